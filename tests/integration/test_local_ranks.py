"""A rank that only a local rank variable gave (LOCAL_RANK and the like,
no RANK): the rank of a process within its node, not of the job. Eight
processes on two hosts with LOCAL_RANK 0-3 each and WORLD_SIZE=8 made
`vramtrace report` say "8 dumps of 4 ranks from 0 to 3 (4 ranks have more
than one dump); missing 4 of 0 to 7: 4-7", and "first to fail: rank 1"
of node1's local rank 1. The dump now says which variable gave its rank
(rank_from), and the report compares such dumps by pid, naming each by
its local rank and host."""
import copy

from run_tests import *  # noqa: F401,F403

TRIAGE = [os.path.join(T, "t_triage"), "fail", "2M"]


def triage(work, env):
    """t_triage's first lines under env, and its exit dump."""
    e = {k: v for k, v in os.environ.items()
         if not k.startswith(("VRAMTRACE_", "SIMGPU_", "OMPI_", "SLURM_", "PMI_", "MPI_"))
         and k not in ("LD_PRELOAD", "LD_LIBRARY_PATH", "RANK", "LOCAL_RANK", "WORLD_SIZE")}
    dump = os.path.join(work, "d.json")
    e.update(env, LD_LIBRARY_PATH=SIM, LD_PRELOAD=LIB, VRAMTRACE_OUT=dump, VRAMTRACE_LIMIT="1M")
    p = subprocess.run(TRIAGE, env=e, capture_output=True, text=True, timeout=60)
    pid = p.stderr.split(" in pid ", 1)[1].split()[0] if " in pid " in p.stderr else "?"
    heads = [l.replace(f" in pid {pid} ", " in pid P ") for l in p.stderr.splitlines() if " in pid " in l]
    d = json.load(open(dump))
    os.unlink(dump)
    return heads, (d["rank"], d["local_rank"], d.get("rank_from"), d.get("rank_known"))


@test
def local_rank_alone_is_said_as_the_nodes():
    host = os.uname().nodename
    with workdir("vt-localrank-") as work:
        heads, said = triage(work, {"WORLD_SIZE": "8", "LOCAL_RANK": "1"})
        eq(heads, [f"vramtrace: out of memory in pid P ({TRIAGE[0]}), local rank 1 on {host} of a job of 8",
                   f"vramtrace: exit in pid P ({TRIAGE[0]}), local rank 1 on {host} of a job of 8"],
           "the first lines of a local rank")
        eq(said, (1, 1, "LOCAL_RANK", None), "the dump: rank, local_rank, rank_from, rank_known")
        heads, said = triage(work, {"WORLD_SIZE": "8", "SLURM_LOCALID": "3"})
        eq(said, (3, 3, "SLURM_LOCALID", None), "Slurm's local rank")
        heads, said = triage(work, {"WORLD_SIZE": "8", "RANK": "6", "LOCAL_RANK": "2"})
        eq(heads, [f"vramtrace: out of memory in pid P ({TRIAGE[0]}), rank 6 of 8 on {host}",
                   f"vramtrace: exit in pid P ({TRIAGE[0]}), rank 6 of 8 on {host}"], "the first lines of a rank")
        eq(said, (6, 2, "RANK", None), "the dump of the job's rank")
        heads, said = triage(work, {"WORLD_SIZE": "8"})
        eq(said, (0, 0, None, False), "the dump of no rank")


def local_dumps(work, shape):
    """Dumps made from the golden rank 0 dump, one per (host, local rank,
    pid, peak MiB, fails), with WORLD_SIZE=8 and rank_from LOCAL_RANK."""
    base = json.load(open(os.path.join(GOLDEN, R0)))
    paths = []
    for host, local, pid, peak, fails in shape:
        d = copy.deepcopy(base)
        d.update(host=host, rank=local, local_rank=local, pid=pid, world_size=8, rank_from="LOCAL_RANK")
        d["start_unix_ns"] += pid   # one process each
        d["totals"]["peak_bytes"] = peak << 20
        if not fails:
            d["ooms"] = []
            d["totals"]["oom_count"] = d["totals"]["failed_count"] = 0
            d["totals"].pop("last_oom_survived", None)
        paths.append(os.path.join(work, f"vt.{host}.{local}.json"))
        json.dump(d, open(paths[-1], "w"))
    return paths


@test
def report_counts_no_local_rank_as_the_jobs():
    shape = [("nodeA", 0, 100, 20, 0), ("nodeA", 1, 101, 30, 0), ("nodeB", 0, 200, 40, 0), ("nodeB", 1, 201, 90, 1)]
    with workdir("vt-localrank-") as work:
        paths = local_dumps(work, shape)
        p = subprocess.run([CLI, "report", *paths], capture_output=True, text=True)
        eq((p.returncode, p.stderr), (0, ""), "vramtrace report")
        lines = p.stdout.splitlines()
        rows = [l for l in lines if l.startswith("  ") and "t_phases" in l and "MiB " in l][:4]
        eq([l.split()[:3] for l in rows], [["100", "L0", "nodeA"], ["101", "L1", "nodeA"], ["200", "L0", "nodeB"],
                                           ["201", "L1", "nodeB"]], "the table's local ranks")
        first = lines.index("4 processes:")
        eq(lines[first + 6:first + 10], [
            "peaks: highest 90.00 MiB (local rank 1 on nodeB, pid 201), lowest 20.00 MiB (local rank 0 on nodeA, "
            "pid 100); the highest is 4.50x the lowest",
            "first to fail: local rank 1 on nodeB (pid 201), 14.00 MiB requested by cudaMalloc",
            "ranks: 4 of these 4 dumps say only a local rank (LOCAL_RANK or the like, L in the table; no RANK or "
            "the like held the job's rank): compared as 4 processes, by pid",
            "peak imbalance: highest 90.00 MiB (local rank 1 on nodeB, pid 201) over the median 35.00 MiB = 2.57x"],
           "the comparison's lines")
        ok("missing" not in p.stdout and "more than one dump" not in p.stdout, p.stdout[:2000])
        ok("\n== pid 201, local rank 1 (no rank of the job's), host nodeB: " in p.stdout, p.stdout[:4000])
        # One such dump alone: of a job of 8, never rank 1's.
        p = subprocess.run([CLI, "report", paths[3]], capture_output=True, text=True)
        eq(p.stdout.splitlines()[0], "ranks: this dump is local rank 1's on nodeB, of a job of 8 (no RANK or the "
                                     "like held the job's rank); the job's other dumps are not among these",
           "one dump's ranks line")
        p = subprocess.run([CLI, "report", "--format", "json", *paths], capture_output=True, text=True)
        j = json.loads(p.stdout)
        eq([(q["rank"], q["rank_from"], q["host"]) for q in j["processes"]],
           [(0, "LOCAL_RANK", "nodeA"), (1, "LOCAL_RANK", "nodeA"), (0, "LOCAL_RANK", "nodeB"),
            (1, "LOCAL_RANK", "nodeB")], "the JSON says where each rank came from")
        p = subprocess.run([CLI, "report", "--format", "folded", "--folded-root", "none", *paths],
                           capture_output=True, text=True)
        eq(sorted({l.split(";")[0] for l in p.stdout.splitlines()}),
           ["local rank 0 nodeA pid 100", "local rank 0 nodeB pid 200", "local rank 1 nodeA pid 101",
            "local rank 1 nodeB pid 201"], "the folded stacks' process frames (they said 'rank 0 pid 100')")
        p = subprocess.run([CLI, "report", "--format", "html", *paths], capture_output=True, text=True)
        ok('first to fail: local rank 1 on nodeB (pid 201), 14.00 MiB requested by cudaMalloc' in p.stdout, "the page's")
        ok('<span class="peak-name">local rank 1 on nodeB, pid 201</span>' in p.stdout, "the page's peaks")


@test
def local_ranks_of_two_nodes_one_after_the_other_are_one_run():
    """Two nodes' processes with local ranks 0 and 1 each, nodeB's begun
    after nodeA's had ended (a node that started late): their local ranks
    repeat, which read as a new run of the same ranks, and nodeA's dumps
    were left out as an earlier run. Local ranks are told apart with their
    host: one run of 4 processes."""
    shape = [("nodeA", 0, 100, 20, 0), ("nodeA", 1, 101, 30, 0), ("nodeB", 0, 200, 40, 0), ("nodeB", 1, 201, 90, 0)]
    with workdir("vt-localrun-") as work:
        paths = local_dumps(work, shape)
        for path in paths[2:]:
            d = json.load(open(path))
            d["start_unix_ns"] += 3600 * 10**9   # an hour later, long after nodeA's ended
            json.dump(d, open(path, "w"))
        p = subprocess.run([CLI, "report", *paths], capture_output=True, text=True)
        eq((p.returncode, p.stderr), (0, ""), "vramtrace report")
        ok("\n4 processes:\n" in "\n" + p.stdout and "earlier run" not in p.stdout, p.stdout[:2000])
        # The job's own ranks repeated are a new run still.
        for path in paths:
            d = json.load(open(path))
            d.pop("rank_from")
            d["rank_known"] = True
            json.dump(d, open(path, "w"))
        p = subprocess.run([CLI, "report", *paths], capture_output=True, text=True)
        eq(p.returncode, 0, p.stderr)
        ok("earlier runs: left out 2 dumps of 1 earlier run of these ranks" in p.stdout, p.stdout[:2000])
