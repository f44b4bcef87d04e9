"""Byte counts as every report says them: in the unit the figure has once
rounded to two decimals. 1048575 bytes read "1024.00 KiB" where 1048576
read "1.00 MiB", and 2^40 - 1 "1024.00 GiB" (common/format.c, and its
copies in Python: the PyTorch companion's holders and the pytest plugin's
failures)."""
from run_tests import *

# (bytes, figure): either side of each unit, and the largest.
FIGURES = ((1023, "1023 B"), (1024, "1.00 KiB"), (1048570, "1023.99 KiB"), (1048571, "1.00 MiB"),
           (1048575, "1.00 MiB"), (1048576, "1.00 MiB"), (2**30 - 1, "1.00 GiB"), (2**40 - 1, "1.00 TiB"),
           (2**40, "1.00 TiB"), (2**50 - 1, "1.00 PiB"), (2**60, "1024.00 PiB"), (2**64 - 1, "16384.00 PiB"))


def triage_site(fn, call=None):
    """FN's call site in t_triage.c: its line, or that of `call` (the
    first line holding it) where FN allocates on a line of its own."""
    return f"{fn} tests/progs/t_triage.c:{source_line('t_triage.c', call or f'{fn}(size_t n)')}"


@test
def figures_in_the_unit_they_round_to_in_the_reports():
    """Allocations of 2^40 - 1, 1048575, 1024 and 1023 bytes: the exit
    summary's holders and `vramtrace report`'s holders and live table."""
    cached = triage_site("cached_block", "cudaError_t r = cudaMalloc(&p, n);")
    holders = [f"    1.00 TiB  99.9%      1 alloc   {triage_site('big_buffer')}",
               f"    1.00 MiB  <0.1%      1 alloc   {triage_site('keep_buffer')}",
               f"    1.00 KiB  <0.1%      1 alloc   {cached}",
               f"      1023 B  <0.1%      1 alloc   {triage_site('other_buffer')}"]
    with workdir("vt-figures-") as work:
        path = os.path.join(work, "dump.json")
        r = run([os.path.join(T, "t_triage"), "keep", "1048575", "big", str(2**40 - 1), "other", "1023", "cache",
                 "1024"], env={"SIMGPU_CAPACITY": "2048G", "VRAMTRACE_OUT": path})
        eq((r.rc, r.out), (0, "keep -> 0\nbig -> 0\nother -> 0\ncache -> 0\n"), "t_triage")
        lines = r.err.splitlines()
        at = lines.index("vramtrace: largest holders by call site (4 call sites):")
        eq(lines[at + 1:at + 5], ["vramtrace: " + h for h in holders], "the exit summary's holders")
        p = subprocess.run([CLI, "report", path], capture_output=True, text=True)
    eq((p.returncode, p.stderr), (0, ""), "vramtrace report")
    lines = p.stdout.splitlines()
    at = lines.index("largest holders by call site (4 call sites):")
    eq([l for l in lines[at + 1:] if not l.startswith("      #")][:4], holders, "the report's holders")
    at = lines.index("largest live allocations (4 live):")
    eq([l[:13] for l in lines[at + 1:at + 5]], ["     1.00 TiB", "     1.00 MiB", "     1.00 KiB", "       1023 B"],
       "the report's live table")


@test
def figures_in_the_unit_they_round_to_in_python():
    """The companion's and the pytest plugin's copies of the rule."""
    code = ("import sys\nsys.path.insert(0, sys.argv[1])\n"
            "from vramtrace_torch.grown import _fmt\nfrom pytest_vramtrace.api import format_bytes\n"
            f"for n in {[n for n, _ in FIGURES]!r}:\n    print(_fmt(n), '|', format_bytes(n))\n")
    p = subprocess.run([sys.executable, "-c", code, os.path.join(ROOT, "python")], capture_output=True, text=True)
    eq((p.returncode, p.stderr), (0, ""), "status")
    eq(p.stdout.splitlines(), [f"{s} | {s}" for _, s in FIGURES], "each figure, both copies")
