"""The text report's line for calls passed through unrecorded (totals.missed)."""
import json

from run_tests import *

SAID = "passed through unrecorded (made while vramtrace was busy on that thread: a signal handler?)"


def text_report_lines(missed, word):
    """`vramtrace report` of the golden phases dump with totals.missed set:
    its lines that hold `word`."""
    dump = json.load(open(os.path.join(GOLDEN, "phases.r0.json")))
    dump["totals"]["missed"] = missed
    work = tempfile.mkdtemp(prefix="vt-test-")
    try:
        path = os.path.join(work, "d.json")
        json.dump(dump, open(path, "w"))
        rc, out, err = report([path], cwd=work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    eq(rc, 0, f"missed={missed}: status ({err})")
    return [l for l in out.decode().splitlines() if word in l]


@test
def report_says_calls_passed_through_unrecorded():
    eq(text_report_lines(0, "unrecorded"), [], "none missed: no line")
    eq(text_report_lines(1, "unrecorded"), ["  1 call " + SAID], "one missed (under totals, as in the exit summary)")
    eq(text_report_lines(3, "unrecorded"), ["  3 calls " + SAID], "three missed")
