"""Integration tests of the files vramtrace writes from inside the traced
process (the dump, the report) and of `vramtrace run` and `make install`:
devices, FIFOs, links and other users' files at the output paths, paths up
to PATH_MAX, dump names of pid 1, an install prefix with a space in it.

Several cases need root (mknod, chown, unshare), as `make test` runs here."""
import re
import select
import shlex
import signal
import time

from run_tests import *

TRIAGE = [os.path.join(T, "t_triage"), "keep", "1M"]
NOBODY = 65534


def copies_for_nobody(work, prog):
    """Copies of the simulated GPU, tests/PROG (its rpath: $ORIGIN/../sim)
    and the library in work, which NOBODY may read and run: the build's
    may be in a folder only root reads (a fresh clone under mktemp -d).
    Returns the program's and the library's paths."""
    os.chmod(work, 0o755)
    shutil.copytree(SIM, os.path.join(work, "sim"), symlinks=True)
    os.makedirs(os.path.join(work, "tests"))
    copy = os.path.join(work, "tests", prog)
    shutil.copy(os.path.join(T, prog), copy)
    lib = os.path.join(work, "libvramtrace.so")
    shutil.copy(LIB, lib)
    for d, _, files in os.walk(work):
        os.chmod(d, 0o755)
        for x in files:
            if not os.path.islink(os.path.join(d, x)):
                os.chmod(os.path.join(d, x), 0o755)
    return copy, lib


def as_nobody():
    """A child's preexec_fn: run as NOBODY (group first)."""
    os.setgid(NOBODY)
    os.setuid(NOBODY)


def lib_env(**extra):
    """The environment of a traced run without run()'s folder: the simulated
    GPU, the library, the report off unless given."""
    e = {k: v for k, v in os.environ.items()
         if not k.startswith(("VRAMTRACE_", "SIMGPU_")) and k not in ("LD_PRELOAD", "LD_LIBRARY_PATH")}
    e.update(LD_LIBRARY_PATH=SIM, LD_PRELOAD=LIB, VRAMTRACE_REPORT="off", VRAMTRACE_OUT="off")
    e.update(extra)
    return e


def timed(argv, env, timeout=30, cwd=None):
    """Run argv; (status, stdout, stderr, seconds)."""
    t0 = time.monotonic()
    p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout, cwd=cwd)
    return p.returncode, p.stdout, p.stderr, time.monotonic() - t0


def warnings(err):
    return [l for l in err.splitlines() if l.startswith("vramtrace: warning:")]


def without(argv, **kw):
    return run(argv, preload=False, **kw)


def read_all(fd):
    """Everything a non-blocking FIFO reader holds now."""
    out = b""
    while True:
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            return out
        if not chunk:
            return out
        out += chunk


# ------------------------------------------ the program's descriptor table


@test
def program_that_closes_every_descriptor_keeps_its_files():
    """A program that, after its first allocation, closes descriptors 3 to
    1023 (a daemon's closefrom) and opens ten files at the lowest numbers,
    then raises the dump signal and forks a child that writes to them:
    every file holds exactly what the program wrote, as without vramtrace
    (before, the signal's handler wrote its byte into the file that took
    the pipe's number, and the child's fork handlers closed three of the
    program's files). With the live publisher and the dump signal on."""
    prog = os.path.join(T, "t_fds")
    for preload in (False, True):
        with workdir("vt-fds-") as work:
            env = lib_env(VRAMTRACE_LIVE="1", XDG_RUNTIME_DIR=work) if preload else \
                dict(lib_env(), LD_PRELOAD="")
            rc, out, err, _ = timed([prog, "closefrom", work], env)
            eq((rc, out, err), (0, "fds 3..12 writes ok child ok\n", ""), f"status and output, preload {preload}")
            for i in range(10):
                with open(os.path.join(work, f"f{i}")) as f:
                    eq(f.read(), "a\nb\nc\n", f"f{i}'s content, preload {preload}")


@test
def program_started_with_stdin_closed_keeps_it_closed():
    """A program started with descriptor 0 closed finds it closed after an
    allocation, with the live segment open (it, and the dump signal's pipe
    of the time, took 0, 1 and 3 before: a read of stdin then hung on the
    pipe or read the segment)."""
    prog = os.path.join(T, "t_fds")
    for preload in (False, True):
        with workdir("vt-fds-") as work:
            env = lib_env(VRAMTRACE_LIVE="1", XDG_RUNTIME_DIR=work) if preload else dict(lib_env(), LD_PRELOAD="")
            p = subprocess.run([prog, "stdin"], env=env, capture_output=True, text=True, timeout=30,
                               stdin=subprocess.DEVNULL, preexec_fn=lambda: os.close(0))
            eq((p.returncode, p.stdout, p.stderr), (0, "fd 0 closed\n", ""), f"preload {preload}")


@test
def program_that_closed_stdout_and_stderr_never_writes_into_vramtraces_files():
    """A program that closed 1 and 2 and keeps writing to them from a
    thread (a daemon's log lines), while two out-of-memory post-mortems
    and the exit write 1 MB dumps: every one of its writes fails (EBADF)
    as without vramtrace, and the dump at the path is whole. The dump's
    folder and temporary file took 1 and 2 before: thousands of the
    program's lines went into the dump, which was then no dump."""
    prog = [os.path.join(T, "t_closedstd"), "2", "20000"]
    want = "out of memory 2 of 2; writes to 1 and 2 taken: 0\n"
    rc, out, err, _ = timed(prog, dict(lib_env(), LD_PRELOAD=""), timeout=60)
    eq((rc, out, err), (0, want, ""), "without vramtrace")
    with workdir("vt-closedstd-") as work:
        path = os.path.join(work, "g.json")
        rc, out, err, _ = timed(prog, lib_env(VRAMTRACE_OUT=path, VRAMTRACE_REPORT="stderr"), timeout=60)
        eq((rc, out, err), (0, want, ""), "with vramtrace: the program's writes to 1 and 2 all refused")
        eq(os.listdir(work), ["g.json"], "one dump, nothing beside it")
        d = load_dump(path)
        eq((d["reason"], d["totals"]["live_count"], d["totals"]["oom_count"]), ("exit", 20000, 2),
           "the exit dump, whole")


@test
def symbolizer_holds_no_descriptor_in_the_programs_range():
    """While a post-mortem names its frames, every descriptor it holds is
    vramtrace's own: at 700 and up, close-on-exec. libdwfl opened the
    program and its libraries (and libc's debug file) at the lowest
    numbers free, without close-on-exec, and held them through the
    session: the program's own open() got other numbers and a child it
    started meanwhile inherited them. The program's thread lists its
    descriptors all along two post-mortems (the first failure, which
    loads libdw, is before it starts); one is held when it stays open
    while the main thread runs 2 ms of CPU (a descriptor opened and moved
    at once takes microseconds of it: counted by listings, a busy CI
    machine preempting the thread in between made a read of
    /proc/self/stat held)."""
    prog = [os.path.join(T, "t_symfds"), "2"]
    rc, out, err, _ = timed(prog, lib_env(VRAMTRACE_REPORT="stderr", VRAMTRACE_LIVE="0"), timeout=60)
    eq((rc, out), (0, "out of memory 3; held below 700: 0; held not close-on-exec: 0\n"), "status and output")
    eq(err.count("vramtrace: out of memory in pid"), 3, "three post-mortems")
    eq(len(re.findall(r"failing call: main \S*t_symfds\.c:\d+$", err, re.M)), 3, "each names the failing call")


@test
def frames_named_from_memory_when_no_descriptor_is_left():
    """A program that has used every descriptor (its limit lowered to 64)
    when an allocation fails: libdw cannot be loaded, nor the program's
    files opened, and every frame of the post-mortem was "?? 0xADDR". Now
    each names its module and offset from the loader's memory (and the
    function, where the module exports one there), said once, with why and
    what turns them into lines; the exit's report, with descriptors again,
    loads libdw then and names them in full, at the same offsets."""
    # The live view off: its thread names sites too, and with a descriptor
    # free at its moment it reads what the post-mortem then cannot (a
    # module mapped, its file not opened: named from memory all the same).
    r = run([os.path.join(T, "t_nofds")], env={"VRAMTRACE_LIVE": "0"})
    eq((r.rc, r.out), (0, "hold 0\nopened up to the limit: yes\nask 2\n"), "status and output")
    # Why: libdw could not be loaded, or (where a thread of vramtrace's
    # had loaded it before the descriptors ran out) the map not read.
    eq(len(re.findall(r"^vramtrace: warning: cannot read this process's symbols \((libdw\.so\.1: cannot open shared "
                      r"object file: )?Too many open files\): frames are named by module and offset, which `addr2line "
                      r"-f -e MODULE OFFSET` turns into a function and line$", r.err, re.M)), 1, "said once, with why")
    d = r.dump  # the failure's dump had no descriptor to be written by
    eq(d["reason"], "exit", "the exit's dump")
    (o,) = d["ooms"]
    ask = frames(d, o["stack"])[0]
    (h,) = d["holders"]
    hold = frames(d, h["stack"])[0]
    eq((ask["function"], os.path.basename(ask["module"]), hold["function"], os.path.basename(hold["module"])),
       ("ask_one_tib", "t_nofds", "hold_one_mib", "t_nofds"), "the exit names them in full")
    post = r.err.split("vramtrace: exit in pid")[0]
    eq(post.count(f"vramtrace:   failing call: ask_one_tib (t_nofds+{ask['offset']})\n"), 1,
       "the failing call by module and offset")
    eq(post.count(f"   1 alloc   hold_one_mib (t_nofds+{hold['offset']})\n"), 1, "the holder by module and offset")
    eq(re.findall(r"\?\? 0x", r.err), [], "no bare address")
    eq(r.err.count(f"   1 alloc   hold_one_mib tests/progs/t_nofds.c:"), 1, "the exit's report by line")


@test
def dump_with_one_descriptor_left_says_why_it_was_not_written():
    """One descriptor free when a failure's dump is written: the dump's
    folder opened, then the name could not be: the warning said the name
    "holds a file that is not a vramtrace dump (kept)", of a name that held
    none. Now it says why: no descriptor."""
    with workdir("vt-files-onefd-") as work:
        r = run([os.path.join(T, "t_nofds"), "one"], env={"VRAMTRACE_LIVE": "0",
                                                          "VRAMTRACE_OUT": os.path.join(work, "d.%p.json")})
        eq((r.rc, r.out), (0, "hold 0\nopened up to the limit: yes\nask 2\n"), "status and output")
        pid = r.err.split("out of memory in pid ")[1].split()[0]
        eq([l for l in r.err.splitlines() if "cannot write the dump" in l],
           [f"vramtrace: warning: cannot write the dump to {os.path.join(work, f'd.{pid}.json')}: Too many open files"],
           "the reason, not a file in the way")
        eq(os.listdir(work), [f"d.{pid}.json"], "the exit's dump, with descriptors again")


# ------------------------------------------ devices, FIFOs, links: the dump


@test
def dump_goes_into_devices_and_fifos_never_over_them():
    a = without(TRIAGE)
    with workdir("vt-files-") as work:
        # A character device: written into, still the same device after.
        dev = os.path.join(work, "null")
        os.mknod(dev, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        rc, out, err, _ = timed(TRIAGE, lib_env(VRAMTRACE_OUT=dev))
        eq((rc, out, err), (a.rc, a.out, ""), "dump to a character device: the program as without, no warning")
        st = os.lstat(dev)
        eq((stat.S_ISCHR(st.st_mode), os.major(st.st_rdev), os.minor(st.st_rdev)), (True, 1, 3),
           "the device node is still the device")
        eq(sorted(os.listdir(work)), ["null"], "no temporary file left beside it")

        # A symbolic link (to this process's stdout): refused, not followed.
        link = os.path.join(work, "stdout")
        os.symlink("/proc/self/fd/1", link)
        rc, out, err, _ = timed(TRIAGE, lib_env(VRAMTRACE_OUT=link))
        eq((rc, out), (a.rc, a.out), "dump to a link: the program's own output and status")
        eq(warnings(err), [f"vramtrace: warning: cannot write the dump to {link}: it is a symbolic link (not followed)"],
           "one warning line")
        eq(os.readlink(link), "/proc/self/fd/1", "the link is still the link")

        # A FIFO without a reader: skipped at once, the FIFO kept.
        fifo = os.path.join(work, "fifo")
        os.mkfifo(fifo, 0o600)
        rc, out, err, secs = timed(TRIAGE, lib_env(VRAMTRACE_OUT=fifo), timeout=20)
        eq((rc, out), (a.rc, a.out), "dump to a FIFO without a reader: the program's own output and status")
        ok(secs < 10, f"no wait for a reader ({secs:.1f} s)")
        eq(warnings(err), [f"vramtrace: warning: cannot write the dump to {fifo}: it is a FIFO with no reader"],
           "one warning line")
        ok(stat.S_ISFIFO(os.lstat(fifo).st_mode), "the FIFO is still a FIFO")

        # A FIFO with a reader: the reader gets the whole dump.
        rfd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        try:
            rc, out, err, _ = timed(TRIAGE, lib_env(VRAMTRACE_OUT=fifo))
            d = json.loads(read_all(rfd))
        finally:
            os.close(rfd)
        eq((rc, out, err), (a.rc, a.out, ""), "dump to a read FIFO: the program as without, no warning")
        eq((d["format"], d["reason"], d["totals"]["live_bytes"]), ("vramtrace-dump", "exit", 1 * MiB),
           "the reader got the dump")
        ok(stat.S_ISFIFO(os.lstat(fifo).st_mode), "the FIFO is still a FIFO")
        eq(sorted(os.listdir(work)), ["fifo", "null", "stdout"], "nothing else made")


@test
def dump_to_a_fifo_whose_reader_leaves_does_not_kill_the_program():
    prog = [os.path.join(T, "t_threads")]
    a = without(prog)
    with workdir("vt-files-") as work:
        fifo = os.path.join(work, "fifo")
        os.mkfifo(fifo, 0o600)
        rfd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        p = subprocess.Popen(prog, env=lib_env(VRAMTRACE_OUT=fifo), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        # The dump (about 800 KiB) fills the pipe; the reader takes the
        # first bytes and goes.
        r, _, _ = select.select([rfd], [], [], 60)
        first = os.read(rfd, 100) if r else b""
        os.close(rfd)
        out, err = p.communicate(timeout=60)
        ok(first.startswith(b'{"format":"vramtrace-dump"'), f"the reader saw the dump start: {first!r}")
        eq((p.returncode, out), (a.rc, a.out), "the program's own status (no SIGPIPE) and output")
        eq(warnings(err), [f"vramtrace: warning: cannot write the dump to {fifo}: Broken pipe"], "one warning line")


@test
def dump_to_a_fifo_whose_reader_stalls_waits_ten_seconds_once():
    """A FIFO at the dump path whose reader opened it and never reads: the
    dump waits 10 s for it without progress, once, then is dropped with
    one warning, and the program ends with its own status. It used to wait
    for as long as the reader stalled (a reader that held it 60 s held the
    program's exit 60 s)."""
    with workdir("vt-fifo-stall-") as work:
        fifo = os.path.join(work, "d.json")
        os.mkfifo(fifo)
        # The reader: opens the FIFO for reading and holds it, reading nothing.
        fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        try:
            rc, out, err, secs = timed([os.path.join(T, "t_deepleak"), "2000"], lib_env(VRAMTRACE_OUT=fifo),
                                       timeout=120)
        finally:
            os.close(fd)
        eq(rc, 0, "the program's own status")
        ok(secs < 45, f"one wait of 10 s: {secs:.0f} s")
        eq([w.split(": ")[-1] for w in warnings(err)], ["Connection timed out"], f"one warning: {err[-500:]}")


@test
def stderr_pipe_nobody_reads_yet_is_waited_for_ten_seconds_once():
    """stderr a pipe its launcher reads only once the program has ended,
    64,000 bytes of the program's in it already, blocking or not: the
    out-of-memory post-mortem waits 10 s for room, once, and the exit's
    report then waits no more; the program's output and status as without
    vramtrace. A blocking stderr held the failing cudaMalloc for ever
    (write() in the post-mortem); a non-blocking one was waited for twice
    (20 s)."""
    prog = os.path.join(T, "t_fullerr")
    for mode in ("block", "nonblock"):
        for preload in (False, True):
            with workdir("vt-fullerr-") as work:
                env = lib_env(VRAMTRACE_REPORT="stderr", SIMGPU_CAPACITY="64M") if preload else \
                    dict(lib_env(SIMGPU_CAPACITY="64M"), LD_PRELOAD="")
                with open(os.path.join(work, "out"), "w+") as out:
                    t0 = time.monotonic()
                    p = subprocess.Popen([prog, "64000", mode], env=env, stdout=out, stderr=subprocess.PIPE)
                    try:
                        rc = p.wait(timeout=40)
                    except subprocess.TimeoutExpired:
                        p.kill()
                        p.wait()
                        rc = "still running after 40 s"
                    secs = time.monotonic() - t0
                    err = p.stderr.read()
                    p.stderr.close()
                    out.seek(0)
                    eq((rc, out.read()), (7, "big request -> 2\n"), f"{mode}, preload {preload}: status and output")
                ok(err.startswith(("x" * 99 + "\n").encode() * 640), f"{mode}: the program's 64,000 bytes first")
                if preload:
                    ok(9.5 < secs < 15, f"{mode}: one wait of 10 s, not more: {secs:.1f} s")
                    if mode == "block":
                        eq(len(err), 64000, "block: nothing of vramtrace's in a pipe that had no room")


@test
def dev_null_stays_a_device():
    # /dev/null itself, in a mount namespace of its own (a private /dev):
    # a regression must not take the machine's /dev/null with it.
    a = without(TRIAGE)
    script = ('mount -t tmpfs vt-dev /dev && mknod -m 666 /dev/null c 1 3 && "$@"; s=$?; '
              'stat -c "%F %t:%T" /dev/null >&2; ls -A /dev >&2; exit $s')
    p = subprocess.run(["unshare", "--mount", "sh", "-c", script, "sh"] + TRIAGE,
                       env=lib_env(VRAMTRACE_OUT="/dev/null"), capture_output=True, text=True, timeout=60)
    eq((p.returncode, p.stdout), (a.rc, a.out), "the program as without: " + p.stderr)
    eq(p.stderr, "character special file 1:3\nnull\n", "/dev/null is still the null device, nothing beside it")


# --------------------------------------- FIFOs, links, other users: the report


@test
def report_never_blocks_nor_goes_to_another_users_file():
    a = without(TRIAGE)
    oom = [os.path.join(T, "t_oom")]
    a_oom = without(oom, env={"SIMGPU_CAPACITY": "64M"})
    with workdir("vt-files-") as work:
        fifo = os.path.join(work, "fifo")
        os.mkfifo(fifo, 0o600)
        want = [f"vramtrace: warning: cannot write the report to {fifo}: it is a FIFO with no reader; the report goes "
                "to stderr"]
        # No reader: at exit, and inside the failing call at an OOM.
        for argv, base, extra in ((TRIAGE, a, {}), (oom, a_oom, {"SIMGPU_CAPACITY": "64M"})):
            rc, out, err, secs = timed(argv, lib_env(VRAMTRACE_REPORT=fifo, **extra), timeout=20)
            name = os.path.basename(argv[0])
            eq((rc, out), (base.rc, base.out), f"{name}: its own status and output")
            ok(secs < 10, f"{name}: no wait for a reader ({secs:.1f} s)")
            eq(warnings(err), want, f"{name}: one warning line")
        # A reader gets the report.
        rfd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        try:
            rc, out, err, _ = timed(TRIAGE, lib_env(VRAMTRACE_REPORT=fifo))
            text = read_all(rfd).decode()
        finally:
            os.close(rfd)
        eq((rc, out, err), (a.rc, a.out, ""), "report to a read FIFO: no warning")
        ok(text.startswith("vramtrace: exit in pid "), "the reader got the report: " + text[:200])

        # A file another user made there: left alone, the report on stderr.
        theirs = os.path.join(work, "theirs.txt")
        with open(theirs, "w") as f:
            f.write("theirs\n")
        os.chown(theirs, NOBODY, NOBODY)
        os.chmod(theirs, 0o666)
        rc, out, err, _ = timed(TRIAGE, lib_env(VRAMTRACE_REPORT=theirs))
        eq((rc, out), (a.rc, a.out), "the program's own status and output")
        eq(warnings(err), [f"vramtrace: warning: cannot write the report to {theirs}: it belongs to another user; "
                           "the report goes to stderr"], "one warning line")
        ok(f"vramtrace: exit in pid " in err, "the report on stderr: " + err)
        eq(open(theirs).read(), "theirs\n", "their file is untouched")
        # The leak report, which CI reads, with it.
        rc, out, err, _ = timed([os.path.join(T, "t_leaks")], lib_env(VRAMTRACE_REPORT=theirs,
                                                                   VRAMTRACE_LEAK_CHECK="1"))
        eq(rc, 23, "the leak check's status")
        ok(err.rstrip().endswith("SUMMARY: vramtrace: 1576960 byte(s) leaked in 10 allocation(s)."),
           "the leak report on stderr: " + err)
        eq(open(theirs).read(), "theirs\n", "their file is untouched by the leak report")

        # A dangling link: nothing is created where it points.
        target = os.path.join(work, "target.txt")
        link = os.path.join(work, "link.txt")
        os.symlink(target, link)
        rc, out, err, _ = timed(TRIAGE, lib_env(VRAMTRACE_REPORT=link))
        eq(warnings(err), [f"vramtrace: warning: cannot write the report to {link}: it is a symbolic link (not "
                           "followed); the report goes to stderr"], "one warning line")
        ok(not os.path.lexists(target), "no file made through the link")

        # Our own report log: appended to; a new one: mode 0600.
        mine = os.path.join(work, "mine.txt")
        with open(mine, "w") as f:
            f.write("vramtrace: before\n")
        rc, out, err, _ = timed(TRIAGE, lib_env(VRAMTRACE_REPORT=mine))
        text = open(mine).read()
        eq((err, text.startswith("vramtrace: before\nvramtrace: exit in pid ")), ("", True), "our own log appended to")
        new = os.path.join(work, "new.txt")
        old_umask = os.umask(0)
        try:
            timed(TRIAGE, lib_env(VRAMTRACE_REPORT=new))
        finally:
            os.umask(old_umask)
        eq(stat.S_IMODE(os.stat(new).st_mode), 0o600, "a new report is 0600 even with umask 0")


@test
def dump_never_replaces_another_users_file():
    a = without(TRIAGE)
    with workdir("vt-files-") as work:
        theirs = os.path.join(work, "theirs.json")
        with open(theirs, "w") as f:
            f.write("theirs\n")
        os.chown(theirs, NOBODY, NOBODY)
        rc, out, err, _ = timed(TRIAGE, lib_env(VRAMTRACE_OUT=theirs))
        eq((rc, out), (a.rc, a.out), "the program's own status and output")
        names = sorted(os.listdir(work))
        eq(len(names), 2, f"their file and the dump beside it: {names}")
        mine = os.path.join(work, names[-1])
        pid, reason, _ = dump_at(mine)
        eq(names, ["theirs.json", f"theirs.pid{pid}.json"], "the dump beside theirs, under the name with the pid")
        eq(reason, "exit", "the dump is whole")
        # Before, the dump was refused: a shared folder where another
        # user's job left a dump at the name gave this job none at all.
        eq(warnings(err), [f"vramtrace: warning: {theirs} belongs to another user: it is left as it is, and the "
                           f"dump written to {mine}"], "one warning line, saying where")
        eq((open(theirs).read(), os.stat(theirs).st_uid), ("theirs\n", NOBODY), "their file is untouched")
        os.unlink(mine)
        # A FIFO of another user is refused too, reader or not.
        fifo = os.path.join(work, "fifo")
        os.mkfifo(fifo, 0o666)
        os.chown(fifo, NOBODY, NOBODY)
        rfd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        try:
            rc, out, err, _ = timed(TRIAGE, lib_env(VRAMTRACE_OUT=fifo))
            got = read_all(rfd)
        finally:
            os.close(rfd)
        eq(warnings(err), [f"vramtrace: warning: cannot write the dump to {fifo}: it belongs to another user"],
           "one warning line")
        eq(got, b"", "nothing sent to their FIFO")


# -------------------------------------------------- long paths, pid 1


def long_dir(root, total):
    """A folder under root whose path is `total` characters long, made of
    components that fit NAME_MAX."""
    path = root
    while len(path) < total:
        left = total - len(path) - 1
        part = "d" * min(200, left)
        if left - len(part) in range(1, 3):  # leave no room too short for "/x"
            part = part[:-3]
        path = os.path.join(path, part)
        os.mkdir(path)
    eq(len(path), total, "long folder built")
    return path


def long_rel_dir(root, total):
    """A folder `total` characters long below root, made relative to it (the
    whole path may pass PATH_MAX); returns the relative path."""
    parts = []
    while sum(len(p) + 1 for p in parts) - 1 < total:
        left = total - (sum(len(p) + 1 for p in parts) if parts else 0)
        parts.append("r" * min(200, left))
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in parts:
            os.mkdir(part, dir_fd=fd)
            nfd = os.open(part, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nfd
    finally:
        os.close(fd)
    rel = "/".join(parts)
    eq(len(rel), total, "long relative folder built")
    return rel


@test
def dump_paths_up_to_path_max_are_exact():
    a = without(TRIAGE)
    with workdir("vt-files-") as work:
        # An absolute path of 4095 characters, the most PATH_MAX holds.
        name = "x.json"
        folder = long_dir(work, 4095 - len(name) - 1)
        path = os.path.join(folder, name)
        eq(len(path), 4095, "path length")
        rc, out, err, _ = timed(TRIAGE, lib_env(VRAMTRACE_OUT=path), cwd=work)
        eq((rc, out, err), (a.rc, a.out, ""), "a 4095-character dump path: no warning")
        with open(path) as f:
            eq(json.load(f)["totals"]["live_bytes"], 1 * MiB, "the dump is at exactly that path")
        eq(sorted(os.listdir(folder)), [name], "and nothing beside it")
        eq(sorted(os.listdir(work)), ["d" * 200], "and no dump elsewhere")
        os.unlink(path)
        # With the pid expanded into it.
        parent = os.path.dirname(folder)
        rc, out, err, _ = timed(TRIAGE, lib_env(VRAMTRACE_OUT=os.path.join(parent, "%p.json"),
                                                VRAMTRACE_REPORT="stderr"), cwd=work)
        files = [f for f in os.listdir(parent) if f.endswith(".json")]
        eq(len(files), 1, "one dump")
        ok(f"dump: {os.path.join(parent, files[0])}\n" in err, "the report names the whole path: " + err[-300:])

        # Relative, 3000 characters, from a working folder 2000 deep: the
        # whole path passes PATH_MAX, the one given does not.
        cwd = long_dir(tempfile.mkdtemp(prefix="vt-files-cwd-", dir=work), 2000)
        rel_dir = long_rel_dir(cwd, 2990)
        rel = os.path.join(rel_dir, "rel.json")
        ok(len(rel) > 2046 and len(cwd) + 1 + len(rel) > 4095, "lengths")
        rc, out, err, _ = timed(TRIAGE, lib_env(VRAMTRACE_OUT=rel), cwd=cwd)
        eq((rc, out, err), (a.rc, a.out, ""), "a relative 3000-character path: no warning")
        dfd = os.open(cwd, os.O_RDONLY)
        try:
            eq(stat.S_ISREG(os.stat(rel, dir_fd=dfd).st_mode), True, "the dump is at that relative path")
        finally:
            os.close(dfd)

        # 4096 characters: one warning, no dump anywhere.
        long_path = os.path.join(folder, "xy.json")
        eq(len(long_path), 4096, "path length")
        for pattern in (long_path, path[:-len(name)] + "%p%p%p.json"):
            rc, out, err, _ = timed(TRIAGE, lib_env(VRAMTRACE_OUT=pattern), cwd=work)
            eq((rc, out), (a.rc, a.out), "too long: the program's own status and output")
            w = warnings(err)
            eq(len(w), 1, f"one warning line: {w}")
            ok(w[0].startswith("vramtrace: warning: cannot write the dump to " + pattern[:200] + "...: ")
               and w[0].endswith(": the path is longer than 4095 characters"), w[0])
            eq(os.listdir(folder), [], "no dump written")
            eq(sorted(f for f in os.listdir(work) if not f.startswith("vt-files-cwd-")), ["d" * 200],
               "none in the working folder")
        # Past what the option holds: one warning, no dump.
        rc, out, err, _ = timed(TRIAGE, lib_env(VRAMTRACE_OUT="/" * 8192 + "x.json"), cwd=work)
        eq(warnings(err), ["vramtrace: warning: VRAMTRACE_OUT is longer than 8191 characters; writing no dump"],
           "one warning line")
        eq(sorted(f for f in os.listdir(work) if not f.startswith("vt-files-cwd-")), ["d" * 200],
           "no dump in the working folder")
        # A report path too long: one warning, no report file.
        rc, out, err, _ = timed(TRIAGE, lib_env(VRAMTRACE_REPORT=long_path), cwd=work)
        eq(warnings(err), ["vramtrace: warning: cannot write the report to " + long_path[:200] +
                           "...: the path is longer than 4095 characters; the report goes to stderr"],
           "one warning line")
        eq(os.listdir(folder), [], "no report written")


def as_pid1(argv, env):
    return subprocess.run(["unshare", "--pid", "--fork", "--mount-proc"] + argv, env=env,
                          capture_output=True, text=True, timeout=60)


def _can_be_pid1():
    try:
        return subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True,
                              timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def pid1_test(fn):
    """A test that runs programs as pid 1 of a pid namespace of their own
    (a container's program): registered where unshare can make one."""
    if _can_be_pid1():
        return test(fn)
    print(f"SKIP {fn.__name__}: unshare --pid --fork --mount-proc cannot run here (it needs root)")
    return fn


def dump_facts(path):
    """(pid, reason, live bytes, pid namespace) of the dump at path."""
    with open(path) as f:
        d = json.load(f)
    return d["pid"], d["reason"], d["totals"]["live_bytes"], d["pid_ns"]


# t_leaks signal's live bytes at its two on-demand dumps and at exit.
LEAKS_AT = (MiB + 4096 + 3 * 65536, MiB + 4096 + 6 * 65536, MiB + 4096 + 8 * 65536)


@pid1_test
def a_pid1s_exit_dump_leaves_its_on_demand_dumps():
    """A program running as pid 1 (a container's) lost its first on-demand
    dump at exit (an outside check): dump 1 of pid 1 is d.1.1.json, which
    is also the name under which a dump of d.1.json's that another writer
    kept aside lies when its writer is pid 1, and the exit dump removed
    what it took for its own dump kept aside there. Now only a file this
    image placed at d.1.json, whose first bytes say this process, is
    removed as such."""
    with workdir("vt-files-pid1-") as work:
        p = as_pid1([os.path.join(T, "t_leaks"), "signal"],
                    lib_env(VRAMTRACE_OUT=os.path.join(work, "d.%p.json"), VRAMTRACE_REPORT="stderr"))
        eq((p.returncode, p.stdout), (0, "done\n"), "t_leaks as pid 1")
        eq([l for l in p.stderr.splitlines() if " dump" in l],
           ["vramtrace: dump 1 of pid 1 on request: " + os.path.join(work, "d.1.1.json"),
            "vramtrace: dump 2 of pid 1 on request: " + os.path.join(work, "d.1.2.json"),
            "vramtrace: dump: " + os.path.join(work, "d.1.json")], "the dumps it announced")
        eq(sorted(os.listdir(work)), ["d.1.1.json", "d.1.2.json", "d.1.json"], "every one of them is there")
        got = [dump_facts(os.path.join(work, x))[:3] for x in ("d.1.1.json", "d.1.2.json", "d.1.json")]
        eq(got, [(1, "signal", LEAKS_AT[0]), (1, "signal", LEAKS_AT[1]), (1, "exit", LEAKS_AT[2])],
           "each the dump its name says")


@pid1_test
def pid1_containers_in_one_folder_keep_every_dump_under_names_apart():
    """Three containers' programs, each pid 1, one after another in one
    folder (d.%p.json), each with two on-demand dumps and its exit dump:
    a dump kept aside under its writer's pid was named like an on-demand
    dump (d.1.1.json: dump 1 of pid 1, or pid 1's d.1.json kept aside),
    which took one container's dump for another's and left 8 of 9, under
    names such as d.1.1.1.2.json (an outside check). A dump kept aside is
    now named with ".pid" before the writer's pid: all 9 are there, each at
    the name that says what it is. So is this process's dump written
    beside a file that is no dump (it was d.1.1.json, over its own
    on-demand dump 1)."""
    prog = [os.path.join(T, "t_leaks"), "signal"]
    with workdir("vt-files-pid1s-") as work:
        env = lib_env(VRAMTRACE_OUT=os.path.join(work, "d.%p.json"), VRAMTRACE_REPORT="stderr")
        runs = []
        for k in range(3):
            p = as_pid1(prog, env)
            eq((p.returncode, p.stdout), (0, "done\n"), f"container {k + 1}")
            with open(os.path.join(work, "d.1.json")) as f:
                d = json.load(f)
            runs.append((d["process_start"], d["pid_ns"]))
        eq(len(set(runs)), 3, "three processes")
        kept = [l for l in p.stderr.splitlines() if "held a dump" in l]
        w = lambda x: os.path.join(work, x)
        eq(kept, [f"vramtrace: {w('d.1.1.json')} held a dump of pid 1 (signal); it is kept as {w('d.1.1.pid1.2.json')}",
                  f"vramtrace: {w('d.1.2.json')} held a dump of pid 1 (signal); it is kept as {w('d.1.2.pid1.2.json')}",
                  f"vramtrace: {w('d.1.json')} held a dump of pid 1 (exit); it is kept as {w('d.1.pid1.2.json')}"],
           "what the third kept, and where")
        got = {}
        for x in os.listdir(work):
            with open(w(x)) as f:
                d = json.load(f)
            got[x] = (runs.index((d["process_start"], d["pid_ns"])) + 1, d["reason"], d["totals"]["live_bytes"])
        eq(got, {"d.1.json": (3, "exit", LEAKS_AT[2]), "d.1.1.json": (3, "signal", LEAKS_AT[0]),
                 "d.1.2.json": (3, "signal", LEAKS_AT[1]),
                 "d.1.pid1.json": (1, "exit", LEAKS_AT[2]), "d.1.pid1.2.json": (2, "exit", LEAKS_AT[2]),
                 "d.1.1.pid1.json": (1, "signal", LEAKS_AT[0]), "d.1.1.pid1.2.json": (2, "signal", LEAKS_AT[0]),
                 "d.1.2.pid1.json": (1, "signal", LEAKS_AT[1]), "d.1.2.pid1.2.json": (2, "signal", LEAKS_AT[1])},
           "every container's three dumps, by name: (container, reason, live bytes)")
        r = subprocess.run([CLI, "report", *sorted(w(x) for x in got)], capture_output=True, text=True, timeout=60)
        eq((r.returncode, r.stderr), (0, ""), "the report of the nine")
        ok("\n9 dumps of 3 processes:\n" in "\n" + r.stdout, r.stdout[:1500])
        # Compared as three processes, not one pid; each note says which
        # pid 1 it is by when it began.
        ok("compared by pid, the dumps of one process as one: 3 processes\n" in r.stdout, r.stdout[:3000])
        began = []
        for x in ("d.1.pid1.json", "d.1.pid1.2.json", "d.1.json"):
            with open(w(x)) as f:
                d = json.load(f)
            ns = d["start_unix_ns"]
            began.append(f"note: 3 of these dumps are of one process (pid 1 on {d['host']}, begun "
                         f"{time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(ns // 10**9))}.{ns % 10**9 // 10**6:03d} "
                         "UTC): the holders combined take its newest alone")
        eq(sorted(l for l in r.stdout.splitlines() if l.startswith("note: ")), sorted(began), "the notes")
        for x in os.listdir(work):
            os.unlink(w(x))
        # A file at the name that is no dump: the exit dump beside it.
        with open(w("d.1.json"), "w") as f:
            f.write("notes\n")
        p = as_pid1(prog, env)
        eq((p.returncode, p.stdout), (0, "done\n"), "a container with notes at its dump's name")
        eq([l for l in p.stderr.splitlines() if "warning" in l or " dump" in l],
           ["vramtrace: dump 1 of pid 1 on request: " + w("d.1.1.json"),
            "vramtrace: dump 2 of pid 1 on request: " + w("d.1.2.json"),
            f"vramtrace: warning: {w('d.1.json')} is not a vramtrace dump: it is left as it is, and the dump written "
            f"to {w('d.1.pid1.json')}",
            "vramtrace: dump: " + w("d.1.pid1.json")], "where each went")
        eq(sorted(os.listdir(work)), ["d.1.1.json", "d.1.2.json", "d.1.json", "d.1.pid1.json"], "all three and the notes")
        eq([dump_facts(w(x))[1:3] for x in ("d.1.1.json", "d.1.2.json", "d.1.pid1.json")],
           [("signal", LEAKS_AT[0]), ("signal", LEAKS_AT[1]), ("exit", LEAKS_AT[2])], "each the dump its name says")


@test
def pid1_runs_keep_each_others_dumps_and_execs_still_get_their_own():
    """Each container's program is pid 1: with the default name (%p), one
    container's dump replaced another's, which lost the failing rank's
    post-mortem when ranks ran in containers of their own writing into one
    folder, at once or one after another (an outside check). Another
    process's dump is now kept aside under its writer's pid, as for a name
    without %p; a real exec still gets .exec1, and containers started in the
    same clock tick on one machine (same boot, same start time) are told
    apart by their pid namespaces."""
    with workdir("vt-files-") as work:
        out = os.path.join(work, "d.%p.json")
        for size in ("1M", "2M"):
            p = as_pid1([os.path.join(T, "t_triage"), "keep", size], lib_env(VRAMTRACE_OUT=out))
            eq((p.returncode, p.stderr), (0, ""), "t_triage as pid 1")
        eq(sorted(os.listdir(work)), ["d.1.json", "d.1.pid1.json"], "the second container run keeps the first's dump")
        got = {}
        for name in ("d.1.json", "d.1.pid1.json"):
            with open(os.path.join(work, name)) as f:
                d = json.load(f)
            got[name] = (d["pid"], d["argv"][1:], d["totals"]["live_bytes"])
        eq(got, {"d.1.json": (1, ["keep", "2M"], 2 * MiB), "d.1.pid1.json": (1, ["keep", "1M"], 1 * MiB)},
           "the second run's at the name, the first's beside it")
        for x in os.listdir(work):
            os.unlink(os.path.join(work, x))
        p = as_pid1([os.path.join(T, "t_exec")], lib_env(VRAMTRACE_OUT=out))
        eq((p.returncode, p.stdout), (0, "first image\nsecond image\n"), "t_exec as pid 1")
        eq(sorted(os.listdir(work)), ["d.1.exec1.json", "d.1.json"], "the exec'd image gets .exec1")
        with open(os.path.join(work, "d.1.json")) as f:
            first = json.load(f)
        with open(os.path.join(work, "d.1.exec1.json")) as f:
            second = json.load(f)
        eq((first["reason"], second["reason"], second["totals"]["live_bytes"]), ("oom", "exit", 4096),
           "the first image's OOM dump and the second's exit dump")
        eq((first["process_start"], first["pid_ns"]), (second["process_start"], second["pid_ns"]),
           "one process, two images")
        for x in os.listdir(work):
            os.unlink(os.path.join(work, x))
        # Eight containers at once: every one's dump is kept, none an .exec.
        procs = [subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc", os.path.join(T, "t_triage"), "keep",
                                   f"{k + 1}M"], env=lib_env(VRAMTRACE_OUT=out), stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL) for k in range(8)]
        eq([q.wait(timeout=60) for q in procs], [0] * 8, "the containers' status")
        names = sorted(os.listdir(work))
        eq((len(names), [x for x in names if "exec" in x]), (8, []), f"eight dumps, no .exec: {names}")
        sizes = []
        for x in names:
            with open(os.path.join(work, x)) as f:
                sizes.append(json.load(f)["totals"]["live_bytes"] // MiB)
        eq(sorted(sizes), list(range(1, 9)), "each container's own dump")

def dump_at(path):
    with open(path) as f:
        d = json.load(f)
    return d["pid"], d["reason"], d["totals"]["live_bytes"]


@test
def a_name_without_pid_keeps_the_dumps_of_other_processes():
    """A restarted rank, the next test of a CI run or an exec'd image writes
    the same name when it has no %p: the dump found there (an
    out-of-memory one, say) is kept under its writer's pid, never replaced;
    what the process wrote itself is replaced; a file that is no dump is
    replaced as before."""
    with workdir("vt-keep-") as work:
        out = os.path.join(work, "d.json")
        env = lib_env(VRAMTRACE_OUT=out, VRAMTRACE_REPORT="stderr", SIMGPU_CAPACITY="64M")
        # One process, two dumps at one name: an out-of-memory dump, then
        # the exit dump over it.
        p = subprocess.run(TRIAGE[:-1] + ["2M", "fail", "1G"], env=env, capture_output=True, text=True, timeout=60)
        eq(p.returncode, 0, "t_triage")
        eq(sorted(os.listdir(work)), ["d.json"], "its own out-of-memory dump replaced by its exit dump")
        p_pid, reason, live = dump_at(out)
        eq((reason, live), ("exit", 2 * MiB), "the exit dump")
        ok("held a dump" not in p.stderr, "nothing kept: " + p.stderr)
        # An exec'd image: the first image's out-of-memory dump is kept
        # under the pid, the dump before it (another process's) too.
        p = subprocess.run([os.path.join(T, "t_exec")], env=env, capture_output=True, text=True, timeout=60)
        eq((p.returncode, p.stdout), (0, "first image\nsecond image\n"), "t_exec")
        x_pid, reason, live = dump_at(out)
        eq((reason, live), ("exit", 4096), "the second image's exit dump at the name")
        eq(sorted(os.listdir(work)), sorted(["d.json", "d.pid%d.json" % p_pid, "d.pid%d.json" % x_pid]), "both kept")
        eq(dump_at(os.path.join(work, "d.pid%d.json" % p_pid)), (p_pid, "exit", 2 * MiB), "t_triage's, kept")
        eq(dump_at(os.path.join(work, "d.pid%d.json" % x_pid)), (x_pid, "oom", 1 * MiB), "the first image's, kept")
        kept_lines = [l for l in p.stderr.splitlines() if "held a dump" in l]
        eq(kept_lines, ["vramtrace: %s held a dump of pid %d (exit); it is kept as %s" % (out, p_pid, os.path.join(work, "d.pid%d.json" % p_pid)),
                        "vramtrace: %s held a dump of pid %d (oom); it is kept as %s" % (out, x_pid, os.path.join(work, "d.pid%d.json" % x_pid))],
           "each image says what it kept")
        # The same pid again (a container's pid 1, a pid reused): the next
        # free number after it.
        os.rename(os.path.join(work, "d.pid%d.json" % x_pid), os.path.join(work, "keep.json"))
        os.rename(os.path.join(work, "d.pid%d.json" % p_pid), os.path.join(work, "d.pid%d.json" % x_pid))
        p = subprocess.run(TRIAGE[:-1] + ["3M"], env=dict(env, VRAMTRACE_REPORT="off"), capture_output=True,
                           text=True, timeout=60)
        eq((p.returncode, p.stderr), (0, ""), "t_triage, report off")
        eq(dump_at(os.path.join(work, "d.pid%d.2.json" % x_pid)), (x_pid, "exit", 4096), "kept at the next number")
        eq(dump_at(out)[1:], ("exit", 3 * MiB), "the newest at the name")
        # Not a dump: left as it is, the dump beside it
        # (dump_never_replaces_a_file_that_is_not_a_dump). A dump of
        # another user: refused (dump_never_replaces_another_users_file).
        for f in os.listdir(work):
            os.unlink(os.path.join(work, f))
        with open(out, "w") as f:
            f.write('{"format":"mine","pid":1}\n')
        p = subprocess.run(TRIAGE, env=env, capture_output=True, text=True, timeout=60)
        eq(p.returncode, 0, "t_triage")
        eq(len(os.listdir(work)), 2, "a file that is no dump is kept, the dump beside it")
        with open(out) as f:
            eq(f.read(), '{"format":"mine","pid":1}\n', "the file that is no dump")
        ok("held a dump" not in p.stderr, "nothing kept")
        os.unlink(out)
        # With %p nothing moves: a pid's name is its own.
        out = os.path.join(work, "e.%p.json")
        p = subprocess.run([os.path.join(T, "t_exec")], env=lib_env(VRAMTRACE_OUT=out), capture_output=True,
                           text=True, timeout=60)
        eq(p.returncode, 0, "t_exec")
        names = sorted(f for f in os.listdir(work) if f.startswith("e."))
        pid = dump_at(os.path.join(work, names[-1]))[0]
        eq(names, ["e.%d.exec1.json" % pid, "e.%d.json" % pid], "two images, two names, nothing kept aside")


@test
def a_name_without_pid_keeps_every_dump_of_processes_ending_at_once():
    """Twelve processes with 3,000 leaks each end at once, one dump name:
    each writes a dump that takes a while. Moving the dump found at the
    name aside and then renaming the new one into place let another
    process's dump land in between and be replaced: 6 to 10 of 12 were
    left, some under another pid's name. The new dump now swaps places
    with the old one in one step (RENAME_EXCHANGE), which is then kept
    from a name only this process uses: every dump is there, under its own
    writer's name. A name too long for the pid is cut before it, not
    lost."""
    deep = os.path.join(T, "t_deepleak")
    # Then on a file system without renameat2's flags (NFS; a preloaded
    # stand-in whose plain renames take 5 ms): the writers took turns at
    # nothing, and 11 or 12 of 30 dumps were lost; they now take turns on a
    # lock beside the name.
    for stem, norename in (("d", False), ("x" * 248, False), ("n", True)):
        with workdir("vt-keep-race-") as work:
            e = lib_env(VRAMTRACE_OUT=os.path.join(work, stem + ".json"), VRAMTRACE_LIVE="0")
            if norename:
                e["LD_PRELOAD"] = os.path.join(T, "libt_norename.so") + " " + e["LD_PRELOAD"]
            count, leaks = {"d": (12, "3000"), "n": (30, "300")}.get(stem[0], (3, "10"))
            ps = [subprocess.Popen([deep, leaks], env=e) for _ in range(count)]
            for p in ps:
                eq(p.wait(timeout=300), 0, "t_deepleak")
            pids = sorted(p.pid for p in ps)
            names = sorted(f for f in os.listdir(work) if not f.endswith(".lock"))
            held = {}
            for f in names:
                with open(os.path.join(work, f)) as x:
                    held[f] = json.load(x)["pid"]
            eq(sorted(held.values()), pids, f"every process's dump, once: {names}")
            for f, pid in held.items():
                if f != stem + ".json":
                    tail = ".pid%d.json" % pid
                    want = stem[:255 - len(tail)] + tail
                    eq(f, want, f"kept under its writer's pid, cut to fit: {f}")
            eq([f for f in os.listdir(work) if f.endswith(".lock")], [stem + ".json.lock"] if norename else [],
               "the turns' lock, only where the file system cannot swap")


# ------------------------------------------- vramtrace run, make install



@test
def a_process_never_leaves_two_dumps_at_one_name():
    """Two processes write one name (no %p), each an out-of-memory dump and
    then its exit dump: a process's OOM dump kept aside by the other's
    writer stayed beside its own exit dump, and `vramtrace report` counted
    each process twice (an outside check). Now what a process placed and
    another moved aside goes when its newer dump is placed: one dump a
    process, its exit dump, whichever order they end in."""
    prog = os.path.join(T, "t_dumptwice")
    with workdir("vt-twice-") as work:
        e = lib_env(VRAMTRACE_OUT=os.path.join(work, "leak.json"))
        procs = [subprocess.Popen([prog, a, "1500"], env=e) for a in ("0", "500")]
        eq([p.wait(timeout=60) for p in procs], [0, 0], "both ran")
        dumps = {}
        for name in sorted(os.listdir(work)):
            with open(os.path.join(work, name)) as f:
                d = json.load(f)
            dumps.setdefault(d["pid"], []).append((name, d["reason"], d["totals"]["oom_count"]))
        eq(sorted(dumps), sorted(p.pid for p in procs), f"each process's dumps: {dumps}")
        eq(sorted(len(v) for v in dumps.values()), [1, 1], f"one dump each: {dumps}")
        eq(sorted(v[0][1:] for v in dumps.values()), [("exit", 1), ("exit", 1)], "each its exit dump, with its failure")

def install(prefix):
    p = subprocess.run(["make", "-s", "-C", ROOT, "install", f"PREFIX={prefix}"], capture_output=True, text=True)
    eq(p.returncode, 0, "make install: " + p.stderr)


def preloaded(cli, env):
    """The libvramtrace.so mapped into a command run by `cli run`."""
    p = subprocess.run([cli, "run", "--", "cat", "/proc/self/maps"], env=env, capture_output=True, text=True)
    eq(p.returncode, 0, "vramtrace run cat: " + p.stderr)
    return sorted({l.split(None, 5)[5] for l in p.stdout.splitlines() if l.endswith("/libvramtrace.so")})


def run_env(tmpdir):
    e = {k: v for k, v in os.environ.items() if not k.startswith("VRAMTRACE_") and k != "LD_PRELOAD"}
    e.update(LD_LIBRARY_PATH=SIM, TMPDIR=tmpdir)
    return e


@test
def run_leak_check_hears_of_a_nested_run_and_exitcode_0_reports_only():
    """A `vramtrace run` inside another (a test launcher wrapping its
    tests, itself run so in CI): the inner run's leak fails the outer run
    too, whatever status the shell between them gives (before: the inner
    run's own mark replaced the outer's, and the outer passed). And
    VRAMTRACE_EXITCODE=0 (LeakSanitizer's exitcode=0): the leaks are
    reported, the status is the program's, and the run passes."""
    with workdir("vt-files-") as work:
        tmp = os.path.join(work, "tmp")
        os.mkdir(tmp)
        env = run_env(tmp)
        leaks = os.path.join(T, "t_leaks")
        for inner in (["--leak-check"], []):
            script = " ".join([CLI, "run", "--out", "off"] + inner + ["--", leaks, ">/dev/null 2>&1;",
                               "echo inner=$?; exit 0"])
            p = subprocess.run([CLI, "run", "--out", "off", "--leak-check", "--", "sh", "-c", script], env=env,
                               capture_output=True, text=True, cwd=work)
            eq((p.returncode, p.stdout), (23, "inner=23\n"), f"inner {inner}: the outer run fails: {p.stderr}")
            lines = [l for l in p.stderr.splitlines() if l.startswith("vramtrace run:")]
            eq(len(lines), 1, f"inner {inner}: one line: {lines}")
            ok(lines[0].startswith("vramtrace run: the leak check found GPU memory leaks in 1 other process of sh "),
               f"inner {inner}: the line: {lines[0]!r}")
        a = subprocess.run([leaks], env=env, capture_output=True, text=True, cwd=work)
        for how in ("run", "env"):
            if how == "run":
                argv, e = [CLI, "run", "--out", "off", "--leak-check", "--exitcode", "0", "--", leaks], env
            else:
                argv, e = [leaks], dict(env, LD_PRELOAD=LIB, VRAMTRACE_OUT="off", VRAMTRACE_LEAK_CHECK="1",
                                        VRAMTRACE_EXITCODE="0")
            p = subprocess.run(argv, env=e, capture_output=True, text=True, cwd=work)
            eq((p.returncode, p.stdout), (a.returncode, a.stdout), f"{how}: the program's own status and output")
            eq(len(re.findall(r"^SUMMARY: vramtrace: \d+ byte\(s\) leaked in \d+ allocation\(s\)\.$", p.stderr,
                              re.M)), 1, f"{how}: the leak report: {p.stderr[-600:]}")
            eq([l for l in p.stderr.splitlines() if l.startswith(("vramtrace run:", "vramtrace: warning"))], [],
               f"{how}: no line of the run's, no warning")
        eq(os.listdir(tmp), [], "the private folders are gone")


@test
def run_leak_check_fails_on_a_leak_in_another_process():
    """`vramtrace run --leak-check` fails the run when any process of the
    command found leaks at its exit, not only the command itself: a test
    runner's worker or a forked child leaks, its status 23 goes to its
    parent, which exits 0 (pytest -n 2 passed with a worker's leak
    reported). One line names the processes; a failure of the command's
    own stays its status, and nothing more is said."""
    with workdir("vt-files-") as work:
        tmp = os.path.join(work, "tmp")
        os.mkdir(tmp)
        env = run_env(tmp)
        fork = os.path.join(T, "t_fork")
        leaks = os.path.join(T, "t_leaks")
        import re

        def child_pids(err):
            return re.findall(r"^==(\d+)==ERROR: vramtrace: detected GPU memory leaks$", err, re.M)

        for flags, code in (([], 23), (["--exitcode", "7"], 7)):
            p = subprocess.run([CLI, "run", "--out", "off", "--leak-check"] + flags + ["--", fork, "clean"], env=env,
                               capture_output=True, text=True, cwd=work)
            pids = child_pids(p.stderr)
            eq((p.returncode, len(pids)), (code, 1), f"{flags}: the child's leak fails the run: {p.stderr}")
            eq(p.stdout.splitlines()[0], f"children exited 0 {code}", "the child's own status, which the parent ignores")
            eq([l for l in p.stderr.splitlines() if l.startswith("vramtrace run:")],
               [f"vramtrace run: the leak check found GPU memory leaks in 1 other process of {fork} (pid {pids[0]}); "
                f"exit status {code}"], "one line")
        # The check asked for by the variable, as the library reads it: a
        # word, or a value it cannot read (it checks anyway). Only "1" was
        # seen here: the run passed the child's leak.
        for value in ("true", "On", "2"):
            p = subprocess.run([CLI, "run", "--out", "off", "--", fork, "clean"], env=dict(env, VRAMTRACE_LEAK_CHECK=value),
                               capture_output=True, text=True, cwd=work)
            eq((p.returncode, len(child_pids(p.stderr))), (23, 1), f"VRAMTRACE_LEAK_CHECK={value}: {p.stderr}")
        p = subprocess.run([CLI, "run", "--out", "off", "--leak-check", "--", fork], env=env, capture_output=True,
                           text=True, cwd=work)
        pids = child_pids(p.stderr)
        eq((p.returncode, len(pids)), (23, 2), "the parent leaks too: its own status")
        eq([l for l in p.stderr.splitlines() if l.startswith("vramtrace run:")], [],
           "the command's own failure is the run's: nothing more said")
        script = ("import subprocess, sys\n"
                  "codes = [subprocess.call([sys.argv[1]] + sys.argv[2:]) for _ in range(3)]\n"
                  "print(codes)\n")
        for args, rc, n in (([], 23, 3), (["clean"], 0, 0)):
            p = subprocess.run([CLI, "run", "--out", "off", "--leak-check", "--", sys.executable, "-c", script, leaks]
                               + args, env=env, capture_output=True, text=True, cwd=work)
            pids = child_pids(p.stderr)
            eq((p.returncode, len(pids), p.stdout), (rc, n, "done\n" * 3 + "[%s]\n" % ", ".join([str(rc)] * 3)),
               f"{args}: three workers, each {'leaking' if n else 'clean'}: {p.stderr[-500:]}")
            eq([l for l in p.stderr.splitlines() if l.startswith("vramtrace run:")],
               [f"vramtrace run: the leak check found GPU memory leaks in 3 other processes of {sys.executable} "
                f"(pid {', '.join(pids)}); exit status 23"] if n else [], "one line naming the three")
        eq(os.listdir(tmp), [], "the private folders are gone")


@test
def report_file_that_cannot_be_opened_sends_the_report_to_stderr():
    """A report file that cannot be opened (a folder at its name, a folder
    that is not there, a read-only file of this user who is not root) is
    said in one warning, and the post-mortem and the exit report come on
    stderr, as for a file that is no report log or a full disk. Before,
    the warning was all there was: the report was lost."""
    args = ["keep", "1M", "fail", "1000G"]
    base = run([os.path.join(T, "t_triage")] + args)
    want = [l for l in base.err.splitlines() if l.startswith("vramtrace:")]
    with workdir("vt-files-noopen-") as work:
        # Copies NOBODY may run (the build's may be in a folder only root reads).
        copy, lib = copies_for_nobody(work, "t_triage")
        prog = [copy] + args
        os.chown(work, NOBODY, NOBODY)
        folder = os.path.join(work, "rdir")
        os.mkdir(folder)
        ro = os.path.join(work, "ro.log")
        with open(ro, "w") as f:
            f.write("vramtrace: before\n")
        os.chown(ro, NOBODY, NOBODY)
        os.chmod(ro, 0o444)
        for rep, why, pre in ((folder, "it is not a regular file, a FIFO or a character device", None),
                              (os.path.join(work, "nodir", "r.log"), "No such file or directory", None),
                              (ro, "Permission denied", as_nobody)):
            p = subprocess.run(["bash", "-c", 'echo $$; exec "$@"', "sh"] + prog, capture_output=True, text=True,
                               timeout=60, preexec_fn=pre, cwd=work,
                               env=lib_env(VRAMTRACE_REPORT=rep, VRAMTRACE_OUT=os.path.join(work, "d.%p.json"),
                                           LD_PRELOAD=lib, LD_LIBRARY_PATH=os.path.join(work, "sim")))
            pid = int(p.stdout.split()[0])
            eq(p.returncode, base.rc, f"{rep}: the program's own status")
            err = p.stderr.splitlines()
            eq(err[0], f"vramtrace: warning: cannot write the report to {rep}: {why}; the report goes to stderr",
               f"{rep}: one warning first")
            eq(warnings(p.stderr), err[:1], f"{rep}: no other warning")
            got = [l for l in err[1:] if l.startswith("vramtrace:")]
            eq(len(got), len(want), f"{rep}: the report's lines on stderr:\n" + p.stderr)
            eq([l for l in got if l.startswith(("vramtrace: out of memory", "vramtrace: exit in"))],
               [f"vramtrace: out of memory in pid {pid} ({prog[0]})", f"vramtrace: exit in pid {pid} ({prog[0]})"],
               f"{rep}: the post-mortem, then the exit report")
        eq(os.listdir(folder), [], "nothing made in the folder")
        ok(not os.path.exists(os.path.join(work, "nodir")), "no folder made")
        eq(open(ro).read(), "vramtrace: before\n", "the read-only file as it was")


@test
def report_to_a_full_device_is_said_and_the_leaks_reach_stderr():
    """A report destination that cannot take the report (/dev/full: no
    space left) is said in one warning; the report, the leak report CI
    reads with it, then comes on stderr, once. Before, both were lost
    without a word and only the status told of leaks."""
    leaks = os.path.join(T, "t_leaks")
    for check in (True, False):
        r = run([leaks], env={"VRAMTRACE_LEAK_CHECK": "1"} if check else None, report="/dev/full")
        eq(r.rc, 23 if check else 0, f"leak check {check}: status")
        eq(r.err.count("vramtrace: warning: cannot write the report to /dev/full: No space left on device; what it "
                       "could not take is on stderr\n"), 1,
           f"leak check {check}: one warning\n{r.err[-1500:]}")
        eq(r.err.count("SUMMARY: vramtrace: 1576960 byte(s) leaked in 10 allocation(s)."), 1 if check else 0,
           f"leak check {check}: the leak report on stderr")


@test
def report_file_on_a_full_disk_keeps_whole_lines_and_the_rest_reaches_stderr():
    """A report file on a full disk (a 64 KiB tmpfs in a mount namespace of
    its own, filled after the file's first 3,000 bytes, then with none
    left): the file keeps whole lines (a cut line is taken off again), and
    the rest of the post-mortem and the exit report, the dump's path
    included, comes on stderr after one warning. Before, all but what fit
    was lost and the file ended in the middle of a line."""
    prog = [os.path.join(T, "t_triage"), "keep", "1M", "fail", "1000G"]
    base = run(prog)
    want = [l for l in base.err.splitlines() if l.startswith("vramtrace:")]
    with workdir("vt-files-full-") as work:
        small = os.path.join(work, "small")
        os.mkdir(small)
        rep = os.path.join(small, "rep.log")
        copy = os.path.join(work, "rep.copy")
        script = ('mount -t tmpfs -o size=64k vt-small "$0" && { [ "$VT_PREFILL" = 0 ] || '
                  'python3 -c "open(\'$0/rep.log\', \'w\').write(\'vramtrace: \' + \'x\' * 2988 + \'\\n\')"; } && '
                  'dd if=/dev/zero of="$0/fill" bs=1k count=64 2>/dev/null; "$@"; s=$?; '
                  'cp "$0/rep.log" "$VT_COPY"; exit $s')
        for prefill in (3000, 0):
            r = run(["unshare", "--mount", "sh", "-c", script, small] + prog, report=rep,
                    env={"VT_PREFILL": str(prefill), "VT_COPY": copy})
            eq((r.rc, r.out), (base.rc, base.out), f"prefill {prefill}: the program as without")
            with open(copy, "rb") as f:
                text = f.read()
            ok(text.endswith(b"\n") or not text, f"prefill {prefill}: the file ends in a whole line: {text[-80:]!r}")
            lines = text.decode().splitlines()
            eq(lines[:1] if prefill else lines, ["vramtrace: " + "x" * 2988] if prefill else [],
               f"prefill {prefill}: the file's start")
            err = r.err.splitlines()
            eq(err[0], f"vramtrace: warning: cannot write the report to {rep}: No space left on device; what it "
                       "could not take is on stderr", f"prefill {prefill}: one warning first")
            got = lines[1:] + [l for l in err[1:] if l.startswith("vramtrace:")]
            eq(len(got), len(want), f"prefill {prefill}: the report's lines, in the file or on stderr:\n" + r.err)
            pid = r.dump["pid"]
            # Each report's lines in order, the file's first (the exit
            # report's first lines may fit where the post-mortem's last
            # did not: the file's last page).
            eq(sorted(l for l in got if l.startswith(("vramtrace: out of memory", "vramtrace: exit in",
                                                      "vramtrace: dump:"))),
               [f"vramtrace: dump: {r.dump['_path']}"] * 2 + [f"vramtrace: exit in pid {pid} ({prog[0]})",
                                                              f"vramtrace: out of memory in pid {pid} ({prog[0]})"],
               f"prefill {prefill}: the post-mortem, the exit report and the dump's path, each once")


@test
def paths_with_a_newline_or_an_escape_are_said_escaped():
    """A dump or report path holding a newline or an escape sequence is
    said in its escaped form (as the command name is): the `vramtrace:
    dump:` line launchers wait for stays one line, and a warning cannot
    recolour the terminal. Before, the library and `vramtrace metrics
    --textfile` printed such paths raw, split over two lines."""
    prog = [os.path.join(T, "t_triage"), "keep", "1M", "fail", "1000G"]
    with workdir("vt-files-esc-") as work:
        os.mkdir(os.path.join(work, "nl\nd"))
        out = os.path.join(work, "nl\nd", "a\nb.json")
        rc, _, err, _ = timed(prog, lib_env(VRAMTRACE_OUT=out, VRAMTRACE_REPORT="stderr"))
        shown = out.replace("\n", "\\x0a")
        eq([l for l in err.splitlines() if "dump:" in l or "name.json" in l or l.startswith("b.json")],
           [f"vramtrace: dump: {shown}"] * 2, "the dump's path, escaped, on one line each time")
        bad = os.path.join(work, "no\x1b[31m\n", "x.json")
        rc, _, err, _ = timed(prog, lib_env(VRAMTRACE_OUT=bad, VRAMTRACE_REPORT=bad + ".log"))
        esc = bad.replace("\x1b", "\\x1b").replace("\n", "\\x0a")
        eq(err.splitlines()[:2], [f"vramtrace: warning: cannot write the dump to {esc}: No such file or directory",
                                  f"vramtrace: warning: cannot write the report to {esc}.log: No such file or "
                                  "directory; the report goes to stderr"], "two warnings, one line each, escaped")
        eq(warnings(err), err.splitlines()[:2], "no other warning")
        p = subprocess.run([CLI, "metrics", "--once", "--textfile", "no\x1b[31m\n"], capture_output=True, text=True,
                           cwd=work, timeout=30)
        eq((p.returncode, p.stderr), (1, "vramtrace metrics: cannot write no\\x1b[31m\\x0a/vramtrace.prom: No such "
                                         "file or directory\n"), "metrics --textfile's error, escaped")


@test
def report_to_stdout_as_leaksanitizers_log_path():
    """VRAMTRACE_REPORT=stdout sends the reports to standard output, as
    LeakSanitizer's log_path=stdout does; it made a file named "stdout" in
    the program's folder (an outside check). The program's own buffered
    output comes first; nothing goes to stderr; `vramtrace run --report
    stdout` is the same."""
    leaks = os.path.join(T, "t_leaks")
    with workdir("vt-stdout-") as work:
        rc, out, err, _ = timed([leaks], lib_env(VRAMTRACE_REPORT="stdout", VRAMTRACE_LEAK_CHECK="1"), cwd=work)
        eq(rc, 23, "the leak check's status")
        eq(err, "", "nothing on stderr")
        eq(out.splitlines()[:2], ["done", ""], "the program's own line first, then the report")
        eq(out.count("Direct leak of "), 3, "the leak report's three sites")
        eq(out.rstrip().splitlines()[-1], "SUMMARY: vramtrace: 1576960 byte(s) leaked in 10 allocation(s).",
           "the leak report's last line on stdout")
        eq(os.listdir(work), [], "no file made")
        rc, out, err, _ = timed(TRIAGE, lib_env(VRAMTRACE_REPORT="stdout"), cwd=work)
        eq((rc, err), (0, ""), "the exit summary: status, stderr")
        lines = out.splitlines()
        eq(lines[0], "keep -> 0", "the program's own line first")
        eq(sum(1 for l in lines if l.startswith(f"vramtrace: exit in pid ")), 1, "one exit summary on stdout")
        e = lib_env(VRAMTRACE_LEAK_CHECK="1")
        e.pop("VRAMTRACE_REPORT")
        e.pop("LD_PRELOAD")
        p = subprocess.run([CLI, "run", "--report", "stdout", "--out", "off", "--", leaks], env=e, cwd=work,
                           capture_output=True, text=True, timeout=60)
        eq(p.returncode, 23, "run --report stdout: the leak check's status")
        eq(p.stdout.rstrip().splitlines()[-1], "SUMMARY: vramtrace: 1576960 byte(s) leaked in 10 allocation(s).",
           "run --report stdout: the leak report on stdout")
        eq([l for l in p.stderr.splitlines() if "leak" in l.lower()], [], "run --report stdout: none on stderr")
        eq(os.listdir(work), [], "run --report stdout: no file made")
        # Standard output a pipe nobody reads: the program dies of SIGPIPE
        # at its exit's flush, as without vramtrace (the flush ahead of the
        # report, with SIGPIPE held, swallowed it: status 0; an outside
        # check).
        for preload in (False, True):
            r, w = os.pipe()
            os.close(r)
            e = lib_env(VRAMTRACE_REPORT="stdout") if preload else lib_env()
            if not preload:
                e.pop("LD_PRELOAD")
            p = subprocess.run([os.path.join(T, "t_triage"), "keep", "1M"], env=e, stdout=w, stderr=subprocess.PIPE,
                               timeout=60, cwd=work)
            os.close(w)
            eq(p.returncode, -signal.SIGPIPE, f"preloaded {preload}: dies of SIGPIPE")


@test
def run_installed_under_a_path_with_a_space():
    with workdir("vt-files-") as work:
        prefix = os.path.join(work, "with space")
        install(prefix)
        cli = os.path.join(prefix, "bin", "vramtrace")
        tmp = os.path.join(work, "tmp")
        os.mkdir(tmp)
        env = run_env(tmp)
        eq(preloaded(cli, env), [os.path.join(prefix, "lib", "libvramtrace.so")], "the installed library is loaded")
        leaks = os.path.join(T, "t_leaks")
        for argv in ([leaks], ["sh", "-c", leaks]):
            p = subprocess.run([cli, "run", "--leak-check", "--"] + argv, env=env, capture_output=True,
                               text=True, cwd=work)
            eq((p.returncode, p.stdout), (23, "done\n"), f"{argv}: the leaks found: {p.stderr}")
            eq(p.stderr.count("Direct leak of "), 3, "three leaking stacks")
            ok(p.stderr.rstrip().endswith("SUMMARY: vramtrace: 1576960 byte(s) leaked in 10 allocation(s)."),
               "the leak report")
        p = subprocess.run([cli, "run", "--leak-check", "--", leaks, "clean"], env=env, capture_output=True,
                           text=True, cwd=work)
        eq((p.returncode, p.stderr), (0, ""), "no leaks: 0, silent")
        eq(os.listdir(tmp), [], "the private folders are gone")

        # A command the library never reaches fails the check, with one line.
        static = os.path.join(T, "t_static")
        for flags, status, what in ((["--leak-check"], "0", "no leak check was made"),
                                    (["--limit", "1G"], "0", "no budget applied"),
                                    (["--leak-check"], "3", "no leak check was made")):
            p = subprocess.run([cli, "run"] + flags + ["--", static, status], env=env, capture_output=True,
                               text=True, cwd=work)
            eq(p.returncode, 125 if status == "0" else 3, f"{flags} {status}: status")
            eq(p.stderr, f"vramtrace run: {static} ran untraced (libvramtrace.so never loaded into it: a static "
                         f"or set-user-ID program?); {what}\n", "one line")
        # The child's end is the run's end: a signal it dies of, or one sent
        # to vramtrace.
        p = subprocess.run([cli, "run", "--leak-check", "--", "sh", "-c", "kill -TERM $$"], env=env,
                           capture_output=True, text=True, cwd=work)
        eq(p.returncode, -signal.SIGTERM, "the command's signal")
        p = subprocess.Popen([cli, "run", "--leak-check", "--", "sh", "-c", "echo $$; exec sleep 30"], env=env,
                             cwd=work, stdout=subprocess.PIPE, text=True)
        child = int(p.stdout.readline())
        t0 = time.monotonic()
        p.send_signal(signal.SIGTERM)
        eq(p.wait(timeout=20), -signal.SIGTERM, "a TERM sent to vramtrace ends it as the command ends")
        p.stdout.close()
        ok(time.monotonic() - t0 < 10, "at once")
        try:
            os.kill(child, 0)
            gone = False
        except ProcessLookupError:
            gone = True
        ok(gone, "the TERM was passed on to the command, which vramtrace waited for")
        p = subprocess.run([cli, "run", "--leak-check", "--", "/nonexistent"], env=env, capture_output=True, text=True)
        eq((p.returncode, p.stderr), (127, "vramtrace run: cannot run /nonexistent: No such file or directory\n"),
           "a missing command")
        eq(os.listdir(tmp), [], "the private folders are gone")


def proc_state(pid):
    """The state letter of /proc/PID/stat (R, S, T...)."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


@test
def run_as_parent_passes_job_control_on():
    """`vramtrace run --leak-check` (the mode where it waits for the command
    as its child): a TSTP sent to it stops the command and then itself, a
    CONT continues both, a TERM ends both (before, the TSTP stopped only
    vramtrace and the command ran on)."""
    # A process group of its own, whose leader's parent (this test) is in
    # another group of the session: not orphaned, so the kernel delivers
    # stops (in an orphaned group it discards them, for vramtrace and the
    # command alike, as where this suite runs as a background job).
    p = subprocess.Popen([CLI, "run", "--leak-check", "--", "sleep", "60"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, preexec_fn=lambda: os.setpgid(0, 0))
    try:
        child = None
        for _ in range(200):
            kids = subprocess.run(["pgrep", "-P", str(p.pid)], capture_output=True, text=True).stdout.split()
            if kids:
                child = int(kids[0])
                break
            time.sleep(0.02)
        ok(child, "the command started as a child")
        time.sleep(0.2)
        for sig, want in ((signal.SIGTSTP, "T"), (signal.SIGCONT, "S")):
            os.kill(p.pid, sig)
            end = time.monotonic() + 10
            while time.monotonic() < end and (proc_state(p.pid), proc_state(child)) != (want, want):
                time.sleep(0.02)
            eq((proc_state(p.pid), proc_state(child)), (want, want), f"after {sig.name}: vramtrace and the command")
        os.kill(p.pid, signal.SIGTERM)
        p.wait(timeout=30)
        eq(p.returncode, -signal.SIGTERM, "ends as the command ended")
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def end_run(p):
    """A vramtrace run left behind by a failed check: continued (it may be
    stopped), killed and waited for; its pipes closed."""
    if p.poll() is None:
        os.kill(p.pid, signal.SIGCONT)
        p.kill()
        p.wait()
    p.stdout.close()
    p.stderr.close()


@test
def run_as_parent_passes_every_signal_on():
    """`vramtrace run --leak-check`: signals beyond the common ones (a batch
    system's SIGXCPU, a real-time signal, a SIGPIPE sent with kill) go on to
    the command, and vramtrace ends as it ended (before, such a signal ended
    vramtrace and left the command running). A TSTP sent to vramtrace that
    the command handles and goes on from stops neither (before, vramtrace
    stopped itself and stayed stopped after the command had ended)."""
    import resource

    def no_core():
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    for sig in (signal.SIGPIPE, signal.SIGXCPU, signal.SIGXFSZ, signal.SIGVTALRM, signal.SIGRTMIN + 3, signal.SIGABRT,
                signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGILL):
        p = subprocess.Popen([CLI, "run", "--leak-check", "--", "sh", "-c", "echo $$; exec sleep 30"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=no_core)
        try:
            child = int(p.stdout.readline())
            os.kill(p.pid, sig)
            eq(p.wait(timeout=20), -sig, f"signal {sig}: vramtrace ends as the command ended")
            ok(not os.path.exists(f"/proc/{child}"), f"signal {sig}: the command is gone")
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            p.stdout.close()
            p.stderr.close()
    # The command stopped and continued by its own pid: vramtrace does not
    # stop with it (it stopped itself and stayed stopped after the command
    # ended, until something continued it).
    p = subprocess.Popen([CLI, "run", "--leak-check", "--", "sh", "-c", "echo $$; sleep 1; exit 6"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=lambda: os.setpgid(0, 0))
    try:
        child = int(p.stdout.readline())
        os.kill(child, signal.SIGSTOP)
        time.sleep(0.3)
        eq(proc_state(p.pid) != "T", True, "vramtrace did not stop with the command stopped by its pid")
        os.kill(child, signal.SIGCONT)
        eq(p.wait(timeout=20), 6, "it ended as the command ended")
    finally:
        end_run(p)
    handles = ("import signal, sys, time\n"
               "signal.signal(signal.SIGTSTP, lambda *a: print('tstp', flush=True))\n"
               "print('ready', flush=True)\n"
               "time.sleep(1.5)\n"
               "sys.exit(4)\n")
    p = subprocess.Popen([CLI, "run", "--leak-check", "--", sys.executable, "-c", handles], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, preexec_fn=lambda: os.setpgid(0, 0))
    try:
        eq(p.stdout.readline(), "ready\n", "the command started")
        os.kill(p.pid, signal.SIGTSTP)
        eq(p.stdout.readline(), "tstp\n", "the TSTP went on to the command, which handled it")
        eq(p.wait(timeout=20), 4, "vramtrace did not stop: it ended as the command ended")
    finally:
        end_run(p)


@test
def run_as_parent_says_the_command_dumped_core():
    """`vramtrace run --leak-check` ends by the signal that ended the
    command, without a core of its own: the status it ends with cannot
    carry the command's "core dumped" mark (the kernel sets it only where
    the dying process's own core is written; a second core would take the
    command's place under a core_pattern without %p). The mark was lost
    without a word (from an outside check); now one line says the command
    dumped core, and still no core of vramtrace's is written. Without a
    core (RLIMIT_CORE 0) nothing is said. Exec mode (no flag) keeps the
    mark: vramtrace is the command there."""
    import resource
    pattern = open("/proc/sys/kernel/core_pattern").read().strip()
    prog = os.path.join(T, "t_oom")
    for limit in (resource.RLIM_INFINITY, 0):
        def core_limit():
            resource.setrlimit(resource.RLIMIT_CORE, (limit, limit))
        seen = []
        for flags in ([], ["--leak-check"]):
            with workdir("vt-core-") as work:
                p = subprocess.Popen([CLI, "run", "--report", "off", "--out", "off", *flags, "--", prog, "abort"],
                                     cwd=work, env=dict(os.environ, LD_LIBRARY_PATH=SIM), preexec_fn=core_limit,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                err = p.stderr.read()
                p.stderr.close()
                _, status = os.waitpid(p.pid, 0)
                cores = sorted(f for f in os.listdir(work) if f.startswith("core"))
                seen.append((flags, os.WTERMSIG(status) if os.WIFSIGNALED(status) else None, os.WCOREDUMP(status),
                             cores, [l for l in err.splitlines() if "dumped core" in l]))
        dumped = seen[0][2]
        if limit == 0:
            eq(dumped, False, "no core under RLIMIT_CORE 0")
        elif pattern == "core":
            eq((dumped, seen[0][3]), (True, ["core"]), "the command's core, in its folder")
        eq([(s[1], s[2]) for s in seen], [(signal.SIGABRT, dumped), (signal.SIGABRT, False)],
           f"core limit {limit}: the signal, and the mark in exec and in parent mode")
        eq(seen[1][3], seen[0][3], f"core limit {limit}: the command's core file and no other")
        eq(seen[0][4], [], "exec mode says nothing")
        eq([re.sub(r"\(pid \d+\)", "(pid N)", l) for l in seen[1][4]],
           [f"vramtrace run: {prog} (pid N) dumped core; vramtrace run ends by the same signal without a core of "
            "its own, so its status does not say so"] if dumped else [],
           f"core limit {limit}: parent mode's line")


@test
def install_prefix_change_rebuilds_the_cli():
    with workdir("vt-files-") as work:
        a, b = os.path.join(work, "a"), os.path.join(work, "b")
        install(a)
        install(b)
        env = run_env(work)
        want = [os.path.join(b, "lib", "libvramtrace.so")]
        eq(preloaded(os.path.join(b, "bin", "vramtrace"), env), want, "the second install runs its own library")
        # Away from its lib/ folder it goes by the prefix compiled in.
        alone = os.path.join(work, "alone")
        os.mkdir(alone)
        shutil.copy(os.path.join(b, "bin", "vramtrace"), alone)
        eq(preloaded(os.path.join(alone, "vramtrace"), env), want, "the prefix compiled in is the second's")
        shutil.rmtree(a)
        eq(preloaded(os.path.join(alone, "vramtrace"), env), want, "and it needs nothing of the first")


@test
def suppressions_at_a_fifo_or_directory_never_block():
    """VRAMTRACE_SUPPRESSIONS naming a FIFO nobody writes (or a folder): the
    leak check says in one line that it cannot read it, reports the leaks
    unsuppressed and exits at once with the leak check's status. A pipe
    with a writer (a shell's `<(...)`, as LeakSanitizer's suppressions=
    takes it) is read: it was refused as not a regular file (an outside
    check)."""
    with workdir("vt-supfifo-") as work:
        fifo = os.path.join(work, "sup.fifo")
        os.mkfifo(fifo)
        e = dict(os.environ, LD_LIBRARY_PATH=SIM, LD_PRELOAD=LIB, VRAMTRACE_OUT="off", VRAMTRACE_LEAK_CHECK="1")
        e.pop("VRAMTRACE_REPORT", None)
        p = subprocess.run(["bash", "-c", "VRAMTRACE_SUPPRESSIONS=<(sleep 0.2; printf 'leak:leaky_step\\n') " +
                            os.path.join(T, "t_leaks")], env=e, capture_output=True, text=True, timeout=60)
        eq(p.returncode, 23, "the rest still leaks")
        ok("\n      8     524288 leaky_step\n" in p.stderr, "the pipe's rule suppressed the staircase:\n" + p.stderr)
        eq(p.stderr.rstrip().splitlines()[-1], "SUMMARY: vramtrace: 1052672 byte(s) leaked in 2 allocation(s).",
           "what is left")
        for path, why in ((fifo, "a pipe or FIFO with nothing to read (no writer)"), (work, "not a regular file")):
            r = run([os.path.join(T, "t_leaks")], env={"VRAMTRACE_LEAK_CHECK": "1", "VRAMTRACE_SUPPRESSIONS": path})
            eq(r.rc, 23, f"{path}: leaks reported, status 23")
            eq(r.err.count(f"cannot read suppressions {path}: {why}"), 1, f"{path}: one line saying why:\n{r.err}")
            eq(r.err.count("Direct leak of "), 3, f"{path}: every leaking stack, none suppressed")


@test
def suppressions_read_again_when_the_program_takes_the_number_of_their_descriptor():
    """A program whose own file takes the number of the descriptor the
    leak check reads the suppressions file through, at that read (a
    daemon's closefrom and its own open in another thread; here the
    program's read(2) does it, t_fdswap read with the file's path): what
    was read there is not used, the program's file is not closed, and
    the suppressions file is opened and read again: its rule suppresses
    the leak, nothing is said. Before, the rules were read through the
    descriptor by the C library's stream, which this program's read(2)
    does not see; a build that uses what it read from the swapped
    descriptor says "expected leak:PATTERN, got 'not a rule at all'" and
    fails the run with the leak."""
    with workdir("vt-supswap-") as work:
        sup, mine = os.path.join(work, "s.supp"), os.path.join(work, "mine")
        with open(sup, "w") as f:
            f.write("leak:^main\n")
        with open(mine, "w") as f:
            f.write("not a rule at all\n")
        r = run([os.path.join(T, "t_fdswap"), "read", mine, sup],
                env={"VRAMTRACE_LEAK_CHECK": "1", "VRAMTRACE_SUPPRESSIONS": sup, "VRAMTRACE_LIVE": "0"})
        eq(r.rc, 0, f"the leak suppressed:\n{r.err}")
        eq(re.findall(r"t_fdswap: swapped at (\d+)\n", r.err) != [], True, f"the swap made:\n{r.err}")
        eq([l for l in r.err.splitlines() if "warning" in l or "cannot" in l], [], "nothing said")
        ok("Suppressions used:\n  count      bytes template\n      1       4096 ^main\n" in r.err,
           f"the file's rule suppressed the leak:\n{r.err}")


@test
def earlier_dump_and_report_read_again_when_the_program_takes_their_descriptors_number():
    """A program whose own file takes the number of the descriptor vramtrace
    reads the first bytes of a file already at the dump's path or the
    report file through (to tell whether it is a dump of vramtrace's to
    keep aside or replace, a report log to append to), at that read
    (t_fdswap read with the file's path, whose read(2) and pread(2) make
    the swap): what was read there is not used, the program's file is not
    closed, and the file is read again. An earlier dump at the path is
    kept aside under its writer's pid and the new one written at the
    path; a report log gets the new report appended; nothing is said.
    Before, the program's file was taken for what the path held ("is not a
    vramtrace dump: it is left as it is, and the dump written to ...", "is
    not a vramtrace report log: ... the report goes to stderr") and its
    descriptor closed."""
    prog = os.path.join(T, "t_fdswap")
    leaks = os.path.join(T, "t_leaks")
    for case in ("dump", "report"):
        with workdir("vt-keepswap-") as work:
            mine = os.path.join(work, "mine")
            with open(mine, "w") as f:
                f.write("neither a dump nor a report\n")
            dump, log = os.path.join(work, "d.json"), os.path.join(work, "r.log")
            there = {"VRAMTRACE_OUT": dump} if case == "dump" else {"VRAMTRACE_REPORT": log}
            p = subprocess.run([leaks], env=lib_env(VRAMTRACE_LIVE="0", **there), capture_output=True, text=True,
                               timeout=60)
            eq(p.returncode, 0, f"{case}: the earlier run")
            path = dump if case == "dump" else log
            with open(path, "rb") as f:
                before = f.read()
            rc, out, err, _ = timed([prog, "read", mine, path], lib_env(VRAMTRACE_LIVE="0", **there))
            eq(rc, 0, f"{case}: status: {err}")
            eq(len(re.findall(r"^t_fdswap: swapped at \d+$", err, re.M)), 1, f"{case}: the swap made:\n{err}")
            eq(warnings(err), [], f"{case}: nothing said")
            if case == "dump":
                aside = sorted(n for n in os.listdir(work) if re.fullmatch(r"d\.pid\d+\.json", n))
                eq(len(aside), 1, f"the earlier dump kept aside: {sorted(os.listdir(work))}")
                kept = os.path.join(work, aside[0])
                eq(aside[0], f"d.pid{load_dump(kept)['pid']}.json", "under its writer's pid")
                with open(kept, "rb") as f:
                    eq(f.read(), before, "the earlier dump, whole")
                eq(load_dump(dump)["argv"], [prog, "read", mine, path], "the new dump at the path")
            else:
                with open(log, "rb") as f:
                    now = f.read()
                ok(now.startswith(before) and len(now) > len(before) and
                   now[len(before):].lstrip(b"\n").startswith(b"vramtrace: exit in pid "),
                   f"the report appended to the log: {now[len(before) - 80:len(before) + 120]!r}")


@test
def suppressions_file_past_any_list_is_refused_without_reading_it_all():
    """A suppressions file of 65 MiB (a log named by mistake; here sparse:
    zero bytes) is read whole at once since the file is read so, but no
    further than a pipe is (64 MiB): one line says it is more text than
    any list of patterns, and the leaks are reported unsuppressed."""
    with workdir("vt-supbig-") as work:
        big = os.path.join(work, "big.supp")
        with open(big, "w") as f:
            f.write("leak:leaky_step\n")
        os.truncate(big, 65 << 20)
        r = run([os.path.join(T, "t_leaks")], env={"VRAMTRACE_LEAK_CHECK": "1", "VRAMTRACE_SUPPRESSIONS": big,
                                                   "VRAMTRACE_LIVE": "0"})
        eq(r.rc, 23, "leaks reported, status 23")
        eq(warnings(r.err), [f"vramtrace: warning: cannot read suppressions {big}: more text than any list of "
                             "patterns; checking without suppressions"], "one line saying why")
        eq(r.err.count("Direct leak of "), 3, "every leaking stack, none suppressed")


@test
def suppressions_pipe_whose_writer_goes_silent_is_no_list():
    """A suppressions pipe whose writer writes one rule and then nothing for
    more than 10 s: the library took the first rule as the whole list (the
    leaks of the rules not yet written failed the check as if unsuppressed,
    with no word of it), where `vramtrace run` refused the same pipe. Both
    read it with one reader now: one line says why, and no rule of a list
    cut short suppresses anything."""
    with workdir("vt-supsilent-") as work:
        e = dict(os.environ, LD_LIBRARY_PATH=SIM, LD_PRELOAD=LIB, VRAMTRACE_OUT="off", VRAMTRACE_LEAK_CHECK="1")
        e.pop("VRAMTRACE_REPORT", None)
        t0 = time.monotonic()
        p = subprocess.run(["bash", "-c", "VRAMTRACE_SUPPRESSIONS=<(printf 'leak:leaky_step\\n'; sleep 13; "
                            "printf 'leak:main\\n') " + os.path.join(T, "t_leaks")],
                           env=e, capture_output=True, text=True, timeout=90, cwd=work)
        took = time.monotonic() - t0
        eq(p.returncode, 23, "the leaks, none suppressed")
        eq(len(re.findall(r"cannot read suppressions /dev/fd/\d+: its writer wrote nothing for 10 s; checking without suppressions\n", p.stderr)), 1,
           "one line saying why:\n" + p.stderr)
        eq(p.stderr.count("Direct leak of "), 3, "every leaking stack, the first rule's too:\n" + p.stderr)
        ok(10 <= took < 30, f"one wait of 10 s: {took:.1f} s")


@test
def a_cancelled_thread_is_not_cancelled_inside_its_failing_cuda_call():
    """A worker cancelled (deferred) while its failing cudaMalloc wrote the
    post-mortem died inside the call, where write and open are cancellation
    points, holding the program's own lock: the program hung (an outside
    check). The failure's work is no cancellation point: the worker is
    cancelled at its pthread_testcancel, the lock let go."""
    with workdir("vt-cancel-") as work:
        for _ in range(3):
            p = subprocess.run([os.path.join(T, "t_cancel")], cwd=work, capture_output=True, text=True, timeout=60,
                               env=lib_env(VRAMTRACE_OUT=os.path.join(work, "d.%p.json")))
            eq((p.returncode, p.stdout), (0, "joined, cancelled; main got the lock\n"), p.stderr[-2000:])
            names = os.listdir(work)
            eq(len(names), 1, f"one dump: {names}")
            d = json.load(open(os.path.join(work, names[0])))
            eq((d["reason"], d["totals"]["oom_count"] >= 1, d["totals"]["live_bytes"]), ("exit", True, 0),
               "its exit dump")
            for x in os.listdir(work):
                os.remove(os.path.join(work, x))


@test
def a_dump_past_the_file_size_limit_is_a_warning_not_a_signal():
    """Under `ulimit -f 1` the dump's writing raised SIGXFSZ, whose default
    killed the program at its caught failure (status 153, its output lost)
    and left the temporary file (an outside check). Now the write's error
    is one warning, the program runs to its end, and nothing is left."""
    with workdir("vt-fsize-") as work:
        cmd = f"ulimit -S -f 1; exec {shlex.quote(os.path.join(T, 't_oom'))} exit"
        plain = subprocess.run(["bash", "-c", cmd], cwd=work, capture_output=True, text=True, timeout=60,
                               env=dict(run_env(work), SIMGPU_CAPACITY="64M"))
        p = subprocess.run(["bash", "-c", cmd], cwd=work, capture_output=True, text=True, timeout=60,
                           env=lib_env(SIMGPU_CAPACITY="64M", VRAMTRACE_OUT=os.path.join(work, "vramtrace.%p.json")))
        eq((p.returncode, p.stdout), (plain.returncode, plain.stdout), f"as without vramtrace: {p.stderr[-2000:]}")
        eq(plain.returncode, 1, "t_oom's own status")
        ok(re.search(r"vramtrace: warning: cannot write the dump to \S+: File too large", p.stderr), p.stderr)
        eq(os.listdir(work), [], "no file left")


@test
def report_and_dump_naming_one_file_keep_the_dump_whole():
    """VRAMTRACE_REPORT equal to VRAMTRACE_OUT (after expansion: %p and the
    pid, a relative and an absolute spelling): one warning, the reports go
    to stderr, the dump stays valid JSON. Before, the report was appended
    into the dump and the out-of-memory dump renamed over the post-mortem."""
    prog = [os.path.join(T, "t_triage"), "keep", "1M", "fail", "1000G"]
    a = without(prog)
    with workdir("vt-files-") as work:
        for report, out in (("same.%p.json", "same.%p.json"), ("./same.$$.json", os.path.join(work, "same.%p.json"))):
            # bash's $$ is the program's pid: it execs the program.
            p = subprocess.run(["bash", "-c", f"VRAMTRACE_REPORT={report} exec {' '.join(prog)}"],
                               env=lib_env(VRAMTRACE_OUT=out), cwd=work, capture_output=True, text=True, timeout=60)
            names = os.listdir(work)
            eq(len(names), 1, f"{report}: one file: {names}")
            path = os.path.join(work, names[0])
            eq(warnings(p.stderr), [f"vramtrace: warning: VRAMTRACE_REPORT names the dump's file {path} "
                                    "(VRAMTRACE_OUT); the report goes to stderr"], f"{report}: one warning")
            eq((p.returncode, p.stdout), (a.rc, a.out), f"{report}: the program's status and output")
            ok("vramtrace: out of memory in pid " in p.stderr and "\nvramtrace: exit in pid " in p.stderr,
               f"{report}: the post-mortem and the exit report on stderr:\n{p.stderr}")
            eq(dump_at(path)[1], "exit", f"{report}: the dump is whole")
            os.unlink(path)


@test
def dump_never_replaces_a_file_that_is_not_a_dump():
    """A dump name that holds a file of the user's that is not a dump
    (notes, the program itself, named by a typo): the file is left as it
    is, the dump written beside it under the name with the pid, with one
    warning. Before, it was replaced without a word. A dump there, or an
    empty file (`--out $(mktemp)`), is replaced as before."""
    prog = os.path.join(T, "t_triage")
    with workdir("vt-files-") as work:
        copy = os.path.join(work, "prog")
        shutil.copy(prog, copy)
        notes = os.path.join(work, "notes.json")
        with open(notes, "w") as f:
            f.write("my notes\n")
        for path in (notes, copy):
            with open(path, "rb") as f:
                before = f.read()
            p = subprocess.run(["bash", "-c", f"echo $$; exec {copy} keep 1M fail 1000G"],
                               env=lib_env(VRAMTRACE_OUT=path), cwd=work, capture_output=True, text=True, timeout=60)
            with open(path, "rb") as f:
                eq(f.read() == before, True, f"{path}: left as it is")
            pid = int(p.stdout.split()[0])
            beside = f"{path[:-5]}.pid{pid}.json" if path.endswith(".json") else f"{path}.pid{pid}"
            eq(warnings(p.stderr), [f"vramtrace: warning: {path} is not a vramtrace dump: it is left as it is, "
                                    f"and the dump written to {beside}"], f"{path}: one warning")
            eq(dump_at(beside)[:2], (pid, "exit"), f"{path}: the dump beside it")
            os.unlink(beside)
        for what in ("", "dump"):
            path = os.path.join(work, f"out{what}.json")
            with open(path, "w"):
                pass
            if what:
                subprocess.run([copy, "keep", "1M"], env=lib_env(VRAMTRACE_OUT=path), cwd=work, timeout=60)
            p = subprocess.run(["bash", "-c", f"echo $$; exec {copy} keep 2M"], env=lib_env(VRAMTRACE_OUT=path),
                               cwd=work, capture_output=True, text=True, timeout=60)
            eq(warnings(p.stderr), [], f"{what or 'empty'}: no warning")
            eq(dump_at(path), (int(p.stdout.split()[0]), "exit", 2 << 20), f"{what or 'empty'}: replaced")


@test
def report_is_appended_only_to_a_report_log():
    """VRAMTRACE_REPORT naming an earlier run's dump (as the library writes
    it, and spaced as a tool rewrites it) or a source file: the file is
    left as it is, byte for byte, and the reports go to stderr after one
    warning. Before, the report was appended to it without a word (the dump
    then no JSON). An empty file (or one of blank lines) and a report log
    of an earlier run, one that begins with a leak report too, are appended
    to; a file that begins with the word vramtrace but no report's
    "vramtrace:" line is not."""
    prog = [os.path.join(T, "t_triage"), "keep", "1M", "fail", "1000G"]
    a = without(prog)
    with workdir("vt-files-") as work:
        dump, spaced, src, notes = (os.path.join(work, n) for n in ("old.json", "spaced.json", "mysrc.c", "notes"))
        subprocess.run(prog, env=lib_env(VRAMTRACE_OUT=dump), cwd=work, timeout=60, capture_output=True)
        shutil.copy(os.path.join(GOLDEN, R0), spaced)
        shutil.copy(os.path.join(ROOT, "tests", "progs", "t_triage.c"), src)
        with open(notes, "w") as f:  # the word alone, not a report's "vramtrace:" line
            f.write("vramtrace notes\nmine, do not touch\n")
        for path, why in ((dump, "is a vramtrace dump"), (spaced, "is a vramtrace dump"),
                          (src, "is not a vramtrace report log"), (notes, "is not a vramtrace report log")):
            with open(path, "rb") as f:
                before = f.read()
            p = subprocess.run(["bash", "-c", f"echo $$; exec {' '.join(prog)}"], env=lib_env(VRAMTRACE_REPORT=path),
                               cwd=work, capture_output=True, text=True, timeout=60)
            pid = int(p.stdout.split()[0])
            eq((p.returncode, p.stdout.split("\n", 1)[1]), (a.rc, a.out), f"{path}: the program as without")
            with open(path, "rb") as f:
                eq(f.read() == before, True, f"{path}: left as it is")
            eq(warnings(p.stderr), [f"vramtrace: warning: the report file {path} {why}: it is left as it is, "
                                    "and the report goes to stderr"], f"{path}: one warning")
            eq((p.stderr.count(f"\nvramtrace: out of memory in pid {pid} ({prog[0]})\n"),
                p.stderr.count(f"\nvramtrace: exit in pid {pid} ({prog[0]})\n")), (1, 1),
               f"{path}: the post-mortem and the exit report on stderr:\n{p.stderr}")
        eq(dump_at(dump)[1], "exit", "the dump is still a dump")
        log = os.path.join(work, "rep.log")
        with open(log, "w") as f:
            f.write("\n \n")  # blank lines alone (`echo > rep.log`): as good as empty
        pids = []
        for i in range(2):  # blank, then a report log of the run before
            p = subprocess.run(["bash", "-c", f"echo $$; exec {' '.join(prog)}"], env=lib_env(VRAMTRACE_REPORT=log),
                               cwd=work, capture_output=True, text=True, timeout=60)
            eq(warnings(p.stderr), [], f"run {i}: no warning")
            pids.append(int(p.stdout.split()[0]))
        text = open(log).read()
        eq([l for l in text.splitlines() if l.startswith(("vramtrace: out of memory in", "vramtrace: exit in"))],
           [f"vramtrace: {w} in pid {pid} ({prog[0]})" for pid in pids for w in ("out of memory", "exit")],
           "both runs' reports in the log")
        # A log that begins with a leak report (its blank line and rule).
        lsan = os.path.join(work, "lsan.log")
        for i in range(2):
            p = subprocess.run([os.path.join(T, "t_leaks")], capture_output=True, text=True, timeout=60,
                               env=lib_env(VRAMTRACE_REPORT=lsan, VRAMTRACE_LEAK_CHECK="1"), cwd=work)
            eq(warnings(p.stderr), [], f"leak report {i}: no warning")
        text = open(lsan).read()
        eq((text[:6], text.count("SUMMARY: vramtrace: 1576960 byte(s) leaked in 10 allocation(s).")), ("\n=====", 2),
           "a log that begins with a leak report is appended to")


@test
def report_file_of_blank_lines_of_any_length_is_appended_to():
    """A report file of blank lines alone (spaces, tabs, CRs and LFs) is
    appended to as an empty one, whatever its length up to a MiB, and so is
    a log that begins with a long run of them before its first report line;
    a file of more than a MiB of blank bytes is left as it is (the report
    on stderr). Before, a file of more than 128 blank bytes (`yes '' | head
    -200 > r.log`) was refused as no report log."""
    prog = [os.path.join(T, "t_triage"), "keep", "1M", "fail", "1000G"]
    unit = b" \t\r\n"
    cases = (("lf200", b"\n" * 200, True),
             ("mib", unit * (1 << 18), True),
             ("then-log", unit * 40000 + b"vramtrace: an earlier report\n", True),
             ("past-mib", b"\n" * ((1 << 20) + 1), False))
    with workdir("vt-files-blank-") as work:
        for name, before, appended in cases:
            path = os.path.join(work, name + ".log")
            with open(path, "wb") as f:
                f.write(before)
            p = subprocess.run(["bash", "-c", f"echo $$; exec {' '.join(prog)}"], env=lib_env(VRAMTRACE_REPORT=path),
                               cwd=work, capture_output=True, text=True, timeout=60)
            pid = int(p.stdout.split()[0])
            with open(path, "rb") as f:
                text = f.read()
            where = text[len(before):].decode() if appended else p.stderr
            eq(warnings(p.stderr), [] if appended else [
                f"vramtrace: warning: the report file {path} is not a vramtrace report log: it is left as it is, and "
                "the report goes to stderr"], f"{name}: the warnings")
            eq((text[:len(before)] == before, len(text) > len(before)), (True, appended),
               f"{name}: what was there kept, the report {'after it' if appended else 'not added'}")
            eq([l for l in where.splitlines() if l.startswith(("vramtrace: out of memory in", "vramtrace: exit in"))],
               [f"vramtrace: out of memory in pid {pid} ({prog[0]})", f"vramtrace: exit in pid {pid} ({prog[0]})"],
               f"{name}: the post-mortem and the exit report " + ("in the file" if appended else "on stderr"))
            if appended:
                ok(where.startswith(f"vramtrace: out of memory in pid {pid} "), f"{name}: the report's first line "
                   "begins the file's first line after the blank ones: " + where[:100])


@test
def report_log_whose_last_line_has_no_newline_gets_one_first():
    """A report log whose last line has no newline (`printf 'vramtrace: no
    newline' > r.log`) gets one before the report, once: the report begins
    a line of its own and no blank line is added. Four processes that open
    it while another holds the log's lock (as a vramtrace process adding the
    newline does) wait for it, and find the newline that one added: none
    adds a second one. Before, the report was joined onto that line ("vramtrace: no
    newlinevramtrace: out of memory in pid ...")."""
    import fcntl
    prog = [os.path.join(T, "t_triage"), "keep", "1M", "fail", "1000G"]
    with workdir("vt-files-eol-") as work:
        log = os.path.join(work, "r.log")
        with open(log, "w") as f:
            f.write("vramtrace: no newline")
        p = subprocess.run(["bash", "-c", f"echo $$; exec {' '.join(prog)}"], env=lib_env(VRAMTRACE_REPORT=log),
                           cwd=work, capture_output=True, text=True, timeout=60)
        pid = int(p.stdout.split()[0])
        eq(warnings(p.stderr), [], "no warning")
        lines = open(log).read().split("\n")
        eq(lines[:2], ["vramtrace: no newline", f"vramtrace: out of memory in pid {pid} ({prog[0]})"],
           "the report on a line of its own")
        eq((lines[-1], [l for l in lines[:-1] if not l.startswith("vramtrace:")]), ("", []),
           "whole lines, none blank")
        # Four processes at once, while the log's lock is held by a writer
        # that adds the newline before it lets go.
        with open(log, "w") as f:
            f.write("vramtrace: no newline")
        holder = open(log, "a")
        fcntl.lockf(holder, fcntl.LOCK_EX)
        procs = [subprocess.Popen(prog, env=lib_env(VRAMTRACE_REPORT=log), cwd=work, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True) for _ in range(4)]
        time.sleep(0.3)
        holder.write("\n")
        holder.flush()
        fcntl.lockf(holder, fcntl.LOCK_UN)
        holder.close()
        errs = [pr.communicate(timeout=60)[1] for pr in procs]
        eq([warnings(e) for e in errs], [[]] * 4, "no warning")
        lines = open(log).read().split("\n")
        eq((lines[0], lines[-1]), ("vramtrace: no newline", ""), "the first line kept, the last ended")
        eq([l for l in lines[:-1] if not l.startswith("vramtrace:")], [], "one newline added: no blank line")
        eq(sorted(l.split(" in pid ")[0] for l in lines if l.startswith(("vramtrace: out of memory in pid",
                                                                           "vramtrace: exit in pid"))),
           ["vramtrace: exit"] * 4 + ["vramtrace: out of memory"] * 4, "each process's two reports")


@test
def a_dash_is_no_file_for_the_dump_or_the_report():
    """VRAMTRACE_OUT=- and VRAMTRACE_REPORT=- warn once each and keep their
    defaults (a dump vramtrace.PID.json, the report on stderr); `vramtrace
    run --out -` and `--report -` are refused with status 2 before the
    command runs. Before, each made a file named "-" in the start folder,
    and a later run's report went into the dump there."""
    prog = [os.path.join(T, "t_triage"), "keep", "1M", "fail", "1000G"]
    with workdir("vt-files-dash-") as work:
        p = subprocess.run(["bash", "-c", f"echo $$; exec {' '.join(prog)}"],
                           env=lib_env(VRAMTRACE_OUT="-", VRAMTRACE_REPORT="-"), cwd=work, capture_output=True,
                           text=True, timeout=60)
        pid = int(p.stdout.split()[0])
        eq(warnings(p.stderr), ["vramtrace: warning: VRAMTRACE_OUT=- names no file (a dump goes to a file); "
                                "keeping the default",
                                "vramtrace: warning: VRAMTRACE_REPORT=- names no file (standard output is "
                                "'stdout'); keeping the default"], "one warning each")
        eq(sorted(os.listdir(work)), [f"vramtrace.{pid}.json"], "the default dump, no file named -")
        eq(p.stderr.count(f"\nvramtrace: exit in pid {pid} ({prog[0]})\n"), 1, "the report on stderr")
        os.unlink(os.path.join(work, f"vramtrace.{pid}.json"))
        for flag, takes in (("--out", "a path or off ('-' names none: a dump goes to a file)"),
                            ("--report", "stderr, stdout, off or a file ('-' names none: stdout)")):
            for args in ([flag, "-"], [flag + "=-"]):
                p = subprocess.run([CLI, "run", *args, "--", "touch", "ran"], cwd=work, capture_output=True,
                                   text=True, timeout=60)
                eq((p.returncode, p.stdout, p.stderr), (2, "", f"vramtrace run: {flag} takes {takes}, not '-'\n"),
                   f"{args} refused")
        eq(os.listdir(work), [], "nothing run, no file named -")


def dead_pid():
    """A pid no process has now: a child's, waited for."""
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


@test
def a_dump_killed_while_written_leaves_nothing():
    """A process killed (SIGKILL) while it writes a dump of 300,000
    allocations, the dump's file open: nothing is left in the folder. The
    dump is written into an unnamed file (O_TMPFILE) named only once whole;
    before, its partial NAME.tmp.PID.HEX stayed for ever."""
    with workdir("vt-files-kill-") as work:
        p = subprocess.Popen([os.path.join(T, "t_many"), "300000", "60"], cwd=work, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, env=lib_env(VRAMTRACE_OUT=os.path.join(work, "k.json")))
        eq(p.stdout.readline(), b"ready\n", "allocated")
        os.kill(p.pid, signal.SIGUSR2)
        writing, deadline = None, time.monotonic() + 30
        while writing is None and time.monotonic() < deadline:
            for fd in os.listdir(f"/proc/{p.pid}/fd"):
                try:
                    target = os.readlink(f"/proc/{p.pid}/fd/{fd}")
                except OSError:
                    continue
                if target.startswith(work + "/"):
                    writing = target
                    break
        p.kill()
        p.wait()
        ok(writing is not None, "the dump's file was seen open")
        eq(os.listdir(work), [], f"nothing left (the file being written was {writing})")


@test
def stale_temporary_files_of_killed_writers_are_removed():
    """What killed writers of a dump's name left (as a file system without
    O_TMPFILE, or an earlier vramtrace, leaves it): the next dump written
    at that name removes each NAME.tmp.PID.HEX of this user whose pid no
    process has and that nothing wrote for 10 minutes; one written lately
    (a writer in another pid namespace, whose pid is not seen here), one of
    a live pid, another name's and a file named otherwise are kept."""
    prog = [os.path.join(T, "t_triage"), "keep", "1M"]
    with workdir("vt-files-stale-") as work:
        dead, old = dead_pid(), time.time() - 700
        names = {f"k.json.tmp.{dead}.0123456789abcdef": old,        # removed
                 f"k.json.tmp.{dead}.00000000000000aa": old,        # removed
                 f"k.json.tmp.{dead}.fedcba9876543210": None,       # kept: written lately
                 f"k.json.tmp.{os.getpid()}.1111111111111111": old,  # kept: its pid lives
                 f"other.json.tmp.{dead}.2222222222222222": old,    # kept: another name
                 f"k.json.tmp.{dead}.notahexnumber!!": old,         # kept: not such a name
                 f"k.json.tmp.{dead}": old}                         # kept: not such a name
        for n, t in names.items():
            with open(os.path.join(work, n), "w") as f:
                f.write("partial")
            if t:
                os.utime(os.path.join(work, n), (t, t))
        p = subprocess.run(["bash", "-c", f"echo $$; exec {' '.join(prog)}"],
                           env=lib_env(VRAMTRACE_OUT=os.path.join(work, "k.json")), cwd=work, capture_output=True,
                           text=True, timeout=60)
        eq(dump_at(os.path.join(work, "k.json"))[:2], (int(p.stdout.split()[0]), "exit"), "the dump written")
        eq(sorted(os.listdir(work)), sorted(["k.json"] + [n for n in names if "abcdef" not in n and "aa" not in n]),
           "the two stale ones removed, the rest kept")


@test
def outputs_are_mode_0600_whatever_the_umask():
    """Under `umask 777` the dump and the report file were created mode
    0000, unreadable by their owner (an outside check; the README says
    0600)."""
    with workdir("vt-umask-") as work:
        cmd = f"umask 777; exec {shlex.quote(os.path.join(T, 't_oom'))} exit"
        p = subprocess.run(["bash", "-c", cmd], cwd=work, capture_output=True, text=True, timeout=60,
                           env=lib_env(SIMGPU_CAPACITY="64M", VRAMTRACE_OUT=os.path.join(work, "d.json"),
                                       VRAMTRACE_REPORT=os.path.join(work, "r.txt")))
        eq(p.returncode, 1, p.stderr)
        eq(sorted((x, os.stat(os.path.join(work, x)).st_mode & 0o777) for x in os.listdir(work)),
           [("d.json", 0o600), ("r.txt", 0o600)], "the outputs' modes")


@test
def dump_never_replaces_a_file_its_user_cannot_read():
    """A file of the user's at the dump name that the user cannot read
    (mode 0200: a log another tool appends to) was taken for replaceable
    and replaced by the dump without a word (an outside check): it is not a
    dump (vramtrace's are 0600), and is left as the other files that are
    not dumps are. Run as another user than root, whom no mode stops, from
    copies in its folder (the build's may be in a folder only root reads:
    a fresh clone under mktemp -d)."""
    with workdir("vt-files-") as work:
        prog, lib = copies_for_nobody(work, "t_triage")
        os.chown(work, NOBODY, NOBODY)
        path = os.path.join(work, "results.json")
        with open(path, "w") as f:
            f.write("my results\n")
        os.chown(path, NOBODY, NOBODY)
        os.chmod(path, 0o200)
        env = lib_env(VRAMTRACE_OUT=path, LD_PRELOAD=lib, LD_LIBRARY_PATH=os.path.join(work, "sim"))
        p = subprocess.run(["bash", "-c", f"echo $$; exec {prog} keep 1M"], env=env, cwd=work,
                           capture_output=True, text=True, timeout=60, preexec_fn=as_nobody)
        pid = int(p.stdout.split()[0])
        os.chmod(path, 0o600)
        eq(open(path).read(), "my results\n", "left as it is")
        beside = f"{path[:-5]}.pid{pid}.json"
        eq(warnings(p.stderr), [f"vramtrace: warning: {path} is not a vramtrace dump: it is left as it is, "
                                f"and the dump written to {beside}"], "one warning")
        eq(dump_at(beside)[:2], (pid, "exit"), "the dump beside it")


def proc_file_swapped(way, name):
    """t_fdswap WAY on the file of /proc NAME: the program's file still open
    at the number, the dump written, saying the process's start, boot id
    and argv right and naming main by function, file and line, nothing
    said."""
    prog = os.path.join(T, "t_fdswap")
    with open("/proc/sys/kernel/random/boot_id") as f:
        boot_id = f.read().strip()
    with workdir("vt-procswap-") as work:
        mine = os.path.join(work, "mine")
        with open(mine, "w") as f:
            f.write("7f0000000000-7f0000001000 r-xp 00000000 00:00 0 the program's own file\n" * 64)
        out_path = os.path.join(work, "d.json")
        argv = [prog, way, mine, name]
        rc, out, err, _ = timed(argv, lib_env(VRAMTRACE_LIVE="0", VRAMTRACE_OUT=out_path))
        dump = os.path.join(work, "d.swap.json")
        m = re.fullmatch(rf"swapped 1 own open bytes {os.path.getsize(mine)}\ndump 0 {re.escape(dump)}\n"
                         r"start (\d+)\n", out)
        ok(rc == 0 and m is not None and err == "", f"{way} {name}: status, output, no warning: {(rc, out, err)!r}")
        d = load_dump(dump)
        eq([a["bytes"] for a in d["live"]], [4096], f"{way} {name}: the live allocation")
        eq((d["process_start"], d["boot_id"], d["argv"]), (int(m.group(1)), boot_id, argv),
           f"{way} {name}: the process's start, boot id and argv")
        main = [f for f in frames(d, d["live"][0]["stack"]) if f["function"] == "main"]
        eq([(os.path.basename(f["module"]), os.path.basename(f["file"] or ""), f["line"]) for f in main],
           [("t_fdswap", "t_fdswap.c", source_line("t_fdswap.c", "cudaMalloc(&p, 4096)"))],
           f"{way} {name}: main named by function, file and line")


@test
def dump_names_frames_when_the_program_takes_the_number_of_vramtraces_maps_descriptor():
    """A program whose own file takes the number of the descriptor that
    vramtrace reads a file of /proc through, in the middle of the read (a
    daemon's closefrom and first open in another thread; here the
    program's read(2) does it, t_fdswap read): /proc/self/maps as the
    dump names its frames, /proc/self/stat and cmdline, the boot id as it
    says which process it is. The dump still names its frames by
    function and line and says the process's start, boot id and argv
    right, no warning is said, and the program's file is still open at
    that number. Before, vramtrace read the program's file as the maps
    (frames named by module and offset, "cannot read this process's
    symbols (Exec format error)"), as the stat (no start, no boot id in
    the dump) or as the command line, and then closed it."""
    for name in ("maps", "stat", "cmdline", "boot_id"):
        proc_file_swapped("read", name)


@test
def files_of_proc_read_right_when_the_program_takes_the_number_as_vramtrace_moves_it():
    """A program whose own file takes the number of a descriptor vramtrace
    has just opened, as vramtrace copies it out of the program's way (to
    700 and up) and closes the number it was opened at (a daemon's
    closefrom and first open in another thread; here the program's
    fcntl(2) does it: before the copy, t_fdswap move, or after it,
    t_fdswap moveafter). For each file of /proc read so (the maps as the
    dump names its frames, the stat, the command line, the boot id): the
    program's file is still open at that number, the dump says the
    process's start, boot id and argv right and names main by function,
    file and line, and nothing is said. Before, the number was closed in
    both cases, the program's file with it, and before the copy the
    library read on from a copy of the program's file."""
    for way in ("move", "moveafter"):
        for name in ("maps", "stat", "cmdline", "boot_id"):
            proc_file_swapped(way, name)


@test
def naming_ends_without_closing_the_file_the_program_put_at_a_modules_number():
    """A program whose own file takes the number of a descriptor the
    symbolizer's libdwfl holds (a module's file, mapped to be read, kept
    open until the naming ends; here the program's mmap(2) puts it there
    as the module is mapped, t_fdswap module) while a dump names its
    frames: libdwfl closes the numbers it holds at the end, and the
    program's file is held aside across that end and put back at its
    number, as it was (not close on exec, as dup2 left it); no other
    descriptor of vramtrace's is left open from 700 up, the dump names
    main by function, file and line, and nothing is said. Before, the
    end closed the program's file."""
    prog = os.path.join(T, "t_fdswap")
    with workdir("vt-moduleswap-") as work:
        mine = os.path.join(work, "mine")
        with open(mine, "w") as f:
            f.write("the program's own file\n")
        out_path = os.path.join(work, "d.json")
        rc, out, err, _ = timed([prog, "module", mine], lib_env(VRAMTRACE_LIVE="0", VRAMTRACE_OUT=out_path))
        dump = os.path.join(work, "d.swap.json")
        m = re.fullmatch(rf"swapped 1 own open bytes {os.path.getsize(mine)}\ndump 0 {re.escape(dump)}\n"
                         r"start \d+\nothers 0 cloexec 0\n", out)
        ok(rc == 0 and m is not None and err == "", f"status, output, no warning: {(rc, out, err)!r}")
        d = load_dump(dump)
        main = [f for f in frames(d, d["live"][0]["stack"]) if f["function"] == "main"]
        eq([(os.path.basename(f["module"]), os.path.basename(f["file"] or ""), f["line"]) for f in main],
           [("t_fdswap", "t_fdswap.c", source_line("t_fdswap.c", "cudaMalloc(&p, 4096)"))],
           "main named by function, file and line")


@test
def dump_written_again_when_the_program_takes_the_number_of_its_descriptor():
    """A program whose own file takes the number of the descriptor a dump
    is being written through (a daemon's closefrom and first open in
    another thread; here the program's write(2) does it, t_fdswap write),
    whether the dump is written into an unnamed file (O_TMPFILE) or, where
    the file system has none, a named temporary one: the program's file
    stays open at that number, vramtrace writes nothing more into it once
    it sees the swap, says how many bytes may have gone there (all of the
    first, small, dump's here: one write), and writes the dump again,
    whole, at its path; no temporary file is left. Before, the rest of the
    dump went into the program's file and the close at the end closed it."""
    prog = os.path.join(T, "t_fdswap")
    for way in ("unnamed", "named"):
        with workdir("vt-dumpswap-") as work:
            mine = os.path.join(work, "mine")
            rc, out, err, _ = timed([prog, "write", mine, work, way],
                                    lib_env(VRAMTRACE_LIVE="0", VRAMTRACE_OUT=os.path.join(work, "d.json")))
            size = os.path.getsize(mine)
            dump = os.path.join(work, "d.swap.json")
            ok(rc == 0 and re.fullmatch(rf"swapped 1 own open bytes {size}\ndump 0 {re.escape(dump)}\nstart \d+\n", out),
               f"{way}: status and output: {(rc, out)!r}")
            m = re.fullmatch(r"vramtrace: warning: the program closed the descriptor a file of vramtrace's was being "
                             r"written through and opened a file of its own at its number \((\d+)\): up to (\d+) "
                             r"bytes meant for d\.swap\.json may have gone into that file; written again\n", err)
            ok(m is not None, f"{way}: one warning, the bytes said: {err!r}")
            eq(int(m.group(2)), size, f"{way}: the bytes said are those the program's file took")
            ok(int(m.group(1)) >= 3, f"{way}: a descriptor of vramtrace's")
            eq(sorted(os.listdir(work)), ["d.json", "d.swap.json", "mine"], f"{way}: the folder")
            for path in (dump, mine):
                d = load_dump(path)
                eq(([a["bytes"] for a in d["live"]], d["reason"]), ([4096], "named"),
                   f"{way}: {os.path.basename(path)} whole")


def folder_swap_run(work, way, *more, **env):
    """t_fdswap folder with a dumps folder and a folder of the program's in
    work: (dumps, mine, rc, out, err)."""
    dumps, mine = os.path.join(os.path.realpath(work), "dumps"), os.path.join(work, "mine")
    os.mkdir(dumps)
    os.mkdir(mine)
    rc, out, err, _ = timed([os.path.join(T, "t_fdswap"), "folder", mine, dumps, way, *more],
                            lib_env(VRAMTRACE_LIVE="0", VRAMTRACE_OUT=os.path.join(dumps, "d.json"), **env))
    return dumps, mine, rc, out, err


@test
def dump_stays_in_its_folder_when_the_program_takes_the_number_of_the_folders_descriptor():
    """A program whose own folder takes the number of the descriptor that
    holds the dump's folder while the dump is written (a daemon's closefrom
    and first open in another thread; here the program's write(2) does it
    at vramtrace's first write, t_fdswap folder), with an unnamed temporary
    file (O_TMPFILE) and a named one: the dump is placed whole in its own
    folder, nothing goes into the program's, the program's descriptor stays
    open, and nothing is said (nothing went astray). Before, the dump was
    linked and renamed into the program's folder, and the close at the end
    closed the program's descriptor."""
    for way in ("unnamed", "named"):
        with workdir("vt-dirswap-") as work:
            dumps, mine, rc, out, err = folder_swap_run(work, way)
            dump = os.path.join(dumps, "d.swap.json")
            ok(rc == 0 and re.fullmatch(rf"swapped 1 own open bytes \d+\ndump 0 {re.escape(dump)}\nstart \d+\n", out),
               f"{way}: status and output: {(rc, out, err)!r}")
            eq(err, "", f"{way}: nothing said")
            eq(os.listdir(mine), [], f"{way}: nothing in the program's folder")
            eq(sorted(os.listdir(dumps)), ["d.json", "d.swap.json"], f"{way}: the dumps' folder")
            eq([(load_dump(os.path.join(dumps, n))["reason"], [a["bytes"] for a in load_dump(os.path.join(dumps, n))["live"]])
                for n in ("d.swap.json", "d.json")], [("named", [4096]), ("exit", [])], f"{way}: both dumps whole")


@test
def report_goes_to_stderr_when_the_program_takes_the_number_of_its_descriptor():
    """A program whose own file takes the number of the report file's
    descriptor at vramtrace's first write into it (t_fdswap write, the
    report file in the watched folder): the write that went into the
    program's file is counted in one warning, and the report, that write's
    lines too, goes to stderr whole; the report file is left empty. Before,
    the whole exit report went into the program's file and nothing was
    said."""
    prog = os.path.join(T, "t_fdswap")
    with workdir("vt-reportswap-") as work:
        folder, mine = os.path.join(os.path.realpath(work), "reports"), os.path.join(work, "mine")
        os.mkdir(folder)
        report = os.path.join(folder, "report.txt")
        rc, out, err, _ = timed([prog, "write", mine, folder],
                                lib_env(VRAMTRACE_LIVE="0", VRAMTRACE_OUT=os.path.join(work, "d.json"),
                                        VRAMTRACE_REPORT=report))
        ok(rc == 0 and out.startswith("swapped 0 "), f"status and output: {(rc, out)!r}")
        size = os.path.getsize(mine)
        m = re.match(r"vramtrace: warning: cannot write the report to (\S+): the program closed its descriptor and "
                     r"opened a file of its own at its number \((\d+)\): up to (\d+) bytes of the report may have gone "
                     r"into that file; what it could not take is on stderr\n", err)
        ok(m is not None, f"one warning: {err!r}")
        eq((m.group(1), int(m.group(3))), (report, size), "the report's path, the bytes the program's file took")
        ok(int(m.group(2)) >= 3, "a descriptor of vramtrace's")
        rest = err[m.end():]
        eq(err.count("vramtrace: warning:"), 1, "one warning")
        ok(rest.startswith("vramtrace: exit in pid ") and rest.endswith(f"vramtrace: dump: {os.path.join(work, 'd.json')}\n"),
           f"the report whole on stderr: {rest!r}")
        with open(mine) as f:
            took = f.read()
        eq(rest, took, "what went into the program's file is the report, on stderr too")
        eq(os.path.getsize(report), 0, "the report file left empty")


@test
def dump_fails_said_when_the_program_takes_its_folders_number_and_moves_the_folder():
    """The same moment as above, and the program then renames the dump's
    folder (t_fdswap folder ... moved): the path no longer leads to the
    folder the dump was being written in, so the dump is not placed in the
    program's folder nor anywhere else; one warning says why, and the
    request for the dump answers -4 (not written). An unnamed temporary
    file leaves nothing; a named one (no O_TMPFILE) stays in the moved
    folder, which vramtrace can no longer reach."""
    for way in ("unnamed", "named"):
        with workdir("vt-dirmove-") as work:
            dumps, mine, rc, out, err = folder_swap_run(work, way, "moved", VRAMTRACE_REPORT="off")
            ok(rc == 0 and re.fullmatch(r"swapped 1 own open bytes \d+\ndump -4 \nstart \d+\n", out),
               f"{way}: status and output: {(rc, out, err)!r}")
            eq(err, f"vramtrace: warning: cannot write the dump to {dumps}/d.swap.json: the program took the number of "
                    "the descriptor of its folder while it was written, and its path no longer leads to that folder\n",
               f"{way}: one warning, why")
            eq(os.listdir(mine), [], f"{way}: nothing in the program's folder")
            left = os.listdir(dumps + ".moved")
            if way == "unnamed":
                eq(left, [], "the moved folder: nothing")
            else:
                ok(len(left) == 1 and re.fullmatch(r"d\.swap\.json\.tmp\.\d+\.[0-9a-f]+", left[0]),
                   f"the moved folder: the named temporary file alone: {left!r}")
