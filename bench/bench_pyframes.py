#!/usr/bin/env python3
"""What reading Python frames costs, per frame, by instruction count.

  bench_pyframes.py [PYTHON ...]

For each interpreter (default: python3), runs bench/py_frames.py under
callgrind with vramtrace preloaded, with Python frames on and off
(VRAMTRACE_PYTHON=1/0), at two numbers of pairs; the difference of the
differences over the pairs between them, divided by the Python frames of a
capture, is the instructions one Python frame adds to an allocation (its
read, its merge into the native stack, and the longer stack's interning).
Each interpreter is measured three times: one line allocating over and
over (the thread's remembered stack answers), two lines in turn (their
Python frames patched into the last merged stack), and two lines in turn
that reach the driver by two native ways, the driver's and the runtime's
(the native frames change too: every capture's Python frames are spliced
into its native ones and the stack interned).
The live view is off (VRAMTRACE_LIVE=0): its publisher thread would add its
own symbolizing. Instruction counts do not move with the machine's load;
bench.py's Python row gives the time.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "build", "bench")
LIB = os.environ.get("BENCH_LIB") or os.path.join(ROOT, "build", "libvramtrace.so")
SCRIPT = os.path.join(ROOT, "bench", "py_frames.py")
SMALL, LARGE = 4000, 8000


def pairs(n):
    """Allocations py_frames.py N makes: a warm-up of N//4, five of N//5."""
    return n // 4 + 5 * (n // 5)


def captures_frames(py):
    """Python frames of each timed capture: deep() x 30, loop, the generator
    expression and the module."""
    return 33


def instructions(py, n, python_on, mode):
    e = {k: v for k, v in os.environ.items() if not k.startswith("VRAMTRACE_") and k != "LD_PRELOAD"}
    e.update(LD_LIBRARY_PATH=BENCH, VRAMTRACE_OUT="off", VRAMTRACE_REPORT="off", VRAMTRACE_LIVE="0",
             VRAMTRACE_PYTHON="1" if python_on else "0", PYTHONHASHSEED="0")
    with tempfile.TemporaryDirectory() as d:
        p = subprocess.run(["valgrind", "--tool=callgrind", "--trace-children=yes",
                            f"--callgrind-out-file={d}/cg.%p", "/usr/bin/env", f"LD_PRELOAD={LIB}", py, SCRIPT,
                            str(n)] + mode, env=e, capture_output=True, text=True)
    refs = re.findall(r"I\s+refs:\s+([\d,]+)", p.stderr)
    if p.returncode != 0 or not refs:
        sys.exit(f"bench_pyframes: {py} failed: {p.stderr[-800:]}")
    return int(refs[-1].replace(",", ""))


def per_frame(py, mode):
    """(version, instructions per pair with frames off, added per Python frame)."""
    ver = subprocess.run([py, "-c", "import sys; print(sys.version.split()[0])"], capture_output=True,
                         text=True).stdout.strip()
    got = {(on, n): instructions(py, n, on, mode) for on in (False, True) for n in (SMALL, LARGE)}
    between = pairs(LARGE) - pairs(SMALL)
    off = (got[(False, LARGE)] - got[(False, SMALL)]) / between
    on = (got[(True, LARGE)] - got[(True, SMALL)]) / between
    return ver, off, (on - off) / captures_frames(py)


def main():
    if not shutil.which("valgrind"):
        sys.exit("bench_pyframes: valgrind not found")
    for py in sys.argv[1:] or ["python3"]:
        ver, off, frame = per_frame(py, [])
        print(f"Python {ver}: {off:,.0f} instructions a pair with Python frames off; each Python frame adds "
              f"{frame:.1f}")
        ver, off, frame = per_frame(py, ["alternate"])
        print(f"Python {ver}, two lines in turn (no stack the last one): {off:,.0f} instructions a pair with "
              f"Python frames off; each Python frame adds {frame:.1f}")
        ver, off, frame = per_frame(py, ["twoways"])
        print(f"Python {ver}, two lines in turn through two native ways (the native frames change too): "
              f"{off:,.0f} instructions a pair with Python frames off; each Python frame adds {frame:.1f}")


if __name__ == "__main__":
    main()
