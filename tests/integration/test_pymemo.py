"""The memo of a thread's last stack with Python frames
(tracker/pystack_id.c): a run of allocations from one line is one stack,
and a stack that differs from the last only in its Python frames (another
line of the same function, another function at the same depth, a forked
child's renumbered stacks) is its own, with the right frames. Every
CPython on the machine; the comparisons on fake frames of each version
are t_pywalk's."""
from run_tests import *  # noqa: F401,F403


@test
def pymemo_tells_lines_apart_and_keeps_runs_together():
    script = os.path.join(ROOT, "tests", "py", "memo.py")
    found = pythons()
    ok(len(found) >= 1, "no CPython 3.10+ on this machine")
    for py in found:
        out = tempfile.mkdtemp(prefix="vt-pymemo-")
        try:
            exp = os.path.join(out, "expected.json")
            # 3.12+ warn at a fork in a process with threads, and vramtrace's
            # watcher (the on-demand dump's) is one: not what is tested here.
            r = run([py, "-W", "ignore::DeprecationWarning", script, exp], report="off")
            eq((r.rc, r.err, r.out), (0, "", "allocations 365 child status 0\n"), f"{py}: memo.py")
            eq(len(r.dumps), 2, f"{py}: the parent's dump and the child's")
            with open(exp) as f:
                parent = json.load(f)
            with open(exp + ".child") as f:
                child = json.load(f)
            eq(len(child), 6, f"{py}: the child's allocations")
            # A forked child forgets its parent's allocations (fork_child_forgets_parent).
            eq(sorted(len(d["live"]) for d in r.dumps), [6, 365], f"{py}: live allocations of each dump")
            child_dump, parent_dump = sorted(r.dumps, key=lambda d: len(d["live"]))
            for d, records in ((parent_dump, parent), (child_dump, child)):
                live = {(a["address"], a["bytes"]): a for a in d["live"]}
                stacks_of = {}
                for rec in records:
                    a = live[(rec["address"], rec["bytes"])]
                    # extract_stack() names a method without its class.
                    got = [[f, line, name.split(".")[-1]] for f, line, name in python_frames(d, a["stack"])]
                    eq(got, rec["frames"], f"{py}: Python frames of the {rec['bytes']}-byte allocation ({rec['group']})")
                    stacks_of.setdefault(rec["group"], set()).add(a["stack"])
                for group, stacks in stacks_of.items():
                    want = 2 if group.endswith(("-two", "-other")) else 1
                    eq(len(stacks), want, f"{py}: stacks of {group}")
            eq(sorted(g for g in {rec["group"] for rec in parent}),
               ["main-after", "main-fork", "main-other", "main-same", "main-two", "thread0-other", "thread0-same", "thread0-two",
                "thread1-other", "thread1-same", "thread1-two"], f"{py}: the parent's groups")
            eq(sorted({rec["group"] for rec in child}), ["child-fork", "child-same"], f"{py}: the child's groups")
        finally:
            shutil.rmtree(out, ignore_errors=True)
