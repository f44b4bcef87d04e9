"""The live view: each traced process's live segment, `vramtrace top`,
`vramtrace metrics` and the forecast, on the simulated GPU. Each test runs
its programs with a private XDG_RUNTIME_DIR, so that it sees its own
processes only."""
import os
import re
import signal
import stat
import subprocess
import tempfile
import time

from run_tests import *

T_LIVE = os.path.join(T, "t_live")


class Live:
    """t_live under vramtrace, driven line by line (tests/progs/t_live.c)."""

    def __init__(self, rundir, env=None, argv=None):
        self.work = tempfile.mkdtemp(prefix="vt-live-")
        e = {k: v for k, v in os.environ.items()
             if not k.startswith(("VRAMTRACE_", "SIMGPU_")) and k not in ("LD_PRELOAD", "LD_LIBRARY_PATH")}
        e.update({"LD_LIBRARY_PATH": SIM, "LD_PRELOAD": LIB, "XDG_RUNTIME_DIR": rundir,
                  "VRAMTRACE_OUT": os.path.join(self.work, "dump.%p.json"), "VRAMTRACE_REPORT": "off",
                  "SIMGPU_CAPACITY": "1G"})
        e.update(env or {})
        self.p = subprocess.Popen(argv or [T_LIVE], env=e, cwd=self.work, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.pid = self.p.pid

    def say(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        eq(self.p.stdout.readline(), "ok\n", f"t_live answers {line!r}")

    def quit(self):
        self.p.stdin.write("q\n")
        self.p.stdin.flush()
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
    rundir = tempfile.mkdtemp(prefix="vt-rundir-")
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
def live_segment_stale_ones_cleaned():
    """A segment left by a killed process (its pid gone), and one whose pid
    runs but started at another time, are removed by the next reader; a
    live one stays."""
    rundir = tempfile.mkdtemp(prefix="vt-rundir-")
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
    rows = process_rows(top_once(rundir, "--bytes").stdout)
    eq(sorted(rows), [b.pid], "only the live process is listed")
    eq(rows[b.pid][3], "8192", "its live bytes")
    eq(sorted(os.listdir(rundir)), [f"vramtrace-live.{b.pid}.shm"], "stale segments removed")
    eq(b.quit(), (0, ""), "b exits as usual")


@test
def live_segment_off_switch():
    """VRAMTRACE_LIVE=0 publishes nothing and starts no thread (with the
    dump signal's watcher off too)."""
    rundir = tempfile.mkdtemp(prefix="vt-rundir-")
    t = Live(rundir, env={"VRAMTRACE_LIVE": "0", "VRAMTRACE_SIGNAL": "0"})
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
    rundir = tempfile.mkdtemp(prefix="vt-rundir-")
    t = Live(rundir)
    t.say("a 1048576")
    wait_for("the segment", lambda: t.pid in process_rows(top_once(rundir, "--bytes").stdout))
    t.p.stdin.write("loop 20000 3145728 0\n")
    t.p.stdin.flush()
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
def top_screen_follows_processes():
    """vramtrace top on a terminal (tmux): two traced programs appear with
    their exact live and peak bytes, largest first; 'n' sorts by pid, 'j'
    selects the next process (its call sites are shown); a program that
    exits loses its row; 'q' quits."""
    rundir = tempfile.mkdtemp(prefix="vt-rundir-")
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
        ok(re.search(rf"^call sites of pid {b.pid} ", tm.screen(), re.M), "the first process is selected")
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
