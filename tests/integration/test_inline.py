"""Frames of functions the compiler inlined (tests/progs/t_inline.c, built
with -O2): each inlined function is a frame of its own at the return
address that holds it, with its own line, in the leak report, the dump,
the suppressions and every format of the CLI."""
import json

from run_tests import *

PROG = os.path.join(T, "t_inline")
CLANG = os.path.join(T, "t_inline_clang")
MIXED = os.path.join(T, "t_inline_mixed")
SRC = "t_inline.c"
FRAME = re.compile(r"    #(\d+) (0x[0-9a-f]+) in (\S+) (\S*tests/progs/t_inline\.c):(\d+)( \(inlined\))?$")


def lines():
    return {k: source_line(SRC, "LINE:" + k) for k in ("alloc", "inner", "outer", "twice", "deeptop", "clone", "nested")}


def first_leak(err):
    """The frames of the first leak in a leak report: (function, line,
    inlined) and the addresses, up to the first frame outside t_inline.c."""
    block = err.split("allocated from:\n")[1]
    got = []
    # After the call site and the kind, vramtrace's own lines.
    for r in block.splitlines()[2:]:
        m = FRAME.match(r)
        if not m:
            break
        got.append(m)
    return [(m.group(3), int(m.group(5)), bool(m.group(6))) for m in got], [m.group(2) for m in got]


def inline_run(work, env=None, prog=PROG, mode=None):
    e = {k: v for k, v in os.environ.items()
         if not k.startswith(("VRAMTRACE_", "SIMGPU_")) and k not in ("LD_PRELOAD", "LD_LIBRARY_PATH")}
    e.update({"LD_LIBRARY_PATH": SIM, "LD_PRELOAD": LIB, "VRAMTRACE_OUT": os.path.join(work, "dump.json"),
              "VRAMTRACE_LEAK_CHECK": "1"})
    e.update(env or {})
    return subprocess.run([prog] + ([mode] if mode else []), env=e, cwd=work, capture_output=True, text=True,
                          timeout=120)


@test
def inline_functions_are_frames_of_their_own():
    """The leak report and the dump list grab_inner, inlined into
    grab_outer, inlined into pool_fill, as three frames at one address,
    each at its own line (before: one frame, pool_fill at grab_outer's
    line, and grab_outer nowhere). Built by GCC, by clang, whose DWARF has
    no .debug_aranges (before: clang's build had no file:line at all), and
    by clang linked with a GCC unit, so that the aranges list GCC's unit
    alone (before: libdwfl's neighbouring unit, no file:line either)."""
    ln = lines()
    for prog in (PROG, CLANG, MIXED):
        name = os.path.basename(prog)
        with workdir("vt-inline-") as work:
            p = inline_run(work, prog=prog)
            eq((p.returncode, p.stdout), (23, "fill -> 0\n"), f"{name}: the leaks fail the run: " + p.stderr)
            want = [("grab_inner", ln["alloc"], True), ("grab_outer", ln["inner"], True),
                    ("pool_fill", ln["outer"], False), ("fill_twice", ln["twice"], False)]
            blocks = p.stderr.split("allocated from:\n")[1:]
            eq(len(blocks), 2, f"{name}: two leaks: " + p.stderr)
            for b in blocks:
                rows = b.splitlines()
                ok(re.fullmatch(r"    call site: grab_inner \S*tests/progs/t_inline\.c:%d" % ln["alloc"], rows[0]),
                   f"{name}: the call site is the inlined function: {rows[0]!r}")
                got, addrs = first_leak("allocated from:\n" + b)
                eq(got[:4], want, f"{name}: frames, lines, inlined marks")
                eq(len(set(addrs[:3])), 1, f"{name}: the three inlined frames are one return address: " + b)
                ok(addrs[3] != addrs[0], f"{name}: fill_twice's frame is its own return address")
            d = load_dump(os.path.join(work, "dump.json"))
            eq(sorted(a["bytes"] for a in d["live"]), [2000, 2002], f"{name}: live allocations")
            for a in d["live"]:
                fr = frames(d, a["stack"])[:4]
                eq([(f["function"], f["line"], bool(f.get("inlined"))) for f in fr], want, f"{name}: the dump's frames")
                eq(len({f["address"] for f in fr[:3]}), 1, f"{name}: one address for the three")
                eq(d["stacks"][a["stack"]]["site"], 0, f"{name}: the call site's index counts inlined frames")


@test
def inline_nests_deeper_than_kept_keep_the_functions_line():
    """Forty functions inlined one into the next: the innermost 31 are
    kept, then the function that holds them at the line where it calls the
    outermost (before: at the line of the 32nd's call, a line that is not
    in it), then its caller. GCC and clang."""
    ln = lines()
    deep = [source_line(SRC, "LINE:deep%d */" % i) for i in range(31)]
    for prog in (PROG, CLANG):
        name = os.path.basename(prog)
        with workdir("vt-inline-") as work:
            p = inline_run(work, prog=prog, mode="deep")
            eq((p.returncode, p.stdout), (23, "deep -> 0\n"), f"{name}: status and output: " + p.stderr)
            got, addrs = first_leak(p.stderr)
            eq(got[:32], [("deep%d" % i, deep[i], True) for i in range(31)] + [("deep_top", ln["deeptop"], False)],
               f"{name}: the kept frames")
            eq(len(set(addrs[:32])), 1, f"{name}: one return address")
            eq(got[32][0], "main", f"{name}: then main")
            ok(addrs[32] != addrs[0], f"{name}: main's own return address")


@test
def inline_frames_in_a_nested_function_and_a_clone():
    """A GNU C nested function (its code outside its parent's, its DWARF
    inside it, as GCC's OpenMP outlined functions): the functions inlined
    in it are found, and it is named "inner" (before: by its clone's
    symbol, inner.0.constprop.0; an OpenMP outlined function's inlined
    frames were missing). And a function GCC cloned (clone_fill.constprop.0
    in the symbol table) is named as LeakSanitizer names it, clone_fill."""
    ln = lines()
    syms = subprocess.run(["nm", PROG], capture_output=True, text=True).stdout
    ok(re.search(r" t clone_fill\.(constprop|isra|part)\.\d+$", syms, re.M), "GCC made its clone: " + syms)
    with workdir("vt-inline-") as work:
        p = inline_run(work, mode="nested")
        eq((p.returncode, p.stdout), (23, "nested -> 0\n"), "nested: " + p.stderr)
        got, addrs = first_leak(p.stderr)
        eq(got[:2], [("grab_inner", ln["alloc"], True), ("inner", ln["nested"], False)], "nested: frames")
        eq(addrs[0], addrs[1], "nested: one return address")
    with workdir("vt-inline-") as work:
        p = inline_run(work, mode="clone")
        eq((p.returncode, p.stdout), (23, "clone -> 0\n"), "clone: " + p.stderr)
        got, addrs = first_leak(p.stderr)
        eq(got[:3], [("grab_inner", ln["alloc"], True), ("grab_outer", ln["inner"], True), ("clone_fill", ln["clone"], False)],
           "clone: frames")


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
    """vramtrace report on the dump: the text and the HTML page mark the
    inlined frames, the JSON says "inlined": true on them alone, the folded
    stacks hold the three functions in order, the torch export a frame for
    each."""
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
        hp = os.path.join(work, "page.html")
        h = cli("--format", "html", "-o", hp)
        eq(h.returncode, 0, "html: " + h.stderr)
        page = open(hp).read()
        marked = [k for k in ("alloc", "inner", "outer", "twice")
                  if f'"tests/progs/{SRC}:{ln[k]} (inlined)"' in page]
        eq(marked, ["alloc", "inner"], "the page marks the inlined frames alone")
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
