"""Integration tests of how reports reach a stderr that other processes
share: in whole lines."""
import re
import threading
import time

from run_tests import *

DEEPLEAK = os.path.join(T, "t_deepleak")
FRAME = re.compile(r"^    #\d+ 0x[0-9a-f]+ in \S+ .*$")


@test
def leak_reports_of_processes_sharing_a_stderr_keep_their_lines():
    """Four processes that leak 200 allocations each, from stacks of 30-odd
    frames, end at once with one pipe as their stderr (as test workers
    share a CI log). A report was written a piece at a time, names a byte
    at a time: lines came out mixed with other processes' (5 to 7% of
    frame lines). Now each report goes out in whole lines: every line is
    one of a report's own."""
    e = dict(os.environ, LD_LIBRARY_PATH=SIM, LD_PRELOAD=LIB, VRAMTRACE_OUT="off", VRAMTRACE_LEAK_CHECK="1")
    e.pop("VRAMTRACE_REPORT", None)
    p = subprocess.run(["sh", "-c", f"for i in 1 2 3 4; do {DEEPLEAK} 200 & done; wait"], env=e,
                       capture_output=True, text=True, timeout=300)
    eq(p.returncode, 0, "the shell's own status")
    lines = p.stderr.splitlines()
    frames = [l for l in lines if re.search(r"#\d+", l)]
    bad = [l for l in frames if not FRAME.match(l)]
    eq(bad[:5], [], f"frame lines mixed with others ({len(bad)} of {len(frames)})")
    eq(sum(1 for l in lines if l == "Direct leak of 4096 byte(s) in 1 object(s) allocated from:"), 800,
       "each process's 200 leaks")
    eq(sum(1 for l in lines if l == "SUMMARY: vramtrace: 819200 byte(s) leaked in 200 allocation(s)."), 4,
       "a summary of each")
    known = re.compile(r"^(|    #\d+ .*|Direct leak of .*|SUMMARY: .*|=+|==\d+==ERROR: vramtrace: detected GPU memory leaks"
                       r"|    call site: .*|vramtrace: .*|  .*)$")
    eq([l for l in lines if not known.match(l)][:5], [], "no line another's pieces")


@test
def leak_reports_of_processes_sharing_a_report_file_or_fifo_keep_their_lines():
    """Four processes that leak 200 allocations each end at once with one
    report file (VRAMTRACE_REPORT, as test workers sharing a CI artefact),
    then with one FIFO: the file took the C library's 4,096-byte writes,
    cut anywhere ("Direct leak of 15#14 0x55bf..."; 9 to 58 broken lines in
    each of 5 runs of 8 processes, from an outside check). Now whole lines:
    every line is one of a report's own, every report whole."""
    with workdir("vt-leaklines-") as work:
        fifo = os.path.join(work, "fifo")
        os.mkfifo(fifo, 0o600)
        for dest in ("file", "fifo"):
            path = os.path.join(work, "shared.txt") if dest == "file" else fifo
            e = dict(os.environ, LD_LIBRARY_PATH=SIM, LD_PRELOAD=LIB, VRAMTRACE_OUT="off", VRAMTRACE_LEAK_CHECK="1",
                     VRAMTRACE_REPORT=path)
            got = []
            reader = None
            if dest == "fifo":   # a reader for the whole run, as a log collector
                reader = threading.Thread(target=lambda: got.append(open(fifo, "rb").read()))
                reader.start()
                keep = os.open(fifo, os.O_WRONLY)   # the FIFO stays open between the writers
            p = subprocess.run(["sh", "-c", f"for i in 1 2 3 4; do {DEEPLEAK} 200 & done; wait"], env=e,
                               capture_output=True, text=True, timeout=300)
            if reader:
                os.close(keep)
                reader.join(timeout=60)
                text = got[0].decode()
            else:
                text = open(path).read()
            eq(p.returncode, 0, f"{dest}: the shell's own status")
            lines = text.splitlines()
            frames = [l for l in lines if re.search(r"#\d+", l)]
            bad = [l for l in frames if not FRAME.match(l)]
            eq(bad[:5], [], f"{dest}: frame lines mixed with others ({len(bad)} of {len(frames)})")
            eq(sum(1 for l in lines if l == "Direct leak of 4096 byte(s) in 1 object(s) allocated from:"), 800,
               f"{dest}: each process's 200 leaks")
            eq(sum(1 for l in lines if l == "SUMMARY: vramtrace: 819200 byte(s) leaked in 200 allocation(s)."), 4,
               f"{dest}: a summary of each")
            known = re.compile(r"^(|    #\d+ .*|Direct leak of .*|SUMMARY: .*|=+|==\d+==ERROR: vramtrace: detected GPU "
                               r"memory leaks|    call site: .*|vramtrace: .*|  .*)$")
            eq([l for l in lines if not known.match(l)][:5], [], f"{dest}: no line another's pieces")


@test
def a_report_to_a_non_blocking_stderr_arrives_whole():
    """A program whose stderr is a non-blocking pipe that its reader drains
    only a while later: the writer gave up at the first "try again" (64 KB
    of a 278 KB report came, no SUMMARY line). It now waits for the pipe."""
    import fcntl
    r, w = os.pipe()
    fcntl.fcntl(w, fcntl.F_SETFL, fcntl.fcntl(w, fcntl.F_GETFL) | os.O_NONBLOCK)
    e = dict(os.environ, LD_LIBRARY_PATH=SIM, LD_PRELOAD=LIB, VRAMTRACE_OUT="off", VRAMTRACE_LEAK_CHECK="1")
    e.pop("VRAMTRACE_REPORT", None)
    p = subprocess.Popen([DEEPLEAK, "150"], env=e, stderr=w)
    os.close(w)
    time.sleep(1.5)
    data = b""
    while True:
        b = os.read(r, 1 << 16)
        if not b:
            break
        data += b
    os.close(r)
    eq(p.wait(timeout=60), 23, "the leak check's status")
    lines = data.decode().splitlines()
    ok(len(data) > 1 << 17, f"a report bigger than a pipe holds: {len(data)} bytes")
    eq(sum(1 for l in lines if l.startswith("Direct leak of 4096 byte(s)")), 150, "every leak")
    eq([l for l in lines if l.startswith("SUMMARY:")],
       ["SUMMARY: vramtrace: 614400 byte(s) leaked in 150 allocation(s)."], "the summary")


@test
def a_report_to_a_non_blocking_stderr_nobody_reads_gives_up_once():
    """A non-blocking stderr whose reader never reads: the report waits 10 s
    without progress once, then drops the rest and the program ends with
    the leak check's status. Each 4 KB chunk used to wait its own 10 s: a
    278 KB report held the program for about 9 minutes."""
    import fcntl
    r, w = os.pipe()
    fcntl.fcntl(w, fcntl.F_SETFL, fcntl.fcntl(w, fcntl.F_GETFL) | os.O_NONBLOCK)
    e = dict(os.environ, LD_LIBRARY_PATH=SIM, LD_PRELOAD=LIB, VRAMTRACE_OUT="off", VRAMTRACE_LEAK_CHECK="1")
    e.pop("VRAMTRACE_REPORT", None)
    t0 = time.monotonic()
    p = subprocess.Popen([DEEPLEAK, "150"], env=e, stderr=w)
    os.close(w)
    try:
        rc = p.wait(timeout=120)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        rc = None
    os.close(r)
    took = time.monotonic() - t0
    eq(rc, 23, f"ended with the leak check's status after {took:.0f} s")
    ok(took < 60, f"one wait of 10 s, not one a chunk: {took:.0f} s")


@test
def reports_of_ranks_sharing_a_log_name_the_rank_and_host():
    """Ranks of one job (WORLD_SIZE > 1) share a log and run the same
    command: the post-mortem and the exit summary named only the pid and
    the command, so a reader could not tell which rank failed (an outside
    check). Their first lines now name the rank, the job's size and the
    host; a process of no such job keeps its line as it was."""
    triage = [os.path.join(T, "t_triage"), "fail", "2M"]
    host = os.uname().nodename
    e = dict(os.environ, LD_LIBRARY_PATH=SIM, LD_PRELOAD=LIB, VRAMTRACE_OUT="off", VRAMTRACE_LIMIT="1M",
             RANK="2", WORLD_SIZE="4")
    e.pop("VRAMTRACE_REPORT", None)
    p = subprocess.run(triage, env=e, capture_output=True, text=True, timeout=60)
    heads = [l for l in p.stderr.splitlines() if " in pid " in l]
    pid = p.stderr.split(" in pid ", 1)[1].split()[0] if heads else "?"
    eq(heads, [f"vramtrace: out of memory in pid {pid} ({triage[0]}), rank 2 of 4 on {host}",
               f"vramtrace: exit in pid {pid} ({triage[0]}), rank 2 of 4 on {host}"],
       "the post-mortem's and the exit summary's first lines")
    for k in ("RANK", "WORLD_SIZE"):
        e.pop(k)
    p = subprocess.run(triage, env=e, capture_output=True, text=True, timeout=60)
    eq([l.split(")")[-1] for l in p.stderr.splitlines() if " in pid " in l], ["", ""], "no rank without a job")


LEAKKINDS = os.path.join(T, "t_leakkinds")


def entries(err):
    """Each entry of a leak report: its header and its lines of vramtrace's
    own (call site, kind), without its frames."""
    out = []
    for b in err.split("\n\n"):
        rows = b.strip("\n").splitlines()
        if rows and rows[0].endswith(" from:"):
            out.append([rows[0]] + [r for r in rows[1:] if not r.startswith("    #")])
    return out


@test
def leak_entries_name_their_kind_and_ipc_mappings_are_not_leaks():
    """Each entry of the leak report names the kind of memory and the API
    that made it (device, managed, pinned host, registered host memory);
    an IPC mapping of another process's memory left open is not a leak
    (this process did not allocate it: LeakSanitizer's rule, and
    `vramtrace report`'s, whose live bytes leave it out): it is listed
    apart as an open mapping, counted in neither the SUMMARY nor the exit
    status. Before, it was a "Direct leak" like a cudaMalloc, in the
    SUMMARY's bytes, alone enough to fail the run; and a reset that
    unmapped it left a leak "released without a free"."""
    ln = lambda k: source_line("t_leakkinds.c", "LINE:" + k)
    site = lambda k, fn="main": f"    call site: {fn} tests/progs/t_leakkinds.c:{ln(k)}"
    ipc_note = ("==%d==vramtrace: IPC mappings of other processes' memory still open at exit (not leaks: this "
                "process did not allocate that memory; cudaIpcCloseMemHandle or cuIpcCloseMemHandle closes them)")
    ipc_entry = ["Open IPC mapping of 65536 byte(s) in 1 mapping(s) (another process's memory) opened from:",
                 site("ipc", "open_peer_buffer")]
    r = run([LEAKKINDS, "all"], env={"VRAMTRACE_LEAK_CHECK": "1"})
    eq((r.rc, r.out), (23, "all done\n"), "the leaks fail the run")
    eq(entries(r.err), [
        ["Direct leak of 1048576 byte(s) in 1 object(s) allocated from:", site("device"),
         "    kind: device memory (cudaMalloc)"],
        ["Direct leak of 524288 byte(s) in 1 object(s) allocated from:", site("managed"),
         "    kind: managed memory (cudaMallocManaged)"],
        ["Direct leak of 262144 byte(s) in 1 object(s) allocated from:", site("pinned"),
         "    kind: pinned host memory (cudaMallocHost)"],
        ["Direct leak of 131072 byte(s) in 1 object(s) allocated from:", site("registered"),
         "    kind: registered host memory (the program's own, page-locked) (cudaHostRegister)"],
        ipc_entry], "the entries, each kind named, the mapping last and apart")
    pid = r.dump["pid"]
    ok(ipc_note % pid in r.err.splitlines(), "the mapping told apart: " + r.err)
    eq(r.err.splitlines()[-1], "SUMMARY: vramtrace: 1966080 byte(s) leaked in 4 allocation(s).",
       "the SUMMARY counts this process's memory alone")
    d = r.dump
    eq((d["totals"]["live_bytes"], d["imported_memory"]), ((1 << 20) + (512 << 10), {"live_bytes": 65536, "live_count": 1}),
       "the dump: device and managed memory live, the mapping apart")
    r = run([LEAKKINDS, "ipc"], env={"VRAMTRACE_LEAK_CHECK": "1"})
    eq((r.rc, r.out), (0, "ipc done\n"), "a mapping left open alone does not fail the run")
    eq(entries(r.err), [ipc_entry], "it is listed")
    ok(ipc_note % r.dump["pid"] in r.err.splitlines(), "as what it is")
    ok("ERROR" not in r.err and "SUMMARY" not in r.err, "no leak said: " + r.err)
    r = run([LEAKKINDS, "reset"], env={"VRAMTRACE_LEAK_CHECK": "1"})
    eq((r.rc, r.out, entries(r.err)), (0, "reset done\n", []), "a reset that unmapped it: nothing to report")
    eq(r.dump["released"], [], "nothing released without a free")


@test
def leak_reports_of_ranks_sharing_a_log_name_each_rank():
    """Ranks of a job that write their reports to one file, under the leak
    check: the leak report stands in for the exit summary, whose first line
    says "rank 3 of 8 on HOST", and said neither rank nor host (ERROR and
    SUMMARY lines alike in every rank's). Now a line of vramtrace's own
    after the ERROR line says it; LSan's lines are as they were."""
    host = os.uname().nodename
    with workdir("vt-leakranks-") as work:
        log = os.path.join(work, "job.log")
        for env in ({"WORLD_SIZE": "8", "RANK": "3", "LOCAL_RANK": "1"}, {"WORLD_SIZE": "8", "LOCAL_RANK": "2"},
                    {"WORLD_SIZE": "8"}, {}):
            r = run([os.path.join(T, "t_leaks")], report=log, env=dict(env, VRAMTRACE_LEAK_CHECK="1",
                                                                        VRAMTRACE_OUT="off"))
            eq(r.rc, 23, "the leak check's status:\n" + r.err)
        lines = open(log).read().splitlines()
        heads = [(l, lines[i + 1]) for i, l in enumerate(lines) if l.endswith("==ERROR: vramtrace: detected GPU memory leaks")]
        pids = [l.split("==")[1] for l, _ in heads]
        eq(heads, [(f"=={pids[0]}==ERROR: vramtrace: detected GPU memory leaks", f"=={pids[0]}==vramtrace: rank 3 of 8 on {host}"),
                   (f"=={pids[1]}==ERROR: vramtrace: detected GPU memory leaks",
                    f"=={pids[1]}==vramtrace: local rank 2 on {host} of a job of 8"),
                   (f"=={pids[2]}==ERROR: vramtrace: detected GPU memory leaks",
                    f"=={pids[2]}==vramtrace: of a job of 8, rank not set, on {host}"),
                   (f"=={pids[3]}==ERROR: vramtrace: detected GPU memory leaks", "")],
           "each leak report's first lines: the rank where the process is one of a job's")
        eq(sum(l == "SUMMARY: vramtrace: 1576960 byte(s) leaked in 10 allocation(s)." for l in lines), 4,
           "the SUMMARY lines as they were")
