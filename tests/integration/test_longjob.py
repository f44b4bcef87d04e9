"""Long jobs: more out-of-memory failures than the records kept
(tests/progs/t_oomloop.c: 40 MiB filled of a 64 MiB device, then 32 MiB
asked in try_a and 48 MiB in try_b, as many times as told).
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
    eq(also_lines(r.err), [f"vramtrace:   also failed, without a post-mortem of its own: 48.00 MiB by cudaMalloc on "
                           f"device 0 at {site('try_b')}, thread T, at Xs, 2 times"],
       f"the two failures before the last, of the 48 MiB request:\n{r.err}")
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
