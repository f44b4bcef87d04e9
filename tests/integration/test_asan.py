"""Programs built with -fsanitize=address under vramtrace
(tests/progs/t_asan.c): `vramtrace run` keeps the sanitizer's runtime first
in LD_PRELOAD, and LeakSanitizer's check at exit finds none of vramtrace's
own memory, while it still finds the program's host leak and vramtrace
still finds its GPU leak. Skipped where the compiler has no libasan."""
from run_tests import *

ASAN_PROG = os.path.join(T, "t_asan")
asan_test = test_if(ASAN_PROG, "no build/tests/t_asan (the compiler has no libasan)")

GPU_LEAK_LINE = source_line("t_asan.c", "cudaMalloc(&p, 12345);")
HOST_LEAK_LINE = source_line("t_asan.c", "char *volatile h = malloc(4321);")


def asan_env(extra=None):
    """The environment of a run: the simulated GPU, no vramtrace setting, no
    preload and the sanitizers' defaults; the dump off."""
    e = {k: v for k, v in os.environ.items()
         if not k.startswith(("VRAMTRACE_", "SIMGPU_", "ASAN_", "LSAN_", "UBSAN_"))
         and k not in ("LD_PRELOAD", "LD_LIBRARY_PATH")}
    e["LD_LIBRARY_PATH"] = SIM
    e["VRAMTRACE_OUT"] = "off"
    e.update(extra or {})
    return e


def t_asan(mode, how, extra=None):
    """t_asan MODE: "plain" without vramtrace, "run" under `vramtrace run
    --leak-check`, "preload" with ASan's runtime and then the library
    preloaded by hand and VRAMTRACE_LEAK_CHECK=1. Its status, stdout and
    stderr."""
    env = asan_env(extra)
    argv = [ASAN_PROG, mode]
    if how == "run":
        argv = [CLI, "run", "--leak-check", "--"] + argv
    elif how == "preload":
        env["LD_PRELOAD"] = gcc_runtime("libasan.so") + ":" + LIB
        env["VRAMTRACE_LEAK_CHECK"] = "1"
    with workdir("vt-asan-") as work:
        p = subprocess.run(argv, env=env, cwd=work, capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


def leak_headers(err):
    return [l for l in err.splitlines() if re.match(r"(Direct|Indirect) leak of", l)]


@asan_test
def asan_program_clean_under_vramtrace_as_without():
    """A program with no leak: the same status, stdout and stderr as
    without vramtrace. Before, `vramtrace run` preloaded the library before
    ASan's runtime, which refused to start (status 1, "ran untraced ... a
    static or set-user-ID program?"); with ASan first, LeakSanitizer
    reported vramtrace's interned stacks and the live table's records as
    leaks (status 1, the program's stdout lost)."""
    eq(t_asan("clean", "plain"), (0, "done clean\n", ""), "t_asan clean without vramtrace")
    eq(t_asan("clean", "run"), (0, "done clean\n", ""), "t_asan clean under vramtrace run --leak-check")
    eq(t_asan("clean", "preload"), (0, "done clean\n", ""), "t_asan clean, ASan and vramtrace preloaded")
    # A runtime the caller preloads already stays first.
    eq(t_asan("clean", "run", {"LD_PRELOAD": gcc_runtime("libasan.so")}), (0, "done clean\n", ""),
       "t_asan clean under vramtrace run, ASan's runtime in LD_PRELOAD")
    # The live table's 70,000 records, in mapped arrays, held at exit.
    rc, out, err = t_asan("keep", "run")
    eq((rc, out), (23, "done keep\n"), "t_asan keep: vramtrace's status")
    ok("LeakSanitizer" not in err, "t_asan keep: LeakSanitizer silent:\n" + err[-3000:])
    eq(re.findall(r"SUMMARY: .*", err), ["SUMMARY: vramtrace: 4480000 byte(s) leaked in 70000 allocation(s)."],
       "t_asan keep: vramtrace's summary")
    # An out-of-memory post-mortem on the way.
    for how in ("run", "preload"):
        rc, out, err = t_asan("oom", how)
        eq((rc, out), (0, "oom 2\ndone oom\n"), f"t_asan oom ({how}): status and stdout")
        eq(err.count("vramtrace: out of memory in pid "), 1, f"t_asan oom ({how}): one post-mortem")
        ok("LeakSanitizer" not in err and "ERROR" not in err, f"t_asan oom ({how}): no leak report:\n{err[-3000:]}")


@asan_test
def asan_program_gpu_leak_still_reported_by_vramtrace():
    """A GPU leak: vramtrace's report and its status 23, the program's
    stdout kept, and nothing from LeakSanitizer. Before, LeakSanitizer's
    report of vramtrace's own memory ended the process first (status 1,
    no GPU leak report)."""
    for how in ("run", "preload"):
        rc, out, err = t_asan("gpuleak", how)
        eq((rc, out), (23, "done gpuleak\n"), f"t_asan gpuleak ({how}): status and stdout")
        ok("LeakSanitizer" not in err, f"t_asan gpuleak ({how}): LeakSanitizer silent:\n{err[-3000:]}")
        eq(leak_headers(err), ["Direct leak of 12345 byte(s) in 1 object(s) allocated from:"],
           f"t_asan gpuleak ({how}): vramtrace's leak")
        ok(re.search(rf"#0 0x[0-9a-f]+ in gpu_leak .*t_asan\.c:{GPU_LEAK_LINE}\n", err),
           f"t_asan gpuleak ({how}): the leak's frame:\n{err}")
        eq(re.findall(r"SUMMARY: .*", err), ["SUMMARY: vramtrace: 12345 byte(s) leaked in 1 allocation(s)."],
           f"t_asan gpuleak ({how}): the summary")


@asan_test
def asan_program_host_leak_still_reported_by_lsan():
    """The program's own host leak: LeakSanitizer's report, the same as
    without vramtrace, with no frame of vramtrace's in it."""
    rc, out, plain = t_asan("hostleak", "plain")
    eq((rc, out), (1, ""), "t_asan hostleak without vramtrace")
    eq(leak_headers(plain), ["Direct leak of 4321 byte(s) in 1 object(s) allocated from:"],
       "t_asan hostleak without vramtrace: LeakSanitizer's report")
    for how in ("run", "preload"):
        rc, out, err = t_asan("hostleak", how)
        eq((rc, out), (1, ""), f"t_asan hostleak ({how}): LeakSanitizer's status")
        eq(leak_headers(err), leak_headers(plain), f"t_asan hostleak ({how}): the same leaks as without vramtrace")
        ok(re.search(rf"#1 0x[0-9a-f]+ in host_leak .*t_asan\.c:{HOST_LEAK_LINE}\n", err),
           f"t_asan hostleak ({how}): the leak's frame:\n{err}")
        eq(re.findall(r"SUMMARY: .*", err), ["SUMMARY: AddressSanitizer: 4321 byte(s) leaked in 1 allocation(s)."],
           f"t_asan hostleak ({how}): the summary")
        ok(not re.search(r"libvramtrace|interpose/|tracker/|report/", err),
           f"t_asan hostleak ({how}): no frame of vramtrace's:\n{err}")


@test
def run_keeps_a_sanitizer_runtime_first():
    """`vramtrace run` puts a sanitizer's runtime the caller preloads before
    the library, the rest after it; a script (sh) is not looked into."""
    asan = gcc_runtime("libasan.so") or "/usr/lib/libasan.so.8"
    other = os.path.join(T, "libt_dep.so")
    env = asan_env({"ASAN_OPTIONS": "detect_leaks=0:verify_asan_link_order=0"})
    show = [CLI, "run", "--", "sh", "-c", 'printf %s "$LD_PRELOAD"']
    p = subprocess.run(show, env=env, capture_output=True, text=True, timeout=60)
    eq((p.returncode, p.stdout), (0, LIB), "a script's LD_PRELOAD")
    if os.path.exists(asan):
        env["LD_PRELOAD"] = f"{other} {asan}"
        p = subprocess.run(show, env=env, capture_output=True, text=True, timeout=60)
        eq((p.returncode, p.stdout), (0, f"{asan}:{LIB}:{other}"), "the caller's sanitizer runtime first")


@test
def run_says_a_sanitizer_build_ran_untraced():
    """A program that needs a sanitizer's runtime and ran untraced is said
    to be one (t_fakesan needs libasan.so.99, which is nowhere). Before:
    "a static or set-user-ID program?"."""
    fake = os.path.join(T, "t_fakesan")
    p = subprocess.run([CLI, "run", "--leak-check", "--", fake], env=asan_env(), capture_output=True, text=True,
                       timeout=60)
    eq(p.returncode, 127, "the loader's status")
    eq(p.stderr.splitlines()[-1],
       f"vramtrace run: {fake} ran untraced (libvramtrace.so never loaded into it: it is built with a sanitizer, "
       "whose runtime libasan.so.99 must come first in the initial library list; preload it by its path, "
       "LD_PRELOAD=/path/to/libasan.so.99 vramtrace run ...); no leak check was made", "the last line")
