"""VRAMTRACE_EVENTS=0 keeps no event history: the dump's events_dropped
said 0 and the report's timeline "0 events (0 allocations, 0 frees)"
beside "allocations 9, frees 3". Every event now counts as dropped, and
the timeline says that no history was kept."""
from run_tests import *  # noqa: F401,F403


@test
def no_event_history_is_said_and_counted():
    with workdir("vt-noevents-") as work:
        path = os.path.join(work, "d.json")
        r = run([os.path.join(T, "t_driver")], report="off", env={"VRAMTRACE_EVENTS": "0", "VRAMTRACE_OUT": path})
        eq(r.rc, 0, "t_driver's status")
        d = json.load(open(path))
        t = d["totals"]
        eq((d["nevents"], d["events_dropped"], t["alloc_count"], t["free_count"]), (0, 12, 9, 3),
           "nevents, events_dropped and the totals")
        p = subprocess.run([CLI, "report", path], capture_output=True, text=True)
        eq((p.returncode, p.stderr), (0, ""), "vramtrace report")
        lines = [l for l in p.stdout.splitlines() if l.startswith("timeline: ")]
        eq(len(lines), 1, "one timeline line")
        ok(re.fullmatch(r"timeline: no event history kept \(VRAMTRACE_EVENTS=0\), 12 events dropped; over \d+\.\d{3} s "
                        r"device bytes peaked at 5\.00 MiB at \d+\.\d{3} s and were 4\.08 MiB at the end", lines[0]),
           lines[0])
        p = subprocess.run([CLI, "report", "--format", "html", path], capture_output=True, text=True)
        eq(p.returncode, 0, "the page")
        ok('<p class="warn">no event history kept (VRAMTRACE_EVENTS=0): 12 events dropped</p>' in p.stdout,
           "the page says it, not that the timeline starts late")
