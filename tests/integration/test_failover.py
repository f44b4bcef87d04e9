"""`vramtrace diff --fail-over` where the growth and the limit round to
figures that read as one value: "+1.00 MiB, more than --fail-over 1.00
MiB" (once "1024.00 KiB"). Such figures are now given in bytes, exact."""
from run_tests import *  # noqa: F401,F403

TRIAGE = os.path.join(T, "t_triage")


@test
def diff_fail_over_in_bytes_where_units_read_equal():
    with workdir("vt-failover-") as work:
        paths = [os.path.join(work, n) for n in ("a.json", "b.json")]
        for path, args in zip(paths, (["keep", "1M"], ["keep", "1M", "other", "1M"])):
            r = run([TRIAGE] + args, report="off", env={"VRAMTRACE_OUT": path})
            eq(r.rc, 0, "t_triage's status")
        for limit, msg in ((MiB - 1, f"+{MiB} bytes, more than --fail-over {MiB - 1} bytes"),
                           (MiB - 1000, "+1.00 MiB, more than --fail-over 1023.02 KiB")):
            p = subprocess.run([CLI, "diff", paths[0], paths[1], "--fail-over", str(limit)], capture_output=True,
                               text=True)
            eq((p.returncode, p.stderr), (1, f"vramtrace diff: live bytes grew by {msg}\n"), f"--fail-over {limit}")
