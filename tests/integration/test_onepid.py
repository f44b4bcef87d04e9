"""`vramtrace report` of the dumps of one process (its on-demand dumps and
the exit's) that say no rank: the table and the note count each dump as a
process ("3 processes"), and the comparison by pid said "compared as 1
processes" right under them. The comparison's count is now in pids."""
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
        eq(lines[0], "3 processes:", "the table's count")
        eq([l for l in lines if l.startswith(("note: ", "ranks: "))],
           [f"note: 3 of these dumps are of one process (pid {pid} on {os.uname().nodename}): the figures add them "
            "up as 3 processes; give one of them for that process alone",
            "ranks: 3 of these 3 dumps say no rank (no RANK, LOCAL_RANK or the like was set): compared by pid, the "
            "dumps of one process as one: 1 pid"], "the note and the ranks line")
