"""Integration tests of the dump signal and SIGTERM in a child forked after
its parent's first GPU call (tests/progs/t_forksig.c): a worker forked once
the model is on the GPU (PyTorch's DataLoader, multiprocessing) is reached
by a `pkill -USR2` meant for the job, or by a signal to the process group."""
from run_tests import *

FORKSIG = os.path.join(T, "t_forksig")


@test
def forksig_child_without_gpu_lives_through_the_dump_signal():
    """The child has used no GPU: it does nothing on the dump signal (it
    died of it: vramtrace had put the signal's default back in the child)
    and goes on; it writes no dump, the parent's exit dump is its own 8 MiB."""
    r = run([FORKSIG, "idle"], report="off")
    eq((r.out, r.err, r.rc), ("child: went on, own handler 0\nchild status exit 0\n", "", 0), "idle child")
    eq([(d["reason"], [a["bytes"] for a in d["live"]]) for d in r.dumps], [("exit", [8 * MiB])],
       "the parent's exit dump alone")


@test
def forksig_child_dumps_once_it_uses_the_gpu():
    """Signalled before it uses a GPU, the child goes on; once it has
    allocated, the next signal writes its dump, of its own 16 MiB only, and
    it exits with its own exit dump."""
    r = run([FORKSIG, "use"], report="off")
    eq((r.out, r.err, r.rc), ("child: went on, own handler 0\nchild: dumped 1\nchild status exit 0\n", "", 0),
       "the child's output")
    by_name = {os.path.basename(d["_path"]): d for d in r.dumps}
    parent = [n for n, d in by_name.items() if 8 * MiB in [a["bytes"] for a in d["live"]]]
    eq(len(parent), 1, f"one dump of the parent's 8 MiB in {sorted(by_name)}")
    child = sorted(n for n in by_name if n not in parent)
    eq(len(child), 2, f"the child's two dumps in {sorted(by_name)}")
    cpid = by_name[child[0]]["pid"]
    eq(child, [f"dump.{cpid}.1.json", f"dump.{cpid}.json"], "the child's signal dump, then its exit dump")
    eq([(by_name[n]["reason"], [a["bytes"] for a in by_name[n]["live"]]) for n in child],
       [("signal", [16 * MiB]), ("exit", [16 * MiB])], "the child's dumps hold its own 16 MiB")


@test
def forksig_child_keeps_the_programs_handler():
    """A handler of the program's, put in after the first GPU call (in place
    of vramtrace's) or before it (vramtrace then installed none, and says
    so), is the child's: it runs, once."""
    r = run([FORKSIG, "own"], report="off")
    eq((r.out, r.err, r.rc), ("child: went on, own handler 1\nchild status exit 0\n", "", 0), "put in after")
    eq(len(r.dumps), 1, "the parent's exit dump alone")
    r = run([FORKSIG, "ownfirst"], report="off")
    eq((r.out, r.err, r.rc),
       ("child: went on, own handler 1\nchild status exit 0\n",
        "vramtrace: warning: signal 12 has a handler of the program's; on-demand dumps are off "
        "(set VRAMTRACE_SIGNAL to another signal)\n", 0), "put in before")
    eq(len(r.dumps), 1, "the parent's exit dump alone")


@test
def forksig_child_ends_of_sigterm_as_without_vramtrace():
    """SIGTERM ends a child that has used no GPU as without vramtrace (no
    dump); one that has allocated writes its exit dump first, of its own
    16 MiB, ended by SIGTERM, and dies of it all the same."""
    r = run([FORKSIG, "term"], report="off")
    eq((r.out, r.err, r.rc), ("child status sig 15\n", "", 0), "idle child")
    eq([[a["bytes"] for a in d["live"]] for d in r.dumps], [[8 * MiB]], "the parent's exit dump alone")
    r = run([FORKSIG, "termuse"], report="off")
    eq((r.out, r.err, r.rc), ("child status sig 15\n", "", 0), "child that allocated")
    parent = [d for d in r.dumps if d.get("ended_by") is None]
    eq(len(parent), 1, "one dump not ended by a signal")
    got = sorted(([a["bytes"] for a in d["live"]], d["reason"], d.get("ended_by")) for d in r.dumps)
    eq(got, [([8 * MiB], "exit", None),
             ([16 * MiB], "exit", {"signal": "SIGTERM", "from_pid": parent[0]["pid"], "from": "t_forksig"})],
       "the parent's dump, the child's ended by the parent's SIGTERM")


STRESS = os.path.join(T, "t_stress")


def _stress_totals(r):
    d = [x for x in r.dumps if x["reason"] == "exit"]
    eq(len(d), 1, "one exit dump:\n" + r.err[-2000:])
    t = d[0]["totals"]
    return (t["alloc_count"], t["free_count"], t["live_bytes"],
            sorted((x["ordinal"], x["alloc_count"], x["free_count"]) for x in d[0]["devices"]))


@test
def stress_of_threads_forks_and_dump_signals_counts_every_allocation():
    """t_stress 4 8 2000 on two devices: 32 threads in 4 waves, 64,000
    allocations of every kind and the main thread's one, freed by whichever
    thread comes next, while dump signals and forks come every 30 and 50 ms.
    The exit dump's counts are exact (each thread draws from its own seed),
    as built and under the TSan build, which reports no data race; the
    on-request dumps' files are whole. With worker 1 calling exit(0) at
    round 300 while the rest go on, the exit's outputs are written (a fork
    then lost them in half the runs, see test_exitorder.py)."""
    want = (64001, 64001, 0, [(0, 30409, 30409), (1, 27205, 27205)])
    env = {"SIMGPU_DEVICES": "2"}
    r = run([STRESS, "4", "8", "2000"], env=env, report="off")
    eq((r.out, r.rc), ("done, freed 4080 at the end\n", 0), "the program ran:\n" + r.err[-2000:])
    eq(_stress_totals(r), want, "the exit dump's counts")
    for d in r.dumps:
        ok(d["reason"] in ("exit", "signal"), f"{d['_path']}: {d['reason']}")
    tsan = gcc_runtime("libtsan.so")
    ok(tsan, "libtsan from gcc")
    r = run([STRESS, "4", "8", "2000"], lib=os.path.join(BUILD, "tsan", "libvramtrace.so"), first=tsan, report="off",
            env=dict(env, TSAN_OPTIONS="halt_on_error=1:exitcode=66:die_after_fork=0"))
    ok("ThreadSanitizer" not in r.err, "no data race:\n" + r.err[-3000:])
    eq((r.out, r.rc), ("done, freed 4080 at the end\n", 0), "under TSan")
    eq(_stress_totals(r), want, "the exit dump's counts under TSan")
    for _ in range(3):
        r = run([STRESS, "4", "8", "2000", "300"], env=env)
        eq(r.rc, 0, "exit(0) from worker 1:\n" + r.err[-2000:])
        ok("no exit dump" not in r.err, "the exit's outputs were written:\n" + r.err[-2000:])
        eq([d["reason"] for d in r.dumps].count("exit"), 1, "the exit dump")
