"""Integration tests of how reports reach a stderr that other processes
share: in whole lines."""
import re

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
