#!/usr/bin/env python3
"""vramtrace's benchmarks: prints the table that docs/performance.md quotes.
`bench.py threads` runs only the two-thread row, `bench.py python` only the
Python one.

Every figure is a median of repeated runs, taken side by side in one run of
this script; ratios are what to compare across machines. Nothing here
asserts a time: a person reads the table against the targets.
"""
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
B = os.path.join(ROOT, "build")
BENCH = os.path.join(B, "bench")
PROG = os.path.join(BENCH, "bench_alloc")
LIB = os.path.join(B, "libvramtrace.so")
REPEAT = int(os.environ.get("BENCH_REPEAT", "5"))
N = int(os.environ.get("BENCH_PAIRS", "300000"))


def env(preload, **extra):
    e = {k: v for k, v in os.environ.items() if not k.startswith("VRAMTRACE_") and k != "LD_PRELOAD"}
    e["LD_LIBRARY_PATH"] = BENCH
    if preload:
        e.update(LD_PRELOAD=LIB, VRAMTRACE_OUT="off", VRAMTRACE_REPORT="off")
    e.update(extra)
    return e


def run(argv, e, wrap=None):
    p = subprocess.run((wrap or []) + argv, env=e, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        sys.exit(f"bench: {' '.join(argv)} failed: {p.stderr[-500:]}")
    return dict(re.findall(r"(\w+) ([0-9.]+)", p.stdout))


def median(argv, e, key, wrap=None):
    return statistics.median(float(run(argv, e, wrap)[key]) for _ in range(REPEAT))


def interleaved(cases, rounds=None):
    """Run each case REPEAT times, round-robin (a round runs every case once),
    so that the machine's slow and fast spells fall on all of them alike.
    `cases`: name -> (argv, env, key, wrap). Returns name -> (median, min,
    the values round by round)."""
    got = {name: [] for name in cases}
    for _ in range(rounds or REPEAT):
        for name, (argv, e, key, wrap) in cases.items():
            got[name].append(float(run(argv, e, wrap)[key]))
    return {name: (statistics.median(v), min(v), v) for name, v in got.items()}


def heaptrack_wrap(tmp):
    return ["heaptrack", "-o", os.path.join(tmp, "ht")] if shutil.which("heaptrack") else None


def pairs_table(tmp):
    rows = []
    ht = heaptrack_wrap(tmp)
    for mode in ("warm", "cold"):
        for depth in (10, 20, 40):
            args = [str(depth), str(N), "1"] + (["cold"] if mode == "cold" else [])
            cases = {
                "base": ([PROG, "pairs", "cuda"] + args, env(False), "ns_per_pair", None),
                "vt": ([PROG, "pairs", "cuda"] + args, env(True), "ns_per_pair", None),
                "mbase": ([PROG, "pairs", "malloc"] + args, env(False), "ns_per_pair", None),
            }
            if ht:
                cases["mht"] = ([PROG, "pairs", "malloc"] + args, env(False), "ns_per_pair", ht)
            m = interleaved(cases)
            base, vt, mbase = m["base"][0], m["vt"][0], m["mbase"][0]
            mht = m["mht"][0] if ht else float("nan")
            best = (m["vt"][1] - m["base"][1]) / (m["mht"][1] - m["mbase"][1]) if ht else float("nan")
            rows.append((mode, depth, base, vt, vt - base, mbase, mht, mht - mbase, (vt - base) / (mht - mbase),
                         best))
    return rows


def machine_scaling():
    """What two threads of pure arithmetic get on this machine: the ceiling."""
    src = os.path.join(BENCH, "spin.c")
    exe = os.path.join(BENCH, "spin")
    if not os.path.exists(exe):
        with open(src, "w") as f:
            f.write("#include <pthread.h>\n#include <stdio.h>\n#include <time.h>\n"
                    "static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);"
                    "return t.tv_sec+t.tv_nsec/1e9;}\n"
                    "static void *work(void *a){volatile unsigned long x=0;(void)a;"
                    "for(long i=0;i<200000000;i++)x+=i;return 0;}\n"
                    "int main(void){double t0=now();work(0);double one=now()-t0;pthread_t a,b;t0=now();"
                    "pthread_create(&a,0,work,0);pthread_create(&b,0,work,0);pthread_join(a,0);"
                    "pthread_join(b,0);printf(\"scaling %f\\n\",2*one/(now()-t0));return 0;}\n")
        subprocess.run(["cc", "-O1", "-o", exe, src, "-lpthread"], check=True)
    return statistics.median(float(run([exe], os.environ.copy())["scaling"]) for _ in range(3))


def threads_row():
    """Medians of pairs/s, and for each of with and without vramtrace the
    median over rounds of two threads' pairs/s over one thread's in the same
    round (a round runs one case after the other, so the two fall in the
    same spell of the machine). Three times the rounds of the other rows:
    the runs are short and this figure moves most."""
    cases = {(pre, t): ([PROG, "pairs", "cuda", "20", str(N), str(t)], env(pre), "pairs_per_sec", None)
             for pre in (False, True) for t in (1, 2)}
    m = interleaved(cases, rounds=3 * REPEAT)
    ratio = {pre: statistics.median(b / a for a, b in zip(m[(pre, 1)][2], m[(pre, 2)][2])) for pre in (False, True)}
    return {k: v[0] for k, v in m.items()}, ratio


def many_threads():
    """Pairs/s with 16 threads allocating at once (the machine's cores shared
    among them), median of REPEAT runs."""
    return statistics.median(float(run([PROG, "pairs", "cuda", "20", str(N), "16"], env(True))["pairs_per_sec"])
                             for _ in range(REPEAT))


def python_row():
    py = os.environ.get("BENCH_PYTHON") or shutil.which("python3")
    script = os.path.join(ROOT, "bench", "py_frames.py")
    n = str(max(N // 3, 50000))
    m = interleaved({"base": ([py, script, n], env(False), "ns_per_pair", None),
                     "native": ([py, script, n], env(True, VRAMTRACE_PYTHON="0"), "ns_per_pair", None),
                     "withpy": ([py, script, n], env(True), "ns_per_pair", None)})
    base, native, withpy = m["base"][0], m["native"][0], m["withpy"][0]
    fastest = m["withpy"][1] - m["native"][1]
    ver = subprocess.run([py, "-c", "import sys; print(sys.version.split()[0])"], capture_output=True,
                         text=True).stdout.strip()
    return ver, base, native, withpy, fastest


def live_row(tmp):
    n = "1000000"
    base = run([PROG, "live", n, "4"], env(False))
    vt = run([PROG, "live", n, "4"], env(True, VRAMTRACE_EVENTS="0"))
    per_alloc = (float(vt["rss_kb"]) - float(base["rss_kb"])) * 1024 / 1e6
    dump = os.path.join(tmp, "live.json")
    import time
    t0 = time.monotonic()
    r = run([PROG, "live", n, "4"], env(True, VRAMTRACE_OUT=dump))
    total = time.monotonic() - t0
    size = os.path.getsize(dump)
    with open(dump) as f:
        d = json.load(f)
    assert d["totals"]["live_count"] == 1000000, d["totals"]
    return per_alloc, float(r["alloc_s"]), total, size


def events_row():
    e0 = run([PROG, "churn", "1000000"], env(True, VRAMTRACE_EVENTS="0"))
    e1 = run([PROG, "churn", "1000000"], env(True))
    e5 = run([PROG, "churn", "5000000"], env(True))
    per_event = (float(e1["rss_kb"]) - float(e0["rss_kb"])) * 1024 / 1e6
    return per_event, float(e1["rss_kb"]), float(e5["rss_kb"])


def threads_only():
    t, ratio = threads_row()
    print(f"two threads at once, pairs/s ({3 * REPEAT} rounds): vramtrace 1 thread {t[(True, 1)]:.0f}, 2 threads "
          f"{t[(True, 2)]:.0f} = {t[(True, 2)] / t[(True, 1)]:.2f}x (median of rounds {ratio[True]:.2f}x); "
          f"without vramtrace {t[(False, 2)] / t[(False, 1)]:.2f}x ({ratio[False]:.2f}x); this machine's ceiling "
          f"{machine_scaling():.2f}x; 16 threads {many_threads():.0f} pairs/s on {os.cpu_count()} CPUs")


def main():
    if sys.argv[1:] == ["threads"]:
        return threads_only()
    if sys.argv[1:] == ["python"]:
        ver, base, native, withpy, fastest = python_row()
        return print(f"Python {ver}, 30 Python frames ({REPEAT} rounds): without vramtrace {base:.0f} ns, native "
                     f"frames only {native:.0f}, with Python frames {withpy:.0f}; Python frames add "
                     f"{withpy - native:.0f} ns, {fastest:.0f} ns between the fastest runs")
    tmp = tempfile.mkdtemp(prefix="vt-bench-")
    try:
        print(f"vramtrace benchmarks: {os.uname().machine}, {os.cpu_count()} CPUs, {REPEAT} runs of each, "
              f"{N} pairs a run")
        print("\n1. added time per allocate+free pair (ns), vramtrace on cuMemAlloc/cuMemFree vs heaptrack on "
              "malloc/free")
        print("   (runs interleaved; medians, and the ratio of the fastest runs, where the machine's noise is least)")
        print(f"  {'run':5} {'depth':>5} {'cuda':>7} {'+vt':>8} {'added':>7} {'malloc':>7} {'+heaptrack':>11} "
              f"{'added':>7} {'ratio':>6} {'fastest':>8}")
        for r in pairs_table(tmp):
            print(f"  {r[0]:5} {r[1]:5d} {r[2]:7.1f} {r[3]:8.1f} {r[4]:7.1f} {r[5]:7.1f} {r[6]:11.1f} "
                  f"{r[7]:7.1f} {r[8]:6.2f} {r[9]:8.2f}")
        print("  target: ratio <= 0.35 at depth 20")
        ver, base, native, withpy, fastest = python_row()
        print(f"\n2. Python {ver}, 30 Python frames, ctypes alloc+free pair (ns): without vramtrace {base:.0f}, "
              f"native frames only {native:.0f}, with Python frames {withpy:.0f}; Python frames add "
              f"{withpy - native:.0f} ns, {fastest:.0f} ns between the fastest runs (target <= 1000)")
        t, ratio = threads_row()
        print(f"\n3. two threads at once, pairs/s: vramtrace 1 thread {t[(True, 1)]:.0f}, 2 threads "
              f"{t[(True, 2)]:.0f} = {t[(True, 2)] / t[(True, 1)]:.2f}x, median of the rounds' ratios "
              f"{ratio[True]:.2f}x (target >= 1.6x); without vramtrace {t[(False, 2)] / t[(False, 1)]:.2f}x "
              f"({ratio[False]:.2f}x); this machine's ceiling (two threads of arithmetic that share nothing) "
              f"{machine_scaling():.2f}x; 16 threads at once {many_threads():.0f} pairs/s on {os.cpu_count()} CPUs")
        per_alloc, alloc_s, total, size = live_row(tmp)
        print(f"\n4. one million live allocations from 4 call sites: {per_alloc:.0f} bytes of resident memory per "
              f"live allocation (target <= 160); allocating {alloc_s:.2f} s; run plus dump {total:.2f} s "
              f"(target <= 5); dump {size / 1e6:.0f} MB")
        per_event, rss1, rss5 = events_row()
        print(f"\n5. event history: {per_event:.1f} bytes per event; resident memory after 2 million events "
              f"{rss1 / 1024:.1f} MiB, after 10 million {rss5 / 1024:.1f} MiB (ring of 1 million events)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


main()
