"""The call-site label (the user's line, then the library line it went
through) in the outputs that print whole stacks: the leak report, the folded
stacks and the torch export; and the library line a native call went
through: the library's entry point the user's line called.

tests/progs/t_sitefirst.c calls cudaMalloc itself and through libt_chain.so
(chain_entry -> chain_inner -> cudaMalloc), named a library with
VRAMTRACE_LIBRARY. The PyTorch cases run real PyTorch on the simulated GPU
through test_torch_truth.py's `traced()`."""
import pickle
import re

from run_tests import *  # noqa: F401,F403

PROG = os.path.join(T, "t_sitefirst")
CHAIN_ENV = {"VRAMTRACE_LEAK_CHECK": "1", "VRAMTRACE_LIBRARY": "libt_chain.so"}
# flamegraph.pl's reading of a folded line (its own regular expression) and
# what each frame must be to stay one frame of one line.
FOLDED = re.compile(r"^(.*)\s+?(\d+(?:\.\d*)?)$")


def truth(name):
    """A helper of tests/integration/test_torch_truth.py, from the module the
    runner loaded (loading it again would register its tests twice)."""
    for t in TESTS:
        if t.__module__ == "test_torch_truth":
            return t.__globals__[name]
    raise Failure("tests/integration/test_torch_truth.py was not loaded")


def line_of(prog, tag):
    return source_line(prog, "SITE:" + tag)


def chain_labels():
    main, chain, entry = (line_of("t_sitefirst.c", "direct"), line_of("t_sitefirst.c", "chain"),
                          line_of("t_chain_lib.c", "entry"))
    return (f"main tests/progs/t_sitefirst.c:{chain} -> chain_entry tests/progs/t_chain_lib.c:{entry}",
            f"main tests/progs/t_sitefirst.c:{main}")


def chain_run(work, env=CHAIN_ENV):
    """t_sitefirst under vramtrace with env, its dump at work/d.json."""
    r = run([PROG], env=dict(env, VRAMTRACE_OUT=os.path.join(work, "d.json")), report="off")
    eq(r.rc, 23 if env.get("VRAMTRACE_LEAK_CHECK") == "1" else 0, "t_sitefirst's status:\n" + r.err)
    return r, os.path.join(work, "d.json")


def cli_out(args):
    p = subprocess.run([CLI, "report"] + args, capture_output=True, text=True)
    eq((p.returncode, p.stderr), (0, ""), f"vramtrace report {args}")
    return p.stdout


def holders_by_site(paths, at="exit"):
    """{label: bytes} of the holders table by call site (the JSON report's
    combined holders: exact bytes)."""
    j = json.loads(cli_out(paths + ["--format", "json", "--at", at, "--top", "100000"]))
    out = {}
    for h in j["combined_holders"]:
        out[h["site"]] = out.get(h["site"], 0) + h["bytes"]
    return out


def folded_lines(text):
    """Each folded line as (frames, bytes), checked as flamegraph.pl reads
    it: one line, a count, no empty frame, no control character."""
    out = []
    for x in text.split("\n")[:-1]:
        m = FOLDED.match(x)
        ok(m is not None, f"a folded line flamegraph.pl reads: {x!r}")
        frames = m.group(1).split(";")
        ok("" not in frames, f"no empty frame: {x!r}")
        ok(not any(ord(c) < 0x20 or 0x7f <= ord(c) <= 0x9f for c in x), f"no control character: {x!r}")
        out.append((frames, int(m.group(2))))
    ok(text.endswith("\n"), "the last line ends")
    return out


# ------------------------------------------------------------ the leak report


@test
def sitefirst_leak_report_names_the_call_site():
    # Each entry: LSan's header, then one line with the holders table's
    # label for that stack and one with its kind, then LSan's frames
    # unchanged.
    with workdir("vt-site-") as work:
        r, path = chain_run(work)
        chained, direct = chain_labels()
        lines = [re.sub(r"#(\d+) 0x[0-9a-f]+ in ", r"#\1 X in ", x) for x in r.err.splitlines()]
        pid = json.load(open(path))["pid"]
        i = lines.index(f"=={pid}==ERROR: vramtrace: detected GPU memory leaks")
        entry, inner = line_of("t_chain_lib.c", "entry"), line_of("t_chain_lib.c", "inner")
        eq(lines[i + 1:i + 8], [
            "",
            "Direct leak of 6291456 byte(s) in 2 object(s) allocated from:",
            f"    call site: {chained}",
            "    kind: device memory (cudaMalloc)",
            f"    #0 X in chain_inner tests/progs/t_chain_lib.c:{inner}",
            f"    #1 X in chain_entry tests/progs/t_chain_lib.c:{entry}",
            f"    #2 X in main tests/progs/t_sitefirst.c:{line_of('t_sitefirst.c', 'chain')}"], "the chained leak")
        j = lines.index("Direct leak of 1048576 byte(s) in 1 object(s) allocated from:")
        eq(lines[j + 1:j + 4], [f"    call site: {direct}", "    kind: device memory (cudaMalloc)",
                                f"    #0 X in main tests/progs/t_sitefirst.c:{line_of('t_sitefirst.c', 'direct')}"],
           "the direct leak")
        eq(lines[-1], "SUMMARY: vramtrace: 7340032 byte(s) leaked in 3 allocation(s).", "LSan's summary line")
        # An LSan reader: each header, then frames #0, #1, ... in order; the
        # call-site line is neither.
        entries, frames = [], None
        for x in lines:
            m = re.match(r"^Direct leak of (\d+) byte\(s\) in (\d+) object\(s\) allocated from:$", x)
            if m:
                frames = []
                entries.append((int(m.group(1)), int(m.group(2)), frames))
            elif frames is not None and re.match(r"^    #\d+ ", x):
                eq(int(re.match(r"^    #(\d+) ", x).group(1)), len(frames), "frames numbered from 0")
                frames.append(x)
        eq([(b, n, len(f) > 0) for b, n, f in entries], [(6291456, 2, True), (1048576, 1, True)], "what LSan reads")
        # The label is the holders table's, in the library and the CLI.
        eq(sorted(re.findall(r"(?m)^    call site: (.*)$", r.err)), sorted(holders_by_site([path])),
           "the holders table's labels")
        text = cli_out([path])
        for label in (chained, direct):
            ok(re.search(rf"(?m)^ +[\d.]+ \S+ +[\d.]+% +\d+ allocs? +{re.escape(label)}$", text),
               f"the holders table prints {label!r}:\n{text}")


# ------------------------------------------------------------ the folded stacks


def check_folded_root(paths, at="exit"):
    """--format folded: each line's root is its stack's call-site label, the
    bytes per root are the holders table's exactly, and --folded-root none
    is the same lines without the root."""
    site = folded_lines(cli_out(paths + ["--format", "folded", "--at", at]))
    none = folded_lines(cli_out(paths + ["--format", "folded", "--at", at, "--folded-root", "none"]))
    table = {k.replace(";", ":"): v for k, v in holders_by_site(paths, at).items()}
    sums = {}
    for frames, n in site:
        sums[frames[0]] = sums.get(frames[0], 0) + n
    eq(sums, table, f"{paths} at {at}: bytes per root, the holders table's")
    eq(sorted((f[1:], n) for f, n in site), sorted((f, n) for f, n in none), f"{paths} at {at}: without the root")
    return site


@test
def sitefirst_folded_root_is_the_holders_table():
    g = lambda name: os.path.join(ROOT, "tests", "golden", name)
    with workdir("vt-site-") as work:
        _, path = chain_run(work)
        chained, direct = chain_labels()
        site = check_folded_root([path])
        eq([(f[0], f[-3:] if f[0] == chained else f[-2:], n) for f, n in site],
           [(chained, ["main", "chain_entry", "chain_inner"], 6291456),
            (direct, ["__libc_start_call_main", "main"], 1048576)], "the chain's two lines: root, then leaves")
    for paths, at in (([g("phases.r0.json")], "exit"), ([g("phases.r0.json")], "peak"),
                      ([g("phases.r0.json"), g("phases.r1.json")], "oom"), ([g("python.json")], "exit"),
                      ([g("hostile.json")], "exit")):
        check_folded_root(paths, at)
    # With several dumps: the label, then the rank, then the frames.
    two = check_folded_root([g("phases.r0.json"), g("phases.r1.json")], "oom")
    eq(sorted((f[0], f[1]) for f, _ in two),
       [("rank_extra tests/progs/t_phases.c:26", "rank 1 pid 8448"),
        ("steady_state tests/progs/t_phases.c:20", "rank 0 pid 8447"),
        ("steady_state tests/progs/t_phases.c:20", "rank 1 pid 8448")], "label, then rank")
    # A rank that never failed adds nothing at "oom" (it made the whole
    # folded report fail); when none failed, no line, said on stderr, with
    # the other formats' status 0.
    three = check_folded_root([g("phases.r0.json"), g("python.json"), g("phases.r1.json")], "oom")
    eq(sorted((f[0], f[2:], n) for f, n in three), sorted((f[0], f[2:], n) for f, n in two),
       "a dump without a failure adds no line")
    p = subprocess.run([CLI, "report", g("python.json"), g("python.json"), "--format", "folded", "--at", "oom"],
                       capture_output=True, text=True)
    eq((p.returncode, p.stdout), (0, ""), "no dump with a failure: " + p.stderr)
    ok(p.stderr.startswith("vramtrace report: no dump has holders at this moment: ") and
       p.stderr.endswith(" has no holders at oom: nothing to fold\n"), p.stderr)
    ok("no dump has holders at this moment" in p.stderr, p.stderr)
    # A label's ';' and control characters are taken out as a frame's are.
    ctrl = os.path.join(ROOT, "tests", "fuzz", "seeds", "cli-control.json")
    lines = folded_lines(cli_out([ctrl, "--format", "folded"]))
    label = cli_out([ctrl, "--format", "json"])
    want = json.loads(label)["combined_holders"][0]["site"]
    ok(";" in want and "\n" in want and "\x1b" in want, f"the seed's label has what must be taken out: {want!r}")
    shown = r"\x1b[31mfunction\x1b[0m\x1b]0:title\x07\x0d\x0a:x\u009b2J\u202eevil\x09\x7f\x01end"
    eq([f[0] for f, _ in lines], [f"{shown} {shown.replace('function', 'file')}:20"], "the label, escaped")
    p = subprocess.run([CLI, "report", g("phases.r0.json"), "--format", "folded", "--folded-root", "all"],
                       capture_output=True, text=True)
    eq((p.returncode, p.stdout, p.stderr), (2, "", "vramtrace report: --folded-root takes site or none, not 'all' "
                                            "(see vramtrace report --help)\n"), "a bad root")


@test
def sitefirst_folded_line_ends_in_its_one_count():
    """A leaf frame whose name ends in a space and a number ("steady 42")
    made the line read as flamegraph.pl's differential input (two counts,
    the name cut); its space becomes '_'. A frame with an empty name is
    named by its module and offset, a call site with one "??", never an
    empty frame or a label that begins with a space."""
    with workdir("vt-site-") as work:
        d = json.load(open(os.path.join(GOLDEN, "phases.r0.json")))
        d["stacks"][1]["frames"][0]["function"] = "steady 42"
        d["stacks"][2]["frames"][0]["function"] = "steady 4.5"
        d["stacks"][2]["frames"][1]["function"] = ""
        path = os.path.join(work, "d.json")
        json.dump(d, open(path, "w"))
        out = cli_out([path, "--format", "folded"])
        two = re.compile(r"^(.*)\s+?(\d+(?:\.\d*)?)\s+?(\d+(?:\.\d*)?)$")
        for line in out.splitlines():
            ok(not two.match(line), f"one count, as flamegraph.pl reads it: {line!r}")
            ok(not line.startswith(" "), f"no label begins with a space: {line!r}")
        leaves = sorted(l.rsplit(" ", 1)[0].rsplit(";", 1)[1] for l in out.splitlines())
        eq(leaves, ["steady_4.5", "steady_42"], "the leaves, their last space made '_'")
        ok(all("" not in f for f, _ in folded_lines(out)), "no empty frame")


# ------------------------------------------------------------ the torch export


def exported(path):
    p = subprocess.run([CLI, "report", path, "--format", "torch"], capture_output=True)
    eq((p.returncode, p.stderr), (0, b""), f"torch export of {path}")
    return p.stdout


@test
def sitefirst_torch_export_frames_start_at_the_call_site():
    # Every frames list: the call-site frame (the user's file and line,
    # named for the site and the library line), then the real frames.
    with workdir("vt-site-") as work:
        _, path = chain_run(work)
        snap = pickle.loads(exported(path))
        chain, direct = line_of("t_sitefirst.c", "chain"), line_of("t_sitefirst.c", "direct")
        entry = line_of("t_chain_lib.c", "entry")
        heads = sorted({(s["frames"][0]["filename"], s["frames"][0]["line"], s["frames"][0]["name"],
                         tuple(f["name"] for f in s["frames"][1:4])) for s in snap["segments"]})
        eq(heads, [("tests/progs/t_sitefirst.c", direct, "main (call site)",
                    ("main", "__libc_start_call_main", "__libc_start_main")),
                   ("tests/progs/t_sitefirst.c", chain, f"main -> chain_entry tests/progs/t_chain_lib.c:{entry} "
                    "(call site)", ("chain_inner", "chain_entry", "main"))], "each segment's frames")
        dump = load_dump(path)
        names = lambda s: [f["function"] for f in s["frames"]]
        stacks = sorted(names(s) for s in dump["stacks"])
        lists = [s["frames"] for s in snap["segments"]] + [b["frames"] for s in snap["segments"] for b in s["blocks"]]
        lists += [e["frames"] for t in snap["device_traces"] for e in t]
        eq(sorted({tuple(f["name"] for f in x[1:]) for x in lists}), [tuple(s) for s in stacks],
           "the real frames follow, unchanged")
        ok(all(x[0]["name"].endswith(" (call site)") for x in lists), "every list starts at its call site")
        eq(len({id(x[0]) for x in lists}), 2, "one call-site frame dict per call site (the pickle memo)")
    # The golden dumps: the same, and what was there before is there after.
    golden = os.path.join(ROOT, "tests", "golden", "phases.r0.json")
    snap = pickle.loads(exported(golden))
    eq(sorted({(s["frames"][0]["name"], s["frames"][1]["name"]) for s in snap["segments"]}),
       [("steady_state (call site)", "steady_state")], "the golden dump's segments")


VIZ_FIRST = r"""
import json, pickle, sys
from torch.cuda import _memory_viz as mv
snap = pickle.load(open(sys.argv[1], "rb"))
shown = [mv._frames_fmt(s["frames"], full_filename=True)[0] for s in snap["segments"]]
blocks = [mv._frames_fmt(b["frames"], full_filename=True)[0] for s in snap["segments"] for b in s["blocks"]]
traced = [mv._frames_fmt(e["frames"], full_filename=True)[0] for t in snap["device_traces"] for e in t if e["frames"]]
leaves = [x.rsplit(" ", 1)[0].rsplit(";", 1)[1] for x in mv.memory(snap, format_flamegraph=lambda s: s).splitlines()]
pages = [len(mv.trace_plot(snap)) > 0, len(mv.segment_plot(snap)) > 0]
print(json.dumps({"shown": shown, "blocks": blocks, "traced": sorted(set(traced)), "leaves": leaves, "pages": pages}))
"""


TORCH_SITES = r"""
import torch
keep = [torch.empty(64 << 20, dtype=torch.uint8, device="cuda")]  # LINE:empty
x = torch.ones(32 << 20, device="cuda")  # LINE:ones
keep.append(torch.nn.functional.relu(x))  # LINE:relu
print(len(keep))
"""


@torch_test
def sitefirst_torch_through_entry_point_and_outputs():
    # torch.empty straight from the script goes through libtorch_python's
    # entry point (not the caching allocator's alloc_block every tensor
    # shares); that label leads the folded stacks and the torch export,
    # which PyTorch's own _memory_viz shows first.
    out, dumps, report = truth("traced")(TORCH_SITES)
    eq(out, "2\n", "the script")
    lines = TORCH_SITES.splitlines()
    at = {tag: 1 + next(i for i, x in enumerate(lines) if x.endswith("# LINE:" + tag))
          for tag in ("empty", "ones", "relu")}
    d = dumps["exit"]
    with workdir("vt-site-") as work:
        path = os.path.join(work, "d.json")
        with open(path, "w") as f:
            json.dump(d, f)
        sites = holders_by_site([path])
        through, script = {}, None
        for label in sites:
            m = re.match(r"^<module> (\S*/train\.py):(\d+) -> (.*)$", label)
            ok(m is not None, f"the script's line first: {label!r}")
            script = m.group(1)
            through[int(m.group(2))] = m.group(3)
        eq(sorted(through), sorted(at.values()), f"a call site per line: {sites}")
        for tag, fn in (("empty", "THPVariable_empty"), ("ones", "THPVariable_ones")):
            ok(re.fullmatch(rf"torch::autograd::{fn} \(libtorch_python\.so\+0x[0-9a-f]+\)", through[at[tag]]),
               f"torch.{tag} went through libtorch_python's {fn}: {through[at[tag]]!r}")
        ok(through[at["relu"]].startswith("relu torch/nn/functional.py:"), f"relu's Python line: {through}")
        check_folded_root([path])
        pk = os.path.join(work, "d.pickle")
        with open(pk, "wb") as f:
            f.write(exported(path))
        p = subprocess.run([TORCH_PY, "-c", VIZ_FIRST, pk], capture_output=True, text=True, timeout=300)
        eq(p.returncode, 0, "memory_viz:\n" + p.stderr[-2000:])
        got = json.loads(p.stdout.splitlines()[-1])
        want = {f"{script}:{line}:<module> -> {t} (call site)" for line, t in through.items()}
        eq(set(got["shown"]), want, "memory_viz shows each segment's call site first")
        eq((set(got["blocks"]), set(got["traced"]) <= want, got["pages"]), (want, True, [True, True]),
           "blocks and trace entries too; both pages written")
        short = {w.replace(script, os.path.basename(script)) for w in want}
        eq(set(got["leaves"]), short, "memory_viz's own flame graph: the call site at each tip")
