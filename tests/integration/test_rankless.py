"""A process of a job (WORLD_SIZE and the like over 1) that no variable
gave a rank: it claims none. Its first lines said "rank 0 of 4" in every
such process, and `vramtrace report` called its dump rank 0's and an
earlier run of the same program "an earlier run of these ranks", though
the dump says rank_known false. A rank variable that holds no number
(RANK=-1, RANK=abc) is passed over with a warning naming it."""
from run_tests import *  # noqa: F401,F403

TRIAGE = [os.path.join(T, "t_triage"), "fail", "2M"]


def triage_heads(env):
    """t_triage's stderr lines that are warnings or first lines, under env."""
    e = {k: v for k, v in os.environ.items()
         if not k.startswith(("VRAMTRACE_", "SIMGPU_")) and k not in ("LD_PRELOAD", "LD_LIBRARY_PATH", "RANK",
                                                                      "LOCAL_RANK", "WORLD_SIZE")}
    e.update(env, LD_LIBRARY_PATH=SIM, LD_PRELOAD=LIB, VRAMTRACE_OUT="off", VRAMTRACE_LIMIT="1M")
    p = subprocess.run(TRIAGE, env=e, capture_output=True, text=True, timeout=60)
    heads = [l for l in p.stderr.splitlines() if " in pid " in l or l.startswith("vramtrace: warning: ")]
    pid = p.stderr.split(" in pid ", 1)[1].split()[0] if " in pid " in p.stderr else "?"
    return pid, heads


@test
def rankless_process_of_a_job_claims_no_rank():
    host = os.uname().nodename
    pid, heads = triage_heads({"WORLD_SIZE": "4"})
    eq(heads, [f"vramtrace: out of memory in pid {pid} ({TRIAGE[0]}), of a job of 4, rank not set, on {host}",
               f"vramtrace: exit in pid {pid} ({TRIAGE[0]}), of a job of 4, rank not set, on {host}"],
       "the first lines without a rank")
    pid, heads = triage_heads({"WORLD_SIZE": "4", "RANK": "-1"})
    eq(heads, ["vramtrace: warning: RANK=-1 is not a whole number from 0 to 2147483647; it is passed over",
               f"vramtrace: out of memory in pid {pid} ({TRIAGE[0]}), of a job of 4, rank not set, on {host}",
               f"vramtrace: exit in pid {pid} ({TRIAGE[0]}), of a job of 4, rank not set, on {host}"],
       "RANK=-1: said once, and no rank")
    pid, heads = triage_heads({"WORLD_SIZE": "4", "RANK": "abc", "SLURM_PROCID": "2"})
    eq(heads, ["vramtrace: warning: RANK=abc is not a whole number from 0 to 2147483647; it is passed over",
               f"vramtrace: out of memory in pid {pid} ({TRIAGE[0]}), rank 2 of 4 on {host}",
               f"vramtrace: exit in pid {pid} ({TRIAGE[0]}), rank 2 of 4 on {host}"],
       "RANK=abc: said once, and the next variable's rank")


@test
def report_of_rankless_dumps_names_no_rank_and_no_earlier_run():
    with workdir("vt-rankless-") as work:
        paths = [os.path.join(work, f"d.{i}.json") for i in (1, 2)]
        for path in paths:   # one after the other: two processes, not two runs of one rank
            r = run([os.path.join(T, "t_driver")], report="off", env={"WORLD_SIZE": "4", "VRAMTRACE_OUT": path})
            eq(r.rc, 0, "t_driver's status")
            d = json.load(open(path))
            eq((d["rank"], d["rank_known"], d["world_size"]), (0, False, 4), "the dump says no rank")
        p = subprocess.run([CLI, "report", paths[0]], capture_output=True, text=True)
        eq((p.returncode, p.stderr), (0, ""), "vramtrace report of one dump")
        eq(p.stdout.splitlines()[0], "ranks: this dump is of a job of 4 but says no rank (no RANK, LOCAL_RANK or the "
                                     "like held a rank); the job's other dumps are not among these", "its first line")
        p = subprocess.run([CLI, "report"] + paths, capture_output=True, text=True)
        eq((p.returncode, p.stderr), (0, ""), "vramtrace report of both")
        eq(p.stdout.splitlines()[0], "2 processes:", "both dumps are of this run: no earlier run left out")
        ok("\nranks: 2 of these 2 dumps say no rank (no RANK, LOCAL_RANK or the like held a rank): compared as 2 "
           "processes, by pid\n" in p.stdout, p.stdout[:1500])
        p = subprocess.run([CLI, "report", "--format", "json"] + paths, capture_output=True, text=True)
        j = json.loads(p.stdout)
        eq((len(j["processes"]), "earlier_runs" in j), (2, False), "the JSON: both processes, no earlier run")
        p = subprocess.run([CLI, "report", "--format", "folded", "--folded-root", "none"] + paths, capture_output=True,
                           text=True)
        eq(sorted({l.split(";")[0] for l in p.stdout.splitlines()}),
           sorted(f"pid {json.load(open(path))['pid']}" for path in paths),
           "the folded stacks' process frames: no rank (they said 'rank 0 pid N')")


def ranked_run(work, rank):
    """t_leaks under WORLD_SIZE=4 and RANK=rank: its warnings, the exit
    summary's place line and the report's ranks line."""
    dump = os.path.join(work, f"d{rank}.json")
    r = run([os.path.join(T, "t_leaks")], env={"WORLD_SIZE": "4", "RANK": rank, "VRAMTRACE_OUT": dump})
    eq(r.rc, 0, "t_leaks' status:\n" + r.err)
    p = subprocess.run([CLI, "report", dump], capture_output=True, text=True)
    eq((p.returncode, p.stderr), (0, ""), "vramtrace report")
    return ([l for l in r.err.splitlines() if "warning" in l or " on " + os.uname().nodename in l],
            [l for l in p.stdout.splitlines() if l.startswith("ranks: ")])


@test
def rank_set_but_unusable_or_past_the_jobs_size():
    # RANK=-1 is set, yet holds no rank: the report said "no RANK,
    # LOCAL_RANK or the like was set". RANK=7 of WORLD_SIZE=4 read "rank 7
    # of 4" with no word.
    host = os.uname().nodename
    with workdir("vt-rankless-") as work:
        warned, ranks = ranked_run(work, "-1")
        eq(warned[0], "vramtrace: warning: RANK=-1 is not a whole number from 0 to 2147483647; it is passed over",
           "the warning for RANK=-1")
        eq(len(warned), 2, "one warning and the place line: " + repr(warned))
        ok(re.fullmatch(r"vramtrace: exit in pid \d+ \(.*t_leaks\), of a job of 4, rank not set, on " + re.escape(host),
                        warned[1]), warned[1])
        eq(ranks, ["ranks: this dump is of a job of 4 but says no rank (no RANK, LOCAL_RANK or the like held a "
                   "rank); the job's other dumps are not among these"], "the report's ranks line for RANK=-1")
        warned, ranks = ranked_run(work, "7")
        eq(warned[0], "vramtrace: warning: RANK=7 is past the job's size (WORLD_SIZE=4: ranks 0 to 3); the rank is kept",
           "the warning for RANK=7")
        eq(len(warned), 2, "one warning and the place line: " + repr(warned))
        ok(re.fullmatch(r"vramtrace: exit in pid \d+ \(.*t_leaks\), rank 7 of 4 on " + re.escape(host), warned[1]),
           warned[1])
        eq(ranks, ["ranks: this dump is rank 7's of a job of 4; the other ranks' dumps are not among these"],
           "the report's ranks line for RANK=7")
