"""Frames of functions the compiler inlined (tests/progs/t_inline.c, built
with -O2): each inlined function is a frame of its own at the return
address that holds it, with its own line, in the leak report, the dump,
the suppressions and every format of the CLI."""
import json

from run_tests import *

PROG = os.path.join(T, "t_inline")
SRC = "t_inline.c"


def lines():
    return {k: source_line(SRC, "LINE:" + k) for k in ("alloc", "inner", "outer", "twice")}


def inline_run(work, env=None):
    e = {k: v for k, v in os.environ.items()
         if not k.startswith(("VRAMTRACE_", "SIMGPU_")) and k not in ("LD_PRELOAD", "LD_LIBRARY_PATH")}
    e.update({"LD_LIBRARY_PATH": SIM, "LD_PRELOAD": LIB, "VRAMTRACE_OUT": os.path.join(work, "dump.json"),
              "VRAMTRACE_LEAK_CHECK": "1"})
    e.update(env or {})
    return subprocess.run([PROG], env=e, cwd=work, capture_output=True, text=True, timeout=120)


@test
def inline_functions_are_frames_of_their_own():
    """The leak report and the dump list grab_inner, inlined into
    grab_outer, inlined into pool_fill, as three frames at one address,
    each at its own line (before: one frame, pool_fill at grab_outer's
    line, and grab_outer nowhere)."""
    ln = lines()
    with workdir("vt-inline-") as work:
        p = inline_run(work)
        eq((p.returncode, p.stdout), (23, "fill -> 0\n"), "the leaks fail the run: " + p.stderr)
        want = [("grab_inner", ln["alloc"], " (inlined)"), ("grab_outer", ln["inner"], " (inlined)"),
                ("pool_fill", ln["outer"], ""), ("fill_twice", ln["twice"], "")]
        blocks = p.stderr.split("allocated from:\n")[1:]
        eq(len(blocks), 2, "two leaks: " + p.stderr)
        for b in blocks:
            rows = b.splitlines()
            eq(rows[0], f"    call site: grab_inner tests/progs/{SRC}:{ln['alloc']}", "the call site: the inlined function")
            got = [re.match(r"    #(\d+) (0x[0-9a-f]+) in (\S+) tests/progs/t_inline\.c:(\d+)(.*)$", r) for r in rows[1:5]]
            ok(all(got), "four frames in t_inline.c: " + b)
            eq([(m.group(3), int(m.group(4)), m.group(5)) for m in got], want, "frames, lines, inlined marks")
            eq(len({m.group(2) for m in got[:3]}), 1, "the three inlined frames are one return address: " + b)
            ok(got[3].group(2) != got[0].group(2), "fill_twice's frame is its own return address")
        d = load_dump(os.path.join(work, "dump.json"))
        eq(sorted(a["bytes"] for a in d["live"]), [2000, 2002], "live allocations")
        for a in d["live"]:
            fr = frames(d, a["stack"])[:4]
            eq([(f["function"], f["line"], bool(f.get("inlined"))) for f in fr],
               [(w[0], w[1], bool(w[2])) for w in want], "the dump's frames")
            eq(len({f["address"] for f in fr[:3]}), 1, "one address for the three")
            eq(d["stacks"][a["stack"]]["site"], 0, "the call site's index counts inlined frames")


@test
def inline_function_names_match_suppressions():
    """A suppression by the name of a function that was inlined matches
    (before: the name appeared in no frame and the leaks failed the run)."""
    with workdir("vt-inline-") as work:
        sup = os.path.join(work, "s.supp")
        with open(sup, "w") as f:
            f.write("leak:grab_outer\n")
        p = inline_run(work, {"VRAMTRACE_SUPPRESSIONS": sup})
        eq((p.returncode, p.stdout), (0, "fill -> 0\n"), "suppressed: " + p.stderr)
        ok("      2       4002 grab_outer\n" in p.stderr, "Suppressions used: " + p.stderr)


@test
def inline_frames_in_every_cli_format():
    """vramtrace report on the dump: the text marks the inlined frames, the
    JSON says "inlined": true on them alone, the folded stacks hold the
    three functions in order, the torch export a frame for each."""
    ln = lines()
    with workdir("vt-inline-") as work:
        inline_run(work)
        dump = os.path.join(work, "dump.json")
        cli = lambda *a: subprocess.run([CLI, "report", *a, dump], capture_output=True, text=True, timeout=120)
        t = cli()
        eq(t.returncode, 0, "text: " + t.stderr)
        ok(f" in grab_inner tests/progs/{SRC}:{ln['alloc']} (inlined)\n" in t.stdout and
           f" in grab_outer tests/progs/{SRC}:{ln['inner']} (inlined)\n" in t.stdout and
           f" in pool_fill tests/progs/{SRC}:{ln['outer']}\n" in t.stdout, "text frames:\n" + t.stdout)
        j = cli("--format", "json")
        eq(j.returncode, 0, "json: " + j.stderr)
        doc = json.loads(j.stdout)
        stacks = [h["frames"] for p in doc["processes"] for h in p["holders"]]
        ok(stacks, "json holders with frames: " + j.stdout[:2000])
        for fr in stacks:
            eq([(f["function"], f["line"], f.get("inlined", False)) for f in fr[:4]],
               [("grab_inner", ln["alloc"], True), ("grab_outer", ln["inner"], True), ("pool_fill", ln["outer"], False),
                ("fill_twice", ln["twice"], False)], "json frames")
        fo = cli("--format", "folded")
        eq(fo.returncode, 0, "folded: " + fo.stderr)
        eq([l.rsplit(" ", 1)[1] for l in fo.stdout.splitlines() if l.endswith(";fill_twice;pool_fill;grab_outer;grab_inner 4002")],
           ["4002"], "folded:\n" + fo.stdout)
        tp = os.path.join(work, "snap.pickle")
        to = cli("--format", "torch", "-o", tp)
        eq(to.returncode, 0, "torch: " + to.stderr)
        import pickle
        with open(tp, "rb") as f:
            snap = pickle.load(f)
        names = [[(fr["name"], fr["line"]) for fr in b["frames"]] for s in snap["segments"] for b in s["blocks"]]
        eq(len(names), 2, "two blocks")
        for n in names:
            ok([("grab_inner", ln["alloc"]), ("grab_outer", ln["inner"]), ("pool_fill", ln["outer"])] ==
               [x for x in n if x[0] in ("grab_inner", "grab_outer", "pool_fill")], f"torch frames: {n}")
