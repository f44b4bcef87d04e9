"""`vramtrace report` of the dumps of one process (its on-demand dumps and
the exit's) that say no rank: the comparison by pid said "compared as 1
processes" under a table of "3 processes", and the holders combined added
the three dumps up ("in 3 processes") beside "compared by pid ... 1 pid".
The comparison's count is now in pids, the table's header counts dumps and
processes, and the holders combined take each process's newest dump."""
import glob

from run_tests import *  # noqa: F401,F403


@test
def report_of_one_processs_dumps_counts_once():
    with workdir("vt-onepid-") as work:
        r = run([os.path.join(T, "t_leaks"), "signal"], report="off",
                env={"VRAMTRACE_OUT": os.path.join(work, "d.%p.json")})
        eq(r.rc, 0, "t_leaks' status:\n" + r.err)
        paths = sorted(glob.glob(os.path.join(work, "d.*.json")))
        eq(len(paths), 3, "two on-demand dumps and the exit's")
        p = subprocess.run([CLI, "report"] + paths, capture_output=True, text=True)
        eq((p.returncode, p.stderr), (0, ""), "vramtrace report")
        pid = json.load(open(paths[0]))["pid"]
        lines = p.stdout.splitlines()
        eq(lines[0], "3 dumps of 1 process:", "the table's count")
        eq([l for l in lines if l.startswith(("note: ", "ranks: "))],
           [f"note: 3 of these dumps are of one process (pid {pid} on {os.uname().nodename}): the holders combined "
            "take its newest alone",
            "ranks: 3 of these 3 dumps say no rank (no RANK, LOCAL_RANK or the like held a rank): compared by pid, the "
            "dumps of one process as one: 1 process"], "the note and the ranks line")
        at = lines.index("holders at exit combined across processes:")
        eq(lines[at + 1:at + 5],
           ["     1.00 MiB in 1 allocation in 1 process  load_once tests/progs/t_leaks.c:20",
            "   512.00 KiB in 8 allocations in 1 process  leaky_step tests/progs/t_leaks.c:26",
            "     4.00 KiB in 1 allocation in 1 process  third_party_init tests/progs/t_leaks.c:38",
            ""], "the holders combined: the exit dump's alone")
        q = subprocess.run([CLI, "report", "--format", "json"] + paths, capture_output=True, text=True)
        eq([(h["bytes"], h["count"], h["processes"]) for h in json.loads(q.stdout)["combined_holders"]],
           [(1 << 20, 1, 1), (512 << 10, 8, 1), (4 << 10, 1, 1)], "the JSON's combined_holders")
