"""The traced program's own behaviour under vramtrace: signals, fork, errno,
file descriptors, calls made from signal handlers (tests/progs/t_host.c)."""
import fcntl
import queue
import signal
import threading
import time

from run_tests import *

HOST = os.path.join(T, "t_host")


def host_env(work, extra=None):
    e = {k: v for k, v in os.environ.items()
         if not k.startswith(("VRAMTRACE_", "SIMGPU_")) and k not in ("LD_PRELOAD", "LD_LIBRARY_PATH")}
    e["LD_LIBRARY_PATH"] = SIM
    e["LD_PRELOAD"] = LIB
    e["VRAMTRACE_OUT"] = os.path.join(work, "dump.json")
    e.update(extra or {})
    return e


def wait_for(cond, what, timeout=60):
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise Failure(f"timed out waiting for {what}")
        time.sleep(0.02)


class StuckInOutput:
    """t_host MODE with its stderr a pipe that is already full (shrunk to
    one page and filled before the start): the out-of-memory hook stays
    inside vramtrace's output, its lock held, blocked in the post-mortem's
    first write, until the pipe is read. The dump, written before the
    report, says when the hook is there."""

    def __init__(self, mode, env=None):
        self.work = tempfile.mkdtemp(prefix="vt-host-")
        self.dump = os.path.join(self.work, "dump.json")
        r, w = os.pipe()
        fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, 4096)
        self.stuffing = fcntl.fcntl(w, fcntl.F_GETPIPE_SZ)
        os.write(w, b"\0" * self.stuffing)
        self.err_fd = r
        self.err = b""
        self.drainer = None
        self.p = subprocess.Popen([HOST, mode], cwd=self.work, stdout=subprocess.PIPE, stderr=w,
                                  env=host_env(self.work, {"VRAMTRACE_REPORT": "stderr",
                                                           "SIMGPU_CAPACITY": "64M", **(env or {})}))
        os.close(w)
        self.lines = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        try:
            wait_for(lambda: os.path.exists(self.dump) or self.p.poll() is not None, "the out-of-memory dump")
            ok(self.p.poll() is None, "t_host is inside its out-of-memory hook")
        except Failure:
            self.p.kill()
            self.p.wait()
            raise

    def _read(self):
        for line in self.p.stdout:
            self.lines.append(line.decode())

    def _drain(self):
        while True:
            chunk = os.read(self.err_fd, 65536)
            if not chunk:
                break
            self.err += chunk
        os.close(self.err_fd)

    def open_fifo(self):
        """Let the blocked report through: read stderr until the process
        ends; returns what vramtrace wrote there."""
        if self.drainer is None:
            self.drainer = threading.Thread(target=self._drain, daemon=True)
            self.drainer.start()
        self.drainer.join(timeout=60)
        return self.err[self.stuffing:].decode()

    def finish(self, timeout=60):
        if self.drainer is None:
            self.drainer = threading.Thread(target=self._drain, daemon=True)
            self.drainer.start()
        try:
            self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
            raise Failure(f"t_host hung (stdout so far: {self.lines})")
        finally:
            self.reader.join(timeout=10)
            self.drainer.join(timeout=10)
        err = self.err[self.stuffing:].decode()
        dumps = []
        if os.path.exists(self.dump):
            with open(self.dump) as f:
                dumps.append(json.load(f))
        shutil.rmtree(self.work, ignore_errors=True)
        return self.p.returncode, "".join(self.lines), err, dumps


@test
def host_fork_child_keeps_programs_signal_handler():
    r = same_as_without([HOST, "fork-usr2"])
    eq(r.out, "alloc -> 0\nchild: handler ran 1 time(s)\nchild: exited 0\nparent: handler ran 1 time(s)\n",
       "the child reached the program's SIGUSR2 handler")


@test
def host_no_cuda_process_has_no_extra_descriptors():
    r = same_as_without([HOST, "no-cuda"])
    ok(r.out.startswith("fds: 0 1 2"), "descriptors listed: " + r.out)
    eq(r.dumps, [], "no dump from a process that never used CUDA")


@test
def host_errno_kept_by_every_hook():
    r = same_as_without([HOST, "errno"], env={"SIMGPU_CAPACITY": "64M"})
    lines = r.out.splitlines()
    eq(len(lines), 38, "every call shown")
    oom = [l for l in lines if "out of memory" in l]
    eq(len(oom), 3, "three out-of-memory calls")
    # Run with the post-mortem on, too: it writes files (and fails to, in a
    # folder it cannot write) inside the failing call.
    a = run([HOST, "errno"], preload=False, env={"SIMGPU_CAPACITY": "64M"})
    b = run([HOST, "errno"], env={"SIMGPU_CAPACITY": "64M", "VRAMTRACE_OUT": "/proc/nonexistent/d.json"})
    eq(b.out, a.out, "errno with the post-mortem written to stderr and a dump that cannot be written")
    eq(b.rc, a.rc, "exit status")


@test
def host_exit_from_signal_handler_inside_hook():
    s = StuckInOutput("exit-in-hook")
    s.p.send_signal(signal.SIGTERM)
    rc, out, err, dumps = s.finish()
    eq(rc, 3, "exit status of exit(3) in the SIGTERM handler")
    eq(out, "main: cuMemAlloc_v2 -> 0\n", "stdout")
    # The interrupted post-mortem may have put out a part of its line before
    # the write that blocked: the skip line is the last thing written, once.
    skip = ("vramtrace: no exit dump or report: a CUDA call vramtrace was recording did not "
            "finish (exit from a signal handler?)\n")
    eq((err.count(skip), err.endswith(skip)), (1, True),
       f"the exit path says in one line, last, that it skipped the dump: {err!r}")
    eq([d["reason"] for d in dumps], ["oom"], "the out-of-memory dump stays, no exit dump replaced it")


@test
def host_exit_from_signal_handler_inside_hook_fails_the_leak_check():
    """The leak check cannot run when the program exits from a signal
    handler that interrupted vramtrace's own work (the dump is skipped): the
    run then never passes. exit(0) becomes 125 with one line saying why
    (before: status 0, a pass with a leak live); exit(3) stays 3."""
    skip = ("vramtrace: no exit dump or report: a CUDA call vramtrace was recording did not "
            "finish (exit from a signal handler?)\n")
    for mode, status, tail in (("exit0-in-hook", 125, skip + "vramtrace: the leak check could not run; exit status 125\n"),
                               ("exit-in-hook", 3, skip)):
        s = StuckInOutput(mode, {"VRAMTRACE_LEAK_CHECK": "1"})
        s.p.send_signal(signal.SIGTERM)
        rc, out, err, dumps = s.finish()
        eq(rc, status, f"{mode}: exit status")
        eq(out, "main: cuMemAlloc_v2 -> 0\n", f"{mode}: stdout")
        eq((err.count(skip), err.endswith(tail)), (1, True), f"{mode}: the last lines: {err[-400:]!r}")
        eq([d["reason"] for d in dumps], ["oom"], f"{mode}: no exit dump")


@test
def host_exit_from_signal_handler_inside_driver_call():
    work = tempfile.mkdtemp(prefix="vt-host-")
    p = subprocess.Popen([HOST, "exit-in-driver"], cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=host_env(work, {"VRAMTRACE_REPORT": "off", "SIMGPU_BLOCK": "cuMemAllocAsync"}))
    try:
        eq(p.stderr.readline().decode(), "simgpu: cuMemAllocAsync waits for a signal\n", "the driver call waits")
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    eq((p.returncode, out.decode(), err.decode()), (3, "main: cuMemAlloc_v2 -> 0\n", ""),
       "exit status, stdout and stderr")
    d = load_dump(os.path.join(work, "dump.json"))
    shutil.rmtree(work, ignore_errors=True)
    eq(d["reason"], "exit", "the exit dump was written")
    eq([(a["api"], a["bytes"]) for a in d["live"]], [("cuMemAlloc_v2", 1 << 20)], "live allocations")


@test
def host_allocation_in_signal_handler_inside_hook():
    s = StuckInOutput("alloc-in-hook")
    s.p.send_signal(signal.SIGUSR1)
    try:
        wait_for(lambda: any(l.startswith("handler:") for l in s.lines) or s.p.poll() is not None,
                 "the signal handler's allocation to return")
    except Failure:
        s.finish(timeout=0)
    report = s.open_fifo()
    rc, out, err, dumps = s.finish()
    eq(rc, 0, "exit status")
    eq(out, "main: cuMemAlloc_v2 -> 0\nhandler: huge cuMemAlloc_v2 -> 2\nmain: huge cuMemAlloc_v2 -> 2\n",
       "the handler's call returned the driver's answer, then the main thread's")
    ok("out of memory" in report, "the post-mortem went through once stderr was read: " + report[:300])
    d = dumps[0]
    eq(d["reason"], "exit", "the exit dump")
    eq(d["totals"]["missed"], 1, "the handler's call counted as missed")
    eq(d["totals"]["oom_count"], 1, "only the main thread's OOM recorded")
    eq(d["totals"]["live_bytes"], 1 << 20, "live bytes")


@test
def host_allocations_in_signal_handlers():
    r = run([HOST, "signal-allocs"], env={"SIMGPU_RAISE": f"{int(signal.SIGUSR1)}:cuMemAlloc_v2"})
    eq(r.rc, 0, "exit status")
    eq(r.out, "handler (inside a hook): cuMemAlloc_v2 -> 0\nmain: cuMemAlloc_v2 -> 0\n"
              "handler (no hook running): cuMemAlloc_v2 -> 0\n", "stdout")
    d = r.dump
    eq(d["totals"]["missed"], 1, "the allocation made inside the hook passed through, counted as missed")
    got = sorted((a["bytes"], site(d, a["stack"])["function"]) for a in d["live"])
    eq(got, [(8192, "on_usr1_small"), (1 << 20, "signal_allocs")],
       "the main thread's allocation and the handler's made outside any hook are recorded")
    eq((d["totals"]["alloc_count"], d["totals"]["live_bytes"]), (2, (1 << 20) + 8192), "totals")


@test
def host_mipmapped_array_budget_asks_driver_nothing():
    r = same_as_without([HOST, "arrays-null"], env={"VRAMTRACE_LIMIT": "1G"})
    eq(r.out.splitlines()[-1], "asked about a NULL array: 0, a NULL mipmapped array: 0",
       "the driver was never asked about a NULL handle")
    got = sorted((a["api"], a["bytes"]) for a in r.dump["live"])
    eq(got, [("cuArray3DCreate_v2", 16 * 16 * 4 * 4), ("cuArrayCreate_v2", 64 * 64 * 4),
             ("cuMipmappedArrayCreate", (64 * 64 + 32 * 32 + 16 * 16) * 4)],
       "sizes from the driver's memory requirements")


@test
def host_located_vmm_and_pools_are_host_memory():
    env = {"SIMGPU_CAPACITY": "4M", "VRAMTRACE_LIMIT": "3M"}
    a = run([HOST, "host-vmm"], preload=False, env=env)
    b = run([HOST, "host-vmm"], env=env, report="off")
    eq(b.out, a.out, "every call's result as without vramtrace")
    ok("cuMemAllocFromPoolAsync device pool 4M -> 2" in a.out, "the device pool's 4M does not fit: " + a.out)
    d = b.dump
    MiB = 1 << 20
    got = sorted((x["api"], x["kind"], x["bytes"], x["device"]) for x in d["live"])
    eq(got, [("cuMemAllocFromPoolAsync", "async", 512 << 10, 0),
             ("cuMemAllocFromPoolAsync", "host_async", 1 * MiB, -1),
             ("cuMemAllocFromPoolAsync", "host_async", 16 * MiB, -1),
             ("cuMemCreate", "host_vmm", 2 * MiB, -1), ("cuMemCreate", "host_vmm", 8 * MiB, -1),
             ("cuMemCreate", "vmm", 2 * MiB, 0)], "live allocations: kind and device")
    eq(d["host_memory"], {"live_bytes": 27 * MiB, "live_count": 4, "peak_bytes": 27 * MiB}, "host memory")
    eq((d["totals"]["live_bytes"], d["totals"]["live_count"]), (2 * MiB + (512 << 10), 2), "device memory")
    mapped = [x for x in d["live"] if x["kind"] == "host_vmm" and x["bytes"] == 8 * MiB][0]
    eq(mapped["address"], "0x7e0000000000", "the host handle's mapped address")
    eq(len(d["ooms"]), 1, "one OOM: the device pool's 4M")
    eq((d["ooms"][0]["budget"], d["ooms"][0]["kind"], d["ooms"][0]["requested_bytes"]), (True, "async", 4 * MiB),
       "the budget refused the device pool's 4M (and none of the host memory)")


@test
def host_registered_memory_is_pinned_host_memory():
    want = run([HOST, "host-register"], preload=False)
    eq(want.out, "".join(f"{c} -> {r}\n" for c, r in [
        ("cuMemHostRegister_v2 1M", 0), ("cuMemHostRegister_v2 overlapping", 712),
        ("cuMemHostRegister_v2 0 bytes", 1), ("cuMemHostRegister 64K", 0), ("cudaHostRegister 2M", 0),
        ("cuMemHostAlloc 8K", 0), ("cuMemHostRegister_v2 over pinned", 712),
        ("cuMemHostUnregister inside", 713), ("cuMemFreeHost registered", 1),
        ("cuMemHostUnregister pinned", 713), ("cuMemHostUnregister 1M", 0), ("cuMemHostUnregister 1M again", 713),
        ("cudaHostUnregister 64K", 0), ("cuMemFreeHost 8K", 0)]), "the simulated driver's answers, as cuda.h says")
    r = run([HOST, "host-register"], env={"VRAMTRACE_LEAK_CHECK": "1", "VRAMTRACE_LIMIT": "1M"})
    eq(r.out, want.out, "every call's result as without vramtrace (a 1M device budget refuses no host memory)")
    eq(r.rc, 23, "the range left registered is a leak")
    d = r.dump
    MiB = 1 << 20
    got = [(x["api"], x["kind"], x["bytes"], x["device"]) for x in d["live"]]
    eq(got, [("cudaHostRegister", "host_registered", 2 * MiB, -1)], "live at exit: the runtime's registration, once")
    eq(d["host_memory"], {"live_bytes": 2 * MiB, "live_count": 1, "peak_bytes": 3 * MiB + (64 << 10) + 8192},
       "host memory: live, and the peak with 1M, 64K, 2M and 8K pinned at once")
    eq((d["totals"]["alloc_count"], d["totals"]["free_count"], d["totals"]["failed_count"]), (4, 3, 3),
       "four registrations and allocations, three frees; the overlaps and the 0 bytes failed")
    eq((d["totals"]["live_bytes"], d["totals"]["live_count"]), (0, 0), "no device memory")
    ev = [(e[1], e[3], e[6]) for e in d["events"]]
    eq(ev, [("alloc", MiB, "host_registered"), ("alloc", 64 << 10, "host_registered"),
            ("alloc", 2 * MiB, "host_registered"), ("alloc", 8192, "host"),
            ("free", MiB, "host_registered"), ("alloc", MiB, "host_registered"),
            ("free", 8192, "host"), ("alloc", 8192, "host"),
            ("free", MiB, "host_registered"), ("free", 64 << 10, "host_registered"), ("free", 8192, "host")],
       "events: a free the driver refused is followed by the allocation's return")
    plain = run([HOST, "host-register"])
    ok("vramtrace:   pinned host memory: 2.00 MiB live in 1 allocation; peak 3.07 MiB\n" in plain.err,
       "the exit summary: " + plain.err)
    ok("Direct leak of 2097152 byte(s) in 1 object(s) allocated from:" in r.err, "the leak report: " + r.err)
    line = source_line("t_host.c", "cudaHostRegister(b, 2 << 20")
    ok(f"call site: host_register tests/progs/t_host.c:{line}" in r.err, "the leak's call site: " + r.err)


@test
def host_stream_ordered_memory_counted_where_it_lands():
    env = {"SIMGPU_DEVICES": "2", "VRAMTRACE_LIMIT": "6M"}
    want = run([HOST, "pool-devices"], preload=False, env=env)
    eq(want.out.splitlines()[-3:], ["cudaMallocFromPoolAsync 512K, host pool -> 0", "cuMemPoolCreate host x70 -> 70 made",
                                    "cuMemAllocFromPoolAsync 4K, the 70th host pool -> 0"], "without vramtrace")
    r = run([HOST, "pool-devices"], env=env)
    eq(r.out, want.out.replace("cuMemAllocAsync 1, device 1's stream -> 0", "cuMemAllocAsync 1, device 1's stream -> 2"),
       "as without vramtrace, but for the byte past device 1's 6M budget")
    d = r.dump
    MiB = 1 << 20
    got = sorted((x["api"], x["kind"], x["bytes"], x["device"]) for x in d["live"])
    eq(got, [("cuMemAllocAsync", "async", 3 * MiB, 1), ("cuMemAllocAsync", "async", 4 * MiB, 0),
             ("cuMemAllocFromPoolAsync", "async", 1 * MiB, 1), ("cuMemAllocFromPoolAsync", "async", 2 * MiB, 1),
             ("cuMemAllocFromPoolAsync", "host_async", 4096, -1),
             ("cudaMallocFromPoolAsync", "host_async", 512 << 10, -1)],
       "each allocation on the device its pool or stream is on, or on the host")
    eq([(x["live_bytes"], x["alloc_count"], x["oom_count"]) for x in d["devices"]], [(4 * MiB, 1, 0), (6 * MiB, 3, 1)],
       "per device: live, allocations, out-of-memory failures")
    eq(d["host_memory"]["live_bytes"], (512 << 10) + 4096, "host memory: the two host pools' allocations")
    eq(len(d["ooms"]), 1, "one failure")
    o = d["ooms"][0]
    eq((o["device"], o["budget"], o["requested_bytes"], o["live_bytes"]), (1, True, 1, 6 * MiB),
       "refused by the budget on device 1, with device 1's 6M live")
    # The post-mortem speaks of device 1's memory alone: its holders, its
    # live allocations, and a finding about its largest holder (before, the
    # holders were every device's and device 0's 4M "held 67%" of device 1's).
    pm = r.err[r.err.index("vramtrace: out of memory in"):r.err.index("vramtrace: exit in")]
    line = {n: source_line("t_host.c", text) for n, text in
            ((3, "cuMemAllocAsync(&a, 3 << 20, s1)"), (2, "cuMemAllocFromPoolAsync(&a, 2 << 20, d1, 0)"),
             (1, "cuMemAllocFromPoolAsync(&a, 1 << 20, p1, 0)"))}
    ok("vramtrace: largest holders of device 1's memory by call site (3 call sites):\n"
       f"vramtrace:     3.00 MiB  50.0%      1 alloc   pool_devices tests/progs/t_host.c:{line[3]}\n"
       f"vramtrace:     2.00 MiB  33.3%      1 alloc   pool_devices tests/progs/t_host.c:{line[2]}\n"
       f"vramtrace:     1.00 MiB  16.7%      1 alloc   pool_devices tests/progs/t_host.c:{line[1]}\n"
       "vramtrace: largest live allocations (3 live):\n" in pm, "the failing device's holders: " + pm)
    ok(f"2. pool_devices tests/progs/t_host.c:{line[3]} holds 50% of the tracked memory (3.00 MiB in 1 allocation)"
       in pm, "the finding about device 1's largest holder: " + pm)
    eq(pm.count(" dev 0 "), 0, "no allocation of device 0 among the failure's live allocations")


@test
def host_failure_holders_are_the_failing_devices_in_the_dump_and_every_report():
    # One call site allocates on both devices (6 MiB on device 1, 3 MiB on
    # device 0), another 4 MiB on device 0; device 1 fails three times: with
    # the site's 6 MiB there, with none of its memory there (device 0's
    # still live), and once device 0 holds nothing. Before, the dump's
    # failures named every device's holders (device 0's 4 MiB "held" part of
    # device 1's failure) and `report --at oom` printed them so.
    env = {"SIMGPU_DEVICES": "2", "VRAMTRACE_LIMIT": "8M"}
    want = run([HOST, "mixed-site-oom"], preload=False, env=env)
    eq(want.out.splitlines()[-5:], ["4M on device 0 -> 0", "3M on device 1 -> 0", "9M on device 1 -> 0",
                                    "layer on device 1 -> 0", "7M on device 1 -> 0"], "without vramtrace")
    work = tempfile.mkdtemp(prefix="vt-host-")
    try:
        p = subprocess.run([HOST, "mixed-site-oom"], cwd=work, env=host_env(work, dict(env, VRAMTRACE_REPORT="stderr")),
                           capture_output=True, text=True, timeout=120)
        eq(p.returncode, 0, "status")
        path = os.path.join(work, "dump.json")
        d = load_dump(path)
        MiB = 1 << 20
        sites = {}
        for o in d["ooms"]:
            for h in o["holders"] or []:
                sites.setdefault(h["stack"], len(sites))
        layer_line = source_line("t_host.c", "CUresult r = cuMemAlloc(p, bytes);")

        def rows(hs):
            return None if hs is None else [(h["bytes"], h["count"]) for h in hs]
        eq([(o["device"], o["requested_bytes"]) for o in d["ooms"]], [(1, 3 * MiB), (1, 9 * MiB), (1, 7 * MiB)],
           "three failures on device 1")
        eq([rows(o["holders"]) for o in d["ooms"]],
           [[(9 * MiB, 6), (4 * MiB, 1)], [(4 * MiB, 1), (3 * MiB, 3)], [(2 * MiB, 1)]],
           "every device's holders, as before")
        eq([rows(o.get("device_holders")) for o in d["ooms"]], [[(6 * MiB, 3)], [], None],
           "device 1's alone while device 0 held memory too; none at the last, where it held nothing")
        eq(d["ooms"][0]["device_holders"][0]["stack"], d["ooms"][0]["holders"][0]["stack"],
           "device 1's share of the site that allocates on both")
        eq([(o["live_bytes"], o["live_count"], o["peak_bytes"]) for o in d["ooms"]],
           [(6 * MiB, 3, 6 * MiB), (0, 0, 6 * MiB), (2 * MiB, 1, 6 * MiB)], "device 1's counts at each failure")
        plain = subprocess.run([CLI, "report", path], capture_output=True, text=True).stdout
        eq([re.sub(r" at [\d.]+ s$", "", l) for l in plain.splitlines() if l.startswith("  tracked on device 1:")],
           ["  tracked on device 1: 6.00 MiB live in 3 allocations at the failure; peak 6.00 MiB",
            "  tracked on device 1: 0 B live in 0 allocations at the failure; peak 6.00 MiB",
            "  tracked on device 1: 2.00 MiB live in 1 allocation at the failure; peak 6.00 MiB"],
           "each failure's own counts in the report, in the post-mortem's words")
        ok("vramtrace:   tracked on device 1: 6.00 MiB live in 3 allocations at the failure; peak 6.00 MiB at " in
           p.stderr, "the post-mortem's: " + p.stderr)
        ok(f"vramtrace: largest holders of device 1's memory by call site (1 call site):\n"
           f"vramtrace:     6.00 MiB 100.0%      3 allocs  layer tests/progs/t_host.c:{layer_line}\n" in p.stderr,
           "the post-mortem: " + p.stderr)
        text = subprocess.run([CLI, "report", "--at", "oom", path], capture_output=True, text=True)
        ok(f"largest holders of device 1's memory at oom by call site (1 call site):\n"
           f"    6.00 MiB 100.0%      3 allocs  layer tests/progs/t_host.c:{layer_line}\n" in text.stdout,
           "report --at oom shows what the post-mortem showed: " + text.stdout + text.stderr)
        found = [l for l in text.stdout.splitlines() if "holds 100% of the tracked memory" in l]
        eq([l.split("(", 1)[1] for l in found], ["6.00 MiB in 3 allocations)", "2.00 MiB in 1 allocation)"],
           "the findings of the first and last failure speak of device 1's memory")
        js = json.loads(subprocess.run([CLI, "report", "--format", "json", "--at", "oom", path], capture_output=True,
                                       text=True).stdout)["processes"][0]
        eq((js["holders_device"], [(h["bytes"], h["count"]) for h in js["holders"]]), (1, [(6 * MiB, 3)]),
           "report --format json --at oom")
        exit_js = json.loads(subprocess.run([CLI, "report", "--format", "json", path], capture_output=True,
                                            text=True).stdout)["processes"][0]
        ok("holders_device" not in exit_js, "at exit the holders are every device's")
        folded = subprocess.run([CLI, "report", "--format", "folded", "--at", "oom", path], capture_output=True,
                                text=True).stdout
        eq(sum(int(l.rsplit(" ", 1)[1]) for l in folded.splitlines()), 6 * MiB, "folded --at oom: device 1's bytes")
    finally:
        shutil.rmtree(work, ignore_errors=True)


@test
def host_failure_growth_is_the_failing_devices():
    # One call site leaks 4 MiB a step on device 0 and 1 MiB on device 1;
    # device 1 fails: the site grew by 8 MiB there (before: by the 40 MiB
    # of both devices, ranked as the failure's explanation).
    env = {"SIMGPU_DEVICES": "2", "VRAMTRACE_LIMIT": "64M"}
    r = run([HOST, "mixed-site-growth"], env=env)
    eq(r.out, "40M on device 1 -> 0\n20M on device 1 -> 2\n", "device 1's 20 MiB refused by the budget")
    line = source_line("t_host.c", "CUresult got = cuMemAlloc(p, bytes);")
    want = (f"2. leaky tests/progs/t_host.c:{line} grew through the run from 0 B to 8.00 MiB: +1.00 MiB per step over "
            "the last 8 steps (")
    ok("vramtrace:   " + want in r.err, "the post-mortem's growth finding: " + r.err)
    when = [l for l in r.err.splitlines() if l.startswith("vramtrace:   when: ")]
    eq((len(when), when[0].endswith(", during step 9") if when else None), (1, True),
       f"the failure came in the ninth step, after eight boundaries: {when}")
    f = [x["finding"] for x in r.dump["ooms"][0]["findings"] if x["id"] == "growing_site"]
    eq(len(f), 1, "one growing site")
    ok(f[0].startswith(want[3:]), "the dump's finding: " + f[0])


@test
def host_growth_per_step_past_the_kept_step_boundaries():
    """A leak of 128 KiB a step from the 1001st step on: per step, it is
    128 KiB over the steps counted, also when the run has more steps than
    the 4096 boundaries kept (then over the steps after the oldest kept
    one). Before: the site's whole rise over the kept steps, 156 KiB a step
    at 6,000 steps, 344 KiB at 12,000."""
    for n, steps in ((3000, 2000), (6000, 4095), (12000, 4095)):
        r = run([HOST, "long-growth", str(n)], report="off", env={"SIMGPU_CAPACITY": "8G"})
        eq(r.out, f"{n} steps\n", f"{n}: stdout")
        g = r.dump["growing"]
        eq(len(g), 1, f"{n}: one growing site")
        eq((g[0]["unit"], g[0]["units"], g[0]["bytes_per_unit"], g[0]["end_bytes"]),
           ("step", steps, 128 << 10, (n - 1000) << 17), f"{n}: growth per step")


@test
def host_cxx_names_demangled_without_a_cxx_runtime():
    """C++ code in a process without libstdc++ (linked in statically): its
    names are demangled all the same, so a suppression by C++ name matches
    however the program was linked (before: "_ZN5mylib4Pool4grabEm" in the
    report, the suppression unmatched, status 23)."""
    work = tempfile.mkdtemp(prefix="vt-mangled-")
    try:
        sup = os.path.join(work, "s.supp")
        with open(sup, "w") as f:
            f.write("leak:mylib::Pool::grab\n")
        r = run([HOST, "mangled-leak"], env={"VRAMTRACE_LEAK_CHECK": "1"})
        eq((r.rc, r.out), (23, "grab -> 0\n"), "unsuppressed: the leak fails the run")
        ok("in mylib::Pool::grab(unsigned long) tests/progs/t_host.c:" in r.err, "the demangled frame: " + r.err)
        eq([f["function"] for f in frames(r.dump, r.dump["live"][0]["stack"])][0], "mylib::Pool::grab(unsigned long)",
           "the dump's frame")
        r = run([HOST, "mangled-leak"], env={"VRAMTRACE_LEAK_CHECK": "1", "VRAMTRACE_SUPPRESSIONS": sup})
        eq((r.rc, r.out), (0, "grab -> 0\n"), "suppressed by its C++ name: " + r.err)
        ok("      1       5000 mylib::Pool::grab\n" in r.err, "Suppressions used: " + r.err)
    finally:
        shutil.rmtree(work, ignore_errors=True)


@test
def host_marks_report_only_their_own_reset_released_memory():
    """Per-test marks (vramtrace_mark): memory a context's reset released
    without a free in one test is that test's leak, and no later test's
    (before: every mark opened after the reset reported it, with its own
    leak added: 4567 bytes in 2 allocations for a test that leaked 1234)."""
    r = run([HOST, "mark-reset"], report="off")
    eq(r.out, "alloc -> 0\nreset -> 0\n"
              "reset: live 0 in 0; SUMMARY: vramtrace: 3333 byte(s) leaked in 1 allocation(s).\n"
              "alloc -> 0\n"
              "leak: live 1234 in 1; SUMMARY: vramtrace: 1234 byte(s) leaked in 1 allocation(s).\n"
              "nothing: live 0 in 0; no leaks\n", "each mark's own")


@test
def host_marks_count_memory_released_when_its_address_comes_back():
    """Per-test marks after a context of the program's own: the reset
    releases nothing at once, so the first test's 3333 bytes are its live
    leak; the second test's allocation gets their address, which releases
    them without a free: a leak of the mark that counted them (one over all
    the tests), never of the second test's. Before, the second test's
    record replaced the first's and the mark over all lost it (3333 bytes
    in 1 allocation)."""
    r = run([HOST, "mark-reset", "own"], report="off")
    eq(r.out, "alloc -> 0\nreset -> 0\n"
              "reset: live 3333 in 1; SUMMARY: vramtrace: 3333 byte(s) leaked in 1 allocation(s).\n"
              "alloc -> 0\nthe first's address 1\n"
              "leak: live 3333 in 1; SUMMARY: vramtrace: 3333 byte(s) leaked in 1 allocation(s).\n"
              "nothing: live 0 in 0; no leaks\n"
              "all: live 3333 in 1; SUMMARY: vramtrace: 6666 byte(s) leaked in 2 allocation(s).\n", "each mark's own")
    eq([(h["bytes"], h["count"]) for h in r.dump["released"]], [(3333, 1)], "the process's released")


@test
def host_forked_child_leaves_the_parents_records_alone():
    # A forked child starts with no records: it used to free each of the
    # parent's, writing beside every one and so copying every page of the
    # parent's heap that held one (15,838 page faults in a child of a parent
    # holding 200,000 allocations, 0.4 s at a million); it leaves them as
    # they are now. The child's faults with 200,000 live in the parent are
    # those with none, give or take a few hundred.
    faults = {}
    for n in (0, 200000):
        r = run([HOST, "fork-many-live", str(n)], env={"SIMGPU_CAPACITY": "100G"}, report="off")
        eq(r.rc, 0, "status")
        faults[n] = int(r.out.split()[-1])
    ok(faults[200000] - faults[0] < 1000, f"the child's page faults: {faults}")


@test
def host_relative_paths_are_the_starting_directorys():
    # A program that changes its working directory before it exits: the
    # relative dump, report and suppressions paths given to vramtrace run
    # are those of where it started (the suppressions were read in the new
    # folder, not found, and the leak check failed the run with status 23;
    # the dump and report landed in the new folder).
    # Also when it changes folder before its first allocation (the paths
    # were taken from where it was then), and from a folder whose name has
    # a '%' (which the dump's pattern expanded: "pct%p" became "pct1234").
    # And in a process started after the command changed folder (a shell
    # that cds, then runs the program): vramtrace run gives the library
    # whole paths (the program's start was already the new folder).
    for mode, folder in (("chdir-leak", "start"), ("chdir-then-leak", "start"), ("chdir-then-leak", "pct%p%%"),
                         ("sh-cd-then-leak", "pct%p%%")):
        with workdir("vt-host-") as top:
            work = os.path.join(top, folder)
            elsewhere = os.path.join(top, "elsewhere")
            for d in (work, elsewhere, os.path.join(work, "supp")):
                os.mkdir(d)
            with open(os.path.join(work, "supp", "t.supp"), "w") as f:
                f.write("leak:chdir_leak\n")
            e = {k: v for k, v in os.environ.items()
                 if not k.startswith(("VRAMTRACE_", "SIMGPU_")) and k not in ("LD_PRELOAD", "LD_LIBRARY_PATH")}
            e["LD_LIBRARY_PATH"] = SIM
            cmd = [HOST, mode, elsewhere]
            if mode == "sh-cd-then-leak":
                cmd = ["sh", "-c", 'cd "$1" && exec "$2" chdir-leak /', "sh", elsewhere, HOST]
            p = subprocess.run([CLI, "run", "--leak-check", "--suppressions", "supp/t.supp", "--out", "rel.%p.json",
                                "--report", "rel.txt", "--"] + cmd, cwd=work, env=e,
                               capture_output=True, text=True, timeout=120)
            lines = ["cudaMalloc 1M -> 0\n", "chdir -> 0\n"]
            eq((p.returncode, p.stdout, p.stderr), (0, "".join(lines if mode != "chdir-then-leak" else lines[::-1]), ""),
               f"{mode} in {folder}: the leak suppressed, nothing on stderr")
            eq(os.listdir(elsewhere), [], f"{mode} in {folder}: nothing written where it went")
            names = sorted(os.listdir(work))
            eq(len([n for n in names if re.fullmatch(r"rel\.\d+\.json", n)]), 1,
               f"{mode} in {folder}: the dump where it started: {names}")
            with open(os.path.join(work, "rel.txt")) as f:
                report = f.read()
            ok("Suppressions used:" in report and "chdir_leak" in report, "the suppressions were read: " + report)


@test
def host_failure_with_nowhere_to_write_does_no_report_work():
    # With the dump and the report both off, a failure makes no snapshot,
    # names no frame (elfutils never loaded) and analyses nothing: a loop
    # of failures at a million live paid up to 71 ms a call for nothing.
    for env, dw in (({"VRAMTRACE_OUT": "off"}, 1), ({"VRAMTRACE_OUT": "off", "VRAMTRACE_REPORT": "off"}, 0)):
        r = run([HOST, "oom-maps"], env=env, report=env.get("VRAMTRACE_REPORT", "stderr"))
        eq(r.out, f"cudaMalloc 1P -> 2\nlibdw mapped {dw}\n", f"{env}")


@test
def host_pinned_failure_is_not_explained_by_device_memory():
    # A pinned host request refused: the device's 100 MiB is no explanation
    # of it ("holds 156% of the tracked memory", 100 MiB over the 64 MiB of
    # pinned memory live), in the post-mortem or the dump.
    r = run([HOST, "host-oom"], env={"SIMGPU_CAPACITY": "1G"})
    eq(r.out, "cudaMalloc 100M -> 0\ncudaMallocHost 64M -> 0\ncudaMallocHost 1P -> 2\n", "the program's own")
    ok("by cudaMallocHost (pinned host memory)" in r.err, r.err)
    ok("of the tracked memory" not in r.err and "grew through the run" not in r.err, "no device finding: " + r.err)
    eq([f["id"] for f in r.dump["ooms"][0].get("findings", [])
        if f["id"] in ("one_site_dominates", "growing_site")], [], "none in the dump")
    # Its holders and live allocations are the pinned host memory's alone
    # (the post-mortem gave the device's 100 MiB as the failure's holders).
    pinned = source_line("t_host.c", "cudaMallocHost(&h, 64 << 20)")
    pm = r.err.split("vramtrace: exit in pid")[0].splitlines()
    at = pm.index("vramtrace: largest holders of pinned host memory by call site (1 call site):")
    eq([re.sub(r"0x[0-9a-f]+", "ADDR", re.sub(r"\d+\.\d+s ", "T ", l)) for l in pm[at:at + 4]],
       ["vramtrace: largest holders of pinned host memory by call site (1 call site):",
        f"vramtrace:    64.00 MiB 100.0%      1 alloc   host_oom tests/progs/t_host.c:{pinned}",
        "vramtrace: largest live allocations (1 live):",
        f"vramtrace:     64.00 MiB  host    cudaMallocHost           dev -1 ADDR      T  host_oom "
        f"tests/progs/t_host.c:{pinned}"], "the post-mortem's holders and live allocations")
    eq([(h["bytes"], h["count"]) for h in r.dump["ooms"][0]["holders"]], [(64 << 20, 1)],
       "the dump's holders of the failure")


@test
def host_pitched_rows_counted_by_the_budget():
    want = run([HOST, "pitched-budget"], preload=False)
    eq(want.out, "cuMemAlloc_v2 500000 -> 0\ncuMemAllocPitch_v2 513x1000 -> 0\ncudaMallocPitch 513x1000 -> 0\n"
                 "cuMemAllocPitch_v2 512x1000 -> 0, pitch 512\ndevice used 3060000\n", "without vramtrace")
    r = run([HOST, "pitched-budget"], env={"VRAMTRACE_LIMIT": "1M"})
    eq(r.out, "cuMemAlloc_v2 500000 -> 0\ncuMemAllocPitch_v2 513x1000 -> 2\ncudaMallocPitch 513x1000 -> 2\n"
              "cuMemAllocPitch_v2 512x1000 -> 0, pitch 512\ndevice used 1012000\n",
       "the padded rows (1,024,000 bytes) pass the 1M budget: refused, and given back to the driver")
    d = r.dump
    eq([(o["api"], o["requested_bytes"], o["budget"], o["free_bytes"], o["live_bytes"]) for o in d["ooms"]],
       [("cuMemAllocPitch_v2", 1024000, True, 1048576 - 500000, 500000),
        ("cudaMallocPitch", 1024000, True, 1048576 - 500000, 500000)], "each refusal: what the rows took")
    eq((d["devices"][0]["live_bytes"], d["devices"][0]["peak_bytes"]), (1012000, 1012000),
       "live and peak never passed the budget")
    ok("VRAMTRACE_LIMIT refused it: 1000.00 KiB asked with 488.28 KiB live would pass the 1.00 MiB budget" in r.err,
       "the finding: " + r.err)


@test
def host_budget_refusal_with_nothing_live_invents_no_other_threads():
    """A refusal under VRAMTRACE_LIMIT with nothing live (a first
    allocation over the budget, or everything freed before it): the
    finding said "with 0 B live and 1.00 MiB being allocated by other
    threads" and "this step needs at least 3.00 MiB" in a program of one
    thread asking for 2 MiB (the budget's free bytes, all of it, were read
    as all of it used; an outside check)."""
    r = run([os.path.join(T, "t_triage"), "temp", "1", "512K", "fail", "2M"], env={"VRAMTRACE_LIMIT": "1M"})
    eq(r.out, "temp -> 0\nfail -> 2\n", "the program's steps")
    want = ("VRAMTRACE_LIMIT refused it: 2.00 MiB asked with 0 B live would pass the 1.00 MiB budget",
            "a GPU with 1.00 MiB would fail here too: this step needs at least 2.00 MiB; shrink it or raise the limit")
    eq([(f["finding"], f["next"]) for f in r.dump["ooms"][0]["findings"] if f["id"] == "budget"], [want], "the finding")
    ok(f"vramtrace:   1. {want[0]}\n" in r.err, "the post-mortem's: " + r.err)


@test
def host_failures_a_retry_got_past_are_counted():
    """A failure whose request, asked again after the program gave back
    memory, succeeded (as PyTorch's caching allocator retries after it
    frees its cache) got a post-mortem like any other, and nothing said
    later that the program got past it (an outside check). The exit
    summary, the dump and the report count such failures: here the 600M
    request's retry succeeded, the 900M one failed twice."""
    r = run([os.path.join(T, "t_triage"), "cache", "600M", "retry", "600M", "retry", "900M"],
            env={"SIMGPU_CAPACITY": "1G"})
    eq(r.out, "cache -> 0\nretry -> 0\nretry -> 2\n", "the program's steps")
    line = "allocations 2, frees 1, failed 3 (out of memory 3; 1 of them got past: the same request, asked again, succeeded)"
    eq([l for l in r.err.splitlines() if "allocations 2," in l], ["vramtrace:   " + line], "the exit summary")
    eq((r.dump["totals"]["oom_count"], r.dump["totals"]["oom_survived"]), (3, 1), "the dump's totals")
    with workdir("vt-survived-") as work:
        path = os.path.join(work, "d.json")
        with open(path, "w") as f:
            json.dump(r.dump, f)
        p = subprocess.run([CLI, "report", path], capture_output=True, text=True, timeout=60)
        eq([l for l in p.stdout.splitlines() if "allocations 2," in l], ["  " + line], "the report's")
        p = subprocess.run([CLI, "report", "--format", "json", path], capture_output=True, text=True, timeout=60)
        eq(json.loads(p.stdout)["processes"][0]["totals"]["oom_survived"], 1, "the report's JSON")
        p = subprocess.run([CLI, "report", "--format", "html", path], capture_output=True, text=True, timeout=60)
        ok(" out-of-memory failures (1 got past: the same request, asked again, succeeded)</p>" in p.stdout,
           "the page's totals")
    # 100 distinct requests pending at once (the count stopped at 64), and
    # a pitched one, whose failure is asked in rows and success recorded
    # padded (it was never counted).
    r = run([os.path.join(T, "t_survived"), "100"], env={"SIMGPU_CAPACITY": "1G"})
    eq(r.out, "ok\n", "the program's steps")
    eq((r.dump["totals"]["oom_count"], r.dump["totals"]["oom_survived"]), (101, 101), "every one got past")
    r = run([os.path.join(T, "t_triage"), "retry", "2G"], env={"SIMGPU_CAPACITY": "1G"})
    eq((r.dump["totals"]["oom_count"], r.dump["totals"]["oom_survived"]), (2, 0), "none got past")
    ok("(out of memory 2)\n" in r.err, "the line as before: " + r.err[-600:])


@test
def host_another_pitched_or_array_success_is_not_a_retry():
    """A pitched allocation of 4 GiB refused, then one of 64 x 16 bytes
    from another function made, and the program ends of the first failure
    (status 1); the same with a 2 GiB array and one of 16 x 16. The exit
    summary said "1 of them got past" and the dump last_oom_survived true
    (any later pitched allocation or array was taken for the retry, whatever
    its size and call site; an outside check). Such a failure gets past
    only by a success from its own call site. The same under the budget."""
    want = "vramtrace:   allocations 1, frees 0, failed 1 (out of memory 1)"
    for mode, env in (("pitched", {"SIMGPU_CAPACITY": "1G"}), ("array", {"SIMGPU_CAPACITY": "1G"}),
                      ("pitched", {"VRAMTRACE_LIMIT": "1G"})):
        r = run([os.path.join(T, "t_pastsite"), mode], env=env)
        eq((r.rc, r.out), (1, "big -> 2\nsmall -> 0\n"), f"{mode} {env}: the program's steps")
        t = r.dump["totals"]
        eq((t["alloc_count"], t["oom_count"], t["oom_survived"], t["last_oom_survived"]), (1, 1, 0, False),
           f"{mode} {env}: the dump's totals")
        eq([l for l in r.err.splitlines() if "allocations 1," in l], [want], f"{mode} {env}: the exit summary")


@test
def host_a_request_that_fails_again_after_its_retry_did_not_get_past():
    """Pages of one size mapped one at a time (PyTorch's expandable
    segments: a tensor's 20 MiB pages): one refused, memory given back,
    two mapped, the next refused again, and the program ends. Nothing got
    past: the exit summary said 1 of 2 had (the retry's success of the
    same request counted at once), although the program died of that very
    failure (an outside check). Another request's allocation after the
    pages, or the end, and the failure got past; a refusal after that is
    a failure of its own."""
    prog = os.path.join(T, "t_pages")
    env = {"SIMGPU_CAPACITY": "50M"}
    for steps, results, allocs, ooms, survived in (
            ("hold page free page page page", "0 2 0 0 0 2", 3, 2, 0),
            ("hold page free page page", "0 2 0 0 0", 3, 1, 1),
            ("hold page free page page other page", "0 2 0 0 0 0 2", 4, 2, 1),
            ("hold page page free page page", "0 2 2 0 0 0", 3, 2, 1),
            # Host memory between the pages (another thread's pinned
            # buffer) does not end the failure going on (an outside check).
            ("hold page free page pinned page page", "0 2 0 0 0 0 2", 4, 2, 0)):
        r = run([prog] + steps.split(), env=env)
        eq(r.out, "".join(f"{s} -> {c}\n" for s, c in zip(steps.split(), results.split())), f"{steps}: the steps")
        eq((r.dump["totals"]["oom_count"], r.dump["totals"]["oom_survived"]), (ooms, survived), f"{steps}: the totals")
        got = f"; {survived} of them got past: the same request, asked again, succeeded" if survived else ""
        eq([l for l in r.err.splitlines() if ", failed " in l and "allocations" in l],
           [f"vramtrace:   allocations {allocs}, frees 1, failed {ooms} (out of memory {ooms}{got})"],
           f"{steps}: the exit summary")


@test
def host_graph_allocations_and_the_graph_pool():
    env = {"SIMGPU_CAPACITY": "64M"}
    want = run([HOST, "graph"], preload=False, env=env)
    ok("graph pool after the free: used 0M, reserved 12M\ncuGraphLaunch again -> 0\n"
       "cuGraphLaunch while its 4M is in use -> 1\ncuMemFree_v2 4M -> 0\n"
       "graph pool after the second launch's free: used 0M, reserved 12M\ncuMemAlloc_v2 56M -> 2\n" in want.out,
       "without vramtrace: a second launch, a third refused, and the pool's reserve leaves no room: " + want.out)
    r = run([HOST, "graph"], env=env)
    eq(r.out, want.out, "every call's result as without vramtrace")
    d = r.dump
    MiB = 1 << 20
    ev = [(e[1], e[3] // MiB, e[6]) for e in d["events"]]
    eq(ev, [("alloc", 8, "graph"), ("alloc", 4, "graph"), ("free", 8, "graph"),  # the first launch
            ("free", 4, "graph"),  # cuMemFreeAsync after it
            ("alloc", 8, "graph"), ("alloc", 4, "graph"), ("free", 8, "graph"),  # the second launch
            ("free", 4, "graph"),  # cuMemFree_v2 after it
            ("oom", 56, "device"), ("alloc", 56, "device")],
       "the capture holds nothing; each launch allocates the graph's nodes (kind graph), then frees the 8M the "
       "graph frees; its 4M stays until freed after it")
    eq((d["totals"]["unknown_frees"], d["totals"]["alloc_count"], d["totals"]["free_count"]), (0, 5, 4),
       "the launches' frees known, the third launch (refused) nothing")
    eq(len(d["ooms"]), 1, "one failure")
    o = d["ooms"][0]
    eq((o["free_bytes"], o["total_bytes"], o["graph_reserved_bytes"], o["graph_used_bytes"]),
       (52 * MiB, 64 * MiB, 12 * MiB, 0), "the failure's device and graph pool figures")
    ok("vramtrace:   device: 52.00 MiB free of 64.00 MiB\n"
       "vramtrace:   CUDA graphs' memory pool: 12.00 MiB reserved, 0 B of it in use by graph allocations\n"
       "vramtrace:   tracked on device 0: 0 B live" in r.err,
       "the post-mortem names the pool, and nothing is left 'held outside': " + r.err)
    ok("1. the CUDA graphs' memory pool keeps 12.00 MiB reserved that no graph allocation uses (12.00 MiB reserved, "
       "0 B in use)\nvramtrace:      next: cudaDeviceGraphMemTrim(0) gives it back between launches" in r.err,
       "the graph_pool finding: " + r.err)
    # The CLI reads the pool's figures back from the dump.
    work = tempfile.mkdtemp(prefix="vt-host-")
    try:
        subprocess.run([HOST, "graph"], cwd=work, env=host_env(work, dict(env, VRAMTRACE_REPORT="off")),
                       capture_output=True, timeout=120)
        text = subprocess.run([CLI, "report", os.path.join(work, "dump.json")], capture_output=True, text=True)
        ok("  CUDA graphs' memory pool: 12.00 MiB reserved, 0 B of it in use by graph allocations\n" in text.stdout,
           "vramtrace report: " + text.stdout + text.stderr)
        js = subprocess.run([CLI, "report", "--format", "json", os.path.join(work, "dump.json")], capture_output=True,
                            text=True)
        o = json.loads(js.stdout)["processes"][0]["ooms"][0]
        eq((o["graph_reserved_bytes"], o["graph_used_bytes"]), (12 * MiB, 0), "vramtrace report --format json")
    finally:
        shutil.rmtree(work, ignore_errors=True)


@test
def host_runtime_array_counted_as_the_driver_says():
    r = same_as_without([HOST, "runtime-array-size"])
    said = int(r.out.splitlines()[-1].split()[2])
    eq(said, 4000, "the simulated driver's requirement (its format for a 64-bit float channel)")
    eq([(a["api"], a["kind"], a["bytes"]) for a in r.dump["live"]], [("cudaMallocArray", "array", said)],
       "the record is what the driver's memory requirements say, not the channel's 8 bytes a texel")


@test
def host_budget_refusals_under_churn_explain_themselves():
    """Four threads allocate (plain and pitched) and free at random under a
    48M budget. Every refusal's figures explain it: the free bytes it
    gives are less than the request. Before, a refusal read the budget's
    figures again after it let go of its lock, and frees by other threads
    in between made some say 7M free for 5M asked, or the whole budget
    free for 22M."""
    limit = 48 << 20
    for i in range(5):
        r = run([HOST, "budget-churn"], report="off", env={"VRAMTRACE_LIMIT": "48M"})
        eq((r.out, r.rc), ("done\n", 0), f"run {i}")
        d = r.dump
        ooms = d["ooms"]
        ok(len(ooms) >= 20, f"run {i}: refusals to look at: {len(ooms)}")
        eq([(o["requested_bytes"], o["free_bytes"]) for o in ooms
            if not o["budget"] or o["free_bytes"] >= o["requested_bytes"]], [],
           f"run {i}: refusals whose figures say the request fit")
        ok(d["devices"][0]["peak_bytes"] <= limit, f"run {i}: peak {d['devices'][0]['peak_bytes']} within the budget")
        eq((d["totals"]["live_bytes"], d["events_dropped"]), (0, 0), f"run {i}: everything freed, every event kept")


@test
def host_post_mortem_of_one_device_leaves_the_others_growth_out():
    """Device 0's memory grows through the run; device 1 fails. The
    post-mortem speaks of device 1: its holder, and no 'grew through the
    run' finding about device 0's call site (before, device 0's growth was
    finding 1, a leak suspect for device 1's failure). A device that holds
    nothing says so, not that no device memory is live."""
    env = {"SIMGPU_DEVICES": "2", "SIMGPU_CAPACITY": "1G", "SIMGPU_CONTEXT": "50M"}
    r = run([HOST, "devices-growth"], env=env)
    eq(r.out, "fail_on_1 -> 2\n", "device 1's request fails")
    pm = r.err[r.err.index("vramtrace: out of memory in"):r.err.index("vramtrace: dump:")]
    step = source_line("t_host.c", "static CUresult step_on_1(")
    ok(f"vramtrace: largest holders of device 1's memory by call site (1 call site):\n"
       f"vramtrace:   100.00 MiB 100.0%      1 alloc   step_on_1 tests/progs/t_host.c:{step}\n" in pm, pm)
    ok(f"1. step_on_1 tests/progs/t_host.c:{step} holds 100% of the tracked memory" in pm, pm)
    eq((pm.count("grow_on_0"), pm.count("grew through the run")), (0, 0), "device 0's growth left out: " + pm)
    o = r.dump["ooms"][0]
    eq([f["id"] for f in o["findings"]], ["one_site_dominates"], "the dump's findings of the failure")
    e = run([HOST, "devices-growth-empty"], env=env)
    ok("vramtrace: largest holders of device 1's memory by call site: none (nothing of device 1's is live)\n" in e.err,
       e.err)


@test
def host_graph_instantiated_through_its_older_name_is_followed():
    """cuGetProcAddress("cuGraphInstantiate", 12000) hands out
    cuGraphInstantiateWithFlags (hooks.def's VT_ALIAS): what it hands out
    instantiates a graph that vramtrace knows, and the second launch's 1M
    is recorded (its free is not a free of an unknown address). The
    simulated driver hands out its exported function, which the preload
    interposes; a real driver's internal pointer takes the alias in
    resolve.c's vt_swap_proc, which this does not reach."""
    r = same_as_without([HOST, "graph-gpa"])
    eq(r.out, "cuGetProcAddress cuGraphInstantiate 12000 -> 0\ncuMemAllocAsync 1M, captured -> 0\ninstantiate -> 0\n"
              + "cuGraphLaunch -> 0\ncuMemFree_v2 1M -> 0\n" * 2, "the program's own view")
    d = r.dump
    eq([(e[1], e[3] >> 20, e[6]) for e in d["events"]],
       [("alloc", 1, "graph"), ("free", 1, "graph"), ("alloc", 1, "graph"), ("free", 1, "graph")],
       "each launch's 1M and its free")
    eq((d["totals"]["unknown_frees"], d["totals"]["live_bytes"]), (0, 0), "every free known")


@test
def host_graphs_built_node_by_node_and_frees_across_graphs():
    """Graphs built by hand (cuGraphAddMemAllocNode, cuGraphAddMemFreeNode,
    cuGraphAddNode in both versions, a child graph moved into its parent)
    are followed as captured ones are:
    each allocation node recorded when it is added (its device from the
    node's pool properties), each launch allocating and freeing what the
    graph frees and allocating again what the last launch's was freed of.
    A free node of another graph's allocation frees it when its own graph
    is launched: g2's (added by hand) and g3's (captured). Before, a graph
    built by hand was not seen at all, and g3's capture freed g1's 4M at
    once, while the memory stayed in use until g3 ran."""
    env = {"SIMGPU_DEVICES": "2"}
    r = same_as_without([HOST, "graph-built"], env=env)
    ok("cuGraphAddMemFreeNode 2M twice -> 1\n" in r.out and "cuGraphLaunch g2 with nothing to free -> 1\n" in r.out
       and "cuGraphAddNode child cloned -> 801\ncuGraphAddNode child moved -> 0\n" in r.out
       and "cuGraphLaunch parent -> 0\n" in r.out
       and "device 0 graph pool: used 0M, reserved 12M\ndevice 1 graph pool: used 0M, reserved 2M\n" in r.out,
       "the simulated driver refuses a second free node of one allocation and a launch with nothing to free: "
       + r.out)
    d = r.dump
    ev = [(e[1], e[3] >> 20, e[4], e[6]) for e in d["events"]]
    eq(ev, [("alloc", 8, 0, "graph"), ("alloc", 2, 1, "graph"), ("alloc", 4, 0, "graph"),  # g1's launch
            ("free", 8, 0, "graph"), ("free", 2, 1, "graph"),  # what g1 frees of its own
            ("free", 4, 0, "graph"),  # g2 frees g1's 4M
            ("alloc", 8, 0, "graph"), ("alloc", 2, 1, "graph"), ("alloc", 4, 0, "graph"),  # g1 again
            ("free", 8, 0, "graph"), ("free", 2, 1, "graph"),
            ("alloc", 1, 0, "device"),  # after g3's capture, before its launch
            ("free", 4, 0, "graph"),  # g3's launch frees g1's 4M
            ("free", 1, 0, "device"),
            ("alloc", 2, 0, "graph"), ("free", 2, 0, "graph")],  # the parent's launch runs the child's nodes
       "nothing held while graphs are built; every node at its launch, g1's 4M freed by the launches of g2 and g3, "
       "not by g3's capture")
    eq((d["totals"]["unknown_frees"], d["totals"]["live_bytes"], d["totals"]["alloc_count"], d["totals"]["free_count"]),
       (0, 0, 8, 8), "every free known, nothing left live")
    add = source_line("t_host.c", "cuGraphAddMemAllocNode 8M on 0")
    site = [s for s in d["stacks"] if any(f.get("line") == add for f in s["frames"])]
    ok(site, "the 8M node's stack is the call that added it (t_host.c line %d)" % add)


@test
def host_graphs_built_through_the_runtime_are_followed():
    """cudaGraphAddMemAllocNode and cudaGraphAddMemFreeNode reach the
    driver's functions through cuGetProcAddress, as the real runtime's do:
    g1's 8M and 4M recorded at their adding, g1's launch allocating and
    freeing its 8M, g2's launch freeing g1's 4M; the call site is the
    program's line, not the runtime's."""
    r = same_as_without([HOST, "graph-built-runtime"])
    ok("graph pool after g1: used 4M, reserved 12M\n" in r.out and "graph pool trimmed: used 0M, reserved 0M\n" in r.out,
       "the simulated runtime reaches the driver's graph pool: " + r.out)
    d = r.dump
    eq([(e[1], e[3] >> 20, e[6]) for e in d["events"]],
       [("alloc", 8, "graph"), ("alloc", 4, "graph"), ("free", 8, "graph"), ("free", 4, "graph")],
       "g1's launch, g2's launch")
    eq((d["totals"]["unknown_frees"], d["totals"]["live_bytes"]), (0, 0), "every free known, nothing left live")
    line = source_line("t_host.c", "cudaGraphAddMemAllocNode 8M")
    sites = [(st["frames"][st["site"]]["function"], st["frames"][st["site"]]["line"]) for st in d["stacks"]]
    ok(("graph_built_runtime", line) in sites, f"the 8M node's call site is the program's line {line}: {sites}")


@test
def host_graph_free_nodes_of_other_graphs_free_at_launch_and_unlaunched_graphs_hold_nothing():
    """A graph's allocation has memory only while a launch left it in use:
    B's captured free of A's 8M (through the runtime's cudaFreeAsync) frees
    it when B runs, not at the capture; C's captured free of it, made while
    nothing was in use there, frees the next launch's; D, captured and
    destroyed unlaunched, and E, built by hand and destroyed, hold nothing
    (before, their nodes were recorded at the capture and stayed live for
    ever: a leak at exit that no free could end)."""
    r = same_as_without([HOST, "graph-foreign"])
    eq(r.out.splitlines()[-1], "cuMemFree_v2 D's address -> 1", "D's address never held memory")
    d = r.dump
    eq([(e[1], e[3] >> 20, e[6]) for e in d["events"]],
       [("alloc", 8, "graph"),  # A
        ("free", 8, "graph"),  # B frees A's 8M
        ("alloc", 8, "graph"),  # A
        ("free", 8, "graph"),  # cuMemFree_v2
        ("alloc", 8, "graph"),  # A
        ("free", 8, "graph")],  # C
       "each launch of A allocates, B's and C's launches free")
    eq((d["totals"]["live_bytes"], d["totals"]["alloc_count"], d["totals"]["free_count"], d["totals"]["unknown_frees"]),
       (0, 3, 3, 1), "nothing left live; the one unknown free is the refused cuMemFree_v2 of D's address")
    lk = run([HOST, "graph-foreign"], report="stderr", env={"VRAMTRACE_LEAK_CHECK": "1"})
    eq(lk.rc, 0, "the leak check finds nothing: " + lk.err)


@test
def host_graph_instantiated_to_free_on_launch_frees_the_last_launchs_memory():
    """An executable graph instantiated with
    CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH frees, at each launch,
    what the last launch left in use: three launches are three 4M
    allocations and three frees (the last by cuMemFree_v2), not one."""
    r = same_as_without([HOST, "graph-auto-free"])
    eq(r.out, "cuMemAllocAsync 4M, captured -> 0\ncuGraphInstantiateWithFlags AUTO_FREE_ON_LAUNCH -> 0\n"
              + "cuGraphLaunch -> 0\n" * 3 + "cuMemFree_v2 4M -> 0\n", "the program's own view")
    d = r.dump
    eq([(e[1], e[3] >> 20, e[6]) for e in d["events"]], [("alloc", 4, "graph"), ("free", 4, "graph")] * 3,
       "each launch frees the last one's 4M first")
    eq((d["totals"]["live_bytes"], d["totals"]["unknown_frees"]), (0, 0), "every free known, nothing live")


@test
def host_graph_launch_counted_by_the_budget():
    """VRAMTRACE_LIMIT counts a graph's memory when a launch gives it: a
    captured 12M node leaves room for 8M under a 16M budget (before, the
    capture's record refused the 8M); the launch, 12M more with the 8M held,
    is refused as the device would, with a post-mortem marked budget; with
    the 8M freed it runs."""
    want = run([HOST, "graph-budget"], preload=False)
    eq(want.out.splitlines()[3], "cuGraphLaunch with 8M held -> 0", "a 16 GiB device runs it")
    r = run([HOST, "graph-budget"], env={"VRAMTRACE_LIMIT": "16M"})
    eq(r.out, "cuMemAllocAsync 12M, captured -> 0\ncuMemFreeAsync 12M, captured -> 0\ncuMemAlloc_v2 8M -> 0\n"
              "cuGraphLaunch with 8M held -> 2\ncuMemFree_v2 8M -> 0\ncuGraphLaunch -> 0\n",
       "the 8M fits beside the captured node; the launch with it held does not")
    d = r.dump
    eq([(o["api"], o["requested_bytes"] >> 20, o["budget"], o["live_bytes"] >> 20) for o in d["ooms"]],
       [("cuGraphLaunch", 12, True, 8)], "the refusal: the graph's 12M, 8M live")
    eq([(e[1], e[3] >> 20, e[6]) for e in d["events"]],
       [("alloc", 8, "device"), ("oom", 12, "graph"), ("free", 8, "device"), ("alloc", 12, "graph"),
        ("free", 12, "graph")], "the second launch allocates and frees its 12M")
    eq(d["devices"][0]["peak_bytes"] >> 20, 12, "the peak within the budget")
    hold = source_line("t_host.c", "static CUresult hold_8m(")
    ok(f"hold_8m tests/progs/t_host.c:{hold}" in r.err, "the post-mortem names the 8M's holder: " + r.err)
    # A relaunch with auto-free takes back the last launch's 4M first: under
    # a 6M budget it fits (before, the 4M held was counted twice).
    a = run([HOST, "graph-auto-free"], env={"VRAMTRACE_LIMIT": "6M"})
    eq(a.out, "cuMemAllocAsync 4M, captured -> 0\ncuGraphInstantiateWithFlags AUTO_FREE_ON_LAUNCH -> 0\n"
              + "cuGraphLaunch -> 0\n" * 3 + "cuMemFree_v2 4M -> 0\n", "no launch refused")
    eq(a.dump["ooms"], [], "no refusal recorded")


@test
def host_graph_nodes_of_a_joined_stream_and_of_each_threads_stream():
    """Nodes are kept by the graph captured into (the driver says which),
    not by stream: a stream that joined the capture through an event adds
    its 4M and 2M to the graph (before, they were lost when the first
    stream ended the capture: two frees unknown, nodes never launched); an
    invalidated capture's 16M holds nothing; two threads capturing their
    own per-thread default streams at once keep their nodes apart."""
    r = same_as_without([HOST, "graph-joined"])
    ok("cuGraphLaunch, cuMemFree_v2 1M, 4M -> 0 0 0\n" * 3 in r.out and
       "cuStreamSynchronize while captured -> 900\ncuStreamEndCapture of the invalidated capture -> 901\n" in r.out,
       "the program's own view: " + r.out)
    d = r.dump
    launch = [("alloc", 4, "graph"), ("alloc", 2, "graph"), ("alloc", 1, "graph"), ("free", 2, "graph"),
              ("free", 1, "graph"), ("free", 4, "graph")]
    eq([(e[1], e[3] >> 20, e[6]) for e in d["events"]], launch * 3,
       "each launch: the joined stream's nodes and the first stream's, the 2M freed by the graph; then the 1M and "
       "4M freed")
    eq((d["totals"]["live_bytes"], d["totals"]["unknown_frees"]), (0, 0), "every free known; the invalidated 16M not live")
    p = same_as_without([HOST, "graph-ptds"])
    eq(p.out, "".join(f"thread {i}: begin 0 alloc 0 end 0 instantiate 0, launches and frees failed 0\n" for i in range(2)),
       "both threads' captures and launches")
    d = p.dump
    eq(sorted((e[1], e[3] >> 20) for e in d["events"]), sorted([("alloc", 1), ("free", 1)] * 2 + [("alloc", 2), ("free", 2)] * 2),
       "each thread's graph allocates its own node at each launch")
    eq((d["totals"]["live_bytes"], d["totals"]["unknown_frees"]), (0, 0), "every free known, nothing live")


@test
def host_graph_captures_that_fail_and_graphs_that_are_gone():
    """An end the driver refuses while the capture goes on keeps the
    capture's nodes (before: its 8M was dropped, and its free unknown); a
    captured free of memory whose graph was destroyed is still a free node,
    freed when its graph runs (before: taken at the capture, after which the
    8M the driver still held was not counted); four invalidated captures
    leave nothing behind though the driver hands their graphs' handles out
    again (before: their 16M nodes stayed under the handles, and the next
    graph given one launched them: 64M of memory nobody held)."""
    r = same_as_without([HOST, "graph-end-fails"])
    eq(r.out, "cuMemAllocAsync 8M, captured -> 0\ncuStreamEndCapture with no graph -> 1\n"
              "cuMemAllocAsync 4M, still captured -> 0\ncuStreamEndCapture -> 0\ncuGraphLaunch -> 0\n"
              "cuMemFree_v2 8M, 4M -> 0 0\n", "the capture goes on after the refused end")
    d = r.dump
    eq([(e[1], e[3] >> 20) for e in d["events"]], [("alloc", 8), ("alloc", 4), ("free", 8), ("free", 4)],
       "both nodes launched and freed")
    eq((d["totals"]["live_bytes"], d["totals"]["unknown_frees"]), (0, 0), "every free known")
    r = same_as_without([HOST, "graph-owner-gone"])
    d = r.dump
    eq([(e[1], e[3] >> 20, e[6]) for e in d["events"]],
       [("alloc", 8, "graph"), ("alloc", 1, "device"), ("free", 8, "graph"), ("free", 1, "device")],
       "A's 8M freed by B's launch, after the 1M, not by B's capture")
    r = same_as_without([HOST, "graph-invalidated-reuse"])
    eq(r.out, "four invalidated captures, unexpected results 0\ngraph handles handed out again: 4\n"
              "launches and frees -> 0 0 0 0\n", "the simulated driver hands the handles out again")
    d = r.dump
    eq([(e[1], e[3] >> 20) for e in d["events"]], [("alloc", 1), ("free", 1)] * 2,
       "only the two good graphs' 1M, each launched and freed")
    eq(d["totals"]["live_bytes"], 0, "nothing left live")


@test
def host_graph_launch_refused_names_the_device_without_room():
    """A launch of a graph with 40M on device 0 and 20M on device 1, where
    50M of 64M are held, fails for want of device 1's memory: the
    post-mortem asks for device 1's 20M (before: device 0's 40M, with 64M
    free there, and a finding that blamed fragmentation)."""
    env = {"SIMGPU_DEVICES": "2", "SIMGPU_CAPACITY": "64M"}
    want = run([HOST, "graph-two-device-oom"], preload=False, env=env)
    r = run([HOST, "graph-two-device-oom"], env=env)
    eq(r.out, want.out, "every call's result as without vramtrace")
    eq(r.out.splitlines()[1], "cuGraphLaunch -> 2", "the launch fails")
    ok("vramtrace:   request: 20.00 MiB (20971520 bytes) by cuGraphLaunch on device 1" in r.err, r.err)
    ok("vramtrace:   device: 14.00 MiB free of 64.00 MiB\n" in r.err, r.err)
    eq([(o["device"], o["requested_bytes"] >> 20) for o in r.dump["ooms"]], [(1, 20)], "the failure's record")


@test
def host_graph_launch_refused_for_memory_has_its_post_mortem():
    """A graph launch the driver refuses for want of memory (its pool
    cannot reserve what the graph's allocation nodes need) is an
    out-of-memory failure: its post-mortem asks for the graph's 24M, at the
    launch's call site, and names what holds the device. Before, the launch
    failed with no post-mortem."""
    env = {"SIMGPU_CAPACITY": "64M"}
    want = run([HOST, "graph-launch-oom"], preload=False, env=env)
    eq(want.out, "cuGraphAddMemAllocNode 24M -> 0\ncuGraphAddMemFreeNode 24M -> 0\ncuGraphInstantiate -> 0\n"
                 "cuMemAlloc_v2 48M -> 0\ncuGraphLaunch with 48M held -> 2\ncuMemFree_v2 48M -> 0\ncuGraphLaunch -> 0\n",
       "without vramtrace: the first launch refused, the second run")
    r = run([HOST, "graph-launch-oom"], env=env)
    eq(r.out, want.out, "every call's result as without vramtrace")
    launch = source_line("t_host.c", "cuGraphLaunch with 48M held")
    hold = source_line("t_host.c", "static CUresult hold_48m(")
    ok("vramtrace:   request: 24.00 MiB (25165824 bytes) by cuGraphLaunch on device 0" in r.err, r.err)
    ok(f"vramtrace:   failing call: graph_launch_oom tests/progs/t_host.c:{launch}\n" in r.err, r.err)
    ok("vramtrace:   device: 16.00 MiB free of 64.00 MiB\n" in r.err, r.err)
    ok(f"vramtrace:    48.00 MiB 100.0%      1 alloc   hold_48m tests/progs/t_host.c:{hold}\n" in r.err, r.err)
    d = r.dump
    eq([(o["api"], o["requested_bytes"], o["device"], o["free_bytes"], o["live_bytes"]) for o in d["ooms"]],
       [("cuGraphLaunch", 24 << 20, 0, 16 << 20, 48 << 20)], "the failure's record")
    eq((d["totals"]["alloc_count"], d["totals"]["free_count"], d["totals"]["live_bytes"]), (2, 2, 0),
       "the 48M, the second launch's 24M; all freed")
    ok("vramtrace:   tracked on device 0: 48.00 MiB live in 1 allocation at the failure" in r.err,
       "the graph's node is not live before a launch gave it memory: " + r.err)


def run_with_closed_stderr(argv, preload, env=None):
    work = tempfile.mkdtemp(prefix="vt-host-")
    r, w = os.pipe()
    os.close(r)
    e = host_env(work, dict({"VRAMTRACE_REPORT": "stderr", "SIMGPU_CAPACITY": "64M"}, **(env or {})))
    if not preload:
        del e["LD_PRELOAD"]
    try:
        p = subprocess.run(argv, cwd=work, stdout=subprocess.PIPE, stderr=w, env=e, timeout=120)
    finally:
        os.close(w)
    reasons = []
    if os.path.exists(os.path.join(work, "dump.json")):
        with open(os.path.join(work, "dump.json")) as f:
            reasons.append(json.load(f)["reason"])
    shutil.rmtree(work, ignore_errors=True)
    return p.returncode, p.stdout.decode(), reasons


@test
def host_report_to_closed_pipe_raises_no_sigpipe():
    want = run_with_closed_stderr([HOST, "oom-closed-stderr"], preload=False)
    eq(want, (0, "cuMemAlloc_v2 -> 0\nhuge cuMemAlloc_v2 -> 2\n", []), "without vramtrace")
    eq(run_with_closed_stderr([HOST, "oom-closed-stderr"], preload=True), (0, want[1], ["exit"]),
       "status and output when the post-mortem and the exit report meet a pipe nobody reads")
    eq(run_with_closed_stderr([HOST, "oom-closed-stderr"], preload=True,
                              env={"VRAMTRACE_DEPTH": "bogus", "VRAMTRACE_REPORT": "off"}), (0, want[1], ["exit"]),
       "status and output when a bad option's warning meets a pipe nobody reads")


class Terminated:
    """A traced MODE of t_host (or a Python script: argv), run until it
    prints "ready"; then signalled from this process."""

    def __init__(self, argv, env=None):
        self.work = tempfile.mkdtemp(prefix="vt-host-")
        self.p = subprocess.Popen(argv, cwd=self.work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env=host_env(self.work, {"VRAMTRACE_REPORT": "stderr", **(env or {})}))
        self.out = []
        self.lines = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.err = []
        self.err_reader = threading.Thread(target=lambda: self.err.append(self.p.stderr.read()), daemon=True)
        self.err_reader.start()
        while not self.out or self.out[-1] != "ready\n":
            self.line()

    def _read(self):
        for line in self.p.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def line(self, timeout=60):
        """The program's next line of stdout (a Failure after timeout s)."""
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            self.p.kill()
            raise Failure(f"no line from the program in {timeout} s; so far {self.out}")
        if line is None:
            raise Failure(f"the program's stdout ended; so far {self.out}")
        self.out.append(line)
        return line

    def finish(self, timeout=60):
        """(status, stdout, stderr, dumps by name, seconds it took to end)."""
        t0 = time.monotonic()
        try:
            self.p.wait(timeout=timeout)
        finally:
            if self.p.poll() is None:
                self.p.kill()
                self.p.wait()
        took = time.monotonic() - t0
        # The pipes close when every process holding them is gone (a
        # forked child too).
        self.reader.join(timeout=timeout)
        self.err_reader.join(timeout=timeout)
        out = []
        while True:
            try:
                line = self.lines.get_nowait()
            except queue.Empty:
                break
            if line is not None:
                out.append(line)
        out = "".join(out)
        err = "".join(self.err)
        dumps = {}
        for name in sorted(os.listdir(self.work)):
            if name.endswith(".json"):
                dumps[name] = load_dump(os.path.join(self.work, name))
        shutil.rmtree(self.work, ignore_errors=True)
        return self.p.returncode, "".join(self.out) + out, err, dumps, took


def my_comm():
    with open("/proc/self/comm") as f:
        return f.read().rstrip("\n")


@test
def host_sigterm_from_another_process_writes_the_exit_dump_and_report():
    """A job ended by SIGTERM from another process (a scheduler's time
    limit, a launcher stopping the other ranks) with SIGTERM left to its
    default: the exit dump, report and leak check are written, saying who
    sent it, and the process still dies of SIGTERM. Before: nothing."""
    for leak_check in ("0", "1"):
        t = Terminated([HOST, "term-wait"], {"VRAMTRACE_LEAK_CHECK": leak_check})
        pid = t.p.pid
        t.p.send_signal(signal.SIGTERM)
        rc, out, err, dumps, _ = t.finish()
        eq(rc, -signal.SIGTERM, f"leak check {leak_check}: the process died of SIGTERM")
        eq(out, "alloc -> 0\nalloc -> 0\nalloc -> 0\nfree -> 0\nready\n", "stdout")
        first = err.splitlines(True)[0] if err else ""
        eq(first, f"vramtrace: exit in pid {pid} ({HOST}), ended by SIGTERM from pid {os.getpid()} ({my_comm()})\n",
           "the exit report's first line says who ended it")
        eq(list(dumps), ["dump.json"], "one dump")
        d = dumps["dump.json"]
        eq(d["reason"], "exit", "the exit dump")
        eq(d.get("ended_by"), {"signal": "SIGTERM", "from_pid": os.getpid(), "from": my_comm()}, "ended_by")
        eq(sorted((a["api"], a["bytes"]) for a in d["live"]), [("cuMemAlloc_v2", 1 << 20)] * 2, "live allocations")
        leak = "SUMMARY: vramtrace: 2097152 byte(s) leaked in 2 allocation(s).\n"
        eq(err.count(leak), 1 if leak_check == "1" else 0, "the leak check's summary")
        # The CLI says it too, in every format that has a header.
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "d.json")
            with open(path, "w") as f:
                json.dump(d, f)
            text = subprocess.run([CLI, "report", path], capture_output=True, text=True)
            eq(text.stdout.splitlines()[0].endswith(
                f"(dump written at exit, ended by SIGTERM from pid {os.getpid()} ({my_comm()}))"), True,
               f"the text report's header: {text.stdout.splitlines()[0]!r}")
            js = json.loads(subprocess.run([CLI, "report", "--format", "json", path], capture_output=True,
                                           text=True).stdout)
            eq(js["processes"][0]["ended_by"], d["ended_by"], "the JSON report's ended_by")
    # VRAMTRACE_ON_TERM=0: SIGTERM is left alone, nothing is written.
    t = Terminated([HOST, "term-wait"], {"VRAMTRACE_ON_TERM": "0"})
    t.p.send_signal(signal.SIGTERM)
    rc, out, err, dumps, _ = t.finish()
    eq((rc, err, dumps), (-signal.SIGTERM, "", {}), "VRAMTRACE_ON_TERM=0: died of SIGTERM, nothing written")


@test
def host_sigterm_and_dump_signal_after_the_program_closed_every_descriptor():
    """A program that closes every descriptor from 3 up after its first GPU
    call (a daemon's close_range or closefrom) still gets a dump for the
    dump signal, and at SIGTERM the exit dump, report and leak check, then
    dies of it; with files of its own opened at the numbers it freed (from
    3, and from 700 where vramtrace keeps its own), nothing of
    vramtrace's lands in them. Before, the handlers' pipe was closed with
    the rest: no dump, no report, not a word, status 143."""
    for reopen in (False, True):
        t = Terminated([HOST, "term-closefrom"] + (["reopen"] if reopen else []), {"VRAMTRACE_LEAK_CHECK": "1"})
        pid = t.p.pid
        t.p.send_signal(signal.SIGUSR2)
        ondemand = os.path.join(t.work, "dump.1.json")
        wait_for(lambda: os.path.exists(ondemand), f"reopen {reopen}: the on-demand dump", timeout=10)
        d = load_dump(ondemand)
        eq((d["reason"], sorted(a["bytes"] for a in d["live"])), ("signal", [1 << 20] * 2),
           f"reopen {reopen}: the on-demand dump")
        t.p.send_signal(signal.SIGTERM)
        t.p.wait(timeout=60)
        files = {}
        for name in sorted(os.listdir(t.work)):
            if name.startswith(("low", "high")):
                with open(os.path.join(t.work, name)) as f:
                    files[name] = f.read()
        rc, out, err, dumps, _ = t.finish()
        eq(rc, -signal.SIGTERM, f"reopen {reopen}: the process died of SIGTERM")
        said = "files 10 at 3 and up, 16 at 700 and up\n" if reopen else ""
        eq(out, f"alloc -> 0\nalloc -> 0\nalloc -> 0\nfree -> 0\n{said}ready\n", f"reopen {reopen}: stdout")
        eq(err.splitlines(True)[:2],
           [f"vramtrace: dump 1 of pid {pid} on request: {ondemand}\n",
            f"vramtrace: exit in pid {pid} ({HOST}), ended by SIGTERM from pid {os.getpid()} ({my_comm()})\n"],
           f"reopen {reopen}: the on-demand dump's line, then the exit report's first")
        eq(err.count("SUMMARY: vramtrace: 2097152 byte(s) leaked in 2 allocation(s).\n"), 1,
           f"reopen {reopen}: the leak check's summary")
        eq([l for l in err.splitlines() if "warning" in l], [], f"reopen {reopen}: no warning")
        eq(sorted(dumps), ["dump.1.json", "dump.json"], f"reopen {reopen}: the dumps")
        d = dumps["dump.json"]
        eq((d["reason"], d.get("ended_by"), sorted(a["bytes"] for a in d["live"])),
           ("exit", {"signal": "SIGTERM", "from_pid": os.getpid(), "from": my_comm()}, [1 << 20] * 2),
           f"reopen {reopen}: the exit dump")
        want = {f"low{i}": "a\n" for i in range(10)} | {f"high{i}": "a\n" for i in range(16)} if reopen else {}
        eq(files, want, f"reopen {reopen}: the program's files hold what it wrote, nothing more")


@test
def host_second_sigterm_ends_the_process_at_once():
    """While the exit's outputs are being written (here: a dump to a FIFO
    nobody reads, which waits 10 s), a second SIGTERM a second or more
    after the first ends the process at once, also a single-threaded one
    whose only thread waits in the first one's handler."""
    work = tempfile.mkdtemp(prefix="vt-fifo-")
    fifo = os.path.join(work, "d.json")
    os.mkfifo(fifo)
    try:
        t = Terminated([HOST, "term-wait"], {"VRAMTRACE_OUT": fifo, "VRAMTRACE_REPORT": "off"})
        t0 = time.monotonic()
        t.p.send_signal(signal.SIGTERM)
        time.sleep(1.5)
        t.p.send_signal(signal.SIGTERM)
        rc, _, err, _, _ = t.finish()
        took = time.monotonic() - t0
        eq(rc, -signal.SIGTERM, "died of SIGTERM")
        ok(took < 6, f"at the second SIGTERM, not after the dump's 10 s wait: {took:.1f} s")
    finally:
        shutil.rmtree(work, ignore_errors=True)


@test
def host_sigterm_handler_the_program_puts_in_later_is_its_own():
    """vramtrace's SIGTERM handler is not what the program sees: asked after
    the first GPU call, SIGTERM's action is the default, also as the old
    action its own sigaction returns; the program's handler then runs
    alone, and its exit writes the usual exit dump (no ended_by)."""
    t = Terminated([HOST, "term-query"])
    t.p.send_signal(signal.SIGTERM)
    rc, out, err, dumps, _ = t.finish()
    eq((rc, out), (7, "alloc -> 0\nSIGTERM: default\nreplaced: default\nready\nhandler ran\n"),
       "status and stdout")
    d = dumps["dump.json"]
    eq((d["reason"], "ended_by" in d, [(a["api"], a["bytes"]) for a in d["live"]]),
       ("exit", False, [("cuMemAlloc_v2", 1 << 20)]), "the exit dump of exit(7)")
    eq(err.splitlines()[0], f"vramtrace: exit in pid {t.p.pid} ({HOST})", "the report's first line")


@test
def host_sigterm_to_a_forked_child_ends_only_the_child():
    """A forked child (a data-loader worker) that never used the GPU gets
    SIGTERM: it dies of it, writing nothing, and the parent goes on (the
    child's handler and pipe were the parent's: a byte from it would have
    made the parent write its exit outputs and die). Then the parent's own
    SIGTERM."""
    t = Terminated([HOST, "term-fork"])
    child = int(next(l for l in t.out if l.startswith("child ")).split()[1])
    os.kill(child, signal.SIGTERM)
    # The parent reports the child's end, then waits again.
    eq(t.line(), "child: signal 15\n", "the child died of SIGTERM")
    eq(t.line(), "waiting\n", "the parent goes on")
    t.p.send_signal(signal.SIGTERM)
    rc, out, err, dumps, _ = t.finish()
    eq(rc, -signal.SIGTERM, "the parent died of SIGTERM")
    eq(err.count("vramtrace: exit in pid"), 1, f"one exit report, the parent's: {err!r}")
    eq(err.splitlines()[0], f"vramtrace: exit in pid {t.p.pid} ({HOST}), ended by SIGTERM from pid {os.getpid()} "
                            f"({my_comm()})", "the parent's report")
    eq([(n, d["pid"], len(d["live"])) for n, d in dumps.items()], [("dump.json", t.p.pid, 1)], "the parent's dump")


@test
def host_sigterm_ends_a_python_program_with_its_lines():
    """A Python program (no SIGTERM handler of its own) ended by SIGTERM:
    the exit dump has its allocation's Python line; signal.getsignal still
    says SIG_DFL, and signal.signal's old value too."""
    work = tempfile.mkdtemp(prefix="vt-pyterm-")
    script = os.path.join(work, "job.py")
    with open(script, "w") as f:
        f.write("import ctypes, signal, sys, time\n"
                "cu = ctypes.CDLL('libcuda.so.1')\n"
                "cu.cuInit(0)\n"
                "p = ctypes.c_uint64()\n"
                "print(cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(3 << 20)))\n"
                "print(signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)\n"
                "print('ready', flush=True)\n"
                "while True:\n"
                "    time.sleep(1)\n")
    try:
        t = Terminated([sys.executable, script])
        t.p.send_signal(signal.SIGTERM)
        rc, out, err, dumps, _ = t.finish()
        eq((rc, out), (-signal.SIGTERM, "0\nTrue\nready\n"), "status and stdout")
        d = dumps["dump.json"]
        eq(d["ended_by"]["signal"], "SIGTERM", "ended_by")
        eq([a["bytes"] for a in d["live"]], [3 << 20], "the live allocation")
        py = python_frames(d, d["live"][0]["stack"])
        eq(py[0][:2], [script, 5], f"the allocation's Python line, innermost: {py}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


@test
def host_sigterm_in_a_sleep_never_lets_the_program_go_on():
    """A SIGTERM while the program sleeps (its main thread in sleep(),
    poll(), a wait): the thread waits in vramtrace's handler while the exit
    outputs are written, so its call never returns early and the program
    never goes on as if unsignalled (before: sleep() returned at once, the
    program exited 0 in 2 of 5 runs, and no dump or leak report came)."""
    for _ in range(3):
        t = Terminated([HOST, "term-sleep"], {"VRAMTRACE_LEAK_CHECK": "1"})
        t.p.send_signal(signal.SIGTERM)
        rc, out, err, dumps, _ = t.finish()
        eq((rc, out), (-signal.SIGTERM, "alloc -> 0\nready\n"), f"died of SIGTERM in its sleep: {err[-300:]!r}")
        eq(err.count("SUMMARY: vramtrace: 1048576 byte(s) leaked in 1 allocation(s).\n"), 1, "the leak report")
        eq((list(dumps), dumps["dump.json"]["ended_by"]["signal"]), (["dump.json"], "SIGTERM"), "the exit dump")


@test
def host_sigterm_handler_kept_from_signal_is_the_default():
    """A program that puts its handler in with signal() after its first GPU
    call and keeps the old one to call it: the old one is SIG_DFL, as
    without vramtrace (before: vramtrace's, which, called as old(sig),
    read garbage for the signal's details and crashed the process)."""
    t = Terminated([HOST, "term-chain"])
    t.p.send_signal(signal.SIGTERM)
    rc, out, err, dumps, _ = t.finish()
    eq((rc, out), (-signal.SIGTERM, "alloc -> 0\nold: default\nready\n"), f"died of SIGTERM, not SIGSEGV: {err!r}")


@test
def host_sigterm_during_the_exit_lets_it_finish():
    """A SIGTERM that comes while the program's own exit writes its outputs
    (200,000 allocations: a tenth of a second and more): they are finished,
    the leak check's status stands (before: the process was killed in the
    middle, no dump, no leak report, status -15)."""
    for _ in range(3):
        t = Terminated([HOST, "term-at-exit", "200000"], {"VRAMTRACE_LEAK_CHECK": "1", "VRAMTRACE_REPORT": "stderr"})
        t.p.send_signal(signal.SIGTERM)
        rc, out, err, dumps, _ = t.finish()
        eq(err.count("SUMMARY: vramtrace: 102400000 byte(s) leaked in 200000 allocation(s).\n"), 1,
           f"the leak report, whole: {err[-300:]!r}")
        eq([d["totals"]["live_count"] for d in dumps.values()], [200000], "the exit dump, whole")
        ok(rc in (23, -signal.SIGTERM), f"the leak check's status, or SIGTERM's when it came first: {rc}")
        # One story: where the exit came first its status stands and the
        # outputs say no SIGTERM ended it (they said "ended by SIGTERM"
        # of a process that exited 23); where the SIGTERM came first, they
        # say so and it ends the process.
        d = list(dumps.values())[0]
        said = "ended by SIGTERM" in err
        eq((said, "ended_by" in d, "exit_status" in d), (rc != 23, rc != 23, rc == 23),
           f"status {rc}: the exit line's and the dump's account")


def terminated_run(flags, group):
    """`vramtrace run FLAGS -- t_host term-wait`, sent SIGTERM once ready:
    to its process group (group), else to vramtrace alone. (status,
    stderr, the exit dump)."""
    work = tempfile.mkdtemp(prefix="vt-termrun-")
    try:
        dump = os.path.join(work, "d.json")
        env = host_env(work)
        env.pop("LD_PRELOAD")
        p = subprocess.Popen([CLI, "run", *flags, "--out", dump, "--", HOST, "term-wait"], cwd=work, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            while p.stdout.readline() not in ("ready\n", ""):
                pass
            if group:
                os.killpg(p.pid, signal.SIGTERM)
            else:
                p.send_signal(signal.SIGTERM)
            _, err = p.communicate(timeout=60)
        finally:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        return p.returncode, err, load_dump(dump)
    finally:
        shutil.rmtree(work, ignore_errors=True)


@test
def run_sigterm_to_the_process_group_writes_the_exit_dump():
    """A scheduler's SIGTERM to the whole process group (Slurm's, at a time
    limit) reaches the command twice: directly, and passed on by
    `vramtrace run`. The second, within a second of the first, is the same
    request, not a second one that ends the process at once (before: 2 of
    3 runs wrote nothing)."""
    for _ in range(3):
        rc, err, d = terminated_run([], group=True)
        eq(rc, -signal.SIGTERM, "the run ends as its command: by SIGTERM")
        ok(", ended by SIGTERM from pid " in err, f"the exit report: {err[-500:]!r}")
        eq((d["reason"], d["ended_by"]["signal"], len(d["live"])), ("exit", "SIGTERM", 2), "the exit dump")


@test
def host_sigterm_while_the_thread_holds_a_c_library_lock_ends_soon():
    """A SIGTERM that interrupts the thread inside malloc (holding the
    arena's lock that the outputs need): the thread waits in the handler
    2 s at most, then lets the lock go; the outputs are written and the
    process dies of SIGTERM within seconds (before: 30 s)."""
    work = tempfile.mkdtemp(prefix="vt-mlock-")
    try:
        src = os.path.join(work, "m.c")
        with open(src, "w") as f:
            f.write('#include <cuda.h>\n#include <stdio.h>\n#include <stdlib.h>\n'
                    'int main(void) { CUdeviceptr p; cuInit(0); CUdevice d; CUcontext c; cuDeviceGet(&d, 0);\n'
                    '  cuDevicePrimaryCtxRetain(&c, d); cuCtxSetCurrent(c);\n'
                    '  printf("alloc -> %d\\nready\\n", (int)cuMemAlloc_v2(&p, 1 << 20)); fflush(stdout);\n'
                    '  for (;;) { void *q[64]; for (int i = 0; i < 64; i++) q[i] = malloc(64 + i * 97);\n'
                    '    for (int i = 0; i < 64; i++) free(q[i]); } }\n')
        exe = os.path.join(work, "m")
        p = subprocess.run(["cc", "-O1", "-I", os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "include"), "-o", exe, src, "-L", SIM,
                            "-lcuda", f"-Wl,-rpath,{SIM}"], capture_output=True, text=True)
        eq((p.returncode, p.stderr), (0, ""), "compiled")
        for _ in range(3):
            t = Terminated([exe])
            t0 = time.monotonic()
            t.p.send_signal(signal.SIGTERM)
            rc, out, err, dumps, _ = t.finish()
            took = time.monotonic() - t0
            eq((rc, list(dumps)), (-signal.SIGTERM, ["dump.json"]), f"died of SIGTERM after its exit dump: {err[-300:]!r}")
            ok(took < 15, f"within seconds: {took:.1f} s")
    finally:
        shutil.rmtree(work, ignore_errors=True)


@test
def run_passes_a_sigterms_sender_on():
    """A SIGTERM sent to `vramtrace run` (not to the group) goes on to the
    command with its sender's pid: the exit report names the sender, not
    vramtrace."""
    # --leak-check: vramtrace run stays the command's parent (without it,
    # it runs the command in its own place).
    rc, err, d = terminated_run(["--leak-check"], group=False)
    eq(rc, -signal.SIGTERM, "the run ends as its command: by SIGTERM")
    ok(f", ended by SIGTERM from pid {os.getpid()} ({my_comm()})\n" in err, f"the exit report: {err[-400:]!r}")
    eq(d["ended_by"], {"signal": "SIGTERM", "from_pid": os.getpid(), "from": my_comm()}, "ended_by")


@test
def host_every_failure_is_told_once():
    """Seven failures, two post-mortems (one a second): each failure is
    told once, by its post-mortem, by a line of a later post-mortem, or at
    the exit; a retry of a failure told (600 MiB twice) is told with it,
    repeats are one line with their count. Before: the failures between two
    post-mortems, and those after the last but the last, were told nowhere;
    listing them, a retry of the failure told was listed again (from an
    outside check)."""
    line = source_line("t_host.c", "CUresult r = cuMemAlloc_v2(&p, mib << 20);")
    site = f"untold_try tests/progs/t_host.c:{line}"
    also = re.compile(r"^vramtrace:   also failed, without a post-mortem of its own: (\S+ MiB) by cuMemAlloc_v2 on "
                      r"device 0 at (\S+ \S+), thread \d+, at +[0-9.]+s(, \d+ times)?$")
    for leak_check in ("0", "1"):
        r = run([HOST, "untold"], env={"SIMGPU_CAPACITY": "512M", "VRAMTRACE_LEAK_CHECK": leak_check})
        eq((r.rc, r.out), (0, "".join(f"{m} -> 2\n" for m in (600, 600, 700, 700, 800, 900, 950))),
           f"leak check {leak_check}: the program's own results: {r.err}")
        lines = r.err.splitlines()
        eq([l.split("request: ")[1].split(" (")[0] for l in lines if l.startswith("vramtrace:   request: ")],
           ["600.00 MiB", "800.00 MiB", "950.00 MiB"], f"leak check {leak_check}: the requests told in full")
        eq([(m.group(1), m.group(2), m.group(3)) for m in map(also.match, lines) if m],
           [("700.00 MiB", site, ", 2 times"), ("900.00 MiB", site, None)],
           f"leak check {leak_check}: the failures told in a line:\n{r.err}")
        eq(len([l for l in lines if "also failed" in l]), 2, f"leak check {leak_check}: no other such line")
        eq(len([l for l in lines if "out-of-memory failure #7, the last, had no post-mortem of its own" in l]), 1,
           f"leak check {leak_check}: the last at the exit")
        eq([o["requested_bytes"] >> 20 for o in r.dump["ooms"]], [600, 600, 700, 700, 800, 900, 950],
           f"leak check {leak_check}: the dump's failures")


@test
def host_sigterm_default_put_back_writes_the_exit_outputs():
    """A program that has a SIGTERM handler of its own for a while and then
    puts the default back (signal() with the old handler it was given,
    SIG_DFL; or sigaction with SIG_DFL): a SIGTERM then writes the exit
    outputs, as before the handler (before: the process died with nothing
    written; from an outside check)."""
    for mode in ("term-restore", "term-restore-sigaction"):
        t = Terminated([HOST, mode])
        pid = t.p.pid
        t.p.send_signal(signal.SIGTERM)
        rc, out, err, dumps, _ = t.finish()
        eq((rc, out), (-signal.SIGTERM, "alloc -> 0\nrestored: default\nready\n"), f"{mode}: died of SIGTERM: {err!r}")
        eq(err.splitlines(True)[0] if err else "",
           f"vramtrace: exit in pid {pid} ({HOST}), ended by SIGTERM from pid {os.getpid()} ({my_comm()})\n",
           f"{mode}: the exit report")
        eq([(n, d["reason"]) for n, d in dumps.items()], [("dump.json", "exit")], f"{mode}: the exit dump")


@test
def host_main_thread_ending_by_pthread_exit_ends_with_its_last_thread():
    """A main thread that ends by pthread_exit: the process ends, status 0,
    when its last thread returns, and the exit's outputs and leak check
    come then, as LeakSanitizer's do. Before, vramtrace's helper threads
    (the dump signal's watcher, the live publisher), which take no signal,
    kept it alive for ever, with a SIGTERM pending and never taken (from an
    outside check). Also where the worker's first GPU call (which starts
    the helpers) comes after the main thread is gone."""
    prog = os.path.join(T, "t_pexit")
    bare = run([prog], preload=False)
    eq((bare.rc, bare.out), (0, "worker done\n"), "without vramtrace")
    for mode in ([], ["late"]):
        started = time.monotonic()
        r = run([prog] + mode, env={"VRAMTRACE_LEAK_CHECK": "1"})
        took = time.monotonic() - started
        eq((r.rc, r.out), (23, "worker done\n"), f"{mode}: the leak check's status: {r.err[-1500:]}")
        ok(took < 30, f"{mode}: ended in {took:.1f} s")
        eq([l for l in r.err.splitlines() if l.startswith(("Direct leak", "SUMMARY"))],
           ["Direct leak of 1048576 byte(s) in 1 object(s) allocated from:",
            "SUMMARY: vramtrace: 1048576 byte(s) leaked in 1 allocation(s)."], f"{mode}: the leak report")
        eq([(d["reason"], d["totals"]["live_bytes"], d["totals"]["alloc_count"]) for d in r.dumps],
           [("exit", 1 << 20, 2)], f"{mode}: the exit dump")
        q = run([prog] + mode)
        eq((q.rc, q.out), (0, "worker done\n"), f"{mode}: without the leak check")
        ok("vramtrace: exit in pid" in q.err and "live at exit: 1.00 MiB in 1 allocation" in q.err,
           f"{mode}: the exit summary: {q.err[-1500:]}")


@test
def host_reports_after_the_main_thread_ended_keep_names_and_command():
    """Once the main thread has ended by pthread_exit, its /proc/self
    entries read empty (maps, cmdline) or are gone (map_files): every
    report was "?? 0x..." with no module, "out of memory in pid N" had no
    command and the dump's argv was [] (from an outside check). Now they
    are read from a thread that lives: the post-mortem, the leak report,
    the dump and a child's exit summary (forked from a thread that then
    returned) name functions, files and lines, and the command."""
    prog = os.path.join(T, "t_pexit")
    line = {n: source_line("t_pexit.c", text) for n, text in
            (("main", "cudaMalloc(&kept, 2 << 20)"), ("kept", "    cudaMalloc(&kept, 1 << 20);"),
             ("huge", "cudaMalloc(&huge, (size_t)1 << 40)"), ("forker", "cudaMalloc(&kept, 3 << 20)"))}
    r = run([prog, "oom"], env={"VRAMTRACE_LEAK_CHECK": "1"})
    eq(r.rc, 23, f"the leak check's status: {r.err[-1500:]}")
    pid = r.dump["pid"]
    lines = r.err.splitlines()
    eq([l for l in lines if "out of memory in pid" in l or "failing call:" in l or " 1 alloc  " in l],
       [f"vramtrace: out of memory in pid {pid} ({prog})",
        f"vramtrace:   failing call: failing_worker tests/progs/t_pexit.c:{line['huge']}",
        f"vramtrace:     2.00 MiB  66.7%      1 alloc   main tests/progs/t_pexit.c:{line['main']}",
        f"vramtrace:     1.00 MiB  33.3%      1 alloc   failing_worker tests/progs/t_pexit.c:{line['kept']}"],
       "the post-mortem")
    eq([l for l in lines if l.startswith(("Direct leak", "    call site:", "SUMMARY"))],
       ["Direct leak of 2097152 byte(s) in 1 object(s) allocated from:",
        f"    call site: main tests/progs/t_pexit.c:{line['main']}",
        "Direct leak of 1048576 byte(s) in 1 object(s) allocated from:",
        f"    call site: failing_worker tests/progs/t_pexit.c:{line['kept']}",
        "SUMMARY: vramtrace: 3145728 byte(s) leaked in 2 allocation(s)."], "the leak report")
    ok(re_frame("main", "t_pexit.c", line["main"], r.err), "the leak's frame lines:\n" + r.err)
    eq(r.dump["argv"], [prog, "oom"], "the dump's command")
    eq(sorted((site(r.dump, a["stack"])["function"], os.path.basename(site(r.dump, a["stack"])["module"]))
              for a in r.dump["live"]), [("failing_worker", "t_pexit"), ("main", "t_pexit")], "the dump's frames")
    c = run([prog, "fork"])
    eq(c.out, "child: exit 0\n", "the forked child's status")
    child = [d["pid"] for d in c.dumps if d["totals"]["live_bytes"] == 3 << 20]
    eq(len(child), 1, "the child's exit dump")
    ok(f"vramtrace: exit in pid {child[0]} ({prog})\n" in c.err, f"the child's exit summary names the command: {c.err}")
    eq([l for l in c.err.splitlines() if " 1 alloc  " in l],
       [f"vramtrace:     3.00 MiB 100.0%      1 alloc   forker tests/progs/t_pexit.c:{line['forker']}"],
       "the child's holders")


@test
def host_child_forked_from_a_thread_ends_when_that_thread_returns():
    """A child forked from a thread other than the main one has that thread
    as its only one: when it returns from its start routine, the child
    ends, status 0, with its exit's outputs and leak check, as one whose
    main thread ended by pthread_exit. Before, once the child had made a
    GPU call, vramtrace's helper threads (started again in the child) kept
    it alive for ever, its main thread a zombie, and the parent's waitpid
    never returned (from an outside check; Python's os.fork in a
    threading.Thread the same)."""
    prog = os.path.join(T, "t_pexit")
    bare = run([prog, "fork"], preload=False)
    eq((bare.rc, bare.out), (0, "child: exit 0\n"), "without vramtrace")
    started = time.monotonic()
    r = run([prog, "fork"])
    took = time.monotonic() - started
    eq((r.rc, r.out), (0, "child: exit 0\n"), f"the child's status: {r.err[-1500:]}")
    ok(took < 15, f"ended in {took:.1f} s")
    eq([l for l in r.err.splitlines() if l.startswith("vramtrace:   allocations ")],
       ["vramtrace:   allocations 1, frees 0, failed 0 (out of memory 0)",
        "vramtrace:   allocations 1, frees 1, failed 0 (out of memory 0)"], "the child's, then the parent's exit summary")
    eq(sorted((d["reason"], d["totals"]["live_bytes"], d["totals"]["alloc_count"]) for d in r.dumps),
       [("exit", 0, 1), ("exit", 3 << 20, 1)], "the parent's and the child's exit dumps")
    c = run([prog, "fork"], env={"VRAMTRACE_LEAK_CHECK": "1"})
    eq((c.rc, c.out), (0, "child: exit 23\n"), f"the child's leak check's status: {c.err[-1500:]}")
    eq([l for l in c.err.splitlines() if l.startswith(("Direct leak", "SUMMARY"))],
       ["Direct leak of 3145728 byte(s) in 1 object(s) allocated from:",
        "SUMMARY: vramtrace: 3145728 byte(s) leaked in 1 allocation(s)."], "the child's leak report")


@test
def host_memory_a_stream_ordered_pool_keeps_is_not_held_outside():
    """The device's default pool, told to keep what it gets back, holds 4 GiB
    that no allocation uses when a cudaMalloc of 5 GiB fails: the
    post-mortem names the pools' reserved and in-use bytes and says what
    gives them back; nothing is called held outside the tracked
    allocations (it was: "4.00 GiB (CUDA context, other processes,
    untracked APIs)"; under PyTorch's cudaMallocAsync backend, which
    `vramtrace run --tensors` uses, the same; from an outside check). The
    dump and `vramtrace report` say the same."""
    prog = os.path.join(T, "t_poolkeep")
    r = run([prog], env={"SIMGPU_CAPACITY": "8G"})
    eq((r.rc, r.out), (0, "5 GiB: 2\n"), "the program's own run")
    lines = r.err.splitlines()
    eq([l for l in lines if "stream-ordered memory pools" in l or "held outside" in l],
       ["vramtrace:   stream-ordered memory pools: 4.00 GiB reserved, 0 B of it in use by allocations",
        "vramtrace:   1. the stream-ordered memory pools keep 4.00 GiB reserved that no allocation uses (4.00 GiB "
        "reserved, 0 B in use)"], "the post-mortem's lines")
    o = r.dump["ooms"][0]
    eq((o["pool_reserved_bytes"], o["pool_used_bytes"], [f["id"] for f in o["findings"]]),
       (4 << 30, 0, ["stream_pool"]), "the dump's failure")
    with workdir("vt-host-") as work:
        path = os.path.join(work, "d.json")
        json.dump({k: v for k, v in r.dump.items() if k != "_path"}, open(path, "w"))
        text = subprocess.run([CLI, "report", path], capture_output=True, text=True).stdout
        ok("  stream-ordered memory pools: 4.00 GiB reserved, 0 B of it in use by allocations\n" in text and
           "held outside" not in text, text)
        j = json.loads(subprocess.run([CLI, "report", "--format", "json", path], capture_output=True, text=True).stdout)
        x = j["processes"][0]["ooms"][0]
        eq((x["pool_reserved_bytes"], x["pool_used_bytes"]), (4 << 30, 0), "the CLI's JSON")
        page = subprocess.run([CLI, "report", "--format", "html", path], capture_output=True, text=True).stdout
        ok("<li>stream-ordered memory pools: 4.00 GiB reserved, 0 B of it in use by allocations</li>" in page and
           "held outside tracked" not in page, "the page")


@test
def host_memory_the_finding_that_makes_it_fit_comes_first():
    """The same pool keeping 4 GiB unused while the program holds 1 GiB of
    it, all the tracked memory, when 5 GiB fails with 3 GiB free: freeing
    the holder would leave 4 GiB, trimming the pool 7 GiB. The pool's
    finding comes first and the holder's says it is not enough alone (the
    holder came first, "shrink or free" it; from an outside check). The
    dump and `vramtrace report` say the same."""
    prog = os.path.join(T, "t_poolkeep")
    r = run([prog, "held"], env={"SIMGPU_CAPACITY": "8G", "SIMGPU_CONTEXT": "0"})
    eq((r.rc, r.out), (0, "5 GiB: 2\n"), "the program's own run")
    site = f"keep_one tests/progs/t_poolkeep.c:{source_line('t_poolkeep.c', 'return cudaMallocAsync(p, n, s);')}"
    pm = r.err.split("vramtrace: exit in pid")[0]
    said = pm.split("vramtrace: what the numbers say, most likely first:\n")[1].splitlines()[:4]
    eq(said,
       ["vramtrace:   1. the stream-ordered memory pools keep 4.00 GiB reserved that no allocation uses (5.00 GiB "
        "reserved, 1.00 GiB in use)",
        "vramtrace:      next: cudaMemPoolTrimTo(pool, 0) gives it back; a lower release threshold "
        "(cudaMemPoolAttrReleaseThreshold) keeps less",
        f"vramtrace:   2. {site} holds 100% of the tracked memory (1.00 GiB in 1 allocation); freed, it would leave "
        "4.00 GiB free, less than the 5.00 GiB asked: not enough alone",
        f"vramtrace:      next: shrink or free what {site} allocates before the failing call"], "the findings")
    eq([f["id"] for f in r.dump["ooms"][0]["findings"]], ["stream_pool", "one_site_dominates"], "the dump's order")
    with workdir("vt-host-") as work:
        path = os.path.join(work, "d.json")
        json.dump({k: v for k, v in r.dump.items() if k != "_path"}, open(path, "w"))
        text = subprocess.run([CLI, "report", path], capture_output=True, text=True).stdout
        ok("  1. the stream-ordered memory pools keep 4.00 GiB reserved" in text and
           f"  2. {site} holds 100% of the tracked memory (1.00 GiB in 1 allocation); freed, it would leave 4.00 GiB "
           "free, less than the 5.00 GiB asked: not enough alone\n" in text, text)


@test
def host_holders_not_enough_alone_are_named_with_those_that_are():
    """Two holders of 300 MiB each, 424 MiB free, 900 MiB asked: the first
    was said "not enough alone" and its "shrink or free" given as the step,
    the second never named (an outside check). Now the finding says which
    holders freed together would be enough, and the step names them; past
    two, how many of the next largest."""
    prog = os.path.join(T, "t_twosites")
    line = lambda f: f"tests/progs/t_twosites.c:{source_line('t_twosites.c', f'void {f}(')}"
    a, b = f"site_a {line('site_a')}", f"site_b {line('site_b')}"
    r = run([prog, "300", "300", "900"], env={"SIMGPU_CAPACITY": "1G", "SIMGPU_CONTEXT": "0"})
    eq((r.rc, r.out), (0, "2\n"), "the program's own run")
    said = r.err.split("vramtrace: what the numbers say, most likely first:\n")[1].splitlines()[:2]
    eq(said, [f"vramtrace:   1. {a} holds 50% of the tracked memory (300.00 MiB in 1 allocation); freed, it would "
              f"leave 724.00 MiB free, less than the 900.00 MiB asked: not enough alone; with {b} (300.00 MiB) freed "
              "too, 1.00 GiB would be free: enough",
              f"vramtrace:      next: shrink or free what {a} and {b} allocate before the failing call: the two "
              "together"], "two together")
    r = run([prog, "500", "200", "950", "100"], env={"SIMGPU_CAPACITY": "1G", "SIMGPU_CONTEXT": "0"})
    said = r.err.split("vramtrace: what the numbers say, most likely first:\n")[1].splitlines()[:2]
    eq(said, [f"vramtrace:   1. {a} holds 62% of the tracked memory (500.00 MiB in 1 allocation); freed, it would "
              "leave 724.00 MiB free, less than the 950.00 MiB asked: not enough alone; with the next 2 largest call "
              "sites freed too, 1.00 GiB would be free: enough",
              f"vramtrace:      next: shrink or free what {a} and the next 2 largest call sites allocate before the "
              "failing call (the holders table lists them)"], "three together")
    eq([f["id"] for f in r.dump["ooms"][0]["findings"]], ["one_site_dominates"], "the dump's findings")


@test
def host_program_in_a_folder_named_with_a_newline_is_symbolized():
    """A program in a folder whose name holds a newline: /proc/self/maps
    names its file with the kernel's escape ("nl\\012x"), which names no
    file, and its frames were "??"; worse, a folder of that literal name
    beside it held another program, whose symbols were then read. The file
    is now named by the kernel's link to the mapping itself (from an
    outside check)."""
    with workdir("vt-host-nl-") as work:
        real = os.path.join(work, "nl\nx")
        decoy = os.path.join(work, "nl\\012x")
        os.mkdir(real)
        os.mkdir(decoy)
        shutil.copy(os.path.join(T, "t_leaks"), os.path.join(real, "t_leaks"))
        shutil.copy(os.path.join(T, "t_deepleak"), os.path.join(decoy, "t_leaks"))   # not the one that runs
        r = run([os.path.join(real, "t_leaks")], env={"VRAMTRACE_LEAK_CHECK": "1"})
        eq(r.rc, 23, r.err[-1500:])
        sites = [l for l in r.err.splitlines() if l.startswith("    call site: ")]
        ok(sites and all(re.match(r"    call site: \w+ tests/progs/t_leaks\.c:\d+$", l) for l in sites),
           f"every call site named from the program's own file: {sites}")


@test
def host_pages_made_before_a_failed_one_are_the_requests_own():
    """A request made of pages (PyTorch's expandable segments make every
    20 MiB page of a tensor, then map them): the pages one call site made
    one after another, not mapped, before the one refused are the failing
    request's own. They were told as the largest holder ("holds 99% of the
    tracked memory", with batch-size advice) of a tensor larger than the
    device. The post-mortem says what the request took, the holders are
    the rest, the finding is the request's; the dump and `vramtrace
    report` of it say the same. Another request's allocation between the
    pages ends the run: the page before it is a holder; that request (40
    MiB so far) fits the 50 MiB device without the 21 MiB held, so it is
    not said to be what does not fit alone (it was: "not what is held")."""
    prog = os.path.join(T, "t_pages")
    line = source_line("t_pages.c", "return cuMemCreate(&h, 20 * MiB, &prop, 0);")
    site = f"page tests/progs/t_pages.c:{line}"
    MiB = 1 << 20
    for steps, count, held, rows in (
            ("page page page", 2, "0 B", ["vramtrace: largest holders by call site: none (no device memory is live)"]),
            ("page other page page", 1, "21.00 MiB",
             ["vramtrace: largest holders by call site (2 call sites):",
              f"vramtrace:    20.00 MiB  95.2%      1 alloc   {site}"])):
        r = run([prog] + steps.split(), env={"SIMGPU_CAPACITY": "50M"})
        eq(r.out.splitlines()[-1], "page -> 2", f"{steps}: the last page refused")
        taken = (f"taken by this request before that call: {count * 20}.00 MiB in {count} handle{'s' if count > 1 else ''} "
                 "made one after another at this call site and not mapped yet (a request made of pages, as PyTorch's "
                 "expandable segments make them): the request's own, not memory the program holds; counted in the "
                 "tracked bytes below, not among the holders")
        pm = r.err[:r.err.index("vramtrace: exit in pid")]
        eq([l for l in pm.splitlines() if "taken by this request" in l], ["vramtrace:   " + taken],
           f"{steps}: the post-mortem's request")
        got = pm.splitlines()
        at = got.index(rows[0])
        eq(got[at:at + len(rows)], rows, f"{steps}: the holders, less the request's own")
        finding = (f"this request made {count} handle{'s' if count > 1 else ''} ({count * 20}.00 MiB) before the one of "
                   f"20.00 MiB that failed: {count * 20 + 20}.00 MiB asked so far, no less than everything else the "
                   f"program holds on the device ({held}); ")
        if count == 2:   # 60 MiB asked of a 50 MiB device
            finding += "it is the request that does not fit, not what is held"
            nxt = f"make that tensor smaller at {site} (batch or sequence length) or shard it across devices"
        else:            # 40 MiB asked, 21 MiB held
            finding += ("that much fits the 50.00 MiB this process can have of the device, and with what is held it "
                        "does not (how much more the request wanted is not known here)")
            nxt = (f"make that tensor smaller at {site} (batch or sequence length), or free what the program holds "
                   "on the device before it (21.00 MiB, the holders)")
        ok(f"vramtrace:   1. {finding}\nvramtrace:      next: {nxt}\n" in pm, f"{steps}: the finding: {pm}")
        eq("of the tracked memory" in pm, False, f"{steps}: no holder said to hold it")
        o = r.dump["ooms"][0]
        eq((o["taken_bytes"], o["taken_count"], o["live_bytes"]),
           (count * 20 * MiB, count, (count * 20 + (21 if count == 1 else 0)) * MiB), f"{steps}: the dump's failure")
        eq([(f["id"], f["finding"], f["next"]) for f in o["findings"]], [("request_takes_most", finding, nxt)],
           f"{steps}: the dump's findings")
        with workdir("vt-taken-") as work:
            path = os.path.join(work, "d.json")
            json.dump({k: v for k, v in r.dump.items() if k != "_path"}, open(path, "w"))
            text = subprocess.run([CLI, "report", path], capture_output=True, text=True).stdout
            eq([l for l in text.splitlines() if "taken by this request" in l], ["  " + taken],
               f"{steps}: vramtrace report's request")
            ok(f"    1. {finding}\n       next: {nxt}\n" in text, f"{steps}: vramtrace report's finding: {text}")


@test
def host_failures_are_named_by_the_memory_asked_for_not_device_minus_one():
    # Five refusals of pinned host memory at one call site, then one of
    # device memory. Every line that names a failure names the pinned host
    # memory as the post-mortem's request line does: the library's "also
    # failed" line, the text report's and the HTML page's failures by
    # request and the page's OOM lines said "on device -1".
    with workdir("vt-host-") as work:
        p = subprocess.run([HOST, "host-ooms"], env=host_env(work, {"SIMGPU_CAPACITY": "1G"}), cwd=work,
                           capture_output=True, text=True, timeout=120)
        eq(p.stdout, "cudaMallocHost 64M -> 0\n" + "cudaMallocHost 1P -> 2\n" * 5 + "cudaMalloc 1P -> 2\n",
           "the program's own")
        host = source_line("t_host.c", "i < 5; i++) printf(\"cudaMallocHost 1P")
        dev = source_line("t_host.c", "cudaMalloc(&d, 1ull << 50)")
        gpu = "vramtrace simulated GPU, GPU-00010203-0405-0607-0809-0a0b0c0d0e0f"
        eq([re.sub(r"thread \d+, at \d+\.\d+s", "thread N, at T", l)
            for l in re.findall(r"^vramtrace:   (?:request:|also failed,) .*", p.stderr, re.M)],
           ["vramtrace:   request: 1.00 PiB (1125899906842624 bytes) by cudaMallocHost (pinned host memory)",
            "vramtrace:   also failed, without a post-mortem of its own: 1.00 PiB by cudaMallocHost (pinned host "
            f"memory) at host_ooms tests/progs/t_host.c:{host}, thread N, at T, 4 times",
            f"vramtrace:   request: 1.00 PiB (1125899906842624 bytes) by cudaMalloc on device 0 ({gpu})"],
           "the library's request lines:\n" + p.stderr)
        ok("device -1" not in p.stderr, p.stderr)
        dump = os.path.join(work, "dump.json")
        text = subprocess.run([CLI, "report", dump, "--top", "2"], capture_output=True, text=True, timeout=60)
        eq(text.returncode, 0, "report: " + text.stderr)
        at = text.stdout.splitlines().index("out-of-memory failures by request:")
        eq([re.sub(r"\d+\.\d+ s", "T s", l) for l in text.stdout.splitlines()[at + 1:at + 3]],
           [f"  1.00 PiB by cudaMallocHost (pinned host memory) at host_ooms tests/progs/t_host.c:{host}: 5 times, "
            "from T s to T s",
            f"  1.00 PiB by cudaMalloc on device 0 at host_ooms tests/progs/t_host.c:{dev}: once, at T s"],
           "the text report's failures by request")
        ok("device -1" not in text.stdout, text.stdout)
        html = subprocess.run([CLI, "report", dump, "--top", "2", "--format", "html"], capture_output=True,
                              text=True, timeout=60)
        eq(html.returncode, 0, "html: " + html.stderr)
        eq([re.sub(r"\d+\.\d+ s", "T s", l) for l in re.findall(r'<p class="oom-line">([^<]*)</p>', html.stdout)],
           [f"out of memory #{n} at T s: 1.00 PiB requested by cudaMallocHost (pinned host memory); 64.00 MiB "
            "tracked live" for n in (1, 2)] +
           ["out of memory #6 at T s: 1.00 PiB requested by cudaMalloc on device 0; 1.00 GiB free of 1.00 GiB; "
            "0 B tracked live"],
           "the page's OOM lines")
        eq([re.sub(r"\d+\.\d+ s", "T s", l) for l in re.findall(r"<li>([^<]*)</li>",
                                                             html.stdout.split('<ul class="oom-requests">')[1])[:2]],
           [f"1.00 PiB by cudaMallocHost (pinned host memory) at host_ooms tests/progs/t_host.c:{host}: 5 times, "
            "from T s to T s", f"1.00 PiB by cudaMalloc on device 0 at host_ooms tests/progs/t_host.c:{dev}: once, "
            "at T s"], "the page's failures by request")
        ok("device -1" not in html.stdout, "the page says device -1")
        # A second process of the same: the page's first to fail of the two.
        subprocess.run([HOST, "host-ooms"], env=host_env(work, {"SIMGPU_CAPACITY": "1G", "VRAMTRACE_REPORT": "off",
                                                                "VRAMTRACE_OUT": os.path.join(work, "two.json")}),
                       cwd=work, capture_output=True, timeout=120, check=True)
        two = subprocess.run([CLI, "report", dump, os.path.join(work, "two.json"), "--format", "html"],
                             capture_output=True, text=True, timeout=60)
        eq(two.returncode, 0, "html of two: " + two.stderr)
        first = re.search(r'<p class="first-to-fail">first to fail: pid \d+, ([^<:]*)', two.stdout)
        eq(re.sub(r"\d+\.\d+ s", "T s", first.group(1)) if first else None,
           "1.00 PiB requested by cudaMallocHost (pinned host memory) at T s", "the page's first to fail")
