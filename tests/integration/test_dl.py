"""How the library's CUDA names are seen and resolved: invisible in a process
without CUDA, resolved per caller and per defining library."""
from run_tests import *

NO_CUDA_OUT = "".join(
    f"{when}: dlsym(self, cudaMalloc) NULL, dlerror ./t_dl_weak: undefined symbol: cudaMalloc\n"
    f"{when}: dlsym(RTLD_DEFAULT, cuMemAlloc_v2) NULL, dlerror ./t_dl_weak: undefined symbol: cuMemAlloc_v2\n"
    for when in ("start", "after libm"))


def weak(args=(), env=None):
    return same_as_without(["./t_dl_weak"] + list(args), cwd=T, env=env)


@test
def dl_cuda_names_invisible_without_cuda():
    for env in (None, {"LD_BIND_NOW": "1"}):
        r = weak(env=env)
        eq(r.out, "cudaMalloc: CPU path\ncuMemAlloc_v2: CPU path\n" + NO_CUDA_OUT, f"weak references and dlsym ({env})")
        eq((r.rc, r.dumps), (0, []), "status, no dump")
    code = ("import ctypes\n"
            "me = ctypes.CDLL(None)\n"
            "print(hasattr(me, 'cudaMalloc'), hasattr(me, 'cuMemAlloc_v2'), hasattr(me, 'cuGetProcAddress_v2'))\n"
            "try:\n"
            "    me.cudaFree\n"
            "except AttributeError as e:\n"
            "    print(str(e).split(': ', 1)[-1])\n")
    r = same_as_without([sys.executable, "-c", code])
    eq(r.out, "False False False\nundefined symbol: cudaFree\n", "ctypes finds no CUDA name")


@test
def dl_runtime_loaded_later_is_tracked():
    for env in (None, {"LD_BIND_NOW": "1"}):
        r = weak([os.path.join(T, "libt_dl_rt.so")], env=env)
        eq(r.out, "cudaMalloc: CPU path\ncuMemAlloc_v2: CPU path\n" + NO_CUDA_OUT + "rt_alloc(3 MiB) -> 0\n",
           "no CUDA names before, the late runtime works")
        b = run([os.path.join(T, "t_dl_weak"), os.path.join(T, "libt_dl_rt.so")], env=env)
        eq([(a["api"], a["bytes"]) for a in b.dump["live"]], [("cudaMalloc", 3 * MiB)],
           f"the late runtime's allocation ({env})")


LOCAL_OUT = ("dlsym(RTLD_DEFAULT, cuMemAlloc_v2): found\ndlsym(RTLD_NEXT, cuMemAlloc_v2): found\n"
             "dlsym(RTLD_DEFAULT, cuMemFree_v2): found\ndlsym(RTLD_NEXT, cuMemFree_v2): found\n"
             "alloc by RTLD_DEFAULT -> 0\nalloc by RTLD_NEXT -> 0\nalloc by RTLD_NEXT -> 0\n"
             "free by RTLD_DEFAULT -> 0\nfree by RTLD_NEXT of an unknown pointer -> 1\n")


def check_local(r, what):
    eq(r.out, LOCAL_OUT, f"{what}: look-ups and calls")
    d = r.dump
    eq(sorted((a["api"], a["bytes"]) for a in d["live"]), [("cuMemAlloc_v2", 1 * MiB), ("cuMemAlloc_v2", 2 * MiB)],
       f"{what}: live allocations")
    t = d["totals"]
    eq((t["alloc_count"], t["free_count"], t["unknown_frees"], t["peak_bytes"]), (3, 1, 1, 3 * MiB + 4096),
       f"{what}: counts")


@test
def dl_rtld_local_library_finds_its_driver():
    for env in (None, {"LD_BIND_NOW": "1"}):
        r = same_as_without([os.path.join(T, "t_dl_local"), T], env=env)
        check_local(run([os.path.join(T, "t_dl_local"), T], env=env), f"C program ({env})")
    code = ("import ctypes, sys\n"
            "sys.exit(ctypes.CDLL(sys.argv[1]).cu_lookups())\n")
    argv = [sys.executable, "-c", code, os.path.join(T, "libt_dl_cu.so")]
    same_as_without(argv)
    check_local(run(argv), "Python ctypes")


TWO_OUT = ("A alloc -> 0 0xa0000000\nB alloc -> 0 0xb0000000\nB alloc -> 0 0xb0002000\n"
           "B free -> 0\nA free of B's pointer -> 1\ncalls: A 2, B 3\n")


@test
def dl_two_drivers_each_reach_their_own():
    for env in (None, {"LD_BIND_NOW": "1"}):
        r = same_as_without([os.path.join(T, "t_dl_two"), T], env=env)
        eq(r.out, TWO_OUT, f"each pointer reached its own library ({env})")
        d = run([os.path.join(T, "t_dl_two"), T], env=env).dump
        eq(sorted((a["api"], a["address"], a["bytes"]) for a in d["live"]),
           [("cuMemAlloc_v2", "0xa0000000", 4096), ("cuMemAlloc_v2", "0xb0002000", 16384)], "live allocations")
        t = d["totals"]
        eq((t["alloc_count"], t["free_count"], t["unknown_frees"], t["peak_bytes"]), (3, 1, 0, 28672), "counts")


@test
def dl_asan_build():
    asan = gcc_runtime("libasan.so")
    ok(asan, "libasan from gcc")
    env = {"ASAN_OPTIONS": "detect_leaks=0:abort_on_error=0"}
    lib = os.path.join(BUILD, "asan", "libvramtrace.so")
    for argv in (["t_dl_weak", os.path.join(T, "libt_dl_rt.so")], ["t_dl_local", T], ["t_dl_two", T]):
        a = run(["./" + argv[0]] + argv[1:], env=env, cwd=T)
        b = run(["./" + argv[0]] + argv[1:], env=env, cwd=T, lib=lib, first=asan)
        ok("AddressSanitizer" not in b.err and "runtime error" not in b.err, f"{argv}: clean:\n{b.err[-2000:]}")
        eq((b.out, b.rc), (a.out, a.rc), f"{argv}: same output and status under the ASan build")
        eq(totals_of(b), totals_of(a), f"{argv}: same figures under the ASan build")
    # Plugins unloaded (departures noted, merged, symbolized from their
    # files, a folder left): clean. Where ASan's own mappings take the
    # place a plugin left, the program says so (status 3) and the leaks
    # are those of the plugins it used.
    for mode in ("", "loop", "chdir"):
        b = run(["./t_unload", T] + ([mode] if mode else []), env=dict(env, VRAMTRACE_LEAK_CHECK="1"), cwd=T, lib=lib,
                first=asan)
        ok("AddressSanitizer" not in b.err and "runtime error" not in b.err, f"t_unload {mode}: clean:\n{b.err[-2000:]}")
        ok(b.rc in (3, 23) and "plug_a_inner" in b.err, f"t_unload {mode}: status {b.rc}, leaks named:\n{b.err[-2000:]}")


@test
def dl_next_from_the_executable_finds_only_what_follows_it():
    """dlsym(RTLD_NEXT, ...) from an executable that links no CUDA library,
    and from a library it links: the global scope after the executable
    holds vramtrace, whose exports the real dlsym found (cudaMalloc "found"
    with no runtime in the process, and calling it failed with
    cudaErrorInitializationError); the library got libcuda's own function,
    whose calls went untracked. Now a name only vramtrace defines there is
    NULL with an error, as without vramtrace, and one that libcuda (loaded
    RTLD_GLOBAL) defines is found and tracked, from either caller."""
    prog = os.path.join(T, "t_dlnext")
    names = ("cudaMalloc", "cuMemAlloc_v2", "cuMemFree_v2")
    local = same_as_without([prog, "local"])
    eq(local.out, "libcuda loaded\n" + "".join(f"{who}RTLD_NEXT {n}: NULL, an error\n"
                                               for who in ("", "library's ") for n in names),
       "libcuda local: nothing follows the executable or the library")
    glob = same_as_without([prog, "global"])
    eq(glob.out, "libcuda loaded\n" + "".join(
        f"{who}RTLD_NEXT cudaMalloc: NULL, an error\n{who}RTLD_NEXT cuMemAlloc_v2: found, no error\n"
        f"{who}RTLD_NEXT cuMemFree_v2: found, no error\n" for who in ("", "library's ")) +
        "cuMemAlloc_v2 4096 -> 0\nlibrary's cuMemAlloc_v2 8192 -> 0\n", "libcuda global")
    eq(sorted((a["api"], a["bytes"]) for a in glob.dump["live"]), [("cuMemAlloc_v2", 4096), ("cuMemAlloc_v2", 8192)],
       "the driver's function found through RTLD_NEXT, by the executable and by the library, is tracked")



UNLOAD = os.path.join(T, "t_unload")
LEAK_FRAME = re.compile(r"    #\d+ (0x[0-9a-f]+) in (.*)$")


def leak_blocks(err):
    """Each leak of a leak report: (its header, its frames' text after "in",
    their addresses)."""
    out = []
    for b in err.split("\n\n"):
        rows = b.strip("\n").splitlines()
        if not rows or not rows[0].startswith("Direct leak of"):
            continue
        got = [m for m in map(LEAK_FRAME.match, rows[2:]) if m]
        out.append((rows[0], [m.group(2) for m in got], [m.group(1) for m in got]))
    return out


def plug_site(p, ln):
    """Plugin p's two frames, as the leak report names them."""
    src = r"\S*tests/progs/t_unload_plug\.c"
    return [rf"plug_{p}_inner {src}:{ln['alloc']}", rf"plug_{p}_alloc {src}:{ln['inner']}"]


# For the runs whose second plugin must load where the first was: the live
# publisher names the view's sites in symbolizing sessions of its own
# while the program runs, and libdw maps the plugins' debug files (three
# pages each here) and, as it is loaded, the loader's cache; one such
# mapping made between the first plugin's dlclose and the second's dlopen
# takes its place (seen in CI, and 1 run in 12 here while a build ran;
# strace showed the publisher loading libdw and mapping both debug files
# between the two).
SAME_PLACE = {"VRAMTRACE_LIVE": "0"}


def unload_run(work, args, env=None, prog=UNLOAD):
    e = {k: v for k, v in os.environ.items()
         if not k.startswith(("VRAMTRACE_", "SIMGPU_")) and k not in ("LD_PRELOAD", "LD_LIBRARY_PATH")}
    e.update({"LD_LIBRARY_PATH": SIM, "LD_PRELOAD": LIB, "VRAMTRACE_OUT": os.path.join(work, "dump.json"),
              "VRAMTRACE_LEAK_CHECK": "1"})
    e.update(env or {})
    return subprocess.run([prog] + args, env=e, cwd=work, capture_output=True, text=True, timeout=120)


def check_frames(fr, want, what):
    eq(len(fr) >= len(want), True, f"{what}: frames {fr}")
    for got, w in zip(fr, want):
        ok(re.fullmatch(w, got), f"{what}: {got!r} is not {w!r}")


def plug_lines():
    return {k: source_line("t_unload_plug.c", "LINE:" + k) for k in ("alloc", "inner")}


def one_leak_of_a(work, args, out):
    """t_unload args run in work: status 23 and stdout out, one leak, its
    frames plugin a's; returns the run."""
    p = unload_run(work, args)
    eq((p.returncode, p.stdout), (23, out), "the leak fails the run: " + p.stderr)
    blocks = leak_blocks(p.stderr)
    eq(len(blocks), 1, "one leak: " + p.stderr)
    check_frames(blocks[0][1], plug_site("a", plug_lines()), "its frames")
    return p


@test
def dl_unloaded_plugin_keeps_its_names():
    """A plugin that allocated and was unloaded, and another loaded where it
    was: each leak is named after the plugin it came from (before: the
    first plugin's leak after the second's functions, which sat at its
    addresses; with nothing loaded there, ??), in the leak report, the
    dump and the CLI's report. The plugins are loaded by a path relative
    to the program's folder; their modules are named whole."""
    ln = plug_lines()
    with workdir("vt-unload-") as work:
        os.symlink(T, os.path.join(work, "plugins"))
        p = unload_run(work, ["./plugins"], env=SAME_PLACE)
        eq((p.returncode, p.stdout), (23, "b loaded where a was\n"), "the leaks fail the run: " + p.stderr)
        blocks = leak_blocks(p.stderr)
        eq([b[0] for b in blocks], ["Direct leak of 2097152 byte(s) in 1 object(s) allocated from:",
                                    "Direct leak of 1048576 byte(s) in 1 object(s) allocated from:"], "two leaks")
        check_frames(blocks[0][1], plug_site("b", ln), "b's leak")
        check_frames(blocks[1][1], plug_site("a", ln), "a's leak")
        eq(blocks[0][2][:2], blocks[1][2][:2], "the two plugins' frames are at the same addresses")
        d = load_dump(os.path.join(work, "dump.json"))
        got = sorted((a["bytes"], [(f["function"], f["module"], f["offset"]) for f in frames(d, a["stack"])[:2]])
                     for a in d["live"])
        real = os.path.realpath(T)
        eq([(b, [(fn, m) for fn, m, _ in fr]) for b, fr in got],
           [(1 * MiB, [("plug_a_inner", real + "/libt_unload_a.so"), ("plug_a_alloc", real + "/libt_unload_a.so")]),
            (2 * MiB, [("plug_b_inner", real + "/libt_unload_b.so"), ("plug_b_alloc", real + "/libt_unload_b.so")])],
           "the dump's frames and modules")
        eq([o for _, _, o in got[0][1]], [o for _, _, o in got[1][1]], "the same offsets in each")
        txt = subprocess.run([CLI, "report", os.path.join(work, "dump.json")], capture_output=True, text=True)
        eq(txt.returncode, 0, "the CLI reads the dump: " + txt.stderr)
        holders = [r.split()[-1] for r in txt.stdout.splitlines() if re.match(r"\s+\S+ MiB\s+\S+%\s+1 alloc ", r)]
        eq(len(holders), 2, "two holders: " + txt.stdout)
        ok(re.search(r"MiB .*1 alloc +plug_b_inner \S*t_unload_plug\.c:%d\n" % ln["alloc"], txt.stdout) and
           re.search(r"MiB .*1 alloc +plug_a_inner \S*t_unload_plug\.c:%d\n" % ln["alloc"], txt.stdout),
           "the CLI's holders name each plugin: " + txt.stdout)


@test
def dl_a_marks_leak_report_after_a_plugin_left_names_the_one_loaded_there():
    """The C API's leak report of one mark, asked for twice: after plugin
    a allocated, then after a's memory was freed, a unloaded and b loaded
    where a was allocated from another line. The reports' frames are kept
    from one call to the next (a report symbolized every stack of the
    process anew: 40 ms a call in a small program); once code has left,
    the kept frames are dropped, and the second report names b's
    functions at the addresses that were a's (kept, it named a's)."""
    ln = plug_lines()
    with workdir("vt-unload-") as work:
        p = unload_run(work, [T, "marks"], env=SAME_PLACE)
        eq(p.returncode, 0, "b loaded where a was, every report made: " + p.stderr)
        first, second = p.stdout.split("report 2:")
        ok(first.startswith("report 1:"), "the first report: " + p.stdout)
        for text, plug, size in ((first, "a", 1 << 20), (second, "b", 2 << 20)):
            blocks = leak_blocks(text)
            eq([b[0] for b in blocks], [f"Direct leak of {size} byte(s) in 1 object(s) allocated from:"],
               f"{plug}'s report, one leak: {text}")
            check_frames(blocks[0][1], plug_site(plug, ln), f"{plug}'s report's frames")
            ok(f"    call site: plug_{plug}_inner " in text, f"{plug}'s report's call site: {text}")
        eq(leak_blocks(first)[0][2][:2], leak_blocks(second)[0][2][:2], "the two plugins' frames at the same addresses")


@test
def dl_plugin_unloaded_again_and_again_keeps_its_names():
    """One plugin loaded, allocating and unloaded ten times in one place:
    ten leaks of one stack, named after it."""
    ln = plug_lines()
    with workdir("vt-unload-") as work:
        p = unload_run(work, [T, "loop"])
        eq((p.returncode, p.stdout), (23, "ten stays in one place\n"), "the leaks fail the run: " + p.stderr)
        blocks = leak_blocks(p.stderr)
        eq([b[0] for b in blocks], ["Direct leak of 40960 byte(s) in 10 object(s) allocated from:"], "one leak")
        check_frames(blocks[0][1], plug_site("a", ln), "its frames")


@test
def dl_unloaded_plugin_whose_file_changed_keeps_module_and_offset():
    """A plugin unloaded whose file is then replaced by another library:
    its frames keep the module and offset they had, without the new
    file's names (its build ID differs)."""
    with workdir("vt-unload-") as work:
        copy = os.path.join(work, "plug.so")
        shutil.copy(os.path.join(T, "libt_unload_a.so"), copy)
        p = unload_run(work, [T, "replace", copy])
        eq((p.returncode, p.stdout), (23, "replaced after one stay\n"), "the leak fails the run: " + p.stderr)
        blocks = leak_blocks(p.stderr)
        eq([b[0] for b in blocks], ["Direct leak of 1048576 byte(s) in 1 object(s) allocated from:"], "one leak")
        d = load_dump(os.path.join(work, "dump.json"))
        fr = frames(d, d["live"][0]["stack"])
        check_frames(blocks[0][1], [r"\?\? \(%s\+%s\)" % (re.escape(copy), f["offset"]) for f in fr[:2]],
                     "its frames")
        eq([(f["function"], f["module"]) for f in fr[:2]], [(None, copy)] * 2, "the dump's frames")
        ok("plug_b" not in p.stderr, "nothing of the new file's")


@test
def dl_unloaded_plugin_named_relative_to_a_folder_left_since():
    """A plugin loaded as ./lib.so, the program then moving to another
    folder before the dlclose: its frames keep their names, its module
    named whole (before: realpath against the new folder named a file
    never loaded, or none)."""
    with workdir("vt-unload-") as work:
        one_leak_of_a(work, [T, "chdir"], "unloaded from /\n")
        d = load_dump(os.path.join(work, "dump.json"))
        eq([f["module"] for f in frames(d, d["live"][0]["stack"])[:2]],
           [os.path.join(os.path.realpath(T), "libt_unload_a.so")] * 2, "the module named whole")


@test
def dl_unloaded_plugin_loaded_through_a_link_moved_since():
    """A plugin loaded through a symbolic link that is pointed elsewhere
    before the dlclose (a "current release" link): its frames keep their
    names, from the file that was mapped (before: the link's new target
    was named, and its build ID refused: ?? at a file never loaded)."""
    with workdir("vt-unload-") as work:
        link = os.path.join(work, "current.so")
        os.symlink(os.path.join(T, "libt_unload_a.so"), link)
        one_leak_of_a(work, [T, "relink", link], "unloaded after the link moved\n")
        d = load_dump(os.path.join(work, "dump.json"))
        eq(frames(d, d["live"][0]["stack"])[0]["module"], os.path.join(os.path.realpath(T), "libt_unload_a.so"),
           "the module: the file mapped")


@test
def dl_unloaded_plugin_without_build_id():
    """A plugin linked without a build ID: unloaded, its file kept, its
    frames keep their names; unloaded and its file replaced by another
    build (the same code, other names), they keep their module and offset
    and none of the new file's names (before: the new file's)."""
    ln = plug_lines()
    for new, want in (("", None), (os.path.join(T, "libt_unload_nobid_b.so"), "??")):
        with workdir("vt-unload-") as work:
            copy = os.path.join(work, "plug.so")
            shutil.copy(os.path.join(T, "libt_unload_nobid_a.so"), copy)
            p = unload_run(work, [T, "replace", copy, new])
            eq((p.returncode, p.stdout), (23, "replaced after one stay\n"), "the leak fails the run: " + p.stderr)
            blocks = leak_blocks(p.stderr)
            eq(len(blocks), 1, "one leak: " + p.stderr)
            if want is None:
                check_frames(blocks[0][1], plug_site("a", ln), "the file kept: its frames")
            else:
                d = load_dump(os.path.join(work, "dump.json"))
                fr = frames(d, d["live"][0]["stack"])
                check_frames(blocks[0][1], [r"\?\? \(%s\+%s\)" % (re.escape(copy), f["offset"]) for f in fr[:2]],
                             "the file replaced: its frames")
                ok("plug_b" not in p.stderr, "nothing of the new file's")


def split_debug(src, dst, debug):
    """A copy of src at dst with its debug information moved to the file
    debug, named by dst's .gnu_debuglink, and everything else stripped, as
    Debian's and CMake's packaging split a release build."""
    os.makedirs(os.path.dirname(debug), exist_ok=True)
    shutil.copy(src, dst)
    for argv in (["objcopy", "--only-keep-debug", dst, debug], ["strip", "--strip-all", dst],
                 ["objcopy", "--add-gnu-debuglink=" + debug, dst]):
        subprocess.run(argv, check=True)


def unload_lines():
    return [source_line("t_unload.c", "if (!f(n)) exit(2);"),
            source_line("t_unload.c", "void *at_a = use(a,"), source_line("t_unload.c", "void *at_b = use(b,"),
            source_line("t_unload.c", "void *at = use(argv[3],")]


@test
def dl_stripped_files_find_their_debug_files_by_debuglink():
    """A stripped program and two stripped plugins, one unloaded before the
    exit, whose debug files sit where gdb looks for a .gnu_debuglink's
    name (the program's beside it, the plugins' in .debug/ beside them):
    every frame of theirs is named with its file and line in the leak
    report and the dump (before: `?? (module+offset)`, only build-ID
    debug files under /usr/lib/debug were read)."""
    ln, (use_ln, a_ln, b_ln, _) = plug_lines(), unload_lines()
    src = r"\S*tests/progs/t_unload\.c"
    with workdir("vt-unload-") as work:
        prog = os.path.join(work, "t_unload")
        split_debug(UNLOAD, prog, prog + ".debug")
        plugins = os.path.join(work, "plugins")
        os.mkdir(plugins)
        for p in "ab":
            name = f"libt_unload_{p}.so"
            split_debug(os.path.join(T, name), os.path.join(plugins, name),
                        os.path.join(plugins, ".debug", name + ".debug"))
        r = unload_run(work, [plugins], env=SAME_PLACE, prog=prog)
        eq((r.returncode, r.stdout), (23, "b loaded where a was\n"), "the leaks fail the run: " + r.stderr)
        blocks = leak_blocks(r.stderr)
        eq([b[0] for b in blocks], ["Direct leak of 2097152 byte(s) in 1 object(s) allocated from:",
                                    "Direct leak of 1048576 byte(s) in 1 object(s) allocated from:"], "two leaks")
        check_frames(blocks[0][1], plug_site("b", ln) + [rf"use {src}:{use_ln}", rf"main {src}:{b_ln}"],
                     "b's leak, b still loaded")
        check_frames(blocks[1][1], plug_site("a", ln) + [rf"use {src}:{use_ln}", rf"main {src}:{a_ln}"],
                     "a's leak, a unloaded")
        ok("call site: plug_b_inner " in r.stderr and "call site: plug_a_inner " in r.stderr, "the call sites")
        d = load_dump(os.path.join(work, "dump.json"))
        got = sorted((a["bytes"], [(f["function"], os.path.basename(f["file"] or ""), f["line"])
                                   for f in frames(d, a["stack"])[:4]]) for a in d["live"])
        eq(got, [(1 * MiB, [("plug_a_inner", "t_unload_plug.c", ln["alloc"]),
                            ("plug_a_alloc", "t_unload_plug.c", ln["inner"]),
                            ("use", "t_unload.c", use_ln), ("main", "t_unload.c", a_ln)]),
                 (2 * MiB, [("plug_b_inner", "t_unload_plug.c", ln["alloc"]),
                            ("plug_b_alloc", "t_unload_plug.c", ln["inner"]),
                            ("use", "t_unload.c", use_ln), ("main", "t_unload.c", b_ln)])], "the dump's frames")


@test
def dl_debuglink_file_must_match_by_checksum():
    """A stripped plugin without a build ID, its debug file beside it found
    through its .gnu_debuglink and taken only when its CRC is the one the
    link records: the right file names its frames; another build's debug
    file under the same name is refused (frames keep module and offset,
    none of its names)."""
    ln, (use_ln, _, _, rep_ln) = plug_lines(), unload_lines()
    with workdir("vt-unload-") as work:
        plug = os.path.join(work, "plug.so")
        debug = os.path.join(work, "plug.so.debug")
        split_debug(os.path.join(T, "libt_unload_nobid_a.so"), plug, debug)
        r = unload_run(work, [T, "replace", plug, ""])
        eq((r.returncode, r.stdout), (23, "replaced after one stay\n"), "the leak fails the run: " + r.stderr)
        blocks = leak_blocks(r.stderr)
        eq(len(blocks), 1, "one leak: " + r.stderr)
        src = r"\S*tests/progs/t_unload\.c"
        check_frames(blocks[0][1], plug_site("a", ln) + [rf"use {src}:{use_ln}", rf"main {src}:{rep_ln}"],
                     "the right debug file: its frames")
        subprocess.run(["objcopy", "--only-keep-debug", os.path.join(T, "libt_unload_nobid_b.so"), debug], check=True)
        r = unload_run(work, [T, "replace", plug, ""])
        eq((r.returncode, r.stdout), (23, "replaced after one stay\n"), "the leak fails the run: " + r.stderr)
        blocks = leak_blocks(r.stderr)
        d = load_dump(os.path.join(work, "dump.json"))
        fr = frames(d, d["live"][0]["stack"])
        check_frames(blocks[0][1], [r"\?\? \(%s\+%s\)" % (re.escape(plug), fr[0]["offset"]),
                                    r"plug_a_alloc \(%s\+%s\)" % (re.escape(plug), fr[1]["offset"]),
                                    rf"use {src}:{use_ln}"], "another build's debug file: its frames")
        eq([(f["function"], f["file"], f["line"]) for f in fr[:2]], [(None, None, 0), ("plug_a_alloc", None, 0)],
           "the dump's frames")
        ok("plug_b" not in r.stderr, "nothing of the other build's")


@test
def dl_code_made_at_run_time_names_no_module():
    """A frame in code made at run time (an anonymous executable mapping):
    its address alone, no module (before: the library libdwfl's view of
    the maps put before it, at an offset past that file's end), in the
    leak report and the dump; the frames around it keep their names."""
    with workdir("vt-jit-") as work:
        e = {k: v for k, v in os.environ.items()
             if not k.startswith(("VRAMTRACE_", "SIMGPU_")) and k not in ("LD_PRELOAD", "LD_LIBRARY_PATH")}
        e.update({"LD_LIBRARY_PATH": SIM, "LD_PRELOAD": LIB, "VRAMTRACE_OUT": os.path.join(work, "dump.json"),
                  "VRAMTRACE_LEAK_CHECK": "1"})
        p = subprocess.run([os.path.join(T, "t_jit")], env=e, cwd=work, capture_output=True, text=True, timeout=120)
        eq(p.returncode, 23, "the leak fails the run: " + p.stderr)
        ret = p.stdout.split()[-1]
        blocks = leak_blocks(p.stderr)
        eq(len(blocks), 1, "one leak: " + p.stderr)
        _, fr, addrs = blocks[0]
        k = [int(a, 16) for a in addrs].index(int(ret, 16))
        ok(re.fullmatch(r"grab \S*t_jit\.c:\d+", fr[k - 1]), f"the frame before: {fr[k - 1]!r}")
        eq(fr[k], "??", "the run-time code's frame: its address alone")
        ok(re.fullmatch(r"main \S*t_jit\.c:\d+", fr[k + 1]), f"the frame after: {fr[k + 1]!r}")
        d = load_dump(os.path.join(work, "dump.json"))
        f = frames(d, d["live"][0]["stack"])[k]
        eq((f["function"], f["module"], f["address"]), (None, None, ret), "the dump's frame")


@test
def dl_unloaded_plugin_linked_to_start_past_zero():
    """A plugin linked to start at 0x10000 (not 0): unloaded, its frames
    keep their names (before: its file was read 0x10000 off, ?? or another
    function's name)."""
    with workdir("vt-unload-") as work:
        one_leak_of_a(work, [T, "based"], "unloaded\n")


@test
def dl_threads_loading_and_unloading_plugins_at_once():
    """Eight threads loading, using and unloading eight copies of a plugin
    at random (the copies take each other's places): the run ends as
    without vramtrace, every leak's plugin frames are the plugin's or an
    address alone, never anything else; under the ASan build, clean
    (before: two dlcloses at once could free what vramtrace knew of a
    library twice, a crash in 3 of 5 runs with two threads)."""
    asan = gcc_runtime("libasan.so")
    with workdir("vt-churn-") as work:
        for i in range(8):
            shutil.copy(os.path.join(T, "libt_unload_a.so"), os.path.join(work, "plug%d.so" % i))
        argv = [UNLOAD, T, "churn", work, "8", "60"]
        for lib, first in ((None, None), (os.path.join(BUILD, "asan", "libvramtrace.so"), asan)):
            r = run(argv, env={"VRAMTRACE_LEAK_CHECK": "1", "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=0"}, lib=lib,
                    first=first)
            what = "the ASan build" if lib else "the library"
            ok("AddressSanitizer" not in r.err and "runtime error" not in r.err, f"{what}: clean:\n{r.err[-3000:]}")
            eq((r.rc, r.out), (23, "done\n"), f"{what}: the run: {r.err[-2000:]}")
            blocks = leak_blocks(r.err)
            eq(sum(int(re.search(r"in (\d+) object", b[0]).group(1)) for b in blocks), 480, f"{what}: every leak told")
            for head, fr, _ in blocks:
                k = next(i for i, f in enumerate(fr) if f.startswith("use "))
                for f in fr[:k]:
                    ok(f == "??" or re.match(r"plug_a_(inner|alloc) \S*t_unload_plug\.c:\d+$", f),
                       f"{what}: a plugin frame: {f!r}")


DEEPBIND_OUT = "cu_plugin: 0 0 0 0\nrt_plugin: 0 0 0 0 0\ndone 0\n"
DEEPBIND_LEAKS = 3 * MiB + 2 * MiB + 5 * MiB + 4 * MiB


def deepbind_sites(d):
    """Each live allocation: its API, bytes and call site (function, file, line)."""
    out = []
    for a in d["live"]:
        f = site(d, a["stack"])
        out.append((a["api"], a["bytes"], f["function"], os.path.basename(f["file"] or ""), f["line"]))
    return sorted(out)


@test
def dl_deepbind_plugins_are_tracked_as_without_it():
    """A plugin loaded with RTLD_DEEPBIND binds in its own scope first: its
    driver calls, and its runtime's way to the driver (dlopen, dlsym,
    cuGetProcAddress), are followed all the same, eagerly or lazily bound,
    as for the same plugins loaded without it."""
    cu = lambda text: source_line("t_deepbind_cu.c", text)
    rt = lambda text: source_line("t_deepbind_rt.c", text)
    want = sorted([("cuMemAlloc_v2", 3 * MiB, "cu_plugin", "t_deepbind_cu.c", cu("the call")),
                   ("cuMemAlloc_v2", 2 * MiB, "cu_plugin", "t_deepbind_cu.c", cu("the pointer kept in data")),
                   ("cudaMalloc", 5 * MiB, "rt_plugin", "t_deepbind_rt.c", rt("cudaMalloc(&a")),
                   ("cuMemAlloc_v2", 4 * MiB, "rt_plugin", "t_deepbind_rt.c", rt("fn ? (int)"))])
    for mode in ("local", "deep", "lazy"):
        argv = [os.path.join(T, "t_deepbind"), T, mode]
        eq(same_as_without(argv).out, DEEPBIND_OUT, f"{mode}: the plugins' calls")
        r = run(argv, env={"VRAMTRACE_LEAK_CHECK": "1"})
        eq(r.out, DEEPBIND_OUT, f"{mode}: output")
        eq(r.rc, 23, f"{mode}: the leak check fails")
        ok(f"SUMMARY: vramtrace: {DEEPBIND_LEAKS} byte(s) leaked in 4 allocation(s).\n" in r.err,
           f"{mode}: the leak summary in {r.err!r}")
        ok("warning" not in r.err, f"{mode}: no warning in {r.err!r}")
        d = r.dump
        eq(deepbind_sites(d), want, f"{mode}: live allocations and their call sites")
        t = d["totals"]
        eq((t["alloc_count"], t["free_count"], t["unknown_frees"], t["missed"], t["peak_bytes"]),
           (6, 2, 0, 0, DEEPBIND_LEAKS), f"{mode}: counts")


@test
def dl_deepbind_by_a_callers_name_is_said_not_followed():
    """A library loaded with RTLD_DEEPBIND by a name whose meaning depends on
    its caller (`$ORIGIN`) is opened as the caller's own, unfollowed: one
    warning line each, naming it. Probing it again with RTLD_NOLOAD, or
    opening it again, loads nothing and says nothing more."""
    for mode in ("origin", "again"):
        argv = [os.path.join(T, "t_deepbind"), T, mode]
        r = run(argv, env={"VRAMTRACE_LEAK_CHECK": "1"})
        eq(r.out, DEEPBIND_OUT, f"{mode}: output")
        eq(r.err, "".join(f"vramtrace: warning: $ORIGIN/{lib}: loaded with RTLD_DEEPBIND by a name that depends on "
                          "its caller: its CUDA calls may bypass vramtrace and go unrecorded (those that reach a CUDA "
                          "library loaded before it are recorded)\n"
                          for lib in ("libt_deepbind_cu.so", "libt_deepbind_rt.so")), f"{mode}: one warning per library")
        eq((r.rc, r.dumps), (0, []), f"{mode}: nothing recorded")
