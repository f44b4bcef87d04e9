"""The text report's line for calls passed through unrecorded (totals.missed)."""
import json

from run_tests import *

MISSED = ("calls passed through unrecorded (made while vramtrace was busy on that thread: "
          "a signal handler?)")


@test
def report_says_calls_passed_through_unrecorded():
    with open(os.path.join(GOLDEN, "phases.r0.json")) as f:
        dump = json.load(f)
    work = tempfile.mkdtemp(prefix="vt-test-")
    try:
        for missed, want in ((0, []), (1, ["1 call passed through unrecorded (made while vramtrace was busy "
                                           "on that thread: a signal handler?)"]),
                             (3, ["3 " + MISSED])):
            dump["totals"]["missed"] = missed
            path = os.path.join(work, "d.json")
            with open(path, "w") as f:
                json.dump(dump, f)
            rc, out, err = report([path], cwd=work)
            eq(rc, 0, f"missed={missed}: status ({err})")
            got = [l for l in out.decode().splitlines() if "unrecorded" in l]
            eq(got, want, f"missed={missed}: the line")
    finally:
        shutil.rmtree(work, ignore_errors=True)
