"""Per-test GPU memory checks: the C API (include/vramtrace.h) and the
pytest plugin (python/pytest_vramtrace) on the simulated GPU.

The C API's figures are checked to the byte against tests/progs/t_api.c,
whose allocations are known. The plugin runs a small suite of tests
(clean, leaking, over the limit, raising) under pytest from PyPI, in
plain C through ctypes and in real PyTorch; outcomes and reports are
checked exactly. The plugin's tests need a Python with pytest and
pytest-xdist (`make pytest-env`; PYTEST_VENV names that environment, by
default build/torch-venv) and are skipped, with the reason printed,
without one.
"""
import re

from run_tests import *  # noqa: F401,F403


def normalized(text):
    """Frame addresses and the pid as X, frames below main dropped (the C
    library's start-up frames differ from one libc to the next)."""
    out, below_main = [], False
    for line in text.splitlines():
        line = re.sub(r"==\d+==", "==PID==", line)
        line = re.sub(r"#(\d+) 0x[0-9a-f]+ in ", r"#\1 X in ", line)
        if re.match(r"    #\d+ ", line):
            if below_main:
                continue
            below_main = " in main " in line
        else:
            below_main = False
        out.append(line)
    return out


def api_line(text):
    return source_line("t_api.c", text)


def leak(n, fn, call):
    return [f"Direct leak of {n} byte(s) in 1 object(s) allocated from:",
            f"    call site: {fn} tests/progs/t_api.c:{api_line('static void *' + fn + '(void)')}",
            "    kind: device memory (cudaMalloc)",
            f"    #0 X in {fn} tests/progs/t_api.c:{api_line('static void *' + fn + '(void)')}",
            f"    #1 X in main tests/progs/t_api.c:{api_line(call)}", ""]


def held(n, fn, call):
    return [f"{n} byte(s) in 1 object(s) allocated from:",
            f"    call site: {fn} tests/progs/t_api.c:{api_line('static void *' + fn + '(void)')}",
            f"    #0 X in {fn} tests/progs/t_api.c:{api_line('static void *' + fn + '(void)')}",
            f"    #1 X in main tests/progs/t_api.c:{api_line(call)}", ""]


@test
def c_api_marks_usage_and_reports():
    check_t_api(run([os.path.join(T, "t_api")], report="off"))


@test
def c_api_under_asan_ubsan():
    asan = gcc_runtime("libasan.so")
    ok(asan, "libasan from gcc")
    check_t_api(run([os.path.join(T, "t_api")], report="off", lib=os.path.join(BUILD, "asan", "libvramtrace.so"),
                    first=asan, env={"ASAN_OPTIONS": "detect_leaks=0:abort_on_error=0",
                                     "UBSAN_OPTIONS": "print_stacktrace=1"}))


def check_t_api(r):
    eq(r.rc, 0, "status")
    # Each report's length as returned, and as strlen saw it in the buffer,
    # is the length of the text printed after it.
    m = re.search(r"\nleaks (\d+) (\d+)\n(.*)peak (\d+) (\d+)\n(.*)cut (\d+) (\d+)\n", r.out, re.S)
    ok(m, "t_api printed its reports:\n" + r.out)
    eq((int(m[1]), int(m[2]), int(m[4]), int(m[5]), int(m[7]), int(m[8])),
       (len(m[3]), len(m[3]), len(m[6]), len(m[6]), len(m[3]), 9), "report lengths (and a report cut to 10 bytes)")
    got = normalized(re.sub(r"^(leaks|peak|cut) \d+ \d+$", r"\1 N", r.out, flags=re.M))
    want = ["active 1", "mark ok",
            "empty: 0 live 0 in 0 peak 0",
            "empty peak report 0",
            "all: 0 live 70144 in 3 peak 77824",
            "device 0: 0 live 70144 in 3 peak 77824",
            "device 1: 0 live 0 in 0 peak 0",
            "second: 0 live 512 in 1 peak 512",
            "bad device: -2 live 1 in 1 peak 1",
            "leaks N", "",
            "=================================================================",
            "==PID==ERROR: vramtrace: detected GPU memory leaks", ""]
    for held_bytes, fn, call in ((65536, "keep_big", "void *d = keep_big();"),
                                 (4096, "keep_small", "void *b = keep_small();"), (512, "late", "void *e = late();")):
        want += leak(held_bytes, fn, call)
    want += ["SUMMARY: vramtrace: 70144 byte(s) leaked in 3 allocation(s).",
             "peak N",
             "==PID==vramtrace: peak of GPU memory since the mark: 77824 byte(s) in 3 allocation(s), held by:", ""]
    for held_bytes, fn, call in ((65536, "keep_big", "void *d = keep_big();"), (8192, "scratch", "void *c = scratch();"),
                                 (4096, "keep_small", "void *b = keep_small();")):
        want += held(held_bytes, fn, call)
    want += ["SUMMARY: vramtrace: peak of 77824 byte(s) in 3 allocation(s) since the mark.",
             "cut N",
             "end 0 -2 -2",
             "ended: -2 live 1 in 1 peak 1",
             f"dump 0 dump.{r.dumps[0]['pid']}.after_keep_big.json",
             "dump of a 101-character name -4",  # VRAMTRACE_FAILED: refused, not cut to another name
             "freed: 0 live 0 in 0 peak 77824",
             "leaks after free 0"]
    eq(got, want, "t_api's output")
    eq(r.err, "", "nothing on stderr")
    eq([os.path.basename(d["_path"]) for d in r.dumps],
       [f"dump.{r.dumps[0]['pid']}.after_keep_big.json", f"dump.{r.dumps[0]['pid']}.json"], "the named dump and the exit dump")
    named = r.dumps[0]
    eq(named["reason"], "named", "the named dump's reason")
    eq(sorted(a["bytes"] for a in named["live"]), [512, 4096, 65536, 1 << 20], "live at the named dump (the process, before_mark's kept one too)")


@test
def c_api_without_vramtrace_is_inactive():
    r = run([os.path.join(T, "t_api")], preload=False)
    eq(r.rc, 0, "status")
    want = ["active 0", "mark inactive", "empty: -1 live 0 in 0 peak 0", "empty peak report -1"]
    want += [f"{w}: -1 live 0 in 0 peak 0" for w in ("all", "device 0", "device 1", "second", "bad device")]
    want += ["leaks -1 0", "peak -1 0", "cut -1 0", "end -1 -1 -1", "ended: -1 live 0 in 0 peak 0", "dump -1 ",
             "dump of a 101-character name -1",
             "freed: -1 live 0 in 0 peak 0", "leaks after free -1"]
    eq(r.out.splitlines(), want, "t_api's output without vramtrace")
    eq((r.err, r.dumps), ("", []), "nothing else")


LATE_WARNING = ("vramtrace: warning: libvramtrace.so was loaded after the process started (by dlopen): it tracks "
                "nothing here; it must be preloaded (LD_PRELOAD, or `vramtrace run`)\n")


@test
def c_api_of_a_library_loaded_late_is_inactive():
    """libvramtrace.so loaded by dlopen after start (C, ctypes) stands behind
    the C library and the driver: nothing reaches its wrappers. It says so
    once and its API answers as without vramtrace; linked into the program
    it is loaded at start-up, and tracks."""
    late = ("active 0\nmark -1 alloc 0\nusage -1 live 0 in 0\nleaks -1 \nstep -1 end -1\n")
    r = run([os.path.join(T, "t_lateload"), LIB, "global"], preload=False)
    eq((r.out, r.err, r.rc, r.dumps), (late, LATE_WARNING, 0, []), "dlopen RTLD_GLOBAL")
    r = run([os.path.join(T, "t_lateload"), LIB, "local"], preload=False)
    eq((r.out, r.err, r.rc, r.dumps), ("active 0 mark -1\n", LATE_WARNING, 0, []), "dlopen RTLD_LOCAL")
    code = ("import ctypes, sys\n"
            "cu = ctypes.CDLL('libcuda.so.1'); cu.cuInit(0); c = ctypes.c_void_p()\n"
            "cu.cuDevicePrimaryCtxRetain(ctypes.byref(c), 0); cu.cuCtxSetCurrent(c)\n"
            "vt = ctypes.CDLL(sys.argv[1])\n"
            "m = vt.vramtrace_mark(); p = ctypes.c_uint64()\n"
            "a = cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(64 << 20))\n"
            "class U(ctypes.Structure): _fields_ = [('live', ctypes.c_uint64), ('n', ctypes.c_uint64), ('peak', ctypes.c_uint64)]\n"
            "u = U(); print(vt.vramtrace_active(), m, a, vt.vramtrace_usage(m, -1, ctypes.byref(u)), u.live, u.n)\n")
    r = run([sys.executable, "-c", code, LIB], preload=False)
    eq((r.out, r.err, r.rc, r.dumps), ("0 -1 0 -1 0 0\n", LATE_WARNING, 0, []), "ctypes.CDLL")
    r = run([os.path.join(T, "t_linked")], preload=False)
    eq(r.out, "active 1\nmark 1 alloc 0\nusage 0 live 67108864 in 1\n"
              "leaks whole SUMMARY: vramtrace: 67108864 byte(s) leaked in 1 allocation(s).\n\nstep 1 end 0\n",
       "linked into the program")
    ok("warning" not in r.err, f"linked: no warning in {r.err!r}")
    eq([(a["api"], a["bytes"]) for a in r.dump["live"]], [("cuMemAlloc_v2", 64 * MiB)], "linked: the allocation")


@test
def c_api_of_a_library_loaded_late_before_cuda_sees_nothing():
    """libvramtrace.so loaded by dlopen RTLD_GLOBAL before any CUDA library
    (C, ctypes) comes ahead of the CUDA libraries loaded after it in the
    global scope: its CUDA names are withdrawn, so that every route (the
    runtime's exports and its cuGetProcAddress, the driver's exports, its
    own dlsym asked by name, pinned host memory) reaches the real function
    unseen. The leak check finds nothing, no dump is written, the status is
    the program's."""
    r = run([os.path.join(T, "t_lateglobal"), LIB], preload=False, env={"VRAMTRACE_LEAK_CHECK": "1"})
    eq((r.out, r.err, r.rc, r.dumps),
       ("active 0\nexports - -\nruntime 0 0 0 0\ndriver export 0\ncuGetProcAddress 0 same 0\n"
        "its dlsym same 0\ndump -1 ''\n", LATE_WARNING, 0, []), "C, dlopen RTLD_NOW|RTLD_GLOBAL")
    code = ("import ctypes, sys\n"
            "vt = ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)\n"
            "print('vramtrace_active() =', vt.vramtrace_active(), flush=True)\n"
            "rt = ctypes.CDLL('libcudart_sim.so')\n"
            "p = ctypes.c_void_p(); h = ctypes.c_void_p()\n"
            "print('cudaMalloc ->', rt.cudaMalloc(ctypes.byref(p), 1 << 20), rt.cudaMallocHost(ctypes.byref(h), 4096),"
            " hasattr(vt, 'cudaMalloc'), flush=True)\n")
    r = run([sys.executable, "-c", code, LIB], preload=False, env={"VRAMTRACE_LEAK_CHECK": "1"})
    eq((r.out, r.err, r.rc, r.dumps), ("vramtrace_active() = 0\ncudaMalloc -> 0 0 False\n", LATE_WARNING, 0, []),
       "ctypes.CDLL(mode=RTLD_GLOBAL)")


@test
def c_api_of_a_library_linked_after_libc_says_so():
    """libvramtrace.so linked into the program after the C library (-lc
    ahead of -lvramtrace) is loaded at start-up but stands behind it: the
    warning says that, and what to do, not that it was loaded by dlopen. The
    runtime linked after it answers the program's cudaMalloc, unseen."""
    r = run([os.path.join(T, "t_linked_after_libc")], preload=False, env={"VRAMTRACE_LEAK_CHECK": "1"})
    eq((r.out, r.err, r.rc, r.dumps),
       ("active 0\ncudaMalloc 0\n",
        "vramtrace: warning: libvramtrace.so was loaded at start-up behind the C library (linked after it: -lc "
        "ahead of -lvramtrace): it tracks nothing here; link it before the C library, or preload it (LD_PRELOAD, "
        "or `vramtrace run`)\n", 0, []), "linked after libc")


@test
def c_api_linked_ahead_of_cuda_as_needed_says_why_it_cannot_start():
    """A program linked --as-needed with -lvramtrace ahead of its CUDA
    library has cudaMalloc bound to libvramtrace.so's export and the CUDA
    library dropped: it cannot start, and one line says why and what to do
    before the dynamic linker's "undefined symbol", bound lazily or now."""
    prog = os.path.join(T, "t_linked_as_needed")
    for env in ({}, {"LD_BIND_NOW": "1"}):
        r = run([prog], preload=False, env=env)
        eq((r.out, r.err, r.rc, r.dumps),
           ("", "vramtrace: error: the program needs cudaMalloc, which no library loaded here defines: it was linked "
                "against libvramtrace.so's CUDA names, not its CUDA library (-lvramtrace ahead of it, linked "
                "--as-needed); put -Wl,--no-as-needed before -lvramtrace (after the CUDA library, --as-needed drops "
                "it unless the program calls its API)\n"
                f"{prog}: symbol lookup error: {prog}: undefined symbol: cudaMalloc\n", 127, []), f"{env}")


CTYPES_COPY = ("import ctypes, sys\n"
               "cu = ctypes.CDLL('libcuda.so.1'); cu.cuInit(0); c = ctypes.c_void_p()\n"
               "cu.cuDevicePrimaryCtxRetain(ctypes.byref(c), 0); cu.cuCtxSetCurrent(c)\n"
               "vt = ctypes.CDLL(sys.argv[1])\n"
               "p = ctypes.c_uint64(); a = cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(64 << 20))\n"
               "print(vt.vramtrace_active(), vt.vramtrace_mark(), ctypes.CDLL(None).vramtrace_active(), a)\n")


@test
def c_api_of_a_second_copy_names_the_preloaded_one():
    """A second copy of libvramtrace.so loaded by ctypes while the preloaded
    one tracks stays inactive and says which copy tracks, and how to reach
    it; the preloaded one's leak check is as without the second."""
    with workdir("vt-copy-") as work:
        copy = os.path.join(work, "libvramtrace.so")
        shutil.copy(LIB, copy)
        r = run([sys.executable, "-c", CTYPES_COPY, copy], env={"VRAMTRACE_LEAK_CHECK": "1"}, report="off")
    eq(r.out, "0 -1 1 0\n", "the copy inactive, the preloaded one active")
    warning = (f"vramtrace: warning: {copy} stays inactive: another copy of libvramtrace.so, {LIB}, is preloaded "
               "and tracks this process; use that one (ctypes.CDLL(None), or dlsym(RTLD_DEFAULT, ...), finds its "
               "API)\n")
    eq(r.err.split("\n", 1)[0] + "\n", warning, "the first line names both copies")
    eq(r.err.count("vramtrace: warning:"), 1, "one warning")
    ok("SUMMARY: vramtrace: 67108864 byte(s) leaked in 1 allocation(s).\n" in r.err, f"the leak check in {r.err!r}")
    eq((r.rc, [(a["api"], a["bytes"]) for a in r.dump["live"]]), (23, [("cuMemAlloc_v2", 64 * MiB)]),
       "the preloaded copy's exit status and dump")


@test
def c_api_threads():
    """Marks opened, read and closed while threads allocate and free, with
    TSan (tests/unit/test_marks.c: exact figures since a mark); then a
    mark in a process of 200,000 stacks that meets 1,000 new ones: its
    holders exact, and (the plain build) its heap under 1 MiB, not an
    array up to the highest stack id (23 MB)."""
    p = subprocess.run(["setarch", os.uname().machine, "-R", os.path.join(T, "unit_marks_tsan")],
                       capture_output=True, text=True, timeout=300)
    eq((p.returncode, p.stdout, p.stderr), (0, "marks: 30 passed, 0 failed\n", ""), "unit_marks_tsan")
    p = subprocess.run([os.path.join(T, "unit_marks")], capture_output=True, text=True, timeout=300)
    eq((p.returncode, p.stdout, p.stderr), (0, "marks: 31 passed, 0 failed\n", ""), "unit_marks")


@test
def c_api_found_without_cuda():
    """The API's names are exported where no CUDA library is loaded (the
    CUDA names are not: exports.c hides those)."""
    code = ("import ctypes\n"
            "g = ctypes.CDLL(None)\n"
            "print(g.vramtrace_active(), g.vramtrace_mark(), hasattr(g, 'cudaMalloc'), hasattr(g, 'cuMemAlloc_v2'))\n")
    eq(run([sys.executable, "-c", code], sim=False).out, "1 1 False False\n", "under vramtrace")
    r = run([sys.executable, "-c", "import ctypes; print(hasattr(ctypes.CDLL(None), 'vramtrace_active'))"],
            preload=False, sim=False)
    eq(r.out, "False\n", "without vramtrace")


# ------------------------------------------------------- the pytest plugin

def _venv():
    v = os.environ.get("PYTEST_VENV") or os.path.join(BUILD, "torch-venv")
    return v if os.path.isabs(v) else os.path.join(ROOT, v)


PYTEST_PY = os.path.join(_venv(), "bin", "python3")
SUITES = os.path.join(ROOT, "tests", "pysuite")


def _has(mods):
    if not os.path.exists(PYTEST_PY):
        return False
    code = "import importlib.util, sys; sys.exit(any(importlib.util.find_spec(m) is None for m in sys.argv[1:]))"
    return subprocess.run([PYTEST_PY, "-c", code, *mods], capture_output=True).returncode == 0


HAVE_PYTEST = _has(["pytest", "xdist", "pytest_vramtrace"])
HAVE_TORCH = HAVE_PYTEST and _has(["torch"])


def pytest_test(fn, need_torch=False):
    if HAVE_PYTEST and (HAVE_TORCH or not need_torch):
        return test(fn)
    print(f"SKIP {fn.__name__}: no pytest, pytest-xdist{', torch' if need_torch else ''} and pytest-vramtrace "
          f"in {_venv()} (`make pytest-env`, PYTEST_VENV=...)")
    return fn


def torch_pytest_test(fn):
    return pytest_test(fn, need_torch=True)


def suite(name, *args, torch=False, vramtrace=True, script=False, env=None):
    """Run pytest (python -m pytest, or with `script` the venv's pytest
    script) on tests/pysuite/NAME from that folder (not preloaded:
    --vramtrace re-executes it), vramtrace's CLI first on PATH; the dumps
    go to a fresh folder."""
    py = [os.path.join(_venv(), "bin", "pytest")] if script else [PYTEST_PY, "-m", "pytest"]
    argv = py + ["-p", "no:cacheprovider", "-v",
            *(["--vramtrace"] if vramtrace else []), *args, name]
    if torch:
        argv = [os.path.join(ROOT, "tests", "simgpu", "run"), "--torch", "--"] + argv
    out = tempfile.mkdtemp(prefix="vt-pytest-")
    try:
        for attempt in range(5):
            r = run(argv, preload=False, cwd=SUITES, env={
                "PYTHONDONTWRITEBYTECODE": "1", "PATH": BUILD + os.pathsep + os.environ.get("PATH", ""),
                "VRAMTRACE_OUT": os.path.join(out, "vramtrace.%p.json"), **(env or {})})
            # PyTorch's own end at exit (run_tests.TERMINATED_AT_EXIT): again,
            # up to four times (test_torch_truth.in_dir)
            if attempt == 4 or not torch or r.rc not in (-6, 134) or TERMINATED_AT_EXIT not in r.err + r.out:
                break
            for f in glob.glob(os.path.join(out, "*")):
                os.unlink(f)
        for path in sorted(glob.glob(os.path.join(out, "*.json"))):
            r.dumps.append(dict(load_dump(path), _path=path))
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return r


def outcomes(out):
    got = {m[1]: m[2] for m in re.finditer(r"^(\S+::\S+) (PASSED|FAILED|ERROR|SKIPPED)", out, re.M)}
    got.update({m[2]: m[1] for m in re.finditer(r"^\[gw\d+\] \[ *\d+%\] (PASSED|FAILED|ERROR|SKIPPED) (\S+::\S+)",
                                               out, re.M)})
    return got


def sections(out, suite_file):
    """Each failure's text, by test name: frame lines kept only in the suite
    file (the native and pytest frames around them vary), as
    "    # in FUNCTION FILE:LINE"; the call-site line with the suite file's
    name alone and a native library frame's offset as 0xX; the pid as PID."""
    secs, cur = {}, None
    for line in out.splitlines():
        m = re.match(r"^_{3,} (\S+) _{3,}$", line)
        if m:
            cur = secs.setdefault(m[1], [])
            continue
        if re.match(r"^(={5,}|-{5,}) ", line):
            cur = None
        if cur is None or line.startswith("[gw"):
            continue
        if re.match(r"^    #\d+ ", line):
            f = re.search(r" in (\S+) (?:\S*/)?(" + re.escape(suite_file) + r":\d+)$", line)
            if f:
                cur.append(f"    # in {f[1]} {f[2]}")
            continue
        if line.startswith("    call site: "):
            line = re.sub(r"\S*/(" + re.escape(suite_file) + r":\d+)", r"\1", line)
            line = re.sub(r"\+0x[0-9a-f]+\)", "+0xX)", line)
        cur.append(re.sub(r"==\d+==", "==PID==", line))
    return secs


def peaks(out):
    i = out.find(" vramtrace: the ")
    ok(i >= 0, "the peaks summary is there:\n" + out)
    lines = out[i:].splitlines()
    return [lines[0].strip("- ")] + [x for x in lines[1:] if re.match(r"^ *[0-9.]+ (B|KiB|MiB|GiB)  ", x)]


def suite_line(name, text):
    with open(os.path.join(SUITES, name)) as f:
        return 1 + next(i for i, line in enumerate(f) if text in line)


def leak_report(first, leaked, frames, kind):
    """A gpu_no_leaks failure's lines: `first`, then the leak report of one
    allocation of `leaked` bytes from `frames` (its call site first), of
    `kind` (the entry's kind line)."""
    return ([first, "", "=================================================================",
             "==PID==ERROR: vramtrace: detected GPU memory leaks", "",
             f"Direct leak of {leaked} byte(s) in 1 object(s) allocated from:"] + frames[:1]
            + [f"    kind: {kind}"] + frames[1:]
            + ["", f"SUMMARY: vramtrace: {leaked} byte(s) leaked in 1 allocation(s).", ""])


def peak_report(first, peak, holders):
    """A gpu_limit failure's lines: `first`, then the peak of `peak` bytes
    since the mark, held by `holders` (bytes and frames of one allocation
    each)."""
    n = len(holders)
    out = [first, f"==PID==vramtrace: peak of GPU memory since the mark: {peak} byte(s) in {n} allocation(s), held by:"]
    for held, frames in holders:
        out += ["", f"{held} byte(s) in 1 object(s) allocated from:"] + frames
    return out + ["", f"SUMMARY: vramtrace: peak of {peak} byte(s) in {n} allocation(s) since the mark.", ""]


C_SUITE = "test_c_suite.py"
C_OUTCOMES = {f"{C_SUITE}::test_{n}": o for n, o in (
    ("clean", "PASSED"), ("leaks", "FAILED"), ("under_limit", "PASSED"), ("over_limit", "FAILED"),
    ("raises", "FAILED"), ("unmarked_leak", "PASSED"), ("frees_what_came_before", "PASSED"))}


def c_frames(test, call):
    return [f"    call site: alloc {C_SUITE}:{suite_line(C_SUITE, 'assert cu.cuMemAlloc_v2')}",
            f"    # in alloc {C_SUITE}:{suite_line(C_SUITE, 'assert cu.cuMemAlloc_v2')}",
            f"    # in {test} {C_SUITE}:{suite_line(C_SUITE, call)}"]


def check_c_suite(r):
    eq(r.rc, 1, "pytest's status: tests failed")
    eq(outcomes(r.out), C_OUTCOMES, "outcomes")
    s = sections(r.out, C_SUITE)
    eq(sorted(s), ["test_leaks", "test_over_limit", "test_raises"], "failures")
    eq(s["test_leaks"], leak_report("gpu_no_leaks: the test left 3.00 MiB (3145728 bytes) of GPU memory allocated "
                                     "in 1 allocation(s):", 3145728,
                                     c_frames("test_leaks", "kept.append(alloc(3 << 20))"),
                                     "device memory (cuMemAlloc_v2)"), "test_leaks' report")
    eq(s["test_over_limit"], peak_report("gpu_limit: the test's GPU memory peaked at 5.00 MiB (5242880 bytes), over "
                                         "its limit of 4.00 MiB (4194304 bytes); held at the peak:", 5242880,
                                         [(3145728, c_frames("test_over_limit", "    a = alloc(3 << 20)")),
                                          (2097152, c_frames("test_over_limit", "    b = alloc(2 << 20)"))]),
       "test_over_limit's report")
    raised = s["test_raises"]
    eq([x for x in raised if x.startswith("E ")], ["E       RuntimeError: the test's own error"], "test_raises' error")
    ok(not any("gpu_no_leaks: " in x for x in raised), "a test that raised is not checked for leaks")
    eq(peaks(r.out), ["vramtrace: the 5 test(s) with the highest GPU peaks",
                      f"  6.00 MiB  {C_SUITE}::test_unmarked_leak", f"  5.00 MiB  {C_SUITE}::test_over_limit",
                      f"  4.00 MiB  {C_SUITE}::test_leaks", f"  4.00 MiB  {C_SUITE}::test_under_limit",
                      f"  1.00 MiB  {C_SUITE}::test_clean"], "the tests with the highest peaks")


@pytest_test
def pytest_plugin_c_suite():
    r = suite(C_SUITE)
    ok(re.search(r"^plugins: .*vramtrace-0\.1\.0", r.out, re.M), "the plugin came through its entry point:\n" + r.out)
    check_c_suite(r)
    eq(len(r.dumps), 1, "one dump: pytest re-executed itself (same pid) under vramtrace")
    d = r.dump
    eq(os.path.basename(d["_path"]), f"vramtrace.{d['pid']}.json", "the dump's name")
    eq((d["totals"]["alloc_count"], d["totals"]["free_count"]), (9, 9), "the suite's allocations and frees")


@pytest_test
def pytest_plugin_xdist_workers():
    r = suite(C_SUITE, "-n", "2", script=True)
    check_c_suite(r)
    eq(len(r.dumps), 2, "each worker its own process and dump")
    eq(len({d["pid"] for d in r.dumps}), 2, "two processes")
    eq(sum(d["totals"]["alloc_count"] for d in r.dumps), 9, "the suite's allocations, between the workers")


@pytest_test
def pytest_plugin_without_vramtrace():
    """Without vramtrace the markers check nothing and the session says so
    in one line, also under pytest-xdist (the count was the workers' own:
    the controller said nothing)."""
    for args in ([], ["-n", "2"]):
        r = suite(C_SUITE, *args, vramtrace=False)
        want = dict(C_OUTCOMES)
        want.update({f"{C_SUITE}::test_leaks": "PASSED", f"{C_SUITE}::test_over_limit": "PASSED"})
        eq(outcomes(r.out), want, f"{args}: outcomes: the markers check nothing")
        eq(r.out.count("vramtrace: not active"), 1, f"{args}: one line")
        ok("\nvramtrace: not active: 5 test(s) marked gpu_no_leaks or gpu_limit ran unchecked (run pytest --vramtrace)\n"
           in r.out, f"{args}: says the markers were not checked:\n" + r.out)
        ok(" vramtrace: the " not in r.out, "no peaks")
        eq((r.err, r.dumps), ("", []), "vramtrace never loaded")


@pytest_test
def pytest_plugin_leaks_suppressed_as_at_exit():
    """A gpu_no_leaks test whose every leaked allocation a suppression
    (VRAMTRACE_SUPPRESSIONS) matches passes, as the exit's leak check
    passes it: it failed with a report that held no leak, only the table
    of suppressions used. A suppression that matches nothing of it changes
    nothing."""
    with workdir("vt-pytest-sup-") as work:
        sup = os.path.join(work, "sup.txt")
        for rule, leaks_outcome in (("leak:^test_leaks$\n", "PASSED"), ("leak:^test_nothing_like_it$\n", "FAILED")):
            with open(sup, "w") as f:
                f.write(rule)
            r = suite(C_SUITE, env={"VRAMTRACE_SUPPRESSIONS": sup})
            want = dict(C_OUTCOMES)
            want[f"{C_SUITE}::test_leaks"] = leaks_outcome
            eq(outcomes(r.out), want, f"{rule.strip()}: outcomes")
            s = sections(r.out, C_SUITE)
            eq(sorted(s), sorted(["test_over_limit", "test_raises"] + (["test_leaks"] if leaks_outcome == "FAILED"
                                                                        else [])), f"{rule.strip()}: failures")


@pytest_test
def pytest_plugin_leaks_partly_suppressed_counts_the_rest():
    """A gpu_no_leaks test that leaks 1 MiB a suppression matches and 2 MiB
    none does fails on the 2 MiB: its first line counts what the leak
    report's SUMMARY line counts, and names the suppressed part apart (it
    said 3.00 MiB in 2 allocations; from an outside check)."""
    with workdir("vt-pytest-sup-") as work:
        sup = os.path.join(work, "sup.txt")
        with open(sup, "w") as f:
            f.write("leak:kept_by_a_cache\n")
        name = "test_partly_suppressed.py"
        r = suite(name, env={"VRAMTRACE_SUPPRESSIONS": sup})
        eq(outcomes(r.out), {f"{name}::test_partly_suppressed": "FAILED"}, "outcome")
        s = sections(r.out, name)["test_partly_suppressed"]
        eq(s[0], "gpu_no_leaks: the test left 2.00 MiB (2097152 bytes) of GPU memory allocated in 1 allocation(s), "
                 "besides 1.00 MiB (1048576 bytes) in 1 allocation(s) that suppressions match:", "the first line")
        ok("SUMMARY: vramtrace: 2097152 byte(s) leaked in 1 allocation(s)." in s, "\n".join(s))


TORCH_SUITE = "test_torch_suite.py"


def torch_frames(test, call, through_mib=True):
    """The call site (mib's torch.empty, or the test's own torch.ones) and the suite's frames."""
    site = (f"mib {TORCH_SUITE}:{suite_line(TORCH_SUITE, 'return torch.empty')} -> "
            "torch::autograd::THPVariable_empty (libtorch_python.so+0xX)" if through_mib else
            f"{test} {TORCH_SUITE}:{suite_line(TORCH_SUITE, call)} -> torch::autograd::THPVariable_ones "
            "(libtorch_python.so+0xX)")
    out = [f"    # in mib {TORCH_SUITE}:{suite_line(TORCH_SUITE, 'return torch.empty')}"] if through_mib else []
    return [f"    call site: {site}"] + out + [f"    # in {test} {TORCH_SUITE}:{suite_line(TORCH_SUITE, call)}"]


@torch_pytest_test
def pytest_plugin_torch_suite():
    r = suite(TORCH_SUITE, "--vramtrace-lib=" + LIB, torch=True)
    eq(r.rc, 1, "pytest's status: tests failed")
    eq(outcomes(r.out), {f"{TORCH_SUITE}::test_{n}": o for n, o in (
        ("clean", "PASSED"), ("cache_is_not_a_leak", "PASSED"), ("leaks", "FAILED"), ("under_limit", "PASSED"),
        ("over_limit", "FAILED"), ("raises", "FAILED"))}, "outcomes")
    s = sections(r.out, TORCH_SUITE)
    eq(sorted(s), ["test_leaks", "test_over_limit", "test_raises"], "failures")
    # The leaked tensor (1 MiB) lies in a 2 MiB segment of PyTorch's small pool.
    eq(s["test_leaks"], leak_report("gpu_no_leaks: the test left 1.00 MiB (1048576 bytes) of tensors allocated "
                                     "(torch.cuda.memory_allocated); the GPU memory allocated since it began and "
                                     "still held:", 2097152,
                                     torch_frames("test_leaks", "kept.append(torch.ones", through_mib=False),
                                     "device memory (cudaMalloc)"),
       "test_leaks' report")
    eq(s["test_over_limit"], peak_report("gpu_limit: the test's GPU memory peaked at 128.00 MiB (134217728 bytes), "
                                         "over its limit of 100.00 MiB (104857600 bytes); held at the peak:",
                                         134217728, [(100663296, torch_frames("test_over_limit", "a = mib(96)")),
                                                     (33554432, torch_frames("test_over_limit", "b = mib(32)"))]),
       "test_over_limit's report")
    eq([x for x in s["test_raises"] if x.startswith("E ")], ["E       RuntimeError: the test's own error"],
       "test_raises' error")
    # PyTorch's segments: a 2 MiB one of the small pool for up to 1 MiB, a
    # 20 MiB one for 1 to 10 MiB, the request rounded to 2 MiB above that.
    eq(peaks(r.out), ["vramtrace: the 5 test(s) with the highest GPU peaks",
                      f"128.00 MiB  {TORCH_SUITE}::test_over_limit", f" 64.00 MiB  {TORCH_SUITE}::test_cache_is_not_a_leak",
                      f" 64.00 MiB  {TORCH_SUITE}::test_under_limit", f" 20.00 MiB  {TORCH_SUITE}::test_raises",
                      f"  2.00 MiB  {TORCH_SUITE}::test_clean"], "the tests with the highest peaks")
    eq(len(r.dumps), 1, "one dump")


GARBAGE_SUITE = "test_garbage.py"


@torch_pytest_test
def pytest_plugin_memory_held_by_garbage_is_no_leak():
    """Memory held only by objects in a reference cycle that the collector
    has not reached (automatic collection off in the suite) is no leak, a
    tensor or memory PyTorch's allocator did not make; a test that also
    keeps memory fails with that memory alone. The plugin collects only
    where a check would fail without it (a full collection took 95 ms a
    test under PyTorch, paid by every test): with no collection at all,
    all four tests failed."""
    r = suite(GARBAGE_SUITE, "--vramtrace-lib=" + LIB, torch=True)
    eq(r.rc, 1, "pytest's status: tests failed")
    eq(outcomes(r.out), {f"{GARBAGE_SUITE}::test_{n}": o for n, o in (
        ("tensor_in_a_cycle", "PASSED"), ("raw_in_a_cycle", "PASSED"), ("cycle_and_a_kept_tensor", "FAILED"),
        ("cycle_and_kept_raw", "FAILED"))}, "outcomes")
    s = sections(r.out, GARBAGE_SUITE)
    eq(sorted(s), ["test_cycle_and_a_kept_tensor", "test_cycle_and_kept_raw"], "failures")
    # The kept 2 MiB tensor lies in a 20 MiB segment PyTorch's cache made
    # at its line; the tensor in the cycle, collected, is in neither count.
    eq((s["test_cycle_and_a_kept_tensor"][0], [x for x in s["test_cycle_and_a_kept_tensor"] if x.startswith("SUMMARY")]),
       ("gpu_no_leaks: the test left 2.00 MiB (2097152 bytes) of tensors allocated (torch.cuda.memory_allocated); "
        "the GPU memory allocated since it began and still held:",
        ["SUMMARY: vramtrace: 20971520 byte(s) leaked in 1 allocation(s)."]), "the kept tensor's failure")
    eq((s["test_cycle_and_kept_raw"][0], [x for x in s["test_cycle_and_kept_raw"] if x.startswith("SUMMARY")]),
       ("gpu_no_leaks: the test left 5.00 MiB (5242880 bytes) of GPU memory allocated in 1 allocation(s) outside "
        "PyTorch's caching allocator:", ["SUMMARY: vramtrace: 5242880 byte(s) leaked in 1 allocation(s)."]),
       "the kept raw memory's failure")


RAW_SUITE = "test_torch_raw.py"


def raw_frames(test, call, via=None):
    """A cudaMalloc of raw() through ctypes: its call site and the suite's frames."""
    alloc = suite_line(RAW_SUITE, "assert rt.cudaMalloc")
    return ([f"    call site: raw {RAW_SUITE}:{alloc}", f"    # in raw {RAW_SUITE}:{alloc}"]
            + ([f"    # in {via} {RAW_SUITE}:{suite_line(RAW_SUITE, 'return raw(n)')}"] if via else [])
            + [f"    # in {test} {RAW_SUITE}:{suite_line(RAW_SUITE, call)}"])


@torch_pytest_test
def pytest_plugin_torch_raw_memory_is_checked():
    """Device memory that PyTorch's allocator did not make (cudaMalloc
    through ctypes, as CuPy or an extension makes it) left by a test is a
    leak once PyTorch has set up CUDA, as it is without PyTorch: the check
    compared PyTorch's count of tensors alone, and passed a test that kept
    7 MiB. PyTorch's cache (a segment kept after its tensor went) is still
    no leak; suppressions apply to that memory as at exit."""
    with workdir("vt-pytest-raw-") as work:
        sup = os.path.join(work, "sup.txt")
        with open(sup, "w") as f:
            f.write("leak:kept_by_a_pool\n")
        r = suite(RAW_SUITE, "--vramtrace-lib=" + LIB, torch=True, env={"VRAMTRACE_SUPPRESSIONS": sup})
    eq(r.rc, 1, "pytest's status: tests failed")
    eq(outcomes(r.out), {f"{RAW_SUITE}::test_{n}": o for n, o in (
        ("raw_leak", "FAILED"), ("raw_freed", "PASSED"), ("cache_kept_is_not_a_leak", "PASSED"),
        ("raw_and_tensor_leak", "FAILED"), ("raw_suppressed", "PASSED"), ("raw_partly_suppressed", "FAILED"))},
       "outcomes")
    s = sections(r.out, RAW_SUITE)
    eq(sorted(s), ["test_raw_and_tensor_leak", "test_raw_leak", "test_raw_partly_suppressed"], "failures")
    eq(s["test_raw_leak"], leak_report("gpu_no_leaks: the test left 7.00 MiB (7340032 bytes) of GPU memory allocated "
                                       "in 1 allocation(s) outside PyTorch's caching allocator:", 7340032,
                                       raw_frames("test_raw_leak", "kept.append(raw(7 * MiB))"), "device memory (cudaMalloc)"),
       "test_raw_leak's report")
    # The tensor's failure shows all the test kept (its 2 MiB segment of
    # PyTorch's small pool and the 3 MiB), the other the 3 MiB alone.
    tensor_site = [f"    call site: test_raw_and_tensor_leak {RAW_SUITE}:"
                   f"{suite_line(RAW_SUITE, 'kept.append(torch.ones')} -> torch::autograd::THPVariable_ones "
                   "(libtorch_python.so+0xX)",
                   f"    # in test_raw_and_tensor_leak {RAW_SUITE}:{suite_line(RAW_SUITE, 'kept.append(torch.ones')}"]
    three = raw_frames("test_raw_and_tensor_leak", "kept.append(raw(3 * MiB))")
    eq(s["test_raw_and_tensor_leak"],
       ["gpu_no_leaks: the test left 1.00 MiB (1048576 bytes) of tensors allocated (torch.cuda.memory_allocated); "
        "the GPU memory allocated since it began and still held:", "",
        "=================================================================",
        "==PID==ERROR: vramtrace: detected GPU memory leaks", "",
        "Direct leak of 3145728 byte(s) in 1 object(s) allocated from:"] + three[:1] + ["    kind: device memory (cudaMalloc)"]
       + three[1:] + ["", "Direct leak of 2097152 byte(s) in 1 object(s) allocated from:"] + tensor_site[:1]
       + ["    kind: device memory (cudaMalloc)"] + tensor_site[1:]
       + ["", "SUMMARY: vramtrace: 5242880 byte(s) leaked in 2 allocation(s).", ""]
       + leak_report("gpu_no_leaks: the test left 3.00 MiB (3145728 bytes) of GPU memory allocated in 1 allocation(s) "
                     "outside PyTorch's caching allocator:", 3145728, three, "device memory (cudaMalloc)"), "test_raw_and_tensor_leak's report")
    partly = s["test_raw_partly_suppressed"]
    eq(partly[0], "gpu_no_leaks: the test left 1.00 MiB (1048576 bytes) of GPU memory allocated in 1 allocation(s) "
                  "outside PyTorch's caching allocator, besides 2.00 MiB (2097152 bytes) in 1 allocation(s) that "
                  "suppressions match:", "test_raw_partly_suppressed's first line")
    ok("SUMMARY: vramtrace: 1048576 byte(s) leaked in 1 allocation(s)." in partly, "\n".join(partly))


FIXTURE_SUITE = "test_torch_fixture.py"


@torch_pytest_test
def pytest_plugin_limit_sees_tensors_in_a_fixtures_segment():
    """A test's 15 MiB of tensors that fit in the free room of a session
    fixture's segments make no allocation: gpu_limit("4 MiB") passed it.
    PyTorch's peak on a device over what was allocated there before the
    test counts them; two devices' peaks, one after the other or at once,
    are not added, by PyTorch's count or by vramtrace's (24 MiB on each of
    two GPUs passes a 32 MiB limit); a parameter's own limit is the test's;
    a test without a limit reads PyTorch's peak stats as they were (only a
    limited test's start resets them). A test's peak in the summary and
    JUnit is one measure for every test, vramtrace's (the device memory
    allocated since it began): it read PyTorch's peak for a limited test
    alone, so the same 15 MiB read 15 MiB with a limit and 0 without."""
    junit = os.path.join(tempfile.mkdtemp(prefix="vt-junit-"), "junit.xml")
    r = suite(FIXTURE_SUITE, "--vramtrace-lib=" + LIB, "--junitxml=" + junit, torch=True,
              env={"SIMGPU_DEVICES": "2"})
    eq(r.rc, 1, "pytest's status: a test failed")
    eq(outcomes(r.out), {f"{FIXTURE_SUITE}::test_a_test_without_a_limit_reads_the_peak_as_it_was": "PASSED",
                         f"{FIXTURE_SUITE}::test_over_limit_in_the_fixtures_segment": "FAILED",
                         f"{FIXTURE_SUITE}::test_under_limit_in_the_fixtures_segment": "PASSED",
                         f"{FIXTURE_SUITE}::test_no_limit_in_the_fixtures_segment": "PASSED",
                         f"{FIXTURE_SUITE}::test_two_devices_one_after_the_other": "PASSED",
                         f"{FIXTURE_SUITE}::test_two_devices_at_once": "PASSED",
                         f"{FIXTURE_SUITE}::test_a_parameters_own_limit[15]": "PASSED"}, "outcomes")
    s = sections(r.out, FIXTURE_SUITE)
    eq([x for x in s["test_over_limit_in_the_fixtures_segment"] if x.startswith("gpu_limit")],
       ["gpu_limit: the test's tensors peaked at 15.00 MiB (15728640 bytes) on cuda:0 over what was allocated there "
        "before it (torch.cuda.max_memory_allocated), over its limit of 4.00 MiB (4194304 bytes); the GPU memory "
        "allocated since it began peaked at 0 B: the rest lay in memory PyTorch's cache held before the test, which "
        "vramtrace saw allocated then"], "the failure")
    eq(peaks(r.out), ["vramtrace: the 2 test(s) with the highest GPU peaks",
                      f" 24.00 MiB  {FIXTURE_SUITE}::test_two_devices_at_once",
                      f" 12.00 MiB  {FIXTURE_SUITE}::test_two_devices_one_after_the_other"], "the peaks")
    with open(junit) as f:
        xml = f.read()
    shutil.rmtree(os.path.dirname(junit), ignore_errors=True)
    eq(re.findall(r'name="vramtrace_peak_bytes" value="(\d+)"', xml), ["0", "0", "0", "0", "12582912", "25165824", "0"],
       "JUnit's peaks")


# ------------------------------------------------ the GoogleTest listener

GTEST = os.path.join(T, "t_gtest_vramtrace")


gtest_test = test_if(GTEST, f"no {GTEST} (libgtest-dev: tests/deps.sh installs it)")


def example_line(text):
    with open(os.path.join(ROOT, "examples", "gtest_vramtrace.cc")) as f:
        return 1 + next(i for i, line in enumerate(f) if text in line)


@gtest_test
def gtest_listener_example():
    r = run([GTEST], report="off")
    eq(r.rc, 1, "googletest's status: a test failed")
    lines = normalized(r.out)
    i = lines.index("Direct leak of 4096 byte(s) in 1 object(s) allocated from:")
    eq(lines[i - 7:i + 5], [
        f"examples/gtest_vramtrace.cc:{example_line('ADD_FAILURE()')}: Failure", "Failed",
        "the test left 4096 byte(s) of GPU memory allocated in 1 allocation(s):", "",
        "=================================================================",
        "==PID==ERROR: vramtrace: detected GPU memory leaks", "",
        "Direct leak of 4096 byte(s) in 1 object(s) allocated from:",
        f"    call site: gpu_buffer(unsigned long) examples/gtest_vramtrace.cc:{example_line('cudaMalloc(&p, n);')}",
        "    kind: device memory (cudaMalloc)",
        f"    #0 X in gpu_buffer(unsigned long) examples/gtest_vramtrace.cc:{example_line('cudaMalloc(&p, n);')}",
        "    #1 X in Demo_LeavesABufferBehind_Test::TestBody() examples/gtest_vramtrace.cc:"
        f"{example_line('static void *cache = gpu_buffer(4096);')}"], "the leaking test's failure")
    for line in ("[ vramtrace] Demo.FreesWhatItTakes: peak 1048576 byte(s) of GPU memory",
                 "[ vramtrace] Demo.LeavesABufferBehind: peak 4096 byte(s) of GPU memory",
                 "SUMMARY: vramtrace: 4096 byte(s) leaked in 1 allocation(s).",
                 "[  PASSED  ] 1 test.", "[  FAILED  ] Demo.LeavesABufferBehind"):
        ok(line in lines, f"{line!r} in googletest's output:\n{r.out}")
    ok(not any(x.startswith("[  FAILED  ] Demo.FreesWhatItTakes") for x in lines), "the clean test passed")
    # Without vramtrace the listener does nothing.
    a = run([GTEST], preload=False)
    eq(a.rc, 0, "status without vramtrace")
    ok("[  PASSED  ] 2 tests." in a.out and "vramtrace" not in a.out, "both tests pass, nothing said:\n" + a.out)


@test
def c_api_header_installed():
    work = tempfile.mkdtemp(prefix="vt-api-")
    try:
        prefix = os.path.join(work, "with space")
        p = subprocess.run(["make", "-s", "-C", ROOT, "install", f"PREFIX={prefix}"], capture_output=True, text=True)
        eq(p.returncode, 0, "make install: " + p.stderr)
        with open(os.path.join(prefix, "include", "vramtrace.h")) as a, open(os.path.join(ROOT, "include", "vramtrace.h")) as b:
            eq(a.read(), b.read(), "the installed vramtrace.h")
        ok(f"pip install {ROOT}/python" in p.stdout, "make install says how to install the pytest plugin: " + p.stdout)
        # A C++ program compiles against the installed header alone.
        src = os.path.join(work, "use.cc")
        with open(src, "w") as f:
            f.write("#include <vramtrace.h>\n#include <cstdio>\nint main() { struct vramtrace_api vt; "
                    "int on = vramtrace_load(&vt); int m = vt.mark(); std::printf(\"%d %d\\n\", on, m); }\n")
        p = subprocess.run(["c++", "-Wall", "-Wextra", "-Werror", "-I", os.path.join(prefix, "include"), "-o",
                            os.path.join(work, "use"), src, "-ldl"], capture_output=True, text=True)
        eq((p.returncode, p.stderr), (0, ""), "compiled with the installed header")
        eq(run([os.path.join(work, "use")], sim=False).out, "1 1\n", "under vramtrace")
        eq(run([os.path.join(work, "use")], preload=False, sim=False).out, "0 -1\n", "without it")
    finally:
        shutil.rmtree(work, ignore_errors=True)


FLAGS_TEST = '''
import sys


def test_flags():
    print("flags", sys.flags.optimize, sys.flags.dev_mode, sys.flags.dont_write_bytecode, sys.warnoptions)
'''


@pytest_test
def pytest_plugin_reexec_keeps_the_interpreters_options():
    """`python -W error::UserWarning -X dev -O -B -m pytest --vramtrace`: the
    re-executed pytest runs with the same interpreter options as without
    --vramtrace (before, they were dropped: a CI job's -W error stopped
    failing on warnings)."""
    work = tempfile.mkdtemp(prefix="vt-pyflags-")
    try:
        with open(os.path.join(work, "test_flags.py"), "w") as f:
            f.write(FLAGS_TEST)
        lines = []
        for extra in ([], ["--vramtrace"]):
            r = run([PYTEST_PY, "-W", "error::UserWarning", "-X", "dev", "-O", "-B", "-m", "pytest", "-p",
                     "no:cacheprovider", "-s", *extra, "test_flags.py"], preload=False, cwd=work,
                    env={"PATH": BUILD + os.pathsep + os.environ.get("PATH", "")})
            eq(r.rc, 0, f"pytest {extra}: {r.out[-1500:]}{r.err[-1500:]}")
            lines.append([l for l in r.out.splitlines() if "flags " in l])
        eq(lines[1], lines[0], "the test saw the same options")
        ok(lines[0] and "flags 1 True 1 " in lines[0][0] and "error::UserWarning" in lines[0][0], lines[0])
    finally:
        shutil.rmtree(work, ignore_errors=True)


@pytest_test
def pytest_plugin_gpu_limit_takes_one_limit():
    """gpu_limit with a second limit, or a limit and a keyword, fails the
    test saying so (the second was ignored); a fraction of a byte too."""
    with workdir("vt-pytest-limit-") as work:
        path = os.path.join(work, "test_limits.py")
        with open(path, "w") as f:
            f.write("import pytest\n"
                    "@pytest.mark.gpu_limit('1 MiB', '2 MiB')\ndef test_two(): pass\n"
                    "@pytest.mark.gpu_limit('1 MiB', limit='2 MiB')\ndef test_and_keyword(): pass\n"
                    "@pytest.mark.gpu_limit(limit='1 MiB', other=1)\ndef test_other_keyword(): pass\n"
                    "@pytest.mark.gpu_limit(1.5)\ndef test_fraction(): pass\n"
                    "@pytest.mark.gpu_limit(limit='1 MiB')\ndef test_one(): pass\n")
        r = suite(path)
        got = {k.split("::")[1]: v for k, v in outcomes(r.out).items()}
        eq(got, {"test_two": "FAILED", "test_and_keyword": "FAILED", "test_other_keyword": "FAILED",
                 "test_fraction": "FAILED", "test_one": "PASSED"}, "outcomes\n" + r.out[-2000:])
        s = sections(r.out, "test_limits.py")
        for test, line in (("test_two", "gpu_limit: takes one limit, also given '2 MiB'"),
                           ("test_and_keyword", "gpu_limit: takes one limit, also given 'limit'"),
                           ("test_other_keyword", "gpu_limit: takes one limit, also given 'other'"),
                           ("test_fraction", "gpu_limit: not a whole number of bytes: 1.5")):
            eq([x for x in s.get(test, []) if x.strip()][:1], [line], f"{test}'s failure\n" + r.out[-2000:])
            ok(not any("During handling" in x for x in s.get(test, [])), f"{test}: the failure alone")


@pytest_test
def pytest_plugin_byte_counts_read_as_the_library_reads_them():
    """gpu_limit's sizes as VRAMTRACE_LIMIT, --limit and --fail-over read
    them: K, M, G, T, KiB..., KB... all powers of 1024 (a bare "2G" was
    2,000,000,000 bytes here once, and "2GB" was until the marks and the
    flags read one way), a fraction of a unit rounded down to a byte ("2.2
    GiB" was refused, 1.0000001K too), exactly (no float: 2^53 + 1 bytes
    stay themselves). A bare fraction (1.5, "0.5") is refused, as the
    library refuses it. The unit in any case (2GIB was refused)."""
    code = ("from pytest_vramtrace import parse_bytes as p\n"
            "print([p(v) for v in ('2G', '512M', '4K', '1T', '2 GiB', '2GB', '1.5G', '1.5 GB', 7, '10',\n"
            "                      '2.2 GiB', '1.0000001K', '9007199254740993', '64MB', '0.999999999999999T', '2GIB', '192KIB')])\n"
            "for bad in ('2Q', '-1', '', 'G', True, 1.5, '0.5', '18446744073709551616', '2 GiBs', '1\\xa0G',\n"
            "            '1G\\n'):\n"
            "    try:\n        p(bad)\n        print('taken', repr(bad))\n"
            "    except ValueError:\n        pass\n")
    r = run([PYTEST_PY, "-c", code], preload=False)
    eq((r.rc, r.err), (0, ""), "status")
    eq(r.out, str([2 << 30, 512 << 20, 4 << 10, 1 << 40, 2 << 30, 2 << 30, 3 << 29, 3 << 29, 7, 10,
                   (2 << 30) + (1 << 30) // 5, 1024, 9007199254740993, 64 << 20, 1099511627774, 2 << 30, 192 << 10]) + "\n",
       "the byte counts; nothing bad taken")


def markhost_leak(n, fn):
    line = source_line("t_markhost.c", f"static void *{fn}(void)")
    call = source_line("t_markhost.c", f"void *{'d' if fn == 'keep_device' else 'h'} = {fn}();")
    return [f"Direct leak of {n} byte(s) in 1 object(s) allocated from:",
            f"    call site: {fn} tests/progs/t_markhost.c:{line}",
            "    kind: " + ("device memory (cudaMalloc)" if fn == "keep_device" else "pinned host memory (cudaMallocHost)"),
            f"    #0 X in {fn} tests/progs/t_markhost.c:{line}",
            f"    #1 X in main tests/progs/t_markhost.c:{call}", ""]


@test
def c_api_leaks_hold_pinned_host_memory_as_the_exit_check_does():
    """Pinned host memory allocated since a mark and still live was left
    out of vramtrace_leaks, while the exit check reported it: every test
    passed and the process then failed with 23, no test named (an outside
    check). Now a mark's report holds every kind the exit check holds, in
    the same entries; the mark's usage stays device memory's."""
    r = run([os.path.join(T, "t_markhost")], report="stderr", env={"VRAMTRACE_LEAK_CHECK": "1"})
    eq(r.rc, 23, "the exit check's status: " + r.err)
    head = ["", "=================================================================",
            "==PID==ERROR: vramtrace: detected GPU memory leaks", ""]
    pinned, device = markhost_leak(5000, "keep_pinned"), markhost_leak(3000, "keep_device")
    eq(normalized(r.out), ["kept: 0 live 3000 in 1 peak 10000", "leaks"] + head + pinned + device
       + ["SUMMARY: vramtrace: 8000 byte(s) leaked in 2 allocation(s).",
          "freed: 0 live 0 in 0 peak 10000", "leaks after free"] + head + pinned
       + ["SUMMARY: vramtrace: 5000 byte(s) leaked in 1 allocation(s)."], "the mark's reports")
    err = normalized(r.err)
    i = err.index("==PID==ERROR: vramtrace: detected GPU memory leaks")
    eq(err[i - 2:], head[:-1] + [""] + pinned + ["SUMMARY: vramtrace: 5000 byte(s) leaked in 1 allocation(s)."],
       "the exit check's report: the same entry")


@gtest_test
def gtest_listener_fails_the_test_that_leaves_pinned_host_memory():
    """examples/gtest_vramtrace.cc on a test that leaves pinned host memory
    behind: that test fails with the leak report (before: every test
    passed, and the exit check failed the binary naming no test)."""
    r = run([os.path.join(T, "t_gtest_pinned")], report="off")
    eq(r.rc, 1, "googletest's status: a test failed")
    lines = normalized(r.out)
    i = lines.index("Direct leak of 5000 byte(s) in 1 object(s) allocated from:")
    alloc = source_line("t_gtest_pinned.cc", "cudaMallocHost(&p, n);")
    eq(lines[i - 7:i + 5], [
        f"examples/gtest_vramtrace.cc:{example_line('ADD_FAILURE()')}: Failure", "Failed",
        "the test left 5000 byte(s) of GPU memory allocated in 1 allocation(s):", "",
        "=================================================================",
        "==PID==ERROR: vramtrace: detected GPU memory leaks", "",
        "Direct leak of 5000 byte(s) in 1 object(s) allocated from:",
        f"    call site: pinned_buffer(unsigned long) tests/progs/t_gtest_pinned.cc:{alloc}",
        "    kind: pinned host memory (cudaMallocHost)",
        f"    #0 X in pinned_buffer(unsigned long) tests/progs/t_gtest_pinned.cc:{alloc}",
        "    #1 X in Pinned_LeavesAStagingBufferBehind_Test::TestBody() tests/progs/t_gtest_pinned.cc:"
        f"{source_line('t_gtest_pinned.cc', 'static void *staging')}"], "the leaking test's failure")
    for line in ("SUMMARY: vramtrace: 5000 byte(s) leaked in 1 allocation(s).",
                 "[  PASSED  ] 1 test.", "[  FAILED  ] Pinned.LeavesAStagingBufferBehind"):
        ok(line in lines, f"{line!r} in googletest's output:\n{r.out}")


@pytest_test
def pytest_plugin_fails_the_test_that_leaves_pinned_host_memory():
    """A gpu_no_leaks test that leaves 5000 bytes of pinned host memory
    behind fails, its first line counting them as the leak report's
    SUMMARY line does (before: the test passed, and the exit check failed
    the run naming no test)."""
    name = "test_pinned_left.py"
    r = suite(name, env={"PYTHONPATH": os.path.join(ROOT, "python")})   # this tree's plugin, whatever the venv installed
    eq(outcomes(r.out), {f"{name}::test_pinned_left": "FAILED"}, "outcome")
    s = sections(r.out, name)["test_pinned_left"]
    eq(s[0], "gpu_no_leaks: the test left 4.88 KiB (5000 bytes) of GPU memory allocated in 1 allocation(s):",
       "the first line")
    ok("Direct leak of 5000 byte(s) in 1 object(s) allocated from:" in s, "\n".join(s))
    ok("SUMMARY: vramtrace: 5000 byte(s) leaked in 1 allocation(s)." in s, "\n".join(s))
