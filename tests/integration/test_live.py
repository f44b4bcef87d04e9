"""The live view: each traced process's live segment, `vramtrace top`,
`vramtrace metrics` and the forecast, on the simulated GPU. Each test runs
its programs with a private XDG_RUNTIME_DIR, so that it sees its own
processes only."""
import os
import atexit
import copy
import fcntl
import html
import json
import re
import shutil
import signal
import stat
import subprocess
import tempfile
import time

from run_tests import *

T_LIVE = os.path.join(T, "t_live")
_dirs = []


def tempdir(prefix):
    """A folder of this test run's, removed when it ends."""
    d = tempfile.mkdtemp(prefix=prefix)
    _dirs.append(d)
    return d


atexit.register(lambda: [shutil.rmtree(d, ignore_errors=True) for d in _dirs])


class Live:
    """t_live under vramtrace, driven line by line (tests/progs/t_live.c)."""

    def __init__(self, rundir, env=None, argv=None):
        self.work = tempdir("vt-live-")
        e = {k: v for k, v in os.environ.items()
             if not k.startswith(("VRAMTRACE_", "SIMGPU_")) and k not in ("LD_PRELOAD", "LD_LIBRARY_PATH")}
        e.update({"LD_LIBRARY_PATH": SIM, "LD_PRELOAD": LIB, "XDG_RUNTIME_DIR": rundir,
                  "VRAMTRACE_OUT": os.path.join(self.work, "dump.%p.json"), "VRAMTRACE_REPORT": "off",
                  "SIMGPU_CAPACITY": "1G"})
        e.update(env or {})
        self.p = subprocess.Popen(argv or [T_LIVE], env=e, cwd=self.work, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.pid = self.p.pid

    def send(self, line):
        """A command, its answer left to be read."""
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()

    def say(self, line):
        self.send(line)
        eq(self.p.stdout.readline(), "ok\n", f"t_live answers {line!r}")

    def quit(self):
        self.send("q")
        out, err = self.p.communicate(timeout=60)
        return self.p.returncode, err


def live_env(rundir):
    e = dict(os.environ)
    e["XDG_RUNTIME_DIR"] = rundir
    return e


def top_once(rundir, *args):
    p = subprocess.run([CLI, "top", "--once", *args], env=live_env(rundir), capture_output=True, text=True,
                       timeout=60)
    return p


def wait_for(what, fn, timeout=10.0):
    """fn() until it returns something true; its last value."""
    end = time.monotonic() + timeout
    while True:
        v = fn()
        if v or time.monotonic() > end:
            ok(v, f"{what} within {timeout} s")
            return v
        time.sleep(0.05)


def process_rows(text):
    """{pid: row fields} of a --once frame."""
    rows = {}
    for line in text.splitlines()[2:]:
        if not line.strip():
            break
        f = line.split()
        if f[0].isdigit() and len(f) >= 9:
            rows[int(f[0])] = f
    return rows


def published(nbytes):
    """A t_live of its own run directory that holds nbytes, once top shows
    it: (rundir, the Live)."""
    rundir = tempdir("vt-rundir-")
    t = Live(rundir)
    t.say(f"a {nbytes}")
    wait_for("the segment", lambda: t.pid in process_rows(top_once(rundir, "--bytes").stdout))
    return rundir, t


def site_rows(text):
    """(bytes, count, site) of a --once frame's call-site table."""
    table = text.split("  SITE\n", 1)[1] if "  SITE\n" in text else ""
    return re.findall(r"^ +(\S+(?: [KMGT]?i?B)?) +(\d+)  (.*)$", table, re.M)


def segment_path(rundir, pid):
    return os.path.join(rundir, f"vramtrace-live.{pid}.shm")


@test
def live_segment_published_and_removed():
    """A process that allocates 100 MiB and then 1 MiB shows them in its
    segment (mode 0600, in XDG_RUNTIME_DIR) within half a second of the
    allocation, with its call site, and the segment goes when it exits."""
    rundir = tempdir("vt-rundir-")
    t = Live(rundir)
    t.say("a 104857600")
    t.say("a 1048576")
    want = 104857600 + 1048576
    start = time.monotonic()
    rows = wait_for("the live bytes", lambda: (lambda r: r if r.get(t.pid, [0] * 9)[3] == str(want) else None)(
        process_rows(top_once(rundir, "--bytes").stdout)))
    ok(time.monotonic() - start < 1.5, "published within a few refreshes")
    f = rows[t.pid]
    eq(f[1:8], ["0", "0", str(want), str(want), "-", "0", "-"], "rank, device, live, peak, reserved, growth, forecast")
    eq(f[8], T_LIVE, "command")
    st = os.stat(segment_path(rundir, t.pid))
    eq(stat.S_IMODE(st.st_mode), 0o600, "segment mode")
    eq(os.listdir(rundir), [f"vramtrace-live.{t.pid}.shm"], "one segment, no temporary file")
    out = top_once(rundir, str(t.pid)).stdout
    line = source_line("t_live.c", "cudaMalloc(&p, bytes) == cudaSuccess")
    eq(site_rows(out),
       [("101.00 MiB", "2", f"keep tests/progs/t_live.c:{line}")], "the call sites of the process")
    t.say("f")
    wait_for("a free", lambda: process_rows(top_once(rundir, "--bytes").stdout).get(t.pid, [0] * 9)[3] == str(104857600))
    rc, err = t.quit()
    eq((rc, err), (0, ""), "status and stderr")
    eq(os.listdir(rundir), [], "segment removed at exit")
    p = top_once(rundir, str(t.pid))
    eq((p.returncode, p.stderr), (1, f"vramtrace top: pid {t.pid} is not a traced process of this user\n"),
       "top PID of a process gone")


@test
def live_segment_names_many_new_sites_at_once():
    """Five call sites that become live between two of the publisher's
    rounds are named together (one symbolizing session for all of a
    round's new sites): each row of the process's call sites is its own
    function and line, with its own bytes, largest first."""
    rundir = tempdir("vt-rundir-")
    t = Live(rundir)
    t.say("sites 1048576")
    want = [(f"{k}.00 MiB", "1", f"site{k} tests/progs/t_live.c:{source_line('t_live.c', f'SITE({k})')}")
            for k in (5, 4, 3, 2, 1)]
    rows = wait_for("the five sites", lambda: (lambda r: r if len(r) == 5 else None)(
        site_rows(top_once(rundir, str(t.pid)).stdout)))
    eq(rows, want, "each site named as itself")
    rc, err = t.quit()
    eq((rc, err), (0, ""), "status and stderr")


@test
def live_segment_sites_add_up_every_stack_of_a_call_site():
    """Call sites reached through many stacks are added up over all of
    them, as the dump's holders table adds them: 40 stacks of 1 MiB reach
    fanned1 and 50 of 512 KiB reach fanned0. With the 32 largest stacks
    alone, fanned1 read 32 MiB in 32 allocations and fanned0 was missing
    (top, and the metrics' vramtrace_site_live_bytes)."""
    rundir = tempdir("vt-rundir-")
    t = Live(rundir)
    t.say("fan 40 1048576 1")
    t.say("fan 50 524288 0")
    line = lambda k: source_line("t_live.c", f"FANNED({k})")  # the macro's, where it is expanded
    want = [("40.00 MiB", "40", f"fanned1 tests/progs/t_live.c:{line(1)}"),
            ("25.00 MiB", "50", f"fanned0 tests/progs/t_live.c:{line(0)}")]
    rows = wait_for("both sites, whole", lambda: (lambda r: r if r == want else None)(
        site_rows(top_once(rundir, str(t.pid)).stdout)))
    eq(rows, want, "each call site once, every stack's bytes")
    text = metrics(rundir, "--top", "5")
    got = sorted((re.search(r'site="([^"]*)"', k)[1], v) for k, v in series(text, "vramtrace_site_live_bytes").items())
    eq(got, [(f"fanned0 tests/progs/t_live.c:{line(0)}", str(50 * 524288)),
             (f"fanned1 tests/progs/t_live.c:{line(1)}", str(40 * 1048576))], "the metrics' sites")
    eq(t.quit(), (0, ""), "status and stderr")


@test
def live_segment_runtime_dir_too_long_is_passed_over_on_both_sides():
    """An XDG_RUNTIME_DIR longer than 3,000 bytes is passed over by the
    writer and the readers alike (/dev/shm instead): the writer cut it to
    3,899 bytes and the readers to 4,095, so that a process in a folder of
    4,042 bytes was not seen (and its cut path could name another folder)."""
    base = tempdir("vt-rundir-")
    deep = base
    while len(deep) < 3950:
        deep = os.path.join(deep, "d" * 200)
    os.makedirs(deep)
    t = Live(deep)
    t.say("a 3145728")
    rows = wait_for("the process, seen", lambda: (lambda r: r if t.pid in r else None)(
        process_rows(top_once(deep, "--bytes").stdout)))
    eq(rows[t.pid][3], "3145728", "its live bytes")
    ok(os.path.exists(f"/dev/shm/vramtrace-live.{t.pid}.shm"), "its segment in /dev/shm")
    eq(os.listdir(deep), [], "nothing in the long folder")
    eq(t.quit(), (0, ""), "status and stderr")
    ok(not os.path.exists(f"/dev/shm/vramtrace-live.{t.pid}.shm"), "removed at exit")


@test
def top_shows_pinned_host_memory_on_a_row_of_its_own():
    """A process holding pinned host memory shows it on a `host` row under
    its devices, as the metrics give it with gpu="host" (a process holding
    only that read 0 B in top)."""
    rundir = tempdir("vt-rundir-")
    t = Live(rundir)
    t.say("h 7340032")
    host_row = lambda: re.findall(r"^ +host +(\d+) +- +- +- +-$", top_once(rundir, "--bytes").stdout, re.M)
    eq(wait_for("the host row", lambda: host_row() or None), ["7340032"], "the host row's live bytes")
    t.say("fh")
    wait_for("the host row gone", lambda: host_row() == [])
    eq(t.quit(), (0, ""), "status and stderr")


@test
def live_segment_stale_ones_cleaned():
    """A segment left by a killed process (its pid gone), one whose pid
    runs but started at another time, and ones left in mid-publication (an
    odd count: they stayed, and cost every reader 50 ms each) are removed
    by the next reader; a live one stays."""
    rundir = tempdir("vt-rundir-")
    a = Live(rundir)
    a.say("a 4096")
    b = Live(rundir)
    b.say("a 8192")
    wait_for("two segments", lambda: len(process_rows(top_once(rundir, "--bytes").stdout)) == 2)
    os.kill(a.pid, signal.SIGKILL)
    a.p.wait()
    ok(os.path.exists(segment_path(rundir, a.pid)), "a killed process leaves its segment")
    # b's segment copied under the pid of this test's own process: the pid
    # runs, its start time is not the segment's.
    fake = segment_path(rundir, os.getpid())
    with open(segment_path(rundir, b.pid), "rb") as f:
        data = bytearray(f.read())
    data[24:28] = os.getpid().to_bytes(4, "little")
    with open(fake, "wb") as f:
        f.write(data)
    os.chmod(fake, 0o600)
    # Forty segments of writers killed in mid-publication: the count odd
    # forever, the pids gone (each cost every reader 50 ms of retries and
    # stayed). b's copied with an odd count, under pids nobody runs.
    odd = bytearray(data)
    odd[16:24] = (int.from_bytes(odd[16:24], "little") | 1).to_bytes(8, "little")
    dead = []
    for k in range(40):
        pid = 4000000 + k
        odd[24:28] = pid.to_bytes(4, "little")
        dead.append(segment_path(rundir, pid))
        with open(dead[-1], "wb") as f:
            f.write(odd)
        os.chmod(dead[-1], 0o600)
    rows = process_rows(top_once(rundir, "--bytes").stdout)
    eq(sorted(rows), [b.pid], "only the live process is listed")
    eq(rows[b.pid][3], "8192", "its live bytes")
    eq(sorted(os.listdir(rundir)), [f"vramtrace-live.{b.pid}.shm"], "stale segments removed")
    eq(b.quit(), (0, ""), "b exits as usual")


@test
def live_segment_hostile_counts_and_strings():
    """A segment of this user's whose counts pass its arrays (100,000,000
    devices, 1,000 call sites, or -1 and -7) and whose strings never end,
    the growth of each device INT64_MIN, held by a live process: top (every
    sort) and metrics read at most the 64 devices and 32 sites a segment
    holds, its strings cut at their ends, and exit 0 (before, top read past
    the segment and died of SIGSEGV). Offsets from common/live.h's struct
    vt_live_segment, checked against a real segment's pid."""
    rundir, t = published(4096)
    with open(segment_path(rundir, t.pid), "rb") as f:
        real = bytearray(f.read())
    eq((len(real), int.from_bytes(real[24:28], "little")), (38544, t.pid), "the segment's size and pid's offset")
    with open("/proc/self/stat") as f:
        start = int(f.read().rsplit(")", 1)[1].split()[19])
    for ndev, nsites in ((100000000, 1000), (-1, -7)):
        data = bytearray(real)
        data[24:28] = os.getpid().to_bytes(4, "little")
        data[40:48] = start.to_bytes(8, "little")
        data[152:280] = b"A" * 128                       # command, no end
        data[392:396] = ndev.to_bytes(4, "little", signed=True)
        data[396:400] = nsites.to_bytes(4, "little", signed=True)
        for i in range(64):                              # growth_per_min of every device
            at = 400 + i * 496 + 192
            data[at:at + 8] = (-(1 << 63)).to_bytes(8, "little", signed=True)
        for i in range(32):                              # every site's label, no end
            at = 32144 + i * 184 + 24
            data[at:at + 160] = b"B" * 160
        data[38032:38288] = b"C" * 256                   # the forecast, no end
        fake = segment_path(rundir, os.getpid())
        fd = os.open(fake, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, bytes(data))
            import fcntl
            fcntl.flock(fd, fcntl.LOCK_EX)              # held: a live writer
            for args in ((), ("--sort", "growth"), ("--sort", "peak"), (str(os.getpid()),)):
                p = top_once(rundir, "--bytes", *args)
                eq((p.returncode, p.stderr), (0, ""), f"top {args} with {ndev} devices, {nsites} sites")
                mine = [l for l in p.stdout.splitlines() if l.split()[:1] == [str(os.getpid())]]
                eq(len(mine), 1, f"top {args}: one row starts with this pid")
                ok(mine[0].endswith(" " + "A" * 127), f"top {args}: the command cut at its end")
                lines = p.stdout.splitlines()
                first = lines.index(mine[0])
                rows = 1
                while first + rows < len(lines) and lines[first + rows].startswith(" " * 8) and lines[first + rows].strip():
                    rows += 1
                eq(rows, 64 if ndev > 0 else 1, f"top {args}: device rows of the segment")
                if args == (str(os.getpid()),):
                    got = site_rows(p.stdout)
                    if nsites > 0:
                        eq(len(got), 10, "its call sites: --once's ten")
                        ok(all(r[2] == "B" * 159 for r in got), "each label cut at its end")
                    else:
                        eq(got, [("0", "0", "(nothing live)")], "no call site")
            text = metrics(rundir)
            c = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
            eq((c.returncode, c.stdout + c.stderr), (0, ""), f"promtool on metrics with {ndev} devices, {nsites} sites")
        finally:
            os.close(fd)
            os.unlink(fake)
    eq(t.quit(), (0, ""), "exit")


@test
def live_segment_of_a_forked_child():
    """A forked child that allocates publishes a segment of its own with its
    own bytes only; the parent's stays as it was, and the child's goes when
    the child exits."""
    rundir, t = published(2097152)
    t.send("fork 8192 3000")
    m = re.match(r"child (\d+)\n", t.p.stdout.readline())
    ok(m, "the child's pid")
    child = int(m.group(1))
    rows = wait_for("the child's row", lambda: (lambda r: r if child in r else None)(
        process_rows(top_once(rundir, "--bytes").stdout)))
    eq((rows[t.pid][3], rows[child][3], rows[child][4]), ("2097152", "8192", "8192"),
       "parent's live, child's live and peak")
    eq(t.p.stdout.readline(), "ok\n", "the child exited")
    eq(sorted(process_rows(top_once(rundir, "--bytes").stdout)), [t.pid], "only the parent is left")
    eq(sorted(os.listdir(rundir)), [f"vramtrace-live.{t.pid}.shm"], "the child's segment removed")
    eq(t.quit(), (0, ""), "exit")


@test
def fork_as_helper_threads_start_never_hangs():
    """Forks at the moment vramtrace's helper threads (the publisher, the dump
    signal's watcher) start, in the ASan and TSan builds with the publisher
    on: no child inherits a lock held (a thread in its start-up holds the
    sanitizer allocator's), every family exits, no sanitizer report, and
    every process's segment is gone at the end (tests/progs/t_forkstorm.c)."""
    storm = os.path.join(T, "t_forkstorm")
    for build, runtime, env, rounds in (
            ("asan", "libasan.so", {"ASAN_OPTIONS": "detect_leaks=0:abort_on_error=0", "SIMGPU_CAPACITY": "64M"}, 40),
            ("tsan", "libtsan.so", {"TSAN_OPTIONS": "halt_on_error=1:exitcode=66:die_after_fork=0"}, 10)):
        first = gcc_runtime(runtime)
        ok(first, f"{runtime} from gcc")
        rundir = tempdir("vt-rundir-")
        r = run([storm, str(rounds)], env=dict(env, VRAMTRACE_LIVE="1", XDG_RUNTIME_DIR=rundir), report="off",
                lib=os.path.join(BUILD, build, "libvramtrace.so"), first=first)
        ok("Sanitizer" not in r.err and "runtime error" not in r.err, f"{build}: clean:\n{r.err[-3000:]}")
        eq((r.out, r.rc), (f"rounds {rounds} hung 0 failed 0\n", 0), f"{build}: every family exited")
        eq(os.listdir(rundir), [], f"{build}: every segment removed")


@test
def live_segment_temporary_of_a_killed_writer_is_removed():
    """A process killed (SIGKILL) before its first publication leaves its
    temporary segment, ".vramtrace-live.PID.tmp": the next reader removes
    it once that pid runs no more and nobody holds its lock; one of a pid
    that runs, or one locked, stays (a writer creates it before it locks
    it)."""
    rundir = tempdir("vt-rundir-")
    gone = subprocess.Popen(["true"])
    gone.wait()
    dead = os.path.join(rundir, f".vramtrace-live.{gone.pid}.tmp")
    running = os.path.join(rundir, f".vramtrace-live.{os.getpid()}.tmp")
    other = subprocess.Popen(["true"])
    other.wait()
    locked = os.path.join(rundir, f".vramtrace-live.{other.pid}.tmp")
    for path in (dead, running, locked):
        with open(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600), "wb") as f:
            f.write(b"\0" * 64)
    hold = open(locked, "rb")
    fcntl.flock(hold, fcntl.LOCK_EX)
    try:
        eq(top_once(rundir).returncode, 0, "top --once")
        eq(sorted(os.listdir(rundir)), sorted(os.path.basename(p) for p in (running, locked)),
           "the dead writer's temporary segment is gone, the others stay")
    finally:
        hold.close()


@test
def live_segment_on_a_full_folder_is_a_warning_not_a_bus_error():
    """The segment's folder (XDG_RUNTIME_DIR, else /dev/shm: a container's
    is 64 MB) on a tmpfs that is full, or that has 20 KiB free of the
    segment's 38 KiB: one warning, the program as without vramtrace, and
    nothing left in the folder. Before, the segment was a sparse file
    written through its mapping: the first store was a SIGBUS (status 135)
    and its temporary file stayed."""
    prog = [os.path.join(T, "t_fds"), "stdin"]
    script = ('mount -t tmpfs -o size=64k vt-shm "$VT_DIR" && '
              'dd if=/dev/zero of="$VT_DIR/fill" bs=1k count="$VT_FILL" 2>/dev/null && "$@"; s=$?; '
              'ls -A "$VT_DIR"; exit $s')
    for fill in (64, 44):
        rundir = tempdir("vt-rundir-")
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("VRAMTRACE_", "SIMGPU_")) and k not in ("LD_PRELOAD", "LD_LIBRARY_PATH")}
        env.update(LD_LIBRARY_PATH=SIM, LD_PRELOAD=LIB, XDG_RUNTIME_DIR=rundir, VT_DIR=rundir,
                   VT_FILL=str(fill), VRAMTRACE_OUT="off", VRAMTRACE_LIVE="1", VRAMTRACE_REPORT="stderr")
        p = subprocess.run(["unshare", "--mount", "sh", "-c", script, "sh"] + prog, env=env,
                           capture_output=True, text=True, timeout=60)
        eq((p.returncode, p.stdout), (0, "fd 0 open\nfill\n"),
           f"{fill} KiB of 64 used: the program's status and output, only the filler left in the folder")
        pid = re.search(r"^vramtrace: exit in pid (\d+) ", p.stderr, re.M)
        ok(pid, "the exit summary: " + p.stderr[-300:])
        eq([l for l in p.stderr.splitlines() if "warning" in l],
           [f"vramtrace: warning: cannot create the live segment {segment_path(rundir, pid[1])}: "
            "No space left on device; vramtrace top and metrics will not see this process"],
           f"{fill} KiB of 64 used: one warning")


@test
def live_segment_off_switch():
    """VRAMTRACE_LIVE=0 publishes nothing and starts no thread (with the
    signals' watcher off too: VRAMTRACE_SIGNAL=0 VRAMTRACE_ON_TERM=0)."""
    rundir = tempdir("vt-rundir-")
    t = Live(rundir, env={"VRAMTRACE_LIVE": "0", "VRAMTRACE_SIGNAL": "0", "VRAMTRACE_ON_TERM": "0"})
    t.say("a 4096")
    time.sleep(0.6)
    eq(os.listdir(rundir), [], "no segment")
    eq(sorted(os.listdir(f"/proc/{t.pid}/task")), [str(t.pid)], "one thread")
    eq(t.quit(), (0, ""), "exit")


@test
def live_segment_reads_are_consistent():
    """While the program allocates and frees 3 MiB thousands of times, every
    frame read shows the process's live bytes equal to what its call sites
    hold (both 0 or both 3 MiB): no torn copy."""
    rundir, t = published(1048576)
    t.send("loop 20000 3145728 0")
    seen = set()
    for _ in range(40):
        out = top_once(rundir, "--bytes", str(t.pid)).stdout
        live = int(process_rows(out)[t.pid][3])
        sites = sum(int(b) for b, _c, _s in site_rows(out))
        eq(sites, live, "call sites sum to the live bytes")
        seen.add(live)
    ok(seen <= {1048576, 1048576 + 3145728}, f"live bytes only ever 1 or 4 MiB: {seen}")
    eq(t.p.stdout.readline(), "ok\n", "the loop ends")
    eq(t.quit(), (0, ""), "exit")


class Tmux:
    """A tmux server of its own, one window running cmd."""

    def __init__(self, cmd, env, width=160, height=30):
        self.sock = f"vt-live-{os.getpid()}-{time.monotonic_ns()}"
        extra = [a for k, v in env.items() for a in ("-e", f"{k}={v}")]
        subprocess.run(["tmux", "-L", self.sock, "-f", "/dev/null", "new-session", "-d", "-x", str(width),
                        "-y", str(height), *extra, *cmd], check=True, timeout=30)

    def screen(self):
        p = subprocess.run(["tmux", "-L", self.sock, "capture-pane", "-p"], capture_output=True, text=True,
                           timeout=30)
        return p.stdout

    def keys(self, *keys):
        subprocess.run(["tmux", "-L", self.sock, "send-keys", *keys], check=True, timeout=30)

    def alive(self):
        return subprocess.run(["tmux", "-L", self.sock, "has-session"], capture_output=True,
                              timeout=30).returncode == 0

    def kill(self):
        subprocess.run(["tmux", "-L", self.sock, "kill-server"], capture_output=True, timeout=30)


def screen_rows(screen):
    """[(pid, live, peak)] of the process rows on a top screen, in order."""
    return [(int(m[0]), m[1], m[2]) for m in
            re.findall(r"^ *(\d+) +\d+ +\d+ +([\d.]+ \w+) +([\d.]+ \w+) ", screen, re.M)]


@test
def top_screen_scrolls_to_the_selected_process():
    """More processes than the terminal has rows: the process rows scroll
    so that the selected one shows, and its call sites stay on the screen
    below them (the frame was cut at the last row: selecting a process
    past it showed neither the row nor its call sites)."""
    rundir = tempdir("vt-rundir-")
    tm = Tmux([CLI, "top", "--interval", "0.2", "--sort", "pid"], {"XDG_RUNTIME_DIR": rundir, "TERM": "screen"},
              height=14)
    procs = []
    try:
        for k in range(12):
            procs.append(Live(rundir))
            procs[-1].say(f"a {(k + 1) << 20}")
        pids = sorted(t.pid for t in procs)
        wait_for("twelve processes", lambda: "12 traced processes" in tm.screen())
        # The selection starts at the first process top saw, which need not
        # be the lowest pid (a later one may publish first): to the top.
        for _ in range(12):
            tm.keys("k")
        wait_for("the lowest pid selected", lambda: re.search(rf"^call sites of pid {pids[0]} ", tm.screen(), re.M))
        for k in range(1, 12):
            tm.keys("j")
            want = pids[k]
            wait_for(f"process {k} ({want}) selected, its row and call sites shown",
                     lambda: re.search(rf"^call sites of pid {want} ", tm.screen(), re.M)
                     and want in [r[0] for r in screen_rows(tm.screen())])
            screen = tm.screen().rstrip("\n").split("\n")
            ok(len(screen) <= 14, f"within the 14 rows: {len(screen)}")
            ok(any(l.strip().endswith("COUNT  SITE") for l in screen), "the call sites' header shows\n" + "\n".join(screen))
        tm.keys("q")
        wait_for("top quits", lambda: not tm.alive())
    finally:
        tm.kill()
        for t in procs:
            t.quit()


@test
def top_screen_on_an_unknown_terminal_says_so():
    """On a terminal that curses does not know (TERM unset or made up),
    `vramtrace top` says so in its own line and exits 1 (curses printed
    "Error opening terminal" and exited)."""
    import pty
    for term in ("no-such-terminal", None):
        m, s = pty.openpty()
        env = {k: v for k, v in os.environ.items() if k != "TERM"}
        if term:
            env["TERM"] = term
        p = subprocess.run([CLI, "top"], stdin=s, stdout=s, stderr=subprocess.PIPE, env=env, timeout=30)
        os.close(m)
        os.close(s)
        eq((p.returncode, p.stderr), (1, b"vramtrace top: cannot draw on this terminal (try --once)\n"), f"TERM={term}")


@test
def top_of_one_pid_says_what_became_of_it():
    """vramtrace top PID: when that process ends, the frame said "0 traced
    processes" and "(no traced process of this user is running)" while
    others ran, which read as the whole job stopped. Now the title counts
    every traced process and names the pid shown, and the line says that
    the pid has ended (seen before), is not running, or runs without live
    counters, and how many others run."""
    rundir = tempdir("vt-rundir-")
    a, b = Live(rundir), Live(rundir)
    a.say("a 1048576")
    b.say("a 2097152")
    wait_for("both", lambda: sorted(process_rows(top_once(rundir).stdout)) == sorted([a.pid, b.pid]))
    title = lambda text: re.sub(r"^vramtrace top - [\d:]+ - [^ ]+ - ", "", text.split("\n")[0])
    p = top_once(rundir, str(a.pid))
    eq((p.returncode, title(p.stdout), list(process_rows(p.stdout))),
       (0, f"2 traced processes, showing pid {a.pid} - sort: live", [a.pid]), "top --once PID")
    tm = Tmux([CLI, "top", "--interval", "0.2", str(a.pid)], {"XDG_RUNTIME_DIR": rundir, "TERM": "screen"})
    try:
        wait_for("a's row", lambda: [r[0] for r in screen_rows(tm.screen())] == [a.pid])
        eq(a.quit(), (0, ""), "a exits")
        line = f"(pid {a.pid} has ended; 1 other traced process of this user is running)"
        wait_for("a has ended", lambda: line in tm.screen().split("\n"))
        eq(title(tm.screen()), f"1 traced process, showing pid {a.pid} - sort: live", "the title counts b")
        tm.keys("q")
        wait_for("top quits", lambda: not tm.alive())
    finally:
        tm.kill()
    p = top_once(rundir, str(a.pid))
    eq((p.returncode, p.stderr), (1, f"vramtrace top: pid {a.pid} is not a traced process of this user\n"),
       "--once of a process gone: status and stderr as before")
    eq((title(p.stdout), p.stdout.split("\n")[2]),
       (f"1 traced process, showing pid {a.pid} - sort: live",
        f"(pid {a.pid} is not running; 1 other traced process of this user is running)"), "--once of a process gone")
    p = top_once(rundir, str(os.getpid()))
    eq(p.stdout.split("\n")[2], f"(pid {os.getpid()} runs but publishes no live counters (not traced, or "
                                 "VRAMTRACE_LIVE=0); 1 other traced process of this user is running)",
       "--once of a process not traced")
    eq(b.quit(), (0, ""), "b exits")
    p = top_once(rundir, str(b.pid))
    eq(p.stdout.split("\n")[0:3:2], [p.stdout.split("\n")[0], f"(pid {b.pid} is not running; no other traced "
                                      "process of this user is running)"], "none left")
    ok(p.stdout.startswith("vramtrace top - ") and f" - 0 traced processes, showing pid {b.pid} - " in p.stdout,
       "none left: the title")


def top_on_a_pty(rundir, env, keys, seconds, cols=0):
    """vramtrace top on a terminal of its own (a pty, `cols` wide) with env:
    what it wrote in `seconds`, then after each line of keys, and its
    status."""
    import pty
    import select
    import struct
    import termios
    m, s = pty.openpty()
    fcntl.ioctl(s, termios.TIOCSWINSZ, struct.pack("HHHH", 24, cols, 0, 0))
    attrs = termios.tcgetattr(s)
    attrs[3] &= ~termios.ECHO    # the keys not echoed among the frames
    termios.tcsetattr(s, termios.TCSANOW, attrs)
    e = dict(os.environ, XDG_RUNTIME_DIR=rundir)
    e.pop("COLUMNS", None)
    e.update(env)
    p = subprocess.Popen([CLI, "top", "--interval", "0.2"], stdin=s, stdout=s, stderr=subprocess.PIPE, env=e)
    os.close(s)
    out = b""

    def read_for(t):
        nonlocal out
        end = time.monotonic() + t
        while time.monotonic() < end:
            if select.select([m], [], [], 0.05)[0]:
                try:
                    out += os.read(m, 65536)
                except OSError:
                    return
    read_for(seconds)
    for k in keys:
        os.write(m, k)
        read_for(0.6)
    try:
        rc = p.wait(timeout=10)
    finally:
        if p.poll() is None:
            p.kill()
        p.wait()
        os.close(m)
    return rc, p.stderr.read(), out.decode().replace("\r\n", "\n")


@test
def top_on_a_terminal_without_cursor_addressing_prints_frames():
    """TERM=dumb (Emacs's shell, some CI and web consoles): a terminal
    that cannot move its cursor. curses drew the title and half the
    header, never a process row, and never refreshed; now each frame is
    printed whole, one after another, without escapes, cut to the
    terminal's width (COLUMNS, else its own), keys read as lines: 'p' sorts
    by peak, 'q' quits with status 0."""
    rundir = tempdir("vt-rundir-")
    t = Live(rundir)
    t.say("a 52428800")
    wait_for("the segment", lambda: t.pid in process_rows(top_once(rundir).stdout))
    head = "    PID RANK DEV         LIVE         PEAK     RESERVED       GROWTH   FULL IN  COMMAND"
    row = f"{t.pid:7d}    0   0    50.00 MiB    50.00 MiB            -            0         -  {T_LIVE}"
    rc, err, out = top_on_a_pty(rundir, {"TERM": "dumb"}, [b"p\n", b"q\n"], 1.2)
    eq((rc, err), (0, b""), "q quits")
    ok("\x1b" not in out, f"no escape sequence: {out!r}")
    frames = [f for f in out.split("\n\nvramtrace top - ")]
    ok(len(frames) >= 4, f"a frame every interval: {len(frames)}\n{out}")
    for f in frames[:-1]:
        lines = f.split("\n")
        eq(lines[1:3], [head, row], "each frame: the header and the process's row")
        ok(re.search(r" - 1 traced process - sort: (live|peak)$", lines[0]), f"the title: {lines[0]!r}")
    ok(frames[-1].split("\n")[0].endswith(" - sort: peak"), "'p' sorted by peak")
    for env, cols, width in (({"COLUMNS": "20"}, 0, 20), ({}, 30, 30), ({"COLUMNS": "25"}, 30, 25)):
        what = f"COLUMNS={env.get('COLUMNS')}, {cols} columns"
        rc, err, out = top_on_a_pty(rundir, dict(env, TERM="dumb"), [b"q\n"], 0.5, cols)
        eq((rc, err), (0, b""), f"{what}: q quits")
        lines = [l for l in out.split("\n") if l]
        eq(lines[1:3], [head[:width], row[:width]], f"{what}: the lines cut")
        eq(max(len(l) for l in lines), width, f"{what}: no line longer")
    p = subprocess.run([CLI, "top"], env=dict(live_env(rundir), TERM="dumb"), capture_output=True, timeout=30)
    eq((p.returncode, p.stdout, p.stderr), (1, b"", b"vramtrace top: cannot draw on this terminal (try --once)\n"),
       "top | cat: not a terminal, as before")
    eq(t.quit(), (0, ""), "exit")


@test
def top_screen_follows_processes():
    """vramtrace top on a terminal (tmux): two traced programs appear with
    their exact live and peak bytes, largest first; 'n' sorts by pid, 'j'
    selects the next process (its call sites are shown); a program that
    exits loses its row; 'q' quits."""
    rundir = tempdir("vt-rundir-")
    tm = Tmux([CLI, "top", "--interval", "0.2"], {"XDG_RUNTIME_DIR": rundir, "TERM": "screen"})
    try:
        wait_for("top's empty screen", lambda: "(no traced process of this user is running)" in tm.screen())
        a = Live(rundir)
        b = Live(rundir)
        a.say("a 52428800")
        b.say("a 104857600")
        b.say("f")
        b.say("a 73400320")
        want = sorted([(b.pid, "70.00 MiB", "100.00 MiB"), (a.pid, "50.00 MiB", "50.00 MiB")],
                      key=lambda r: r[1], reverse=True)
        wait_for("both rows, largest first", lambda: screen_rows(tm.screen()) == want)
        # The selection follows the process first seen, wherever it moves.
        ok(re.search(rf"^call sites of pid ({a.pid}|{b.pid}) ", tm.screen(), re.M), "a process is selected")
        tm.keys("n")
        by_pid = sorted(want)
        wait_for("sorted by pid", lambda: screen_rows(tm.screen()) == by_pid and "sort: pid" in tm.screen())
        tm.keys("k")
        wait_for("the first process selected",
                 lambda: re.search(rf"^call sites of pid {by_pid[0][0]} ", tm.screen(), re.M))
        tm.keys("j")
        second = by_pid[1][0]
        wait_for("the second process selected",
                 lambda: re.search(rf"^call sites of pid {second} ", tm.screen(), re.M))
        eq(a.quit(), (0, ""), "a exits")
        wait_for("a's row gone", lambda: [r[0] for r in screen_rows(tm.screen())] == [b.pid])
        tm.keys("q")
        wait_for("top quits", lambda: not tm.alive())
        eq(b.quit(), (0, ""), "b exits")
    finally:
        tm.kill()


def free_port():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def metrics(rundir, *args):
    p = subprocess.run([CLI, "metrics", *args], env=live_env(rundir), capture_output=True, text=True, timeout=60)
    eq((p.returncode, p.stderr), (0, ""), f"vramtrace metrics {' '.join(args)}")
    return p.stdout


def series(text, name):
    """{labels text: value} of one metric's samples."""
    return {m[0]: m[1] for m in re.findall(rf"^{name}\{{(.*)\}} (\S+)$", text, re.M)}


@test
def metrics_exposition_and_promtool():
    """vramtrace metrics over two traced programs: exact bytes and counts
    per process and device, labelled pid, rank, host, command, gpu and the
    UUID as DCGM spells it; the call sites capped by --top; promtool check
    metrics finds nothing to say; --textfile writes the same whole."""
    rundir = tempdir("vt-rundir-")
    a = Live(rundir, env={"RANK": "3"})
    b = Live(rundir)
    a.say("a 52428800")
    a.say("a 1048576")
    a.say("f")
    a.say("o")
    b.say("a 4096")
    wait_for("both published", lambda: len(series(metrics(rundir), "vramtrace_live_bytes")) == 2
             and "52428800" in series(metrics(rundir), "vramtrace_live_bytes").values()
             and "1" in series(metrics(rundir), "vramtrace_ooms_total").values())
    text = metrics(rundir)
    host = os.uname().nodename
    uuid = "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f"
    la = f'pid="{a.pid}",rank="3",host="{host}",command="{T_LIVE}",gpu="0",UUID="{uuid}"'
    lb = f'pid="{b.pid}",rank="0",host="{host}",command="{T_LIVE}",gpu="0",UUID="{uuid}"'
    eq(series(text, "vramtrace_live_bytes"), {la: "52428800", lb: "4096"}, "live bytes")
    eq(series(text, "vramtrace_peak_bytes"), {la: "53477376", lb: "4096"}, "peak bytes")
    eq(series(text, "vramtrace_allocations_total"), {la: "2", lb: "1"}, "allocations")
    eq(series(text, "vramtrace_frees_total"), {la: "1", lb: "0"}, "frees")
    eq(series(text, "vramtrace_ooms_total"), {la: "1", lb: "0"}, "out-of-memory failures")
    eq(series(text, "vramtrace_device_memory_bytes"), {la: "1073741824", lb: "1073741824"}, "device memory")
    line = source_line("t_live.c", "cudaMalloc(&p, bytes) == cudaSuccess")
    site = f"keep tests/progs/t_live.c:{line}"
    pa = f'pid="{a.pid}",rank="3",host="{host}",command="{T_LIVE}"'
    pb = f'pid="{b.pid}",rank="0",host="{host}",command="{T_LIVE}"'
    eq(series(text, "vramtrace_site_live_bytes"), {f'{pa},site="{site}"': "52428800", f'{pb},site="{site}"': "4096"},
       "call sites")
    eq(series(metrics(rundir, "--top", "0"), "vramtrace_site_live_bytes"), {}, "--top 0: no call sites")
    p = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    eq((p.returncode, p.stdout, p.stderr), (0, "", ""), "promtool check metrics")
    om = metrics(rundir, "--openmetrics")
    ok(om.endswith("# EOF\n") and "# TYPE vramtrace_allocations counter\n" in om
       and "# UNIT vramtrace_live_bytes bytes\n" in om, "OpenMetrics: counter family, units, EOF")
    eq(series(om, "vramtrace_live_bytes"), series(text, "vramtrace_live_bytes"), "the same series in OpenMetrics")
    out = tempdir("vt-textfile-")
    eq(metrics(rundir, "--textfile", out, "--once"), "", "textfile: nothing on stdout")
    eq(os.listdir(out), ["vramtrace.prom"], "one file, no temporary left")
    with open(os.path.join(out, "vramtrace.prom")) as f:
        eq(series(f.read(), "vramtrace_live_bytes"), {la: "52428800", lb: "4096"}, "textfile's live bytes")
    eq(a.quit(), (0, ""), "a exits")
    eq(b.quit(), (0, ""), "b exits")
    eq(series(metrics(rundir), "vramtrace_live_bytes"), {}, "no series once they exit")


@test
def metrics_by_kind_of_memory():
    """Live and peak bytes per device and kind of memory, exact: device
    memory, managed memory (one block freed: its peak stays) and pinned host
    memory (gpu "host"); the kinds never held have no series; the live
    segment's device totals are their sum; promtool still passes."""
    rundir = tempdir("vt-rundir-")
    t = Live(rundir)
    for line in ("a 1048576", "m 2097152", "f", "m 65536", "h 4096", "h 8192", "fh"):
        t.say(line)
    # The view is published four times a second: one taken between "h 4096"
    # and "fh" already has three kinds, so wait for the last command's
    # (the host's peak of both, and one of them live).
    def after_last(text):
        return ("12288" in series(text, "vramtrace_kind_peak_bytes").values() and
                series(text, "vramtrace_host_live_bytes") and
                set(series(text, "vramtrace_host_live_bytes").values()) == {"4096"})
    wait_for("published", lambda: after_last(metrics(rundir)))
    text = metrics(rundir)
    host = os.uname().nodename
    uuid = "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f"
    proc = f'pid="{t.pid}",rank="0",host="{host}",command="{T_LIVE}"'
    dev = f'{proc},gpu="0",UUID="{uuid}"'
    pin = f'{proc},gpu="host",UUID=""'
    eq(series(text, "vramtrace_kind_live_bytes"),
       {f'{dev},kind="device"': "1048576", f'{dev},kind="managed"': "65536", f'{pin},kind="host"': "4096"},
       "live bytes by kind")
    eq(series(text, "vramtrace_kind_peak_bytes"),
       {f'{dev},kind="device"': "1048576", f'{dev},kind="managed"': "2097152", f'{pin},kind="host"': "12288"},
       "peak bytes by kind")
    eq((series(text, "vramtrace_live_bytes"), series(text, "vramtrace_peak_bytes")),
       ({dev: "1114112"}, {dev: "3145728"}), "the device's totals")
    eq(series(text, "vramtrace_host_live_bytes"), {proc: "4096"}, "pinned host memory")
    p = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    eq((p.returncode, p.stdout, p.stderr), (0, "", ""), "promtool check metrics")
    om = metrics(rundir, "--openmetrics")
    ok("# UNIT vramtrace_kind_peak_bytes bytes\n" in om, "OpenMetrics: the unit")
    eq(series(om, "vramtrace_kind_peak_bytes"), series(text, "vramtrace_kind_peak_bytes"), "the same in OpenMetrics")
    eq(t.quit(), (0, ""), "exit")


TORCH_STEPS = """
import sys, torch
m = torch.nn.Linear(512, 512).cuda()
opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
for i in range(5):
    loss = m(torch.randn(64, 512, device="cuda")).sum()
    loss.backward()
    opt.step()
print(torch.cuda.memory_allocated(0), torch.cuda.memory_reserved(0), flush=True)
sys.stdin.readline()
"""


@torch_test
def live_segment_has_pytorchs_own_figures():
    """Real PyTorch on the simulated GPU under vramtrace run: after five
    optimizer steps the live segment holds PyTorch's allocated and reserved
    bytes of device 0, exactly torch.cuda.memory_allocated() and
    memory_reserved() at the last step, and the 5 steps; top shows the
    reserved bytes; the metrics have them."""
    rundir = tempdir("vt-rundir-")
    work = tempdir("vt-torchlive-")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("VRAMTRACE_", "SIMGPU_")) and k not in ("LD_PRELOAD", "LD_LIBRARY_PATH", "PYTHONPATH")}
    env.update(XDG_RUNTIME_DIR=rundir, SIMGPU_CAPACITY="8G", VRAMTRACE_REPORT="off")
    p = subprocess.Popen([os.path.join(ROOT, "tests", "simgpu", "run"), "--torch", "--", CLI, "run", "--out",
                          os.path.join(work, "d.%p.json"), "--", "python3", "-c", TORCH_STEPS], env=env, cwd=work,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        allocated, reserved = p.stdout.readline().split()
        # The segment catches up with the program within a round or two (a
        # round that first names PyTorch's call sites takes a second or
        # more): the figures of the last step, once they are there.
        text = wait_for("PyTorch's figures at the fifth step", lambda: (
            lambda t: t if list(series(t, "vramtrace_steps_total").values()) == ["5"] else None)(metrics(rundir)),
            timeout=30)
        procs = series(text, "vramtrace_steps_total")
        eq(list(procs.values()), ["5"], "the optimizer steps")
        proc = list(procs)[0]
        pid = int(re.match(r'pid="(\d+)"', proc).group(1))
        dev = f'{proc},gpu="0",UUID="GPU-00010203-0405-0607-0809-0a0b0c0d0e0f"'
        eq((series(text, "vramtrace_torch_allocated_bytes"), series(text, "vramtrace_torch_reserved_bytes")),
           ({dev: allocated}, {dev: reserved}), "PyTorch's allocated and reserved bytes, exact")
        row = process_rows(top_once(rundir, "--bytes").stdout)[pid]
        eq(row[5], reserved, "top's RESERVED")
    finally:
        p.stdin.write("\n")
        p.stdin.close()
        p.wait(timeout=120)
    eq(p.returncode, 0, f"the program exits: {p.stderr.read()[-2000:]}")


def sites_script(text):
    """Python script `text` started under vramtrace, its live segment in a
    runtime folder of its own: (that folder, the process), its standard
    input and output piped."""
    rundir = tempdir("vt-rundir-")
    work = tempdir("vt-sites-")
    script = os.path.join(work, "sites.py")
    with open(script, "w") as f:
        f.write(text)
    e = {k: v for k, v in os.environ.items() if not k.startswith(("VRAMTRACE_", "SIMGPU_"))
         and k not in ("LD_PRELOAD", "LD_LIBRARY_PATH")}
    e.update(LD_LIBRARY_PATH=SIM, LD_PRELOAD=LIB, XDG_RUNTIME_DIR=rundir, VRAMTRACE_OUT="off", VRAMTRACE_REPORT="off")
    return rundir, subprocess.Popen([pythons()[-1], script], env=e, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    text=True)


COLLIDING_SITES = PY_NAMED_ALLOCS + r'''
import sys
mk("a\nb", "/x/f.py")(1 << 20)
mk("a\\x0ab", "/x/f.py")(2 << 20)
print("ready", flush=True)
sys.stdin.read()
'''


@test
def metrics_sites_whose_shown_labels_meet_are_one_series():
    """Two call sites whose labels differ only in that one holds a newline
    and the other the four characters \\x0a show as the same site label: the
    exposition has one series for it, their sum (3 MiB, 2 allocations), not
    two samples with the same labels (which Prometheus drops)."""
    rundir, p = sites_script(COLLIDING_SITES)
    try:
        eq(p.stdout.readline(), "ready\n", "the program holds its memory")
        want = {"bytes": "3145728", "allocations": "2"}
        def both():
            text = metrics(rundir)
            got = {}
            for what in want:
                rows = re.findall(rf'^vramtrace_site_live_{what}{{.*site="(a\\\\x0ab /x/f.py:3)"}} (\d+)$', text, re.M)
                got[what] = rows
            return got if all(len(v) >= 1 and v[0][1] == want[k] for k, v in got.items()) else None
        got = wait_for("the site's series", both)
        for what in want:
            eq([r[1] for r in got[what]], [want[what]], f"one {what} series, the sum")
    finally:
        p.stdin.close()
        p.wait(timeout=60)


LONG_PATH_SITES = PY_NAMED_ALLOCS + r'''
import sys
deep = "/x/" + "/".join("workspace_component_%02d" % i for i in range(12))
mk("step", deep + "/a.py")(1 << 20)
mk("step", deep + "/b.py")(2 << 20)
print("ready", flush=True)
sys.stdin.read()
'''


@test
def metrics_and_top_keep_long_sites_apart_and_their_lines():
    """Two call sites of one function name in two files of a 300-byte
    folder: the live view (metrics, top) names each by its start and its
    end, "step /x/workspace_...workspace_component_11/a.py:3", two series.
    Names were cut at 159 bytes from the end: file and line gone, the two
    sites one series of their sum (from an outside check)."""
    rundir, p = sites_script(LONG_PATH_SITES)
    try:
        eq(p.stdout.readline(), "ready\n", "the program holds its memory")
        pattern = r'^vramtrace_site_live_bytes{.*site="(step /x/workspace_component_00/[^"]*)"} (\d+)$'
        def both():
            rows = re.findall(pattern, metrics(rundir), re.M)
            return rows if len(rows) == 2 else None
        rows = sorted(wait_for("the two sites' series", both), key=lambda r: r[0])
        eq([(r[0].endswith("/workspace_component_11/" + f), int(r[1])) for r, f in zip(rows, ("a.py:3", "b.py:3"))],
           [(True, 1 << 20), (True, 2 << 20)], f"each site its own series, named by its end: {rows}")
        ok(all("..." in r[0] and len(r[0].encode()) <= 159 for r in rows), f"cut in the middle: {rows}")
        text = top_once(rundir).stdout
        ok(any(l.rstrip().endswith("/workspace_component_11/a.py:3") for l in text.splitlines()) and
           any(l.rstrip().endswith("/workspace_component_11/b.py:3") for l in text.splitlines()), text)
    finally:
        p.stdin.close()
        p.wait(timeout=60)


@test
def metrics_listen_refuses_a_port_out_of_range():
    """--listen takes a port from 1 to 65535: a bigger one (which the
    resolver took modulo 65536: 70000 listened on 4464), 0, a service's
    name or no port at all is refused with status 2 (as every bad flag
    value is) and one line."""
    rundir = tempdir("vt-rundir-")
    for spec in ("127.0.0.1:70000", "99999", "65536", "0", "http", "127.0.0.1:", "-1", "1e3", "[]:9191"):
        p = subprocess.run([CLI, "metrics", "--listen", spec], env=live_env(rundir), capture_output=True, text=True,
                           timeout=30)
        eq((p.returncode, p.stdout, p.stderr),
           (2, "", f"vramtrace metrics: --listen takes [HOST:]PORT with a PORT of 1 to 65535, not '{spec}'\n"),
           f"--listen {spec}")


@test
def metrics_and_top_missing_values_said_so():
    """A flag whose value is missing says so (it read as an unknown
    argument), and `metrics --textfile ''` is refused (it wrote
    /vramtrace.prom, the root folder's)."""
    rundir = tempdir("vt-rundir-")
    for cmd, flag in (("metrics", "--textfile"), ("metrics", "--listen"), ("metrics", "--top"),
                      ("metrics", "--interval"), ("top", "--interval"), ("top", "--sort")):
        p = subprocess.run([CLI, cmd, flag], env=live_env(rundir), capture_output=True, text=True, timeout=30)
        eq((p.returncode, p.stdout, p.stderr), (2, "", f"vramtrace {cmd}: {flag} needs a value (see vramtrace {cmd} "
                                                      f"--help)\n"), f"{cmd} {flag}")
    cwd = tempdir("vt-textfile-")
    p = subprocess.run([CLI, "metrics", "--textfile", "", "--once"], env=live_env(rundir), capture_output=True,
                       text=True, timeout=30, cwd=cwd)
    eq((p.returncode, p.stdout, p.stderr), (2, "", "vramtrace metrics: --textfile takes a folder, not ''\n"),
       "--textfile ''")
    eq(os.listdir(cwd), [], "nothing written here")
    # vramtrace --help names every flag of metrics (it left out three).
    usage = subprocess.run([CLI, "--help"], capture_output=True, text=True).stdout
    for flag in re.findall(r"(--[a-z]+)", subprocess.run([CLI, "metrics", "--help"], capture_output=True,
                                                          text=True).stdout.split("\n\n")[0]):
        ok(flag in usage.split("vramtrace metrics", 1)[1].split("vramtrace --help")[0], f"--help's metrics names {flag}")


def http_request(port, data, timeout=10):
    """The whole answer to the raw request bytes `data`."""
    import socket
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        out = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return out
            out += chunk


@test
def metrics_listen_serves_each_connection_on_its_own():
    """Connections that send nothing, or a header line now and then, do not
    hold other scrapes (the server read one request at a time: four idle
    connections delayed a scrape 20 s, a slow one for as long as it liked);
    a request ended by a bare LF blank line is answered; HEAD gets GET's
    head without a body, POST 405 with Allow; an Accept that gives OpenMetrics q=0 gets the text format.
    A request that begins with a NUL gets 400 at once (the head was read
    as a C string: nothing answered for 5 s), a head of 100 KB 431 read
    whole (it was answered 200 and reset, the answer lost to a client
    whose rest was unread), the absolute form of the target 200; the 65th
    connection while 64 are open reads its 503 whole."""
    import socket
    rundir, t = published(8388608)
    port = free_port()
    server = subprocess.Popen([CLI, "metrics", "--listen", f"127.0.0.1:{port}"], env=live_env(rundir),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        def listening():
            try:
                return http_request(port, b"GET /metrics HTTP/1.1\r\n\r\n", timeout=2).startswith(b"HTTP/1.1 200")
            except OSError:
                return None
        wait_for("the listener", listening)
        idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(4)]
        slow = socket.create_connection(("127.0.0.1", port))
        slow.sendall(b"GET /metrics HTTP/1.1\r\n")
        for i in range(3):
            slow.sendall(b"X-a: b\r\n")
            answer = http_request(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", timeout=4)
            head, body = answer.split(b"\r\n\r\n", 1)
            eq(head.split(b"\r\n")[0], b"HTTP/1.1 200 OK", f"scrape {i} beside 4 idle and 1 slow connection")
            ok(f"vramtrace_live_bytes{{".encode() in body and b"} 8388608\n" in body, body[-500:])
        for s in idle + [slow]:
            s.close()
        answer = http_request(port, b"GET /metrics HTTP/1.0\n\n")
        eq(answer.split(b"\r\n")[0], b"HTTP/1.1 200 OK", "a head ended by LF LF")
        answer = http_request(port, b"HEAD /metrics HTTP/1.1\r\n\r\n")
        head, rest = answer.split(b"\r\n\r\n", 1)
        head = head.split(b"\r\n")
        length = int(next(h for h in head if h.startswith(b"Content-Length: ")).split()[1])
        get = http_request(port, b"GET /metrics HTTP/1.1\r\n\r\n").split(b"\r\n\r\n", 1)[1]
        eq((head[0], rest, length), (b"HTTP/1.1 200 OK", b"", len(get)), "HEAD: GET's head, no body")
        answer = http_request(port, b"POST /metrics HTTP/1.1\r\n\r\n")
        head = answer.split(b"\r\n\r\n", 1)[0].split(b"\r\n")
        eq((head[0], b"Allow: GET, HEAD" in head), (b"HTTP/1.1 405 Method Not Allowed", True), "POST")
        for accept, om in ((b"application/openmetrics-text;q=0, text/plain", False),
                           (b"application/openmetrics-text; version=1.0.0; q=0.5, text/plain;q=0.1", True),
                           (b"text/plain, application/openmetrics-text", True), (b"text/plain", False),
                           # q-values weigh (the text format preferred was answered in OpenMetrics; from an
                           # outside check), as Prometheus's own header asks
                           (b"text/plain;version=0.0.4;q=0.5,application/openmetrics-text;version=1.0.0;q=0.1", False),
                           (b"application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;"
                            b"version=0.0.1;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2", True),
                           (b"*/*;q=0.9, application/openmetrics-text;q=0.2", False)):
            answer = http_request(port, b"GET /metrics HTTP/1.1\r\nAccept: " + accept + b"\r\n\r\n")
            eq(b"Content-Type: application/openmetrics-text" in answer.split(b"\r\n\r\n", 1)[0], om,
               f"Accept: {accept!r}")
        first = lambda answer: answer.split(b"\r\n")[0]
        for request, want in ((b"\x00GET /metrics HTTP/1.1\r\n\r\n", b"HTTP/1.1 400 Bad Request"),
                              (b"GET /metrics HTTP/1.1\r\nX: \x00\r\n\r\n", b"HTTP/1.1 400 Bad Request"),
                              (b"GET /metrics\r\n\r\n", b"HTTP/1.1 400 Bad Request"),
                              (b"GET /metrics HTTP/1.1\r\nX: " + b"a" * 100000 + b"\r\n\r\n",
                               b"HTTP/1.1 431 Request Header Fields Too Large"),
                              (f"GET http://127.0.0.1:{port}/metrics HTTP/1.1\r\n\r\n".encode(), b"HTTP/1.1 200 OK"),
                              (f"GET http://127.0.0.1:{port}/metricsX HTTP/1.1\r\n\r\n".encode(),
                               b"HTTP/1.1 404 Not Found")):
            t0 = time.monotonic()
            answer = http_request(port, request)
            eq((first(answer), time.monotonic() - t0 < 3), (want, True), f"{request[:40]!r}: answered at once")
            if want != b"HTTP/1.1 200 OK":
                eq(answer.split(b"\r\n\r\n", 1)[1], want[9:] + b"\n", f"{request[:40]!r}: its body, whole")
        idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(64)]
        try:
            def busy():
                answer = http_request(port, b"GET /metrics HTTP/1.1\r\n" + b"X-a: b\r\n" * 500 + b"\r\n")
                return answer if first(answer) != b"HTTP/1.1 200 OK" else None
            eq(wait_for("the 65th connection's 503", busy),
               b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
               "the 65th connection")
        finally:
            for s in idle:
                s.close()
        wait_for("a scrape after the 64 closed",
                 lambda: first(http_request(port, b"GET /metrics HTTP/1.1\r\n\r\n")) == b"HTTP/1.1 200 OK" or None)
    finally:
        server.terminate()
        server.wait(timeout=30)
        eq(t.quit(), (0, ""), "the traced program")


@test
def metrics_scraped_by_prometheus():
    """A Prometheus server started on loopback scrapes vramtrace metrics
    --listen while a traced program holds 96 MiB: the HTTP API answers a
    PromQL query with the exact live bytes and the program's pid."""
    rundir, t = published(100663296)
    work = tempdir("vt-prom-")
    mport, pport = free_port(), free_port()
    exporter = subprocess.Popen([CLI, "metrics", "--listen", f"127.0.0.1:{mport}"], env=live_env(rundir),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with open(os.path.join(work, "prometheus.yml"), "w") as f:
        f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n"
                f"  - job_name: vramtrace\n    static_configs:\n      - targets: ['127.0.0.1:{mport}']\n")
    prom = subprocess.Popen(["prometheus", f"--config.file={work}/prometheus.yml",
                             f"--storage.tsdb.path={work}/data", f"--web.listen-address=127.0.0.1:{pport}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    import json
    import urllib.parse
    import urllib.request

    def query():
        q = urllib.parse.quote(f'vramtrace_live_bytes{{pid="{t.pid}"}}')
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{pport}/api/v1/query?query={q}", timeout=5) as r:
                res = json.load(r)["data"]["result"]
        except OSError:
            return None
        return [(x["metric"]["pid"], x["metric"]["UUID"], x["value"][1]) for x in res] or None

    try:
        start = time.monotonic()
        got = wait_for("Prometheus answers", query, timeout=60)
        eq(got, [(str(t.pid), "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f", "100663296")], "PromQL result")
        print(f"  (Prometheus answered {time.monotonic() - start:.1f} s after it started)")
    finally:
        prom.terminate()
        prom.wait(timeout=60)
        exporter.terminate()
        eq(exporter.wait(timeout=60), 0, "the exporter stops on SIGTERM")
    eq(t.quit(), (0, ""), "exit")


FORECAST = re.compile(r"^vramtrace: forecast: at \+([\d.]+) (MiB|GiB) a minute, device 0 is full \(1\.00 GiB, "
                      r"VRAMTRACE_LIMIT\) in (\d+) seconds; it grows at (.*)$")


@test
def forecast_leak_warns_steady_and_loading_do_not():
    """Three programs at once on a 1 GiB budget with a 30 s horizon (1 s
    windows): one keeps 8 MiB every 100 ms (a leak: one warning line, at
    about 4800 MiB a minute, naming its call site, shown by top, the metrics
    and the exit dump); one allocates and frees 64 MiB in a loop over 100
    MiB it keeps (steady: no warning, no growth); one loads 500 MiB in a
    second, then loops steadily (a loading phase: no warning)."""
    rundir = tempdir("vt-rundir-")
    env = {"VRAMTRACE_FORECAST": "30", "VRAMTRACE_LIMIT": "1G"}
    leak, steady, loading = Live(rundir, env), Live(rundir, env), Live(rundir, env)
    steady.say("a 104857600")
    for t, cmd in ((leak, "leak 85 8388608 100"), (steady, "loop 400 67108864 20"),
                   (loading, "leak 20 26214400 50")):
        t.send(cmd)
    eq(loading.p.stdout.readline(), "ok\n", "loading done")
    loading.send("loop 400 67108864 20")
    frame = wait_for("the leak's forecast on top", lambda: (lambda out: out if re.search(
        rf"^ *{leak.pid} +0 +0 .* +\d+ s  ", out, re.M) else None)(top_once(rundir).stdout), timeout=30)
    m = series(metrics(rundir), "vramtrace_forecast_full_seconds")
    eq([k.split(",")[0] for k in m], [f'pid="{leak.pid}"'], "only the leak has a forecast in the metrics")
    growth = {k.split(",")[0]: float(v) for k, v in series(metrics(rundir), "vramtrace_growth_bytes_per_second").items()}
    eq(growth[f'pid="{steady.pid}"'], 0.0, "the steady loop does not grow")
    for t in (leak, steady, loading):
        eq(t.p.stdout.readline(), "ok\n", "the program's loop ends")
    dumps = {}
    for t in (leak, steady, loading):
        rc, err = t.quit()
        eq(rc, 0, "status")
        with open(os.path.join(t.work, f"dump.{t.pid}.json")) as f:
            dumps[t] = (err, json.load(f))
    err, d = dumps[leak]
    lines = err.splitlines()
    eq(len(lines), 1, f"one warning line: {err!r}")
    m = FORECAST.match(lines[0])
    ok(m, f"the forecast's line: {lines[0]!r}")
    rate = float(m.group(1)) * (1024 if m.group(2) == "GiB" else 1)
    ok(4000 <= rate <= 5600, f"about 4800 MiB a minute: {rate}")
    line = source_line("t_live.c", "cudaMalloc(&p, bytes) == cudaSuccess")
    ok(0 < int(m.group(3)) < 30, f"full within the horizon: {m.group(3)} s")
    eq(m.group(4), f"keep tests/progs/t_live.c:{line}", "the growing call site")
    ok(d.get("forecast", "").startswith("at +") and d["forecast"].endswith(f"t_live.c:{line}"), "in the dump")
    rep = subprocess.run([CLI, "report", os.path.join(leak.work, f"dump.{leak.pid}.json")], capture_output=True,
                         text=True, timeout=60)
    eq([x for x in rep.stdout.splitlines() if x.startswith("forecast")], ["forecast: " + d["forecast"]],
       "vramtrace report's forecast line")
    for t in (steady, loading):
        eq(dumps[t][0], "", "no warning")
        ok("forecast" not in dumps[t][1], "no forecast in the dump")


@test
def forecast_line_goes_to_the_report_file():
    """With the reports sent to a file (VRAMTRACE_REPORT=FILE), the
    forecast's line is added to that file, once, and stderr stays the
    program's (before: it went nowhere)."""
    rundir = tempdir("vt-rundir-")
    report = os.path.join(rundir, "report.txt")
    leak = Live(rundir, {"VRAMTRACE_FORECAST": "30", "VRAMTRACE_LIMIT": "1G", "VRAMTRACE_REPORT": report})
    leak.send("leak 85 8388608 100")
    eq(leak.p.stdout.readline(), "ok\n", "the program's loop ends")
    rc, err = leak.quit()
    eq((rc, err), (0, ""), "status, and nothing on stderr")
    with open(report) as f:
        lines = f.read().splitlines()
    fc = [l for l in lines if l.startswith("vramtrace: forecast:")]
    eq(len(fc), 1, f"one forecast line in the report file: {lines[:5]}")
    ok(FORECAST.match(fc[0]), f"the forecast's line: {fc[0]!r}")
    eq(lines.index(fc[0]) < next(i for i, l in enumerate(lines) if l.startswith("vramtrace: exit in pid")), True,
       "before the exit summary")


@test
def forecast_names_a_site_of_the_device_it_forecasts():
    """Five call sites hold 100 MiB each on device 0, then another keeps 8
    MiB a step on device 1: device 1's forecast names the site that grows
    there (it named device 0's sites, whose 100 MiB each had "risen" more
    since the first window)."""
    rundir = tempdir("vt-rundir-")
    t = Live(rundir, {"VRAMTRACE_FORECAST": "30", "VRAMTRACE_LIMIT": "1G", "SIMGPU_DEVICES": "2"})
    t.say("sites 104857600")
    t.say("dev 1")
    t.say("steps 20 8388608 50")
    wait_for("the 20 steps published",
             lambda: list(series(metrics(rundir), "vramtrace_steps_total").values()) == ["20"] or None)
    rc, err = t.quit()
    eq(rc, 0, "status")
    site = f"keep tests/progs/t_live.c:{source_line('t_live.c', 'cudaMalloc(&p, bytes) == cudaSuccess')}"
    ok(re.fullmatch(r"vramtrace: forecast: at \+8\.00 MiB per step, device 1 is full \(1\.00 GiB, VRAMTRACE_LIMIT\) "
                    rf"in \d+ steps; it grows at {re.escape(site)}\n", err), f"one warning line: {err!r}")


@test
def forecast_per_step_where_the_program_has_steps():
    """Two programs that mark steps (vramtrace_step) on a 1 GiB budget: one
    keeps 8 MiB a step for 20 steps (growth +8 MiB a step; full in 108 steps
    at its last, in top, the metrics and, exact, the dump; one warning line
    per step), one allocates 64 MiB, steps and frees it again over 100 MiB it
    keeps (its steps end where they began: no growth, no forecast)."""
    rundir = tempdir("vt-rundir-")
    env = {"VRAMTRACE_FORECAST": "30", "VRAMTRACE_LIMIT": "1G"}
    leak, steady = Live(rundir, env), Live(rundir, env)
    steady.say("a 104857600")
    leak.say("steps 20 8388608 50")
    steady.say("steady 20 67108864 50")
    text = wait_for("both programs' 20 steps published", lambda: (lambda t: t if sorted(
        series(t, "vramtrace_steps_total").values()) == ["20", "20"] else None)(metrics(rundir)))
    host = os.uname().nodename
    uuid = "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f"
    dl, ds = (f'pid="{t.pid}",rank="0",host="{host}",command="{T_LIVE}",gpu="0",UUID="{uuid}"' for t in (leak, steady))
    pl, ps = (f'pid="{t.pid}",rank="0",host="{host}",command="{T_LIVE}"' for t in (leak, steady))
    eq(series(text, "vramtrace_forecast_full_steps"), {dl: "108"}, "only the leak is full, in 108 steps")
    eq(series(text, "vramtrace_growth_bytes_per_step"), {dl: "8388608", ds: "0"}, "growth a step")
    eq(series(text, "vramtrace_steps_total"), {pl: "20", ps: "20"}, "the steps")
    rows = process_rows(top_once(rundir, "--bytes").stdout)
    eq((rows[leak.pid][6:9], rows[steady.pid][6:8]), (["+8388608/step", "108", "steps"], ["0", "-"]),
       "top's growth and forecast")
    (rc, err), (src, serr) = leak.quit(), steady.quit()
    eq((rc, src, serr), (0, 0, ""), "both exit; the steady one says nothing")
    site = f"keep tests/progs/t_live.c:{source_line('t_live.c', 'cudaMalloc(&p, bytes) == cudaSuccess')}"
    ok(re.fullmatch(r"vramtrace: forecast: at \+8\.00 MiB per step, device 0 is full \(1\.00 GiB, VRAMTRACE_LIMIT\) "
                    rf"in \d+ steps; it grows at {re.escape(site)}\n", err), f"one warning line: {err!r}")
    with open(os.path.join(leak.work, f"dump.{leak.pid}.json")) as f:
        d = json.load(f)
    eq(d.get("forecast"), f"at +8.00 MiB per step, device 0 is full (1.00 GiB, VRAMTRACE_LIMIT) in 108 steps; "
                          f"it grows at {site}", "the dump's forecast")
    with open(os.path.join(steady.work, f"dump.{steady.pid}.json")) as f:
        ok("forecast" not in json.load(f), "no forecast for the steady one")


@test
def top_sorts_processes_with_steps_by_growth():
    """top --sort growth over four programs that mark steps, started in
    this order: +2, +32 and +4 MiB a step and a steady one. Growth a step
    and growth a minute are not one measure: the sort is by the time to
    full (the soonest first; both forecasts have one), then by growth as
    the GROWTH column shows it. It sorted on growth a minute alone, 0 for
    every process with steps (every PyTorch job): pid order."""
    rundir = tempdir("vt-rundir-")
    env = {"VRAMTRACE_FORECAST": "300", "VRAMTRACE_LIMIT": "1G"}
    procs = [Live(rundir, env) for _ in range(4)]
    for t, cmd in zip(procs, ("steps 20 2097152 50", "steps 20 33554432 50", "steps 20 4194304 50",
                              "steady 20 8388608 50")):
        t.send(cmd)
    for t in procs:
        eq(t.p.stdout.readline(), "ok\n", "the steps done")
    wait_for("the 20 steps published", lambda: sorted(series(metrics(rundir), "vramtrace_steps_total").values())
             == ["20"] * 4)
    out = top_once(rundir, "--bytes", "--sort", "growth").stdout
    rows = process_rows(out)
    eq([(pid, rows[pid][6:9]) for pid in rows],
       [(procs[1].pid, ["+33554432/step", "12", "steps"]), (procs[2].pid, ["+4194304/step", "236", "steps"]),
        (procs[0].pid, ["+2097152/step", "492", "steps"]), (procs[3].pid, ["0", "-", T_LIVE])],
       "the soonest full first\n" + out)
    ok(out.startswith("vramtrace top - ") and " - sort: growth\n" in out, "the header says the sort")
    for t in procs:
        eq(t.quit()[0], 0, "exit")


def freezer_cgroup():
    """A cgroup v1 freezer of this test's own (a folder under the freezer's
    mount), or None where none can be made (not root, no v1 freezer)."""
    root = "/sys/fs/cgroup/freezer"
    try:
        path = os.path.join(root, f"vt-live-{os.getpid()}")
        os.mkdir(path)
        return path
    except OSError:
        return None


@test
def top_and_metrics_show_a_stopped_process_as_stopped():
    """A process stopped (SIGSTOP, a debugger, Slurm's suspend; a frozen
    cgroup, as docker pause makes) publishes nothing: top and the metrics
    kept its growth and time to full, "+8.00 MiB/step 108 steps" or "full in
    19 s" for as long as it was stopped, and an alert on them kept firing.
    Now top's GROWTH reads "stopped" and FULL IN "-", the metrics say
    vramtrace_stopped 1 with growth 0 and no forecast series, until it runs
    again."""
    rundir = tempdir("vt-rundir-")
    t = Live(rundir, {"VRAMTRACE_FORECAST": "30", "VRAMTRACE_LIMIT": "1G"})
    t.say("steps 20 8388608 50")
    host = os.uname().nodename
    uuid = "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f"
    dl = f'pid="{t.pid}",rank="0",host="{host}",command="{T_LIVE}",gpu="0",UUID="{uuid}"'
    pl = f'pid="{t.pid}",rank="0",host="{host}",command="{T_LIVE}"'
    wait_for("the 20 steps published", lambda: series(metrics(rundir), "vramtrace_steps_total") == {pl: "20"})

    def check(stopped, how):
        text = metrics(rundir)
        want = ({"stopped": "1", "step": "0", "full": {}} if stopped else
                {"stopped": "0", "step": "8388608", "full": {dl: "108"}})
        eq((series(text, "vramtrace_stopped"), series(text, "vramtrace_growth_bytes_per_step"),
            series(text, "vramtrace_growth_bytes_per_second"), series(text, "vramtrace_forecast_full_steps")),
           ({pl: want["stopped"]}, {dl: want["step"]}, {dl: "0"}, want["full"]), f"{how}: the metrics")
        out = top_once(rundir, "--bytes").stdout
        eq(process_rows(out)[t.pid][3:9], ["167772160", "167772160", "-"] +
           (["stopped", "-", T_LIVE] if stopped else ["+8388608/step", "108", "steps"]), f"{how}: top's row")
        eq(len(re.findall(rf"^call sites of pid {t.pid} \({re.escape(T_LIVE)}\){', stopped' if stopped else ''}: ",
                          out, re.M)), 1, f"{how}: top's call sites' line\n{out}")

    check(False, "running")
    os.kill(t.pid, signal.SIGSTOP)
    wait_for("stopped", lambda: open(f"/proc/{t.pid}/stat").read().rsplit(")", 1)[1].split()[0] == "T")
    check(True, "SIGSTOP")
    os.kill(t.pid, signal.SIGCONT)
    wait_for("running again", lambda: open(f"/proc/{t.pid}/stat").read().rsplit(")", 1)[1].split()[0] != "T")
    check(False, "SIGCONT")
    cg = freezer_cgroup()
    if cg:
        try:
            with open(os.path.join(cg, "tasks"), "w") as f:
                f.write(str(t.pid))
            with open(os.path.join(cg, "freezer.state"), "w") as f:
                f.write("FROZEN")
            wait_for("frozen", lambda: open(os.path.join(cg, "freezer.state")).read().strip() == "FROZEN")
            check(True, "a frozen cgroup")
            with open(os.path.join(cg, "freezer.state"), "w") as f:
                f.write("THAWED")
            check(False, "thawed")
        finally:
            with open(os.path.join(cg, "freezer.state"), "w") as f:
                f.write("THAWED")
            with open(os.path.join(os.path.dirname(cg), "tasks"), "w") as f:
                f.write(str(t.pid))
            os.rmdir(cg)
    else:
        print("(no cgroup v1 freezer of its own can be made here: the frozen cgroup is not checked)")
    rc, err = t.quit()
    eq(rc, 0, "exit")


@test
def forecast_per_step_names_the_site_that_grows_not_a_model_loaded_before():
    """Five call sites load 200 MiB each before the first step, then 8 MiB
    is kept a step for 20 steps: the per-step forecast named the largest
    loaded site ("it grows at site1"), its rise since no window (a run of a
    few seconds closes none) being its whole size (an outside check); it
    names the site that rose over the steps' stretch."""
    rundir = tempdir("vt-rundir-")
    t = Live(rundir, {"VRAMTRACE_FORECAST": "30", "VRAMTRACE_LIMIT": "2G"})
    t.say("sites 209715200")
    t.say("steps 20 8388608 50")
    wait_for("the 20 steps published",
             lambda: list(series(metrics(rundir), "vramtrace_steps_total").values()) == ["20"] or None)
    rc, err = t.quit()  # the 1 GiB device, less than the limit, is what fills
    eq(rc, 0, "status")
    site = f"keep tests/progs/t_live.c:{source_line('t_live.c', 'cudaMalloc(&p, bytes) == cudaSuccess')}"
    ok(re.fullmatch(r"vramtrace: forecast: at \+8\.00 MiB per step, device 0 is full \(1\.00 GiB\) "
                    rf"in \d+ steps; it grows at {re.escape(site)}\n", err), f"one warning line: {err!r}")
    with open(os.path.join(t.work, f"dump.{t.pid}.json")) as f:
        ok(json.load(f)["forecast"].endswith(f"; it grows at {site}"), "the dump's forecast")


# A round of the publisher sees the parameter alone (step 0); then, within
# the first step, a 512 MiB buffer made once (as cuBLAS makes its
# workspace at the first forward), and 16 MiB kept at each of 20 steps,
# the first 10 at once, the rest 100 ms apart.
TORCH_LOAD_IN_FIRST_STEP = """
import time, torch
p = torch.nn.Parameter(torch.zeros(256, device="cuda"))
opt = torch.optim.SGD([p], lr=0.1)
keep = []
time.sleep(0.6)
once = torch.empty(128 << 20, device="cuda")  # made once
for i in range(20):
    keep.append(torch.empty(4 << 20, device="cuda"))  # kept
    opt.step()
    if i >= 9:
        time.sleep(0.1)
time.sleep(0.6)
"""


@torch_test
def forecast_per_step_names_what_grows_not_a_buffer_of_the_first_step():
    """PyTorch keeping 16 MiB a step after a 512 MiB buffer made once in
    its first step: the warning on stderr and the dump's forecast named
    the buffer's line ("it grows at <module> fc.py:7"), which the
    publisher's round before the first step did not have and which rose
    more than the leak by the next round (an outside check, where a 32 MiB
    cuBLAS workspace of the first forward was named for a leak of 1 MiB a
    step); both name the line that keeps 16 MiB a step, the dump's line
    exact (full in 76 steps under a 2 GiB limit)."""
    work = tempdir("vt-torchfc-")
    script = os.path.join(work, "fc.py")
    with open(script, "w") as f:
        f.write(TORCH_LOAD_IN_FIRST_STEP)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("VRAMTRACE_", "SIMGPU_")) and k not in ("LD_PRELOAD", "LD_LIBRARY_PATH", "PYTHONPATH")}
    env.update(XDG_RUNTIME_DIR=tempdir("vt-rundir-"), SIMGPU_CAPACITY="8G", VRAMTRACE_LIMIT="2G",
               VRAMTRACE_FORECAST="30")
    p = subprocess.run([os.path.join(ROOT, "tests", "simgpu", "run"), "--torch", "--", CLI, "run", "--out",
                        os.path.join(work, "d.%p.json"), "--", TORCH_PY, script], env=env, cwd=work,
                       capture_output=True, text=True, timeout=120)
    eq(p.returncode, 0, f"status: {p.stderr[-2000:]}")
    line = 1 + TORCH_LOAD_IN_FIRST_STEP.splitlines().index(
        '    keep.append(torch.empty(4 << 20, device="cuda"))  # kept')
    site = f"<module> {script}:{line}"
    warned = [x for x in p.stderr.splitlines() if x.startswith("vramtrace: forecast:")]
    eq(len(warned), 1, f"one forecast line: {p.stderr[-2000:]!r}")
    ok(re.fullmatch(r"vramtrace: forecast: at \+16\.00 MiB per step, device 0 is full \(2\.00 GiB, VRAMTRACE_LIMIT\) "
                    rf"in \d+ steps; it grows at {re.escape(site)}", warned[0]), f"the warning: {warned[0]!r}")
    (dump,) = glob.glob(os.path.join(work, "d.*.json"))
    with open(dump) as f:
        eq(json.load(f).get("forecast"), "at +16.00 MiB per step, device 0 is full (2.00 GiB, VRAMTRACE_LIMIT) in 76 "
           f"steps; it grows at {site}", "the dump's forecast, the same site")


@test
def forecast_per_step_names_the_site_that_rose_most_not_most_often():
    """Ten steps of 400 ms, each keeping 64 MiB at site1 at its start and
    1 MiB at fanned0 four times over it, then 1 MiB more at fanned0 after
    the last step: the forecast named fanned0 (4 MiB a step), which rose at
    one more of the publisher's rounds than site1 (64 MiB a step) did, in
    the dump's last forecast (an outside check: the dump and `vramtrace
    report` blamed the 8 MiB-a-step site for a 264 MiB-a-step growth, the
    stderr line the other); it names site1 in the line and the dump."""
    rundir = tempdir("vt-rundir-")
    t = Live(rundir, {"VRAMTRACE_FORECAST": "30"})
    t.say(f"mixed 10 {64 << 20} 4 {1 << 20} 100")
    t.say(f"fan 1 {1 << 20} 0")  # fanned0 once more: rounds of this step count see it rise, site1 not
    time.sleep(1.2)
    rc, err = t.quit()
    eq(rc, 0, "status")
    site = f"site1 tests/progs/t_live.c:{source_line('t_live.c', 'SITE(1)')}"
    ok(re.fullmatch(r"vramtrace: forecast: at \+68\.00 MiB per step, device 0 is full \(1\.00 GiB[^)]*\) "
                    rf"in \d+ steps; it grows at {re.escape(site)}\n", err), f"one warning line: {err!r}")
    with open(os.path.join(t.work, f"dump.{t.pid}.json")) as f:
        line = json.load(f)["forecast"]
    ok(re.fullmatch(r"at \+68\.00 MiB per step, device 0 is full \(1\.00 GiB[^)]*\) in \d+ steps; "
                    rf"it grows at {re.escape(site)}", line), f"the dump's forecast: {line!r}")


@test
def forecast_counts_what_is_held_outside_the_tracked_allocations():
    """A 1 GiB device whose CUDA context holds 512 MiB, 8 MiB kept a step
    for 20 steps: the forecast said full in 108 steps, as if the context
    held nothing, while the device had room for 44 (an outside check: "full
    in 16 steps" one step before the failure). Measured at the device's
    first allocation: the line says what it leaves out, the metric and the
    dump have 44."""
    rundir = tempdir("vt-rundir-")
    t = Live(rundir, {"VRAMTRACE_FORECAST": "30", "SIMGPU_CAPACITY": "1G", "SIMGPU_CONTEXT": "512M"})
    t.say("steps 20 8388608 50")
    text = wait_for("the 20 steps published", lambda: (lambda x: x if list(
        series(x, "vramtrace_steps_total").values()) == ["20"] else None)(metrics(rundir)))
    eq(list(series(text, "vramtrace_forecast_full_steps").values()), ["44"], "full in")
    rc, err = t.quit()
    eq(rc, 0, "status")
    site = f"keep tests/progs/t_live.c:{source_line('t_live.c', 'cudaMalloc(&p, bytes) == cudaSuccess')}"
    ok(re.fullmatch(r"vramtrace: forecast: at \+8\.00 MiB per step, device 0 is full \(1\.00 GiB, 512\.00 MiB of it "
                    rf"held outside the tracked allocations\) in \d+ steps; it grows at {re.escape(site)}\n", err),
       f"one warning line: {err!r}")
    with open(os.path.join(t.work, f"dump.{t.pid}.json")) as f:
        eq(json.load(f)["forecast"], "at +8.00 MiB per step, device 0 is full (1.00 GiB, 512.00 MiB of it held outside "
           f"the tracked allocations) in 44 steps; it grows at {site}", "the dump's forecast")

@test
def forecast_fills_the_device_first_under_a_larger_limit():
    """The device of forecast_counts_what_is_held_outside_the_tracked_allocations
    (1 GiB, 512 MiB held by its context) under a 900 MiB VRAMTRACE_LIMIT: the
    forecast counted to the limit, full in 93 steps, while the device fills
    in 44 (an outside check: "full in 17 steps", the device's OOM 14 steps
    on); it counts to the lower, the device's room, and says so."""
    rundir = tempdir("vt-rundir-")
    t = Live(rundir, {"VRAMTRACE_FORECAST": "30", "SIMGPU_CAPACITY": "1G", "SIMGPU_CONTEXT": "512M",
                      "VRAMTRACE_LIMIT": "900M"})
    t.say("steps 20 8388608 50")
    text = wait_for("the 20 steps published", lambda: (lambda x: x if list(
        series(x, "vramtrace_steps_total").values()) == ["20"] else None)(metrics(rundir)))
    eq(list(series(text, "vramtrace_forecast_full_steps").values()), ["44"], "full in")
    eq(list(series(text, "vramtrace_capacity_bytes").values()), [str(1 << 30)], "the capacity")
    rc, err = t.quit()
    eq(rc, 0, "status")
    site = f"keep tests/progs/t_live.c:{source_line('t_live.c', 'cudaMalloc(&p, bytes) == cudaSuccess')}"
    with open(os.path.join(t.work, f"dump.{t.pid}.json")) as f:
        eq(json.load(f)["forecast"], "at +8.00 MiB per step, device 0 is full (1.00 GiB, 512.00 MiB of it held outside "
           f"the tracked allocations) in 44 steps; it grows at {site}", "the dump's forecast")
    ok(re.fullmatch(r"vramtrace: forecast: at \+8\.00 MiB per step, device 0 is full \(1\.00 GiB, 512\.00 MiB of it "
                    rf"held outside the tracked allocations\) in \d+ steps; it grows at {re.escape(site)}\n", err),
       f"one warning line: {err!r}")


@test
def forecast_line_says_which_rank_in_a_job():
    """Rank 2 of a job of 4 (WORLD_SIZE, RANK) keeps 8 MiB a step: the
    forecast line, in a log the ranks share, did not say whose it was (an
    outside check: four bare lines, "in 6151 steps" of which rank?); it
    names the process as the post-mortem's first line does. The dump's
    forecast, in a dump of its own process, is as before."""
    rundir = tempdir("vt-rundir-")
    t = Live(rundir, {"VRAMTRACE_FORECAST": "30", "VRAMTRACE_LIMIT": "1G", "WORLD_SIZE": "4", "RANK": "2"})
    t.say("steps 20 8388608 50")
    rc, err = t.quit()
    eq(rc, 0, "status")
    site = f"keep tests/progs/t_live.c:{source_line('t_live.c', 'cudaMalloc(&p, bytes) == cudaSuccess')}"
    ok(re.fullmatch(rf"vramtrace: forecast: pid {t.pid}, rank 2 of 4 on {re.escape(os.uname().nodename)}: "
                    r"at \+8\.00 MiB per step, device 0 is full \(1\.00 GiB, VRAMTRACE_LIMIT\) "
                    rf"in \d+ steps; it grows at {re.escape(site)}\n", err), f"one warning line: {err!r}")
    with open(os.path.join(t.work, f"dump.{t.pid}.json")) as f:
        ok(json.load(f)["forecast"].startswith("at +8.00 MiB per step, device 0 is full (1.00 GiB, VRAMTRACE_LIMIT)"),
           "the dump's forecast")


@test
def forecast_per_step_of_growth_at_every_few_steps():
    """A program that keeps 32 MiB at every fourth of 40 steps, as a leak a
    caching allocator absorbs into its segments rises: no rise at most
    boundaries, yet growth all along. Over the stretch in which its live
    bytes never fell, from the boundary before its first rise (36 steps,
    288 MiB): 8 MiB a step, full in 88 steps (the old rule, a rise at each of
    the last five boundaries, never saw it)."""
    rundir = tempdir("vt-rundir-")
    leak = Live(rundir, {"VRAMTRACE_FORECAST": "30", "VRAMTRACE_LIMIT": "1G"})
    leak.say("sparse 40 4 33554432 50")
    text = wait_for("its 40 steps published", lambda: (lambda t: t if list(
        series(t, "vramtrace_steps_total").values()) == ["40"] else None)(metrics(rundir)))
    eq(list(series(text, "vramtrace_growth_bytes_per_step").values()), ["8388608"], "growth a step")
    eq(list(series(text, "vramtrace_forecast_full_steps").values()), ["88"], "full in")
    rc, err = leak.quit()
    eq(rc, 0, "exit")
    with open(os.path.join(leak.work, f"dump.{leak.pid}.json")) as f:
        line = json.load(f)["forecast"]
    p = subprocess.run([CLI, "report", "--format", "json", os.path.join(leak.work, f"dump.{leak.pid}.json")],
                       capture_output=True, text=True)
    eq(json.loads(p.stdout)["processes"][0].get("forecast"), line, "the JSON report's forecast is the dump's")
    p = subprocess.run([CLI, "report", "--format", "html", os.path.join(leak.work, f"dump.{leak.pid}.json")],
                       capture_output=True, text=True)
    eq(p.stdout.count(f'<p class="forecast">forecast: {html.escape(line, quote=False)}</p>'), 1, "the page's")
    # Said once, when it first held (the rate then).
    ok(re.fullmatch(r"vramtrace: forecast: at \+\d+\.\d\d MiB per step, device 0 is full \(1\.00 GiB, VRAMTRACE_LIMIT\) "
                    r"in \d+ steps; it grows at keep tests/progs/t_live\.c:\d+\n", err), f"the warning: {err!r}")


def steps_published(rundir, n):
    """The metrics once the one traced program's n steps are published."""
    return wait_for(f"the {n} steps published", lambda: (lambda x: x if list(
        series(x, "vramtrace_steps_total").values()) == [str(n)] else None)(metrics(rundir)))


def keep_site():
    return f"keep tests/progs/t_live.c:{source_line('t_live.c', 'cudaMalloc(&p, bytes) == cudaSuccess')}"


@test
def forecast_is_the_device_that_fills_first():
    """Two 1 GiB devices: each step keeps 16 MiB on device 0 and 8 MiB on
    device 1, 20 steps. Device 0 is full in 44 steps, device 1 in 108: top's
    header, the dump and `vramtrace report` kept the last device's forecast
    (an outside check: "device 3 ... in 102 steps" where device 0 was 34
    from full); they give device 0's, as the line printed does."""
    rundir = tempdir("vt-rundir-")
    t = Live(rundir, {"VRAMTRACE_FORECAST": "30", "SIMGPU_DEVICES": "2"})
    t.say(f"dsteps 20 {16 << 20} {8 << 20} 50")
    text = steps_published(rundir, 20)
    eq(sorted(series(text, "vramtrace_forecast_full_steps").values()), ["108", "44"], "each device's own")
    want = f"at +16.00 MiB per step, device 0 is full (1.00 GiB) in 44 steps; it grows at {keep_site()}"
    header = top_once(rundir, str(t.pid)).stdout
    ok(f"forecast: {want}" in header, f"top's header: {header!r}")
    rc, err = t.quit()
    eq(rc, 0, "status")
    ok(re.fullmatch(r"vramtrace: forecast: at \+16\.00 MiB per step, device 0 is full \(1\.00 GiB\) in \d+ steps; "
                    rf"it grows at {re.escape(keep_site())}\n", err), f"one warning line: {err!r}")
    path = os.path.join(t.work, f"dump.{t.pid}.json")
    with open(path) as f:
        eq(json.load(f).get("forecast"), want, "the dump's forecast")
    rep = subprocess.run([CLI, "report", path], capture_output=True, text=True, timeout=60)
    eq([x for x in rep.stdout.splitlines() if x.startswith("forecast")], ["forecast: " + want], "the report's")


@test
def forecast_rate_is_the_growths_and_goes_when_it_stops():
    """16 MiB kept a step for 10 steps on a 1 GiB device, then steps that
    keep nothing. Two steps after the growth stopped the forecast still
    holds (its rises are recent) at +16 MiB a step, full in 54 steps: it
    said +13.09 MiB, the rises over the steps since the first boundary,
    flat ones included (an outside check: the dump kept that rate, which
    the program never had). After 20 flat steps no forecast holds: the
    dump and the report have none (they kept the last one made, "full in
    301 steps" for a job flat for 50); the line printed says +16 MiB."""
    rundir = tempdir("vt-rundir-")
    t = Live(rundir, {"VRAMTRACE_FORECAST": "30"})
    t.say(f"steps 10 {16 << 20} 50")
    t.say("flat 2 50")
    text = steps_published(rundir, 12)
    eq(list(series(text, "vramtrace_growth_bytes_per_step").values()), [str(16 << 20)], "growth a step")
    eq(list(series(text, "vramtrace_forecast_full_steps").values()), ["54"], "full in")
    t.say("flat 20 50")
    text = steps_published(rundir, 32)
    eq(list(series(text, "vramtrace_growth_bytes_per_step").values()), ["0"], "no growth after 20 flat steps")
    eq(series(text, "vramtrace_forecast_full_steps"), {}, "no forecast")
    rc, err = t.quit()
    eq(rc, 0, "status")
    ok(re.fullmatch(r"vramtrace: forecast: at \+16\.00 MiB per step, device 0 is full \(1\.00 GiB\) in \d+ steps; "
                    rf"it grows at {re.escape(keep_site())}\n", err), f"one warning line: {err!r}")
    path = os.path.join(t.work, f"dump.{t.pid}.json")
    with open(path) as f:
        ok("forecast" not in json.load(f), "no forecast in the dump")
    rep = subprocess.run([CLI, "report", path], capture_output=True, text=True, timeout=60)
    eq([x for x in rep.stdout.splitlines() if x.startswith("forecast")], [], "none in the report")


@test
def forecast_not_of_a_cycle_that_returns_to_its_floor():
    """A sawtooth on a 1 GiB device: 16 MiB kept a step, all of it freed at
    every tenth step (144 MiB at most), 27 steps. In its third cycle, 7
    rises from its floor: growth +16 MiB a step, full in 57 steps, in the
    metrics and the exit dump (an outside check: "full in 56 steps" for
    the whole run, and in an exit report with 0 B live). It rises to no
    more than it held before: no growth, no forecast. (Its first cycle
    cannot be told from a leak's start: the line printed then stays.)"""
    rundir = tempdir("vt-rundir-")
    t = Live(rundir, {"VRAMTRACE_FORECAST": "30"})
    t.say(f"saw 27 10 {16 << 20} 50")
    text = steps_published(rundir, 27)
    eq(list(series(text, "vramtrace_live_bytes").values())[:1], [str(112 << 20)], "112 MiB live")
    eq(list(series(text, "vramtrace_growth_bytes_per_step").values()), ["0"], "no growth")
    eq(series(text, "vramtrace_forecast_full_steps"), {}, "no forecast")
    rc, err = t.quit()
    eq(rc, 0, "status")
    with open(os.path.join(t.work, f"dump.{t.pid}.json")) as f:
        ok("forecast" not in json.load(f), "no forecast in the dump")


@test
def forecast_not_kept_in_a_dump_after_its_growth_fell():
    """8 MiB kept a step for 20 steps, then everything freed and one more
    step, and the exit at once: the dump kept the forecast of the round
    before ("full in 108 steps" with 0 B live). A step boundary after the
    forecast's shows the device fell: the dump has none."""
    rundir = tempdir("vt-rundir-")
    t = Live(rundir, {"VRAMTRACE_FORECAST": "30"})
    t.say(f"steps 20 {8 << 20} 50")
    text = steps_published(rundir, 20)
    eq(list(series(text, "vramtrace_forecast_full_steps").values()), ["108"], "full in")
    t.say("drop")
    rc, err = t.quit()
    eq(rc, 0, "status")
    with open(os.path.join(t.work, f"dump.{t.pid}.json")) as f:
        d = json.load(f)
    eq((d["totals"]["live_bytes"], d["steps_total"]), (0, 21), "nothing live after 21 steps")
    ok("forecast" not in d, f"no forecast in the dump: {d.get('forecast')!r}")


@test
def forecast_by_time_once_the_steps_stop():
    """20 steps that allocate 64 MiB and free it, then, without a step, 8
    MiB kept every 100 ms (an evaluation that keeps its outputs) on a 1 GiB
    device, a 30 s horizon: top and the metrics showed no growth and no
    forecast while it climbed to full (an outside check: GROWTH 0 for 15 s
    at 160 MiB a second). Once no boundary came for 5 s (3 of its step
    times, 5 s at least), growth is measured by time: a forecast a minute
    within the horizon, naming the site."""
    rundir = tempdir("vt-rundir-")
    t = Live(rundir, {"VRAMTRACE_FORECAST": "30"})
    t.say(f"steady 20 {64 << 20} 50")
    t.send(f"leak 110 {8 << 20} 100")
    text = wait_for("a forecast in seconds", lambda: (lambda x: x if series(
        x, "vramtrace_forecast_full_seconds") else None)(metrics(rundir)), timeout=20)
    eq(series(text, "vramtrace_forecast_full_steps"), {}, "none in steps")
    per_s = float(list(series(text, "vramtrace_growth_bytes_per_second").values())[0])
    ok(60 << 20 <= per_s <= 100 << 20, f"about 80 MiB a second: {per_s}")
    eq(t.p.stdout.readline(), "ok\n", "the leak ends")
    rc, err = t.quit()
    eq(rc, 0, "status")
    ok(re.fullmatch(r"vramtrace: forecast: at \+[\d.]+ GiB a minute, device 0 is full \(1\.00 GiB\) in \d+ seconds; "
                    rf"it grows at {re.escape(keep_site())}\n", err), f"one warning line: {err!r}")


@test
def report_prints_the_dumps_forecast():
    """vramtrace report prints the dump's forecast line, as the library wrote
    it (a control character made printable), after the out-of-memory
    failures; a dump without one prints no such line."""
    r = run([os.path.join(T, "t_oom")], report="off")
    eq(len(r.dumps), 1, "one dump")
    d = r.dumps[0]
    del d["_path"]
    work = tempdir("vt-forecast-")
    plain = os.path.join(work, "plain.json")
    with open(plain, "w") as f:
        json.dump(d, f)
    d["forecast"] = "at +8.00 MiB a minute, device 0 is full (64.0 MiB) in 7.5 minutes; it grows at keep t.c:9\x07"
    fc = os.path.join(work, "forecast.json")
    with open(fc, "w") as f:
        json.dump(d, f)
    p = subprocess.run([CLI, "report", fc], capture_output=True, text=True, timeout=60)
    q = subprocess.run([CLI, "report", plain], capture_output=True, text=True, timeout=60)
    eq((p.returncode, q.returncode, p.stderr, q.stderr), (0, 0, "", ""), "both reports")
    lines = p.stdout.splitlines()
    want = "forecast: at +8.00 MiB a minute, device 0 is full (64.0 MiB) in 7.5 minutes; it grows at keep t.c:9\\x07"
    eq([x for x in lines if x.startswith("forecast")], [want], "the forecast's line")
    eq([x for x in q.stdout.splitlines() if x.startswith("forecast")], [], "no forecast, no line")
    at = lines.index(want)
    eq(lines[:at] + lines[at + 1:], q.stdout.splitlines(), "the rest of the report as without it")


def rank_dumps(tmpl, folder, world, missing, fail, events):
    """Dumps of the ranks 0..world-1 of one simulated job, but `missing`,
    made from the dump `tmpl` (a real one): rank r peaks at 1 GiB + r MiB
    (rank `fail` at 3 GiB), holds 512 MiB at one call site and, from rank
    256 on, 64 MiB more at another; rank `fail` fails first, ranks 0 and 1
    fail later; `events` events each. Returns the paths written."""
    MiBi = 1 << 20
    base = copy.deepcopy(tmpl)
    keep = base["stacks"][base["holders"][0]["stack"]]
    extra = copy.deepcopy(keep)
    extra["frames"][0].update(function="cache_batch", line=99)
    base["stacks"] = [keep, extra]
    ev = tmpl["events"][0]
    events_text = json.dumps([[i * 1000, "alloc", ev[2], ev[3], 0, 0, "device"] for i in range(events)])
    paths = []
    for r in range(world):
        if r in missing:
            continue
        d = dict(base)
        d.update(pid=100000 + r, rank=r, local_rank=r % 8, reason="oom" if r in (fail, 0, 1) else "exit")
        d.pop("rank_known", None)   # a launcher's rank
        peak = (3 << 30) if r == fail else (1 << 30) + r * MiBi
        holders = [{"stack": 0, "bytes": 512 * MiBi, "count": 8}]
        if r >= 256:
            holders.append({"stack": 1, "bytes": 64 * MiBi, "count": 1})
        live_bytes = sum(h["bytes"] for h in holders)
        d["holders"] = holders
        d["peak_holders"] = holders
        d["totals"] = dict(tmpl["totals"], live_bytes=live_bytes, peak_bytes=peak,
                           oom_count=1 if d["reason"] == "oom" else 0, oom_survived=0)
        # A dump written at its failure: that failure not got past (yet).
        d["totals"].pop("last_oom_survived", None)
        if d["reason"] == "oom":
            d["totals"]["last_oom_survived"] = False
        d.pop("exit_status", None)
        d["devices"] = [dict(tmpl["devices"][0], live_bytes=live_bytes, peak_bytes=peak,
                             oom_count=d["totals"]["oom_count"])]
        d["live"] = [dict(tmpl["live"][0], stack=h["stack"], bytes=h["bytes"], address=hex(0x700000000000 + (i << 24)))
                     for i, h in enumerate(holders)]
        d["ooms"] = []
        if d["reason"] == "oom":
            o = dict(tmpl["ooms"][0], requested_bytes=(2 << 30) if r == fail else 1 << 30, stack=0,
                     time_ns=1000 if r == fail else 5000000 + r, holders=holders)
            d["ooms"] = [o]
        d["growing"] = []
        d["events"] = "EVENTS"
        path = os.path.join(folder, f"dump.r{r}.json")
        with open(path, "w") as f:
            f.write(json.dumps(d).replace('"EVENTS"', events_text))
        paths.append(path)
    return paths


@test
def report_over_512_ranks():
    """vramtrace report over 512 dumps of one simulated job (ranks 0 to 513,
    17 and 400 missing, 5000 events each, 157 MB of JSON): the first rank
    to fail, the missing ranks, the peaks' imbalance over the median, and
    the call site held on half the ranks only, in under 30 s of CPU and
    1 GB of memory."""
    import resource
    work = tempdir("vt-ranks-")
    t = Live(work)
    t.say("a 4194304")
    t.say("o")
    eq(t.quit(), (0, ""), "template run")
    tmpl = load_dump(os.path.join(t.work, f"dump.{t.pid}.json"))
    paths = rank_dumps(tmpl, work, 514, missing={17, 400}, fail=300, events=5000)
    eq(len(paths), 512, "dumps made")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    p = subprocess.run(["/usr/bin/time", "-f", "%M", CLI, "report", *paths], capture_output=True, text=True,
                       timeout=600)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    rss_kib = int(p.stderr.split()[-1])
    eq(p.returncode, 0, "status")
    print(f"  (512 dumps: {wall:.1f} s wall, {cpu:.1f} s CPU, {rss_kib // 1024} MiB resident)")
    ok(cpu < 30, f"under 30 s of CPU: {cpu:.1f}")
    ok(rss_kib < 1 << 20, f"under 1 GB: {rss_kib} KiB")
    MiBi = 1 << 20
    peaks = sorted((3 << 30) if r == 300 else (1 << 30) + r * MiBi for r in range(514) if r not in (17, 400))
    median = (peaks[255] + peaks[256]) // 2
    head = p.stdout.split("\n== pid", 1)[0]
    want = [
        # Each failing rank's dump was written at its failure (not got past,
        # no exit status): alike, the earliest first.
        "first to fail: rank 300 (pid 100300), 2.00 GiB requested by cudaMalloc: its last failure, not got past",
        "ranks: 512 dumps of 512 ranks from 0 to 513; missing 2 of 0 to 513: 17, 400",
        f"peak imbalance: highest 3.00 GiB (rank 300) over the median {median / (1 << 30):.2f} GiB = "
        f"{(3 << 30) / median:.2f}x",
        "call sites that differ across ranks (at exit): 1",
        f"  cache_batch tests/progs/t_live.c:99: 64.00 MiB on 257 of 512 ranks (256-399, 401-513)",
    ]
    lines = head.splitlines()
    at = lines.index(want[0])
    eq(lines[at:at + len(want)], want, "the job's summary")


@test
def forecast_names_the_site_that_grows_not_one_that_loaded():
    """A leak of 4 MiB every 100 ms, a load of 100 to 500 MiB at five
    other call sites three seconds in, the leak going on: the forecast
    names the leaking site, which rose in every window, not a loading one,
    which rose more bytes in one (before: site5, named for its load; from
    an outside check)."""
    rundir = tempdir("vt-rundir-")
    t = Live(rundir, {"VRAMTRACE_FORECAST": "30", "VRAMTRACE_LIMIT": "2G", "SIMGPU_CAPACITY": "8G"})
    t.say("leak 30 4194304 100")
    t.say("sites 104857600")
    t.say("leak 60 4194304 100")
    rc, err = t.quit()
    eq(rc, 0, "status")
    site = f"keep tests/progs/t_live.c:{source_line('t_live.c', 'cudaMalloc(&p, bytes) == cudaSuccess')}"
    lines = err.splitlines()
    eq(len(lines), 1, f"one warning line: {err!r}")
    ok(re.fullmatch(r"vramtrace: forecast: at \+[\d.]+ (MiB|GiB) a minute, device 0 is full \(2\.00 GiB, "
                    rf"VRAMTRACE_LIMIT\) in \d+ seconds; it grows at {re.escape(site)}", lines[0]),
       f"the leaking site: {lines[0]!r}")
