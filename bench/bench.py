#!/usr/bin/env python3
"""vramtrace's benchmarks: prints the table that docs/performance.md quotes.
`bench.py threads` runs only the two-thread row, `bench.py python` only the
Python one, `bench.py shapes` only the rows of bench_shapes (distinct stacks,
instructions, the slowest call, frees across threads, start-up).

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
SHAPES = os.path.join(BENCH, "bench_shapes")
LIB = os.environ.get("BENCH_LIB") or os.path.join(B, "libvramtrace.so")  # BENCH_LIB: another build, to compare
PROBE_LIB = os.path.join(B, "probe", "libvramtrace.so")  # the lock probe (tracker/lockprobe.h)
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


PY_FRAMES = 33  # Python frames of each timed capture of bench/py_frames.py


def python_row(mode=()):
    """mode ["alternate"]: the loop allocates from two lines in turn, so that
    every capture reads, splices and interns its stack (the thread's last
    stack never answers)."""
    py = os.environ.get("BENCH_PYTHON") or shutil.which("python3")
    script = os.path.join(ROOT, "bench", "py_frames.py")
    n = str(max(N // 3, 50000))
    a = [py, script, n] + list(mode)
    m = interleaved({"base": (a, env(False), "ns_per_pair", None),
                     "native": (a, env(True, VRAMTRACE_PYTHON="0"), "ns_per_pair", None),
                     "withpy": (a, env(True), "ns_per_pair", None)})
    base, native, withpy = m["base"][0], m["native"][0], m["withpy"][0]
    fastest = m["withpy"][1] - m["native"][1]
    # bench/py_frames.py's stack: deep() x 30, loop, the generator
    # expression and the module (32 in its warm-up).
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


def keep_rows():
    """Bytes of resident memory a live allocation costs, the stacks' share
    and the event ring's included: 1,000,000 kept over 1 and over 100,000
    stacks (`bench_shapes keep`), with the ring as by default (1,000,000
    events, full here) and without it (VRAMTRACE_EVENTS=0), each against
    the same loop without vramtrace. {(stacks, ring): bytes}."""
    n = 1000000
    got = {}
    for stacks in (1, 100000):
        base = float(run([SHAPES, "keep", str(n), str(stacks)], env(False))["rss_kb"])
        for ring in (True, False):
            extra = {} if ring else {"VRAMTRACE_EVENTS": "0"}
            vt = float(run([SHAPES, "keep", str(n), str(stacks)], env(True, **extra))["rss_kb"])
            got[(stacks, ring)] = (vt - base) * 1024 / n
    return got


def marks_row():
    """The C API's leak report of a mark, as pytest's plugin or a C++ test
    runner asks for it at every test: ms a report with one allocation live
    and with none, in a process of 1 and of 10,000 distinct stacks
    (`bench_shapes marks`), and of 1,000,000 (50 reports). {stacks: (one, none)}."""
    got = {}
    for stacks in (1, 10000, 1000000):
        r = run([SHAPES, "marks", "200" if stacks < 1000000 else "50", str(stacks)], env(True, VRAMTRACE_LIVE="0"))
        got[stacks] = (float(r["leaks_ms_one"]), float(r["leaks_ms_none"]))
    return got


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


STACK_SHAPES = (1, 10, 1000, 100000, 1000000)


def shapes_table(tmp):
    """Added time a pair at depth 20 over 1 to a million distinct stacks
    drawn at random, vramtrace vs heaptrack, interleaved as pairs_table."""
    rows = []
    ht = heaptrack_wrap(tmp)
    for nst in STACK_SHAPES:
        args = [str(nst), str(N)]
        cases = {"base": ([SHAPES, "stacks", "cuda"] + args, env(False), "ns_per_pair", None),
                 "vt": ([SHAPES, "stacks", "cuda"] + args, env(True), "ns_per_pair", None),
                 "mbase": ([SHAPES, "stacks", "malloc"] + args, env(False), "ns_per_pair", None)}
        if ht:
            cases["mht"] = ([SHAPES, "stacks", "malloc"] + args, env(False), "ns_per_pair", ht)
        m = interleaved(cases)
        vt = m["vt"][0] - m["base"][0]
        hta = m["mht"][0] - m["mbase"][0] if ht else float("nan")
        best = (m["vt"][1] - m["base"][1]) / (m["mht"][1] - m["mbase"][1]) if ht else float("nan")
        rows.append((nst, m["base"][0], m["vt"][0], vt, m["mbase"][0], m["mht"][0] if ht else float("nan"), hta,
                     vt / hta if ht else float("nan"), best))
    return rows


def callgrind_pairs(api, nst, preload):
    """Instructions a pair (callgrind): the run of 2n pairs minus the run of
    n, over 2n pairs (each run makes n warm-up pairs and n counted ones, so
    the two runs differ by 2n; the warm-up's pass over every stack cancels).
    The live publisher is off (VRAMTRACE_LIVE=0): its thread's work follows
    the wall clock, not the pairs, and would move the difference."""
    def one(n):
        e = env(preload, **({"VRAMTRACE_LIVE": "0"} if preload else {}))
        p = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", SHAPES, "stacks", api,
                            str(nst), str(n)], env=e, capture_output=True, text=True, timeout=3600)
        return int(re.search(r"Collected : (\d+)", p.stderr).group(1))
    n = 50000
    return (one(2 * n) - one(n)) / (2 * n)


def instructions_rows():
    """(api, stacks, instructions added a pair), the driver at every shape of
    STACK_SHAPES, then the runtime over the driver at one stack (last)."""
    if not shutil.which("valgrind"):
        return None
    rows = []
    for api, nst in [("cuda", k) for k in STACK_SHAPES] + [("cudart", 1)]:
        rows.append((api, nst, callgrind_pairs(api, nst, True) - callgrind_pairs(api, nst, False)))
    return rows


def maxcall_row(varied=None):
    """The slowest call among BENCH_LIVE allocations kept: of 256 bytes each,
    or (varied: a seed) of sizes of 256 B to 64 KiB, whose unevenly spaced
    addresses make the runs in the live table that fixed sizes never do."""
    n = os.environ.get("BENCH_LIVE", "10000000")
    extra = {"BENCH_VARIED": varied} if varied else {}
    vt = run([SHAPES, "maxcall", n], env(True, **extra))
    base = run([SHAPES, "maxcall", n], env(False, **extra))
    return n, vt, base


def dumpwait_row(runs=3, stacks="1"):
    """The slowest call of a thread that allocates and frees while another
    writes a named dump, with BENCH_DUMP_LIVE (default 1,000,000) kept by
    the first: each run's figures, and the dump's own time; and, in turns
    with them, the same loop without vramtrace beside a thread that keeps
    a CPU busy as long as the dump took (the machine's own slowest call)."""
    n = os.environ.get("BENCH_DUMP_LIVE", "1000000")
    vt, base, probe = [], [], []
    with tempfile.TemporaryDirectory(prefix="vt-bench-wait-") as work:
        e = env(True, VRAMTRACE_OUT=os.path.join(work, "d.%p.json"))
        for _ in range(runs):
            vt.append(run([SHAPES, "dumpwait", n, stacks], e))
            base.append(run([SHAPES, "dumpwait", n, stacks], env(False, BENCH_BUSY_S=vt[-1]["dump_s"])))
            if os.path.exists(PROBE_LIB):
                probe.append(run([SHAPES, "dumpwait", n, stacks], dict(e, LD_PRELOAD=PROBE_LIB, BENCH_CONTROL="1000",
                                                                         BENCH_TOUCH="4")))
            for f in os.listdir(work):
                os.unlink(os.path.join(work, f))
    return n, vt, base, probe


def xfree_row():
    """Pairs/s with 16 threads passing batches round, each freed by the next
    thread (cross) or by its own (same), and the threads' CPU time inside
    the calls a pair (work_ns_per_pair: their waits for each other and the
    scheduler's turns left out). For each of with and without vramtrace:
    the medians of pairs/s, the median over rounds of each round's cross
    over same, and the same ratio by the calls' CPU time (same's over
    cross's: a rate)."""
    got = {(pre, way): [] for pre in (False, True) for way in ("same", "cross")}
    for _ in range(REPEAT):
        for (pre, way), v in got.items():
            v.append(run([SHAPES, "xfree", way, "16", str(max(N // 1024, 50) * 1024)], env(pre)))
    out = {}
    for pre in (False, True):
        same, cross = got[(pre, "same")], got[(pre, "cross")]
        rate = lambda v: statistics.median(float(x["pairs_per_sec"]) for x in v)
        out[pre] = (rate(same), rate(cross),
                    statistics.median(float(c["pairs_per_sec"]) / float(s["pairs_per_sec"]) for s, c in zip(same, cross)),
                    statistics.median(float(s["work_ns_per_pair"]) / float(c["work_ns_per_pair"])
                                      for s, c in zip(same, cross)))
    return out


def startup_row(runs=300):
    """/bin/true bare, with an empty preloaded library (the floor any
    LD_PRELOAD costs) and with vramtrace preloaded, in turns (median wall
    us, bench_start.py's rows); and the libraries the preload maps beside
    vramtrace."""
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import bench_start
    rows = {name: (med, ins) for name, med, _fast, _cpu, ins in bench_start.start_rows(LIB, runs)}
    maps = subprocess.run(["/bin/cat", "/proc/self/maps"], env=env(True), capture_output=True, text=True).stdout
    libs = sorted({os.path.basename(l.split()[-1]) for l in maps.splitlines() if ".so" in l.split()[-1]})
    return rows["bare"], rows["empty preload"], rows["vramtrace"], libs


def shapes_main(number=6):
    print(f"\n{number}. distinct stacks at depth 20, drawn at random: added time per allocate+free pair (ns), "
          "vramtrace vs heaptrack")
    print(f"  {'stacks':>8} {'cuda':>7} {'+vt':>8} {'added':>7} {'malloc':>7} {'+heaptrack':>11} {'added':>7} "
          f"{'ratio':>6} {'fastest':>8}")
    for r in shapes_table(tempfile.mkdtemp(prefix="vt-bench-")):
        print(f"  {r[0]:8d} {r[1]:7.1f} {r[2]:8.1f} {r[3]:7.1f} {r[4]:7.1f} {r[5]:11.1f} {r[6]:7.1f} {r[7]:6.2f} "
              f"{r[8]:8.2f}")
    print("  target: ratio <= 0.25 at 1,000 stacks")
    rows = instructions_rows()
    if rows is None:
        print(f"\n{number + 1}. instructions: valgrind not found")
    else:
        # heaptrack's own instructions cannot be counted under valgrind (its
        # preloaded malloc never runs there): the quoted figures.
        quoted = {10: 2528, 100000: 2646}
        print(f"\n{number + 1}. instructions added per pair at depth 20 (callgrind, bench_shapes stacks, the bare loop "
              "subtracted), heaptrack's quoted beside")
        print(f"  {'api':>6} {'stacks':>8} {'added':>7} {'heaptrack':>10} {'ratio':>6}")
        for api, nst, ins in rows:
            q = quoted.get(nst) if api == "cuda" else None
            print(f"  {api:>6} {nst:8d} {ins:7.0f} {q or '':>10} {f'{ins / q:.2f}' if q else '':>6}")
        at1000 = dict(((a, k), v) for a, k, v in rows)[("cuda", 1000)]
        print(f"  the runtime over the driver {rows[-1][2] / rows[0][2]:.2f}x the driver (target <= 1.10); "
              f"target at 1,000 stacks <= 0.25x heaptrack's 2,528 (quoted at 10): {at1000 / 2528:.2f}x")
    n, vt, base = maxcall_row()
    print(f"\n{number + 2}. {int(n):,} allocations kept, the slowest single call: {vt['max_cpu_us']} us of its "
          f"thread's CPU time with vramtrace (at the {int(vt['at_cpu']):,}th; calls over 1 ms: {vt['over_1ms_cpu']}), "
          f"{base['max_cpu_us']} us without ({base['over_1ms_cpu']} over 1 ms; target <= 1000 us); by the wall clock "
          f"(the machine's scheduler included) {vt['max_call_us']} us ({vt['over_1ms']} over 1 ms), without "
          f"{base['max_call_us']} us ({base['over_1ms']} over 1 ms); the timed thread preempted "
          f"{vt['switches_preempted']} times and waiting of its own {vt['switches_waited']} times with vramtrace, "
          f"{base['switches_preempted']} and {base['switches_waited']} without")
    fc = [(run([SHAPES, "firstcall", "256", "20000"], env(True)), run([SHAPES, "firstcall", "256", "20000"], env(False)))
          for _ in range(3)]
    print(f"  256 threads started at once, each thread's first call: the slowest {', '.join(str(v['first_max_us']) for v, _ in fc)} "
          f"us with vramtrace (over 1 ms: {', '.join(str(v['first_over_1ms']) for v, _ in fc)}), "
          f"{', '.join(str(b['first_max_us']) for _, b in fc)} us without (3 runs)")
    mt = [(run([SHAPES, "manythreads", "256", "10000", "1000"], env(True)),
           run([SHAPES, "manythreads", "256", "10000", "1000"], env(False))) for _ in range(3)]
    print(f"  256 threads at once, each keeping 10,000 allocations over 1,000 stacks of its own (256,000 in all), "
          f"then freeing them: the slowest call by the smaller of its thread's CPU time and the wall clock "
          f"{', '.join(str(max(float(v['alloc_max_us']), float(v['free_max_us']))) for v, _ in mt)} us with "
          f"vramtrace (calls over 1 ms: {', '.join(str(int(v['alloc_over_1ms']) + int(v['free_over_1ms'])) for v, _ in mt)} "
          f"of 5,120,000), {', '.join(str(max(float(b['alloc_max_us']), float(b['free_max_us']))) for _, b in mt)} "
          f"us without ({', '.join(str(int(b['alloc_over_1ms']) + int(b['free_over_1ms'])) for _, b in mt)}; 3 runs)")
    n, vt, base = maxcall_row(varied="88172645463325252")
    print(f"  with sizes of 256 B to 64 KiB (BENCH_VARIED): {vt['max_cpu_us']} us of CPU time with vramtrace (at the "
          f"{int(vt['at_cpu']):,}th; over 1 ms: {vt['over_1ms_cpu']}), {base['max_cpu_us']} us without "
          f"({base['over_1ms_cpu']} over 1 ms)")
    for stacks in ("1", "100000"):
        n, w, b, pr = dumpwait_row(stacks=stacks)
        print(f"  while another thread writes a dump of {int(n):,} live allocations from {int(stacks):,} "
              f"stack{'s' if stacks != '1' else ''} (the live tables copied a chunk at a time; {len(w)} runs): the "
              f"slowest call {', '.join(str(round(float(r['dump_wait_max_us']))) for r in w)} us by the wall clock, "
              f"calls over 1 ms {', '.join(r['over_1ms'] for r in w)} of {', '.join(r['calls'] for r in w)}, of "
              f"which slept on a lock of the tracker's (a voluntary switch) "
              f"{', '.join(r['blocked_over_1ms'] for r in w)}, the slowest of those "
              f"{', '.join(str(round(float(r['blocked_max_us']))) for r in w)} us (those include the lock's "
              f"holder off its CPU; the rest were preempted), the dump {', '.join(r['dump_s'] for r in w)} s; "
              f"without vramtrace, beside a thread as busy for as long: the slowest call "
              f"{', '.join(str(round(float(r['dump_wait_max_us']))) for r in b)} us, calls over 1 ms "
              f"{', '.join(r['over_1ms'] for r in b)} of {', '.join(r['calls'] for r in b)}, of which slept "
              f"{', '.join(r['blocked_over_1ms'] for r in b)} (the machine's own)")
        if pr:
            print(f"    the locks a call can wait for, held at most (by the holder's CPU time, the library built with "
                  f"the lock probe, in the same runs' turns): a slot's "
                  f"{', '.join(str(round(float(r['slot_hold_max_us']))) for r in pr)} us, the global lock "
                  f"{', '.join(str(round(float(r['global_hold_max_us']))) for r in pr)} us (target <= 1000 us: "
                  f"{'met' if all(max(float(r['slot_hold_max_us']), float(r['global_hold_max_us'])) <= 1000 for r in pr) else 'not met'}); "
                  f"slot holds over 1 ms {', '.join(r.get('slot_did_over_1ms', '?') for r in pr)}; the most one slot hold "
                  f"did (work, which the machine's stalls do not move): chunks copied "
                  f"{', '.join(r.get('slot_did_most_chunks', '?') for r in pr)}, records kept "
                  f"{', '.join(r.get('slot_did_most_records', '?') for r in pr)}, move steps "
                  f"{', '.join(r.get('slot_did_most_moves', '?') for r in pr)}, fresh stages "
                  f"{', '.join(r.get('slot_did_most_fresh_stages', '?') for r in pr)}; the control (a fixed "
                  f"{float(pr[0].get('control_mean_us', 0)):.2f} us of loop in the same thread, timed the same way) "
                  f"at most {', '.join(str(round(float(r.get('control_max_us', 0)))) for r in pr)} us, and one "
                  f"first write to a fresh page every 4 pairs at most "
                  f"{', '.join(str(round(float(r.get('touch_max_us', 0)))) for r in pr)} us: the machine's own")
    x = xfree_row()
    print(f"\n{number + 3}. frees across 16 threads: vramtrace same-thread {x[True][0]:.0f} pairs/s, cross-thread "
          f"{x[True][1]:.0f}, median of the rounds' cross over same {x[True][2]:.2f}x (target >= 0.9x), by the "
          f"calls' own CPU time a pair {x[True][3]:.2f}x; without vramtrace {x[False][2]:.2f}x ({x[False][3]:.2f}x)")
    bare, empty, pre, libs = startup_row()
    ins = "" if pre[1] is None else (f"; user instructions of the whole process {bare[1]:,} bare, {empty[1]:,} "
                                     f"with the empty preload, {pre[1]:,} with vramtrace")
    print(f"\n{number + 4}. start of /bin/true (a process that never touches the GPU): {bare[0]:.0f} us bare, "
          f"{empty[0]:.0f} us with an empty preloaded library (the floor), {pre[0]:.0f} us with vramtrace: "
          f"{pre[0] - bare[0]:.0f} us added (target <= 100), {pre[0] - empty[0]:.0f} over the floor{ins}; "
          f"libraries mapped: {' '.join(libs)}")


def marks_line():
    m = marks_row()
    return (f"a mark's leak report (the C API, at every test of a runner): {m[1][0]:.3f} ms with one allocation "
            f"live, {m[1][1]:.3f} ms with none, in a process of 1 stack; {m[10000][0]:.3f} and {m[10000][1]:.3f} ms "
            f"in one of 10,000 stacks; {m[1000000][0]:.2f} and {m[1000000][1]:.2f} ms in one of 1,000,000")


def main():
    if sys.argv[1:] == ["threads"]:
        return threads_only()
    if sys.argv[1:] == ["shapes"]:
        return shapes_main()
    if sys.argv[1:] == ["xfree"]:
        x = xfree_row()
        return print(f"frees across 16 threads ({REPEAT} rounds): vramtrace same-thread {x[True][0]:.0f} pairs/s, "
                     f"cross-thread {x[True][1]:.0f}, median of the rounds' cross over same {x[True][2]:.2f}x, by the "
                     f"calls' own CPU time a pair {x[True][3]:.2f}x (target >= 0.9x); without vramtrace "
                     f"{x[False][2]:.2f}x ({x[False][3]:.2f}x)")
    if sys.argv[1:] == ["marks"]:
        return print(marks_line())
    if sys.argv[1:] == ["python"]:
        for mode, shape in (((), "one line"), (("alternate",), "two lines in turn")):
            ver, base, native, withpy, fastest = python_row(mode)
            print(f"Python {ver}, 33 Python frames, {shape} ({REPEAT} rounds): without vramtrace {base:.0f} ns, "
                  f"native frames only {native:.0f}, with Python frames {withpy:.0f}; Python frames add "
                  f"{withpy - native:.0f} ns, {fastest:.0f} ns between the fastest runs: "
                  f"{(withpy - native) / PY_FRAMES:.1f} and {fastest / PY_FRAMES:.1f} ns a frame (target <= 6)")
        return
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
        print(f"\n2. Python {ver}, 33 Python frames, ctypes alloc+free pair (ns): without vramtrace {base:.0f}, "
              f"native frames only {native:.0f}, with Python frames {withpy:.0f}; Python frames add "
              f"{withpy - native:.0f} ns, {fastest:.0f} ns between the fastest runs (target <= 1000): "
              f"{(withpy - native) / PY_FRAMES:.1f} and {fastest / PY_FRAMES:.1f} ns a frame (target <= 6; "
              "bench_pyframes.py counts instructions)")
        ver, base, native, withpy, fastest = python_row(("alternate",))
        print(f"   the same from two lines in turn (every capture read, spliced and interned): without vramtrace "
              f"{base:.0f}, native frames only {native:.0f}, with Python frames {withpy:.0f}; Python frames add "
              f"{(withpy - native) / PY_FRAMES:.1f} and {fastest / PY_FRAMES:.1f} ns a frame (target <= 6)")
        t, ratio = threads_row()
        print(f"\n3. two threads at once, pairs/s: vramtrace 1 thread {t[(True, 1)]:.0f}, 2 threads "
              f"{t[(True, 2)]:.0f} = {t[(True, 2)] / t[(True, 1)]:.2f}x, median of the rounds' ratios "
              f"{ratio[True]:.2f}x (target >= 1.7x); without vramtrace {t[(False, 2)] / t[(False, 1)]:.2f}x "
              f"({ratio[False]:.2f}x); this machine's ceiling (two threads of arithmetic that share nothing) "
              f"{machine_scaling():.2f}x; 16 threads at once {many_threads():.0f} pairs/s on {os.cpu_count()} CPUs")
        per_alloc, alloc_s, total, size = live_row(tmp)
        print(f"\n4. one million live allocations from 4 call sites: {per_alloc:.0f} bytes of resident memory per "
              f"live allocation (target <= 160); allocating {alloc_s:.2f} s; run plus dump {total:.2f} s "
              f"(target <= 5); dump {size / 1e6:.0f} MB (the event ring off: VRAMTRACE_EVENTS=0)")
        k = keep_rows()
        print(f"   one million kept at stacks of about 26 frames, bytes of resident memory per live allocation (target <= 160): "
              f"over 1 stack {k[(1, True)]:.0f} ({k[(1, False)]:.0f} with the ring off), over 100,000 stacks "
              f"{k[(100000, True)]:.0f} ({k[(100000, False)]:.0f} with the ring off; the ring of 1,000,000 "
              f"events is 32 bytes an event, full here)")
        per_event, rss1, rss5 = events_row()
        print(f"\n5. event history: {per_event:.1f} bytes per event; resident memory after 2 million events "
              f"{rss1 / 1024:.1f} MiB, after 10 million {rss5 / 1024:.1f} MiB (ring of 1 million events)")
        print("\n6. " + marks_line())
        shapes_main(7)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
