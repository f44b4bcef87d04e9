"""Integration tests of when the exit's outputs are written: after every
library's destructors, so that what a library frees at its end is not a
leak."""
import itertools
import time

from run_tests import *

LIBFINI = os.path.join(T, "t_libfini")


@test
def exit_check_waits_for_every_librarys_destructors():
    """A library the program links keeps 4 KiB in a C++ global and 8 KiB
    for a destructor function, and frees both at its end. The loader runs
    its destructors after vramtrace's own (unrelated to vramtrace, loaded
    after it): the check ran first, called them leaks, and ended the
    process with 23, so that they never ran. Now the outputs come after
    them: no leak, the program's status, the frees counted; a real leak of
    the program's is still the one leak."""
    for leak in (False, True):
        argv = [LIBFINI] + (["leak"] if leak else [])
        r = run(argv, env={"VRAMTRACE_LEAK_CHECK": "1"})
        eq(r.out, "main returns\nlibrary destructor: free 0\nlibrary object's destructor: free 0\n",
           "the library's destructors ran, and freed")
        d = r.dump
        eq((d["totals"]["alloc_count"], d["totals"]["free_count"], d["totals"]["live_bytes"]),
           (3 if leak else 2, 2, (1 << 20) if leak else 0), "the exit dump counts the library's frees")
        if not leak:
            eq(r.rc, 0, "nothing leaked: " + r.err)
            ok("leak" not in r.err.lower(), r.err)
        else:
            eq(r.rc, 23, "the program's own leak")
            summary = [l for l in r.err.splitlines() if l.startswith("SUMMARY:")]
            eq(summary, ["SUMMARY: vramtrace: 1048576 byte(s) leaked in 1 allocation(s)."], "the one leak")
    # Under `vramtrace run --leak-check` too.
    p = subprocess.run([CLI, "run", "--leak-check", "--out", "off", "--", LIBFINI], capture_output=True, text=True,
                       env=dict(os.environ, LD_LIBRARY_PATH=SIM), timeout=60)
    eq((p.returncode, p.stdout.count("free 0")), (0, 2), p.stderr)


@test
def quick_exit_runs_the_exit_check():
    """quick_exit runs the handlers at_quick_exit registered and nothing
    else (no destructor): a process that leaked 1 MiB and ended by
    quick_exit(0) passed the leak check with no report. The exit's outputs
    are one of those handlers now. The library's own 12 KiB, freed only by
    its destructors, which quick_exit skips, are leaks here too."""
    r = run([LIBFINI, "quick"], env={"VRAMTRACE_LEAK_CHECK": "1"})
    eq(r.out, "quick_exit\n", "no destructor ran")
    eq(r.rc, 23, "the leak check's status: " + r.err[-2000:])
    eq([l for l in r.err.splitlines() if l.startswith("SUMMARY:")],
       ["SUMMARY: vramtrace: 1060864 byte(s) leaked in 3 allocation(s)."], "every leak")
    eq((r.dump["reason"], r.dump["totals"]["live_bytes"]), ("exit", 1060864), "the exit dump")


@test
def quick_exit_with_leaks_leaves_stdio_unwritten():
    """quick_exit writes no stdio buffer, and the leak check's status does
    not change that: with leaks found, the check flushed every stream
    before its _exit, so a line the program left in stdout's buffer was
    written under --leak-check alone (from an outside check). Now only an
    exit, which writes them, has them written; the leak report and the
    status 23 are as before."""
    prog = os.path.join(T, "t_quickbuf")
    for mode, out in (([], ""), (["atexit"], ""), (["exit"], "main\n")):
        bare = run([prog] + mode, preload=False)
        eq((bare.rc, bare.out), (7, out), f"{mode} without vramtrace")
        r = run([prog] + mode, report="off")
        eq((r.rc, r.out), (7, out), f"{mode} without the leak check")
        c = run([prog] + mode, env={"VRAMTRACE_LEAK_CHECK": "1"})
        eq((c.rc, c.out), (23, out), f"{mode} with the leak check: {c.err[-1500:]}")
        eq([l for l in c.err.splitlines() if l.startswith("SUMMARY:")],
           ["SUMMARY: vramtrace: 1048576 byte(s) leaked in 1 allocation(s)."], f"{mode}: the leak report")


@test
def threads_calling_exit_at_once_still_get_the_exit_check():
    """Two and eight threads each keep 1 MiB and call exit(0) at the same
    moment: the C library ran the exit handlers on one thread and ended the
    process from another while vramtrace wrote its outputs, so the leak
    check printed nothing, wrote no dump and passed with status 0 (an
    outside check). The later callers of exit now wait for the first to
    end the process, as glibc 2.41's exit does."""
    for n in (2, 8, 2, 8, 2):
        r = run([os.path.join(T, "t_exitrace"), str(n), "0"], env={"VRAMTRACE_LEAK_CHECK": "1"})
        eq(r.rc, 23, f"{n} threads: the leak check's status: {r.err[-2000:]}")
        summary = [l for l in r.err.splitlines() if l.startswith("SUMMARY:")]
        eq(summary, [f"SUMMARY: vramtrace: {(n + 1) << 20} byte(s) leaked in {n + 1} allocation(s)."], "the leaks")
        eq((r.dump["reason"], r.dump["totals"]["live_bytes"]), ("exit", (n + 1) << 20), "the exit dump")
    # A program's own status, without the check, is the exit's.
    r = run([os.path.join(T, "t_exitrace"), "4", "7"])
    eq(r.rc, 7, r.err[-2000:])


@test
def a_second_exit_waits_only_while_the_outputs_may_come():
    """The later caller of exit waits for the first's outputs, but not for
    ever (an outside check: an atexit handler that joins a worker calling
    exit hung, where the C library ends the process from the worker, status
    3; in a process without a GPU too); quick_exit from another thread
    during exit's outputs lost them (status 4, no leak check); a vfork
    child's careless exit() wrote the parent's report and took its leak
    check's status 23, the parent's own exit then checking nothing."""
    prog = os.path.join(T, "t_exitrace")
    t0 = time.monotonic()
    r = run([prog, "join"])
    eq(r.rc, 3, f"join: the worker's exit ends it: {r.err[-2000:]}")
    ok(time.monotonic() - t0 < 20, "join: no hang")
    # The worker's exit, after its 2 s, runs the handlers left: the check.
    r = run([prog, "join"], env={"VRAMTRACE_LEAK_CHECK": "1"})
    eq(r.rc, 23, f"join: the leak check: {r.err[-2000:]}")
    eq([l for l in r.err.splitlines() if l.startswith("SUMMARY:")],
       ["SUMMARY: vramtrace: 1048576 byte(s) leaked in 1 allocation(s)."], "join: the leak")
    t0 = time.monotonic()
    r = run([prog, "joinplain"], env={"VRAMTRACE_LEAK_CHECK": "1"})
    eq((r.rc, r.err), (3, ""), "no GPU: as without vramtrace")
    ok(time.monotonic() - t0 < 2, "no GPU: no wait")
    r = run([prog, "quick"], env={"VRAMTRACE_LEAK_CHECK": "1"})
    eq(r.rc, 23, f"quick: the leak check: {r.err[-2000:]}")
    eq([l for l in r.err.splitlines() if l.startswith("SUMMARY:")],
       ["SUMMARY: vramtrace: 2097152 byte(s) leaked in 2 allocation(s)."], "quick: the leaks")
    r = run([prog, "vfork"], env={"VRAMTRACE_LEAK_CHECK": "1"})
    eq((r.rc, r.out), (23, "child status 9\n"), f"vfork: the child's status, the parent's check: {r.err[-2000:]}")
    eq([l for l in r.err.splitlines() if l.startswith("SUMMARY:")],
       ["SUMMARY: vramtrace: 1048576 byte(s) leaked in 1 allocation(s)."], "vfork: the parent's leak")


@test
def a_threads_later_key_destructor_may_allocate():
    """The C library runs a thread's key destructors at its exit in the
    order the keys were made, vramtrace's (made at the process's first
    allocation) before a key the program makes later. The walker's
    per-thread cache was freed by its destructor and still named by the
    thread: a later destructor's cudaMalloc walked in freed memory, and the
    C library aborted ("malloc(): invalid size"). Now a destructor's
    allocation finds no cache and makes one, which the next round of
    destructors frees; with "twice" that round also runs the program's
    destructor again. Its allocations are counted and placed, and the
    ASan build finds nothing (SAN_PROGRAMS)."""
    prog = os.path.join(T, "t_tsdexit")
    line = source_line("t_tsdexit.c", "cudaMalloc(&kept, 3 << 20)")
    for mode, runs in (([], 1), (["twice"], 2)):
        r = run([prog] + mode)
        eq((r.rc, r.out), (0, "thread done\n"), f"{mode}: the program ran to its end: {r.err[-2000:]}")
        d = r.dump
        eq((d["totals"]["alloc_count"], d["totals"]["free_count"], d["totals"]["live_bytes"]),
           (2 + 2 * runs, 2 + runs, runs * (3 << 20)), f"{mode}: every allocation counted")
        live = [(a["bytes"], site(d, a["stack"])["function"], site(d, a["stack"])["line"]) for a in d["live"]]
        eq(live, [(3 << 20, "keep_in_destructor", line)] * runs, f"{mode}: the destructor's allocations placed")


@test
def a_threads_later_key_destructor_may_allocate_from_python():
    """The same order with Python frames: tracker/pystack.c's memo of a
    thread's Python frames was freed by vramtrace's destructor and still
    named by the thread. tests/py/tsdexit.py's key destructor is a ctypes
    callback (Python code in the ending thread, on a new thread state) that
    keeps 3 MiB and frees 1 MiB, once, and with "twice" in a second round
    of destructors too. Before, CPython 3.11 to 3.13 died of a segmentation
    fault (3.12 first raised a SystemError naming a code object as the
    exception) and the ASan build found the use after free on every
    version (asan_ubsan_build_of_the_library runs it). Now each capture
    finds no memo and makes one, which the next round frees; every
    allocation is counted, and each kept one is placed at its Python line."""
    script = os.path.join(ROOT, "tests", "py", "tsdexit.py")
    line = source_line(script, "cuMemAlloc_v2(ctypes.byref(kept), 3 << 20)")
    for py in pythons():
        for mode, runs in (("once", 1), ("twice", 2)):
            r = run([py, script, mode])
            eq((r.rc, r.out), (0, f"destructor ran {runs} time(s)\n"), f"{py} {mode}: ran to its end: {r.err[-2000:]}")
            d = r.dump
            eq((d["totals"]["alloc_count"], d["totals"]["free_count"], d["totals"]["live_bytes"]),
               (1 + 2 * runs, 1 + runs, runs * (3 << 20)), f"{py} {mode}: every allocation counted")
            live = [(a["bytes"], site(d, a["stack"])["function"], site(d, a["stack"])["line"]) for a in d["live"]]
            eq(live, [(3 << 20, "keep_in_destructor", line)] * runs, f"{py} {mode}: the destructor's allocations placed")


@test
def threads_started_after_others_ended_take_their_caches():
    """A thread's walker cache and slot come from vramtrace's own mappings,
    not malloc (with 256 threads starting at once, first calls queued on a
    malloc arena's lock), and an ended thread's cache goes to the next
    thread as it was left: t_threadreuse starts 40 threads two at a time,
    each pair joined before the next, each thread's 50 allocations from
    stacks of three shapes and depths. The walker, checked against
    libunwind at every allocation, differs nowhere."""
    r = run([os.path.join(T, "t_threadreuse"), "40"], env={"VRAMTRACE_UNWIND": "check"})
    eq((r.rc, r.out), (0, "threads 40\n"), r.err[-2000:])
    eq([l for l in r.err.splitlines() if "unwind check" in l],
       ["vramtrace: unwind check: 2000 stacks, 0 differ from libunwind, 0 handed to libunwind"],
       "the walker against libunwind at each allocation")
    t = r.dump["totals"]
    eq((t["alloc_count"], t["free_count"], t["live_bytes"]), (2000, 2000, 0), "every allocation counted")


def _signal_at_exit_once(lib=None, first=None, env=None):
    """t_leaks signal-at-exit: the dump signal raised as main returns. The
    watcher either writes its dump before the exit's (then nothing is said)
    or not at all (then the exit says so), never after it: one that waited
    for the exit's writing used to begin its own once the exit let go, while
    the C library's exit flushed its stream underneath it."""
    r = run([os.path.join(T, "t_leaks"), "signal-at-exit"], lib=lib, first=first, env=env)
    eq((r.out, r.rc), ("done\n", 0), "the program's output and status (the dump signal is vramtrace's)")
    reasons = sorted(d["reason"] for d in r.dumps)
    lines = r.err.splitlines()
    exit_at = [i for i, l in enumerate(lines) if l.startswith("vramtrace: exit in pid ")]
    asked_at = [i for i, l in enumerate(lines) if " on request: " in l]
    overtaken = sum("a dump asked for by signal was not written yet" in l for l in lines)
    eq(len(exit_at), 1, "one exit report:\n" + r.err[-3000:])
    if "signal" in reasons:
        eq((reasons, overtaken, len(asked_at)), (["exit", "signal"], 0, 1), "the signal's dump, written:\n" + r.err[-3000:])
        ok(asked_at[0] < exit_at[0], "the signal's dump came before the exit's:\n" + r.err[-3000:])
    else:
        eq((reasons, overtaken, asked_at), (["exit"], 1, []), "the signal's dump overtaken, and said:\n" + r.err[-3000:])
    return r


@test
def a_dump_signal_at_exit_is_written_before_the_exit_or_said_not_to_be():
    """Ten runs, the library as built and its ThreadSanitizer build (whose
    runtime waits a second at exit, the time a dump begun after the exit's
    needs to be seen: it was, in every run)."""
    for _ in range(10):
        _signal_at_exit_once()
    tsan = gcc_runtime("libtsan.so")
    ok(tsan, "libtsan from gcc")
    for _ in range(5):
        r = _signal_at_exit_once(lib=os.path.join(BUILD, "tsan", "libvramtrace.so"), first=tsan,
                                 env={"TSAN_OPTIONS": "halt_on_error=1:exitcode=66"})
        ok("ThreadSanitizer" not in r.err, "no data race:\n" + r.err[-3000:])


@test
def a_fork_while_the_exit_runs_vramtraces_finalizer_keeps_the_exit_outputs():
    """A thread forks while the main thread exits; a library preloaded after
    vramtrace's holds the fork between vramtrace's prepare step (every
    tracker lock taken) and the fork proper until the exit has run
    vramtrace's finalizer. The fork handlers were tied to vramtrace's
    library, and the C library's exit unregisters such handlers as it
    finalizes the library: the parent's step never ran, the locks stayed
    held, and the exit wrote no dump and no report ("no exit dump or
    report"), its leak check not run (status 125). Now the handlers belong
    to no library, and the exit's outputs are as usual."""
    preload = LIB + " " + os.path.join(T, "libt_forkexit.so")
    for leak_check in ("0", "1"):
        r = run([os.path.join(T, "t_forkexit")], env={"LD_PRELOAD": preload, "VRAMTRACE_LEAK_CHECK": leak_check})
        eq(r.out, "exiting\n", "the program ran to its exit:\n" + r.err[-2000:])
        ok("no exit dump" not in r.err and "could not run" not in r.err, "the exit's outputs:\n" + r.err[-2000:])
        eq([(d["reason"], d["totals"]["live_bytes"]) for d in r.dumps], [("exit", 1 << 20)], "the exit dump")
        if leak_check == "1":
            eq([l for l in r.err.splitlines() if l.startswith("SUMMARY:")],
               ["SUMMARY: vramtrace: 1048576 byte(s) leaked in 1 allocation(s)."], "the leak check's report")
            eq(r.rc, 23, "the exit status: the leak check's finding\n" + r.err[-2000:])
        else:
            eq(sum(l.startswith("vramtrace: exit in pid ") for l in r.err.splitlines()), 1, "the exit report")
            eq(r.rc, 0, "the exit status")


EXITWAIT = os.path.join(T, "t_exitwait")
EXITWAIT_N = 60000  # allocations of 4 KiB kept: a dump of about 3.5 MB


def _exit_during_signal_dump(reader, status, env=None, lib=None, first=None):
    """t_exitwait: the dump signal's dump goes into a FIFO the test reads
    (opened before the writer opens it, which a FIFO without a reader
    refuses); once its first bytes come, the test lets the program exit
    with `status`, its EXITWAIT_N allocations live. `reader` "slow": 64 KiB
    every 50 ms to the end (the writing goes on throughout, about 2.5 s);
    "stalled": nothing more. Returns (status, stdout, stderr, the FIFO's
    bytes, seconds from the exit to the process's end, {reason: dump} of
    the dumps in files)."""
    import select
    with workdir("vt-exitwait-") as work:
        fifo = os.path.join(work, "dump.1.json")
        os.mkfifo(fifo, 0o600)
        rfd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        go = os.path.join(work, "go")
        e = {k: v for k, v in os.environ.items()
             if not k.startswith(("VRAMTRACE_", "SIMGPU_")) and k not in ("LD_PRELOAD", "LD_LIBRARY_PATH")}
        e.update({"LD_LIBRARY_PATH": SIM, "LD_PRELOAD": " ".join(x for x in (first, lib or LIB) if x),
                  "VRAMTRACE_OUT": os.path.join(work, "dump.%n.json"), "VRAMTRACE_REPORT": "stderr",
                  "SIMGPU_CAPACITY": "1G", **(env or {})})
        p = subprocess.Popen([EXITWAIT, str(EXITWAIT_N), go, str(status)], env=e, cwd=work, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        try:
            got = b""
            end = time.monotonic() + 60
            while not got and time.monotonic() < end:
                select.select([rfd], [], [], 1)
                try:
                    got += os.read(rfd, 4096)
                except BlockingIOError:
                    pass
            if not got:
                p.kill()
                o, er = p.communicate()
                raise Failure(f"the dump signal's dump did not begin (status {p.returncode}):\n{er[-2000:]}")
            t0 = time.monotonic()
            open(go, "w").close()
            while reader == "slow":
                time.sleep(0.05)
                try:
                    chunk = os.read(rfd, 65536)
                except BlockingIOError:
                    continue
                if not chunk:
                    break
                got += chunk
            out, err = p.communicate(timeout=120)
            took = time.monotonic() - t0
        finally:
            if p.poll() is None:
                p.kill()
                p.communicate()
            os.close(rfd)
        dumps = {}
        for name in sorted(os.listdir(work)):
            if name.endswith(".json") and name != "dump.1.json":
                d = load_dump(os.path.join(work, name))
                dumps[d["reason"]] = d
        leftovers = [n for n in os.listdir(work) if ".tmp." in n]
        ok(not leftovers, f"no temporary file left: {leftovers}")
        return p.returncode, out, err, got, took, dumps


@test
def the_exit_waits_for_a_dump_on_request_still_being_written():
    """A dump asked for by signal still being written when the program
    exits (a big process, a dump of seconds) is finished first, and then
    the exit's own: before, the exit waited a second, then wrote no dump
    and no report and said a CUDA call had not finished, and the dump on
    request was cut where the process ended (a 10,000,000-live process
    that exited 0.1 s after asking lost both). The test's reader keeps the
    writing going for about 2.5 s after the exit begins."""
    tsan = gcc_runtime("libtsan.so")
    ok(tsan, "libtsan from gcc")
    for leak_check, lib, first in (("0", None, None), ("1", None, None),
                                   ("0", os.path.join(BUILD, "tsan", "libvramtrace.so"), tsan)):
        env = {"VRAMTRACE_LEAK_CHECK": leak_check}
        if first:
            env["TSAN_OPTIONS"] = "halt_on_error=1:exitcode=66"
        rc, out, err, got, took, dumps = _exit_during_signal_dump("slow", 7, env, lib, first)
        what = f"leak check {leak_check}, {'TSan' if first else 'as built'}"
        ok("ThreadSanitizer" not in err, f"{what}: no data race:\n{err[-3000:]}")
        eq((rc, out), (23 if leak_check == "1" else 7, "exiting\n"), f"{what}: the status and the output:\n{err[-2000:]}")
        ok(took > 1.5, f"{what}: the exit waited past a second for the writing ({took:.2f} s)")
        signal_dump = json.loads(got)
        eq((signal_dump["reason"], signal_dump["totals"]["alloc_count"], signal_dump["totals"]["live_bytes"]),
           ("signal", EXITWAIT_N, EXITWAIT_N * 4096), f"{what}: the dump on request, whole")
        eq(sorted(dumps), ["exit"], f"{what}: the exit dump")
        eq((dumps["exit"]["totals"]["alloc_count"], dumps["exit"]["totals"]["live_bytes"]),
           (EXITWAIT_N, EXITWAIT_N * 4096), f"{what}: the exit dump's counts")
        ok("no exit dump" not in err and "was not written" not in err and "could not run" not in err,
           f"{what}: nothing said missing:\n{err[-2000:]}")
        eq(sum(l.startswith("vramtrace: exit in pid ") for l in err.splitlines()), 0 if leak_check == "1" else 1,
           f"{what}: the exit report")
        if leak_check == "1":
            eq([l for l in err.splitlines() if l.startswith("SUMMARY:")],
               [f"SUMMARY: vramtrace: {EXITWAIT_N * 4096} byte(s) leaked in {EXITWAIT_N} allocation(s)."],
               f"{what}: the leak check's report")


@test
def the_exit_gives_up_on_a_dump_whose_reader_stalled_and_says_why():
    """The dump on request's reader stops reading: its writer waits (up
    to 10 s a stalled reader) making no progress, and the exit, after a
    second of that, goes on without it: no exit dump or report, one line
    that says which writing it gave up on and why (before: "a CUDA call
    vramtrace was recording did not finish"), the warning that the dump
    on request was not written (before: "the exit dump stands for it",
    with no exit dump), and the leak check's 125. The process ends within
    a few seconds: the C library's exit flushes the writer's stream, which
    waited on the stalled reader another 10 s (the 125's flush waited for
    the writer's lock as long)."""
    tsan = gcc_runtime("libtsan.so")
    ok(tsan, "libtsan from gcc")
    gave_up = ("vramtrace: no exit dump or report: the dump asked for by signal that another thread was writing "
               "made no progress for a second")
    for (leak_check, status), (lib, first) in itertools.product(
            (("0", 7), ("1", 0)), ((None, None), (os.path.join(BUILD, "tsan", "libvramtrace.so"), tsan))):
        env = {"VRAMTRACE_LEAK_CHECK": leak_check}
        if first:
            env["TSAN_OPTIONS"] = "halt_on_error=1:exitcode=66"
        rc, out, err, got, took, dumps = _exit_during_signal_dump("stalled", status, env, lib, first)
        what = f"leak check {leak_check}, {'TSan' if first else 'as built'}"
        ok("ThreadSanitizer" not in err, f"{what}: no data race:\n{err[-3000:]}")
        eq((rc, out), (125 if leak_check == "1" else status, "exiting\n"),
           f"{what}: the status and the output:\n{err[-2000:]}")
        ok(1.0 <= took < 8, f"{what}: the exit waited a second, not the stalled reader's 10 ({took:.2f} s)")
        tail = ["vramtrace: warning: a dump asked for by signal was not written when the process exited", gave_up]
        if leak_check == "1":
            tail.append("vramtrace: the leak check could not run; exit status 125")
        eq(err.splitlines()[-len(tail):], tail, f"{what}: the last lines:\n{err[-2000:]}")
        eq(sum(gave_up in l for l in err.splitlines()), 1, f"{what}: said once")
        eq(dumps, {}, f"{what}: no exit dump")
