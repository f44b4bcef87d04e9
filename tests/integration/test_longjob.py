"""Long jobs: more out-of-memory failures than the records kept
(tests/progs/t_oomloop.c: 40 MiB filled of a 64 MiB device, then 32 MiB
asked in try_a and 48 MiB in try_b, as many times as told), and more
events than the ring keeps (tests/progs/t_leakstep.c: steps, each with
temporary allocations freed at once and one kept in keep; small rings
through VRAMTRACE_EVENTS).
"""
from run_tests import *  # noqa: F401,F403

OOMLOOP = os.path.join(T, "t_oomloop")
MiB = 1 << 20


def oomloop(a, b, work):
    """t_oomloop A B on a 64 MiB device, its dump in work: the run, the
    dump and `vramtrace report`'s text of it."""
    path = os.path.join(work, "d.json")
    r = run([OOMLOOP, str(a), str(b)], env={"SIMGPU_CAPACITY": "64M", "VRAMTRACE_OUT": path})
    eq((r.rc, r.out), (0, f"failed a {a} b {b}\n"), f"the program's own results: {r.err[-2000:]}")
    p = subprocess.run([CLI, "report", path], capture_output=True, text=True, timeout=60)
    eq(p.returncode, 0, f"report's status: {p.stderr}")
    return r, load_dump(path), p.stdout


def site(fn):
    return f"{fn} tests/progs/t_oomloop.c:{source_line('t_oomloop.c', 'return cudaMalloc(p, ' + ('32' if fn == 'try_a' else '48'))}"


def also_lines(err):
    return [re.sub(r"thread \d+, at +[0-9.]+s", "thread T, at Xs", l) for l in err.splitlines() if "also failed" in l]


@test
def longjob_failures_counted_past_the_records_kept():
    """4,501 failures: one told by the post-mortem, 4,500 after it. Each
    request's count is exact however many the history keeps (the first
    4,032 and the newest 64), and the last failure, the 4,501st, is kept
    and told in full. Before: only the first 4,096 were kept and counted,
    the line said 4,094 times, the last failure was "not one of them" and
    `vramtrace report` said 4,086 more failures against 4,501 in its
    totals."""
    with workdir("vt-longjob-") as work:
        r, d, rep = oomloop(1, 4500, work)
    eq(r.err.count("out of memory in pid"), 1, "one post-mortem, the first failure's")
    eq(also_lines(r.err), [f"vramtrace:   also failed, without a post-mortem of its own: 48.00 MiB by cudaMalloc on "
                           f"device 0 at {site('try_b')}, thread T, at Xs, 4499 times"],
       f"the failures after the post-mortem but the last, counted:\n{r.err}")
    ok("vramtrace: out-of-memory failure #4501, the last, had no post-mortem of its own (at most one a second is "
       "written; 1 of 4501 failures got one):\nvramtrace:   request: 48.00 MiB (50331648 bytes) by cudaMalloc on device 0"
       in r.err, f"the last failure told in full:\n{r.err[-3000:]}")
    eq(d["totals"]["oom_count"], 4501, "failures in all")
    eq([o["number"] for o in d["ooms"]], list(range(1, 4033)) + list(range(4438, 4502)),
       "the first 4032 failures kept, and the newest 64")
    eq([(o["requested_bytes"] // MiB, o["number"]) for o in d["ooms"][-1:]], [(48, 4501)], "the last one kept")
    eq([(q["requested_bytes"] // MiB, q["count"], q["first_number"], q["last_number"]) for q in d["oom_requests"]],
       [(32, 1, 1, 1), (48, 4500, 2, 4501)], "each request counted whole")
    eq(d["oom_requests_other"], 0, "no request past the table")
    ok("(4491 more out-of-memory failures)\n" in rep, f"the report's count of the failures not shown:\n{rep[-3000:]}")
    ok(f"\n  48.00 MiB by cudaMalloc on device 0 at {site('try_b')}: 4500 times, from " in rep and
       f"\n  32.00 MiB by cudaMalloc on device 0 at {site('try_a')}: once, at " in rep,
       f"the report's failures by request:\n{rep[-3000:]}")


@test
def longjob_last_failure_kept_past_the_records():
    """4,200 failures of one request, then 3 of another, the last of
    which ends the job: it is kept (number 4,203) and told in full at the
    exit, the two before it in a line. Before: the exit said the last was
    not among the first 4,096 kept, and the 48 MiB request appeared
    nowhere, in the exit report, the dump or `vramtrace report`."""
    with workdir("vt-longjob-") as work:
        r, d, rep = oomloop(4200, 3, work)
    # The 4,199 failures after the first one's post-mortem, of its request:
    # not a retry told with it (under "failures so far" they went unsaid,
    # an outside check).
    eq(also_lines(r.err), [f"vramtrace:   also failed, without a post-mortem of its own: 32.00 MiB by cudaMalloc on "
                           f"device 0 at {site('try_a')}, thread T, at Xs, 4199 times",
                           f"vramtrace:   also failed, without a post-mortem of its own: 48.00 MiB by cudaMalloc on "
                           f"device 0 at {site('try_b')}, thread T, at Xs, 2 times"],
       f"the first request's later failures, and the two failures before the last, of the 48 MiB request:\n{r.err}")
    ok("vramtrace: out-of-memory failure #4203, the last, had no post-mortem of its own (at most one a second is "
       "written; 1 of 4203 failures got one):\nvramtrace:   request: 48.00 MiB (50331648 bytes) by cudaMalloc on device 0"
       f" (vramtrace simulated GPU, GPU-00010203-0405-0607-0809-0a0b0c0d0e0f)\nvramtrace:   failing call: {site('try_b')}\n"
       in r.err, f"the last failure told in full:\n{r.err[-3000:]}")
    eq([(o["requested_bytes"] // MiB, o["number"]) for o in d["ooms"][-4:]],
       [(32, 4200), (48, 4201), (48, 4202), (48, 4203)], "the newest failures kept")
    eq([(q["requested_bytes"] // MiB, q["count"]) for q in d["oom_requests"]], [(32, 4200), (48, 3)],
       "each request counted whole")
    ok(f"\n  32.00 MiB by cudaMalloc on device 0 at {site('try_a')}: 4200 times, from " in rep and
       f"\n  48.00 MiB by cudaMalloc on device 0 at {site('try_b')}: 3 times, from " in rep,
       f"the report's failures by request:\n{rep[-3000:]}")


LEAKSTEP = os.path.join(T, "t_leakstep")
KEEP = f"keep tests/progs/t_leakstep.c:{source_line('t_leakstep.c', 'return cudaMalloc(&p, n) == cudaSuccess')}"
CAVEAT = "; figures of the history kept (events from {} s; before them, only its allocations still live)"


def leakstep(args, env, work):
    """t_leakstep ARGS, its dump in work: the run, the dump and `vramtrace
    report`'s text of it."""
    path = os.path.join(work, "d.json")
    r = run([LEAKSTEP, *map(str, args)], env={"VRAMTRACE_OUT": path, **env})
    p = subprocess.run([CLI, "report", path], capture_output=True, text=True, timeout=60)
    eq(p.returncode, 0, f"report's status: {p.stderr}")
    return r, load_dump(path), p.stdout


def secs(ns):
    return f"{ns / 1e9:.3f}"


def growth_fields(g):
    keys = ("first_bytes", "end_bytes", "allocations", "unit", "units", "bytes_per_unit", "rise_bytes", "run_steps")
    return {k: g[k] for k in keys if k in g}


@test
def longjob_growth_known_past_the_ring():
    """A leak of 1 MiB a step over 100 steps, each with 5 temporary
    allocations, until the device (100 MiB) is full, with a ring of 300
    events (the last 27 steps or so): the site's live allocations keep
    their times, so its growth is known from its first one, 0 B to 100
    MiB over 100 allocations and 100 steps, in the post-mortem's finding,
    the exit summary, the dump and `vramtrace report`; each says its
    figures are of the history kept, from the oldest event kept. Before:
    "from 72.00 MiB", "+1.00 MiB per step over the last 28 steps", and the
    dump's since_ns the site's first event in the ring. With the whole
    history kept the figures are the same, and nothing is said."""
    with workdir("vt-longjob-") as work:
        r, d, rep = leakstep([1000, 5, 1024], {"SIMGPU_CAPACITY": "100M", "VRAMTRACE_EVENTS": "300"}, work)
    eq(r.out, "steps 100, kept 104857600 bytes\n", "the program's own results")
    eq(d["events_dropped"] > 0, True, "the ring wrapped")
    f = [l for l in r.err.splitlines() if "grew through the run" in l]
    want = (re.escape(f"vramtrace:   1. {KEEP} grew through the run from 0 B to 100.00 MiB: +1.00 MiB per step over "
                      "the last 100 steps (+100.00 MiB in ") + r"[0-9.]+ s\)" +
            re.escape(CAVEAT.format("@")).replace("@", "[0-9.]+") + "; a leak suspect$")
    ok(len(f) >= 1 and all(re.match(want, l) for l in f), f"the post-mortem's finding:\n{f}")
    g = d["growing"]
    eq(len(g), 1, "one growing site")
    eq(growth_fields(g[0]), {"first_bytes": 0, "end_bytes": 100 * MiB, "allocations": 100, "unit": "step",
                             "units": 100, "bytes_per_unit": MiB, "rise_bytes": 100 * MiB}, "the dump's figures")
    kept = [a for a in d["live"] if a["bytes"] == MiB]
    eq(len(kept), 100, "the site's live allocations")
    eq(g[0]["since_ns"], min(a["time_ns"] for a in kept), "since: the site's earliest live allocation")
    eq(g[0]["history_from_ns"], min(e[0] for e in d["events"]), "the history kept: from the oldest event")
    ok(g[0]["since_ns"] < g[0]["history_from_ns"], "the site began before the history kept")
    line = (f"{KEEP}: 0 B -> 100.00 MiB, +1.00 MiB per step over the last 100 steps (+100.00 MiB in "
            f"{secs(g[0]['span_ns'])} s){CAVEAT.format(secs(g[0]['history_from_ns']))}\n")
    ok(f"\nvramtrace:   {line}" in r.err, f"the exit summary's line {line!r}:\n{r.err[-3000:]}")
    ok(f"\n  {line}" in rep, f"the report's line {line!r}:\n{rep}")
    with workdir("vt-longjob-") as work:
        r, d, rep = leakstep([1000, 5, 1024], {"SIMGPU_CAPACITY": "100M"}, work)
    eq(d["events_dropped"], 0, "the whole history kept")
    eq(growth_fields(d["growing"][0]), {"first_bytes": 0, "end_bytes": 100 * MiB, "allocations": 100, "unit": "step",
                                        "units": 100, "bytes_per_unit": MiB, "rise_bytes": 100 * MiB},
       "the same figures")
    ok("history_from_ns" not in d["growing"][0] and "figures of the history kept" not in r.err + rep,
       "nothing said of a history kept whole")


@test
def longjob_growth_per_step_past_the_steps_kept_says_so():
    """4,200 steps keeping 1 KiB each, a ring of 1,000 events: the site's
    growth is known from its first allocation (0 B -> 4.10 MiB over 4,200
    allocations); per step it is counted over the steps after the oldest
    of the 4,096 boundaries kept, and says so: "over the last 4095 of the
    run's 4200 steps", its rise (+4.00 MiB) from what the site held at that
    boundary. Before: "3.12 MiB -> 4.10 MiB, +1.00 KiB per step over the
    last 1000 steps"; with a larger ring, a rise from the first floor and
    a rise over the last steps on one line that disagreed."""
    with workdir("vt-longjob-") as work:
        r, d, rep = leakstep([4200, 0, 1], {"VRAMTRACE_EVENTS": "1000"}, work)
    eq(r.out, "steps 4200, kept 4300800 bytes\n", "the program's own results")
    g = d["growing"]
    eq(len(g), 1, "one growing site")
    eq(growth_fields(g[0]), {"first_bytes": 0, "end_bytes": 4200 << 10, "allocations": 4200, "unit": "step",
                             "units": 4095, "bytes_per_unit": 1024, "rise_bytes": 4095 << 10, "run_steps": 4200},
       "the dump's figures")
    eq(g[0]["history_from_ns"], min(e[0] for e in d["events"]), "the history kept: from the oldest event")
    line = (f"{KEEP}: 0 B -> 4.10 MiB, +1.00 KiB per step over the last 4095 of the run's 4200 steps (+4.00 MiB in "
            f"{secs(g[0]['span_ns'])} s){CAVEAT.format(secs(g[0]['history_from_ns']))}\n")
    ok(f"\nvramtrace:   {line}" in r.err, f"the exit summary's line {line!r}:\n{r.err[-3000:]}")
    ok(f"\n  {line}" in rep, f"the report's line {line!r}:\n{rep}")


@test
def longjob_repeats_of_the_told_request_are_counted_whole_at_exit():
    """A request told by the post-mortem that fails N more times, the last
    of them ending the run: the exit's line counted N - 1 ("9 times" for
    10, the last failure neither in the line nor told in full) and said
    nothing for 3 (an outside check); now N, so that the told failure and
    the lines add up to the failures. One or two repeats on the failing
    thread are a retry told with it."""
    for a, want in ((3, []), (4, [3]), (5, [4]), (11, [10])):
        with workdir("vt-longjob-") as work:
            r, d, rep = oomloop(a, 0, work)
        eq(d["totals"]["oom_count"], a, f"{a}: the failures")
        eq(also_lines(r.err), [f"vramtrace:   also failed, without a post-mortem of its own: 32.00 MiB by cudaMalloc "
                               f"on device 0 at {site('try_a')}, thread T, at Xs, {n} times" for n in want],
           f"{a} failures: the exit's line\n{r.err[-3000:]}")


def growth_per_step_leaves_out_the_first_steps_buffers():
    """A leak of 256 KiB a step over 60 steps at a site that made 384 MiB
    more in the first step, kept and not added to again (the gradients'
    buffers a caching allocator makes at the first backward): the rise per
    step counted them, +6.65 MiB per step where the leak is 256 KiB (an
    outside check: +541 KiB per step for a 256 KiB leak, while the forecast
    of the same run said +266 KiB); it counts the first step's rise as the
    others' mean, +15.00 MiB over the 60 steps, and what the site holds is
    still all of it (0 B -> 399.00 MiB)."""
    with workdir("vt-longjob-") as work:
        r, d, rep = leakstep([60, 2, 256, 384 << 10], {}, work)
    eq(r.out, f"steps 60, kept {(384 << 20) + 60 * (256 << 10)} bytes\n", "the program's own results")
    g = d["growing"]
    eq(len(g), 1, "one growing site")
    eq(growth_fields(g[0]), {"first_bytes": 0, "end_bytes": (384 << 20) + 60 * (256 << 10), "allocations": 61,
                             "unit": "step", "units": 60, "bytes_per_unit": 256 << 10, "rise_bytes": 60 * (256 << 10)},
       "the dump's figures")
    line = (f"{KEEP}: 0 B -> 399.00 MiB, +256.00 KiB per step over the last 60 steps (+15.00 MiB in "
            f"{secs(g[0]['span_ns'])} s)\n")
    ok(f"\nvramtrace:   {line}" in r.err, f"the exit summary's line {line!r}:\n{r.err[-3000:]}")
    ok(f"\n  {line}" in rep, f"the report's line {line!r}:\n{rep}")
