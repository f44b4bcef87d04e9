"""Step boundaries (vramtrace_step, tracker/steps.c) in the dump's "steps"
and "steps_total", with tests/progs/t_steps.c's known events: alloc 1 MiB,
step 1, alloc 2 MiB, free 1 MiB, step 2, step 3, alloc 4096, then argv[1]
more steps, then two frees; and the CLI's check of those fields.
"""
import signal

from run_tests import *  # noqa: F401,F403

T_STEPS = os.path.join(T, "t_steps")
MiB = 1 << 20


def steps_of(r):
    eq(len(r.dumps), 1, "one exit dump")
    d = r.dumps[0]
    return d, [(s["step"], s["event"]) for s in d["steps"]]


@test
def steps_between_known_events():
    r = run([T_STEPS], report="off")
    eq(r.out, "steps 1 2 3 last 3\n", "what vramtrace_step returned")
    d, steps = steps_of(r)
    eq([(e[1], e[3]) for e in d["events"]],
       [("alloc", MiB), ("alloc", 2 * MiB), ("free", MiB), ("alloc", 4096), ("free", 2 * MiB), ("free", 4096)],
       "the events")
    eq((d["steps_total"], steps), (3, [(1, 1), (2, 3), (3, 3)]), "each step's first event")
    t = [e[0] for e in d["events"]]
    st = [s["time_ns"] for s in d["steps"]]
    ok(t[0] <= st[0] <= t[1] and t[2] <= st[1] <= st[2] <= t[3], f"step times {st} between the events' {t}")


@test
def failure_before_the_first_step_mark_is_not_said_to_be_in_a_step():
    """A failure before the program's first step mark: the post-mortem,
    written before any mark, says no step; the report of the exit's dump,
    which knows of later marks, said "during step 1", which a failure
    before training starts (a model moved to the device) is not. It now
    says "before step 1 ended"; a failure after the first mark is still
    "during step 2"."""
    r = run([T_STEPS], env={"VRAMTRACE_LIMIT": "512K"})
    eq(r.out, "steps 1 2 3 last 3\n", "what vramtrace_step returned")
    when = [l.split(" UTC")[-1] for l in r.err.splitlines() if l.startswith("vramtrace:   when: ")]
    eq(when, ["", ", during step 2"], "the post-mortems: no step known at the first, the second in step 2")
    eq(len(r.dumps), 1, "one exit dump")
    with workdir("vt-steps-") as work:
        path = os.path.join(work, "d.json")
        with open(path, "w") as f:
            json.dump(r.dumps[0], f)
        p = subprocess.run([CLI, "report", path], capture_output=True, text=True, timeout=60)
        eq(p.returncode, 0, "report's status")
        when = [l.split(" UTC")[-1] for l in p.stdout.splitlines() if l.startswith("  when: ")]
        eq(when, [", before step 1 ended", ", during step 2"], "the report: the first failure came before step 1 ended")


@test
def steps_whose_events_the_ring_overwrote():
    # 6 events in a ring of 3: the first 3 are gone, so step 1's first event
    # (alloc 2 MiB, index 1 of the whole history) is -1; steps 2 and 3 start
    # at alloc 4096 (now index 0); the 4093 later ones at the first free.
    r = run([T_STEPS, "4093"], report="off", env={"VRAMTRACE_EVENTS": "3"})
    eq(r.out, "steps 1 2 3 last 4096\n", "what vramtrace_step returned")
    d, steps = steps_of(r)
    eq((d["events_dropped"], [e[1] for e in d["events"]]), (3, ["alloc", "free", "free"]), "the ring")
    eq((d["steps_total"], steps), (4096, [(1, -1), (2, 0), (3, 0)] + [(n, 1) for n in range(4, 4097)]),
       "every step kept")


@test
def steps_ring_keeps_the_newest_4096():
    r = run([T_STEPS, "5000"], report="off")
    eq(r.out, "steps 1 2 3 last 5003\n", "what vramtrace_step returned")
    d, steps = steps_of(r)
    eq((d["steps_total"], steps), (5003, [(n, 4) for n in range(908, 5004)]), "the newest 4096 steps")
    st = [s["time_ns"] for s in d["steps"]]
    eq(st, sorted(st), "oldest first")


@test
def steps_without_vramtrace():
    r = run([T_STEPS, "2"], preload=False)
    eq((r.out, r.rc), ("steps -1 -1 -1 last -1\n", 0), "VRAMTRACE_INACTIVE from the header's stand-in")


def report_of(d):
    work = tempfile.mkdtemp(prefix="vt-steps-")
    try:
        path = os.path.join(work, "d.json")
        with open(path, "w") as f:
            json.dump({k: v for k, v in d.items() if k != "_path"}, f)
        p = subprocess.run([CLI, "report", path], capture_output=True, text=True)
        return p.returncode, p.stderr.replace(path, "DUMP")
    finally:
        shutil.rmtree(work, ignore_errors=True)


@test
def steps_checked_by_the_dump_reader():
    d, _ = steps_of(run([T_STEPS], report="off"))
    eq(report_of(d), (0, ""), "the dump as written")
    old = {k: v for k, v in d.items() if k not in ("steps", "steps_total")}
    eq(report_of(old), (0, ""), "a dump from before steps")
    cases = [
        ("event past the events", lambda x: x["steps"][1].update(event=7), "DUMP: steps[1] is malformed\n"),
        ("event going back", lambda x: x["steps"][2].update(event=1), "DUMP: steps[2] is malformed\n"),
        ("a step number skipped", lambda x: x["steps"][0].update(step=2), "DUMP: steps[0] is malformed\n"),
        ("no steps_total", lambda x: x.pop("steps_total"),
         "DUMP: \"steps\" is not an array, or \"steps_total\" is missing or negative\n"),
        ("steps_total below the steps", lambda x: x.update(steps_total=2),
         "DUMP: \"steps_total\" (2) is below the 3 steps kept\n"),
    ]
    for what, change, err in cases:
        bad = json.loads(json.dumps(d))
        change(bad)
        rc, e = report_of(bad)
        eq((rc, e), (1, "vramtrace report: " + err), what)


@test
def growth_of_a_sigterm_dump_counts_the_steps_made_while_it_is_written():
    """A worker keeps 4 MiB a step and goes on stepping while the exit's
    outputs of a SIGTERM are written (tests/progs/t_termstep.c): the
    growing site left out what the program did after the outputs were
    asked for, though the same dump's holders and totals count it (an
    outside check: "0 B -> 352 MiB ... over the last 22 steps" where the
    site held 368 MiB after 23 steps). Its growth is now all it holds,
    over every step: exactly the holders' bytes and allocations."""
    r = run([os.path.join(T, "t_termstep")], report="off")
    eq(r.rc, -signal.SIGTERM, "died of SIGTERM")
    eq(len(r.dumps), 1, "one exit dump")
    d = r.dumps[0]
    live, count, steps = d["totals"]["live_bytes"], d["totals"]["live_count"], d["steps_total"]
    ok(steps > 10, f"steps made after the signal: {steps}")
    kept = 4 * MiB * steps
    ok(live in (kept, kept + 4 * MiB), f"4 MiB a step, one more allocated before its step: {live}")
    eq(len(d["growing"]), 1, "one growing site")
    g = d["growing"][0]
    eq((g["first_bytes"], g["end_bytes"], g["allocations"]), (0, live, count), "the growth is all it holds")
    eq(g.get("unit"), "step", "said per step")
    eq(g.get("units"), steps, "over every step")
