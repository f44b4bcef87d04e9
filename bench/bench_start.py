#!/usr/bin/env python3
"""The start of a process that never touches the GPU: /bin/true bare, with
an empty preloaded library (the floor: what any LD_PRELOAD costs), and with
vramtrace preloaded.

  bench_start.py [RUNS] [LIB ...]

Prints, for each case, the median and the fastest wall time of a spawn and
wait (os.posix_spawn, the cases in turns, so that the machine's slow and
fast spells fall on all alike), the added time over bare, and, where
valgrind is installed, the user instructions of the whole /bin/true
(callgrind: the loader, libc's start and exit, the preloaded library's
relocation, constructor and destructor). Extra LIB arguments are more
libraries to compare (another build of vramtrace, say). bench.py's
start-up row calls start_rows().
"""
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "build", "bench")
TRUE = "/bin/true"


def empty_library():
    """An empty shared library, built once into build/bench/."""
    so = os.path.join(BENCH, "libempty_preload.so")
    if not os.path.exists(so):
        os.makedirs(BENCH, exist_ok=True)
        src = os.path.join(BENCH, "empty_preload.c")
        with open(src, "w") as f:
            f.write("void vt_bench_empty(void) {}\n")
        subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", so, src], check=True)
    return so


def environment(lib, extra):
    e = {k: v for k, v in os.environ.items() if not k.startswith("VRAMTRACE_") and k != "LD_PRELOAD"}
    if lib:
        e["LD_PRELOAD"] = lib
        e.update(extra)
    return e


def spawn_times(cases, runs):
    """name -> [(wall seconds of the spawn and wait, the child's own CPU
    seconds: user and system, by wait4)] of each run of /bin/true, in turns.
    The CPU time leaves out what the wall time adds of the parent's and the
    scheduler's (the spawn, the wake-up): on a shared virtual machine the
    steadier of the two."""
    got = {name: [] for name in cases}
    for _ in range(runs):
        for name, e in cases.items():
            t0 = time.perf_counter()
            pid = os.posix_spawn(TRUE, [TRUE], e)
            _, _, ru = os.wait4(pid, 0)
            got[name].append((time.perf_counter() - t0, ru.ru_utime + ru.ru_stime))
    return got


def instructions(e):
    """User instructions of the whole /bin/true under e (callgrind), or None.
    valgrind runs env, which sets LD_PRELOAD (replacing valgrind's own
    preloads) and execs /bin/true, the process counted."""
    if not shutil.which("valgrind"):
        return None
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "cg")
        outer = {k: v for k, v in e.items() if k != "LD_PRELOAD"}
        pre = [f"LD_PRELOAD={e.get('LD_PRELOAD', '')}"]
        p = subprocess.run(["valgrind", "--tool=callgrind", "--trace-children=yes",
                            f"--callgrind-out-file={out}.%p", "/usr/bin/env"] + pre + [TRUE], env=outer,
                           capture_output=True, text=True)
        refs = re.findall(r"I\s+refs:\s+([\d,]+)", p.stderr)
        return int(refs[-1].replace(",", "")) if refs else None


def start_rows(lib, runs=300, extra=None, more=()):
    """[(name, median wall us, fastest wall us, median CPU us, instructions)]
    for bare, the empty preload, vramtrace (`lib`) and any `more`
    libraries."""
    extra = extra if extra is not None else {"VRAMTRACE_OUT": "off", "VRAMTRACE_REPORT": "off"}
    cases = {"bare": environment(None, extra), "empty preload": environment(empty_library(), extra),
             "vramtrace": environment(lib, extra)}
    for m in more:
        cases[os.path.basename(m)] = environment(m, extra)
    got = spawn_times(cases, runs)
    return [(name, statistics.median(w for w, _ in got[name]) * 1e6, min(w for w, _ in got[name]) * 1e6,
             statistics.median(c for _, c in got[name]) * 1e6, instructions(cases[name])) for name in cases]


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    lib = os.environ.get("BENCH_LIB") or os.path.join(ROOT, "build", "libvramtrace.so")
    rows = start_rows(lib, runs, more=sys.argv[2:])
    bare = rows[0]
    print(f"/bin/true, {runs} spawns of each in turns (wall us: median, fastest; the child's CPU us, median; "
          "each added over bare), user instructions of the whole process (callgrind)")
    for name, med, fast, cpu, ins in rows:
        print(f"  {name:>16} {med:8.0f} {fast:8.0f}  +{med - bare[1]:5.0f} +{fast - bare[2]:5.0f}  "
              f"cpu {cpu:6.0f} +{cpu - bare[3]:5.0f}  {ins if ins is not None else 'n/a':>8}")


if __name__ == "__main__":
    main()
