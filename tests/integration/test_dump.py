"""The dump's format version 2 (docs/dump-format.md): each string, frame
and stack prefix stored once; vramtrace report reads versions 1 and 2 to
the same model, so every format prints the same from either."""
import json

from run_tests import *  # noqa: F401,F403
from dumpview import v2_of

FORMATS = ("text", "json", "folded", "html", "torch")


def write_json(path, d):
    with open(path, "w") as f:
        json.dump(d, f)


def same_reports(v1, v2, what, names=("d.json",), args=()):
    """Every format from the dumps v1 and v2 (lists of dicts or one dict,
    written under the same names in two folders) is byte for byte the same."""
    v1, v2 = (v1 if isinstance(v1, list) else [v1]), (v2 if isinstance(v2, list) else [v2])
    with workdir("vt-dump-") as work:
        for sub, ds in (("v1", v1), ("v2", v2)):
            os.makedirs(os.path.join(work, sub))
            for name, d in zip(names, ds):
                write_json(os.path.join(work, sub, name), d)
        for fmt in FORMATS:
            if fmt == "torch" and len(names) > 1:
                continue
            a = report(list(names) + ["--format", fmt] + list(args), cwd=os.path.join(work, "v1"))
            b = report(list(names) + ["--format", fmt] + list(args), cwd=os.path.join(work, "v2"))
            eq(a[0], 0, f"{what}: --format {fmt} from version 1: {a[2]}")
            eq(b, a, f"{what}: --format {fmt} from version 2 as from version 1")


@test
def dump_golden_outputs_from_version_2():
    """The golden dumps (version 1 fixtures) written as version 2 give the
    golden outputs byte for byte."""
    with workdir("vt-dump-gold-") as work:
        for name in ("phases.r0.json", "phases.r1.json", "python.json", "hostile.json", "hostile_live.json"):
            with open(os.path.join(GOLDEN, name)) as f:
                d = v2_of(json.load(f))
            eq(d["version"], 2, name)
            write_json(os.path.join(work, name), d)
        def same_as_golden(expected, out):
            with open(os.path.join(EXPECTED, expected), "rb") as f:
                eq(out, f.read(), f"{expected} from version 2 dumps")
        golden_cases(lambda args: report(args, cwd=work), same_as_golden)


def traced_dump(argv, env=None):
    """The version 2 dump a run of argv wrote, as the raw JSON dict."""
    with workdir("vt-dump-run-") as work:
        path = os.path.join(work, "d.json")
        r = run(argv, env=dict(env or {}, VRAMTRACE_OUT=path), report="off")
        ok(os.path.exists(path), f"{argv[0]} wrote its dump: {r.err[-500:]}")
        with open(path) as f:
            return r, json.load(f)


@test
def dump_version_2_reads_as_its_version_1_view():
    """Dumps the library writes (version 2) and the same dumps in version
    1's shape (tests/dumpview.py) give the same report in every format."""
    cases = [([os.path.join(T, "t_phases")], {}), ([os.path.join(T, "t_driver")], {}),
             ([os.path.join(T, "t_arrays")], {}), ([os.path.join(T, "t_host"), "host-vmm"], {}),
             ([os.path.join(T, "t_threads")], {"SIMGPU_DEVICES": "4"})]
    for argv, env in cases:
        r, d = traced_dump(argv, env)
        eq(d["version"], 2, f"{argv[0]}: the library writes version 2")
        same_reports(v1_view(d), d, os.path.basename(argv[0]))
        same_reports(v1_view(d), d, os.path.basename(argv[0]) + " --at peak", args=("--at", "peak"))


@test
def dump_version_2_python_frames():
    py = pythons()[-1]
    with workdir("vt-dump-py-") as out:
        r, d = traced_dump([py, os.path.join(ROOT, "tests", "py", "frames.py"), os.path.join(out, "e.out"), "4"])
    eq(r.rc, 0, "frames.py")
    flags = {f[6] for f in d["frames"]}
    ok(1 in flags and 0 in flags, f"Python and native frames: {flags}")
    same_reports(v1_view(d), d, "Python frames")


@test
def dump_version_2_stores_each_string_frame_and_prefix_once():
    r, d = traced_dump([os.path.join(T, "t_phases")])
    strings, frames, nodes = d["strings"], d["frames"], d["nodes"]
    eq(len(set(strings)), len(strings), "each string once")
    eq(len({f[5] for f in frames}), len(frames), "each return address once")
    pairs = [(nodes[k], nodes[k + 1]) for k in range(0, len(nodes), 2)]
    eq(len(set(pairs)), len(pairs), "each (caller, frame) node once")
    ok(all(p < k for k, (p, _) in enumerate(pairs)), "a node's caller comes before it")
    v1 = v1_view(d)
    prefixes = {tuple(f["address"] for f in reversed(s["frames"][i:])) for s in v1["stacks"]
                for i in range(len(s["frames"]))}
    eq(len(pairs), len(prefixes), "one node per distinct stack prefix")
    # t_phases: 4 stacks (the warm-up, two steady states from two lines of
    # main, the huge request), each of 5 frames: 3 of the C start-up that all
    # share, main at 4 return addresses, 3 leaf functions.
    eq((len(v1["stacks"]), len(pairs), len(frames)), (4, 3 + 4 + 4, 3 + 4 + 3), "stacks, nodes, frames of t_phases")
    eq(sum(len(s["frames"]) for s in v1["stacks"]), 20, "frames of all stacks, had each stack its own")


def bench_dump(work, live, nstacks, outer=None):
    """The path of the dump bench/bench_dump.c writes in work: `live`
    allocations kept over `nstacks` stacks of depth 26; with outer=D, stacks
    that differ near their outermost frames, D plain levels below them
    (kept whole: VRAMTRACE_DEPTH=256)."""
    more = ["outer", str(outer)] if outer is not None else []
    p = subprocess.run([os.path.join(BUILD, "bench", "bench_dump"), str(live), str(nstacks)] + more,
                       capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, LD_PRELOAD=LIB, VRAMTRACE_OUT=os.path.join(work, "d.json"),
                                VRAMTRACE_REPORT="off", VRAMTRACE_DEPTH="256"))
    eq(p.returncode, 0, p.stderr)
    return os.path.join(work, "d.bench.json")


@test
def dump_named_then_exit_agree_on_growth():
    """bench_dump keeps 20,000 allocations from 20,000 deep stacks of one
    call site (no step marked), then writes a named dump, then exits: the
    exit's report follows at once. Both dumps list the site as growing,
    with all its allocations: the named dump's own time (symbolizing and
    writing 20,000 deep stacks, several times the growth's) is not the
    program's work (report/owntime.h); it was, and the exit dump listed
    nothing."""
    with workdir("vt-dump-owntime-") as work:
        named = bench_dump(work, 20000, 20000, outer=240)
        growing = []
        for path in (named, os.path.join(work, "d.json")):
            with open(path) as f:
                d = json.load(f)
            eq(d["steps_total"], 0, "no step marked")
            growing.append([(g["first_bytes"], g["end_bytes"], g["allocations"]) for g in d["growing"]])
        eq(growing, [[(0, 20000 * 256, 20000)]] * 2, "the named dump's growing site and the exit's")


@test
def dump_version_2_size_per_allocation_frame_and_event():
    """20,000 live allocations over 2,000 stacks of depth 26 (bench/bench_dump.c):
    within 120 bytes a live allocation + 40 a frame + 16 an event."""
    with workdir("vt-dump-size-") as work:
        path = bench_dump(work, 20000, 2000)
        size = os.path.getsize(path)
        with open(path) as f:
            d = json.load(f)
    nlive, nframes, nevents = len(d["live"]), len(d["frames"]), d["nevents"]
    eq((nlive, nevents, len(d["stacks"]) // 3), (20000, 20000, 2000), "live, events, stacks")
    ok(size <= 120 * nlive + 40 * nframes + 16 * nevents,
       f"{size} bytes <= 120 x {nlive} + 40 x {nframes} + 16 x {nevents}")
    # Each event of the allocation loop packs into 11 bytes or fewer: at most 16 of base64 text.
    ok(len(d["events"]) <= 16 * nevents, f"events: {len(d['events'])} bytes for {nevents}")


@test
def dump_version_2_hostile_tables_are_one_error_line():
    with open(os.path.join(GOLDEN, "phases.r0.json")) as f:
        d = v2_of(json.load(f))
    good = json.dumps(d)
    cases = {
        "node-forward.json": (dict(d, nodes=[5] + d["nodes"][1:]), "nodes[0] is malformed"),
        "node-frame.json": (dict(d, nodes=d["nodes"][:1] + [999] + d["nodes"][2:]), "nodes[0] is malformed"),
        "stack-node.json": (dict(d, stacks=[999] + d["stacks"][1:]), "stacks[0] is malformed"),
        "stack-short.json": (dict(d, stacks=d["stacks"][:-1]), "stacks[3] is malformed"),
        "live-stack.json": (dict(d, live=[d["live"][0][:5] + [99] + d["live"][0][6:]]), "live[0] is malformed"),
        "live-kind.json": (dict(d, live=[d["live"][0][:2] + [-1] + d["live"][0][3:]]), "live[0] is malformed"),
        "frame-string.json": (dict(d, frames=[[999] + d["frames"][0][1:]] + d["frames"][1:]), "frames[0] is malformed"),
        "events-base64.json": (dict(d, events="!" + d["events"][1:]), "events: not base64"),
        "events-count.json": (dict(d, nevents=d["nevents"] - 1), "events: more than \"nevents\""),
        "holders.json": (dict(d, holders=[0, 1]), "holders[0] is malformed"),
        "version.json": (dict(d, version=3), "unsupported dump version (this vramtrace reads versions 1 and 2)"),
    }
    with workdir("vt-dump-bad-") as work:
        for name, (bad, want) in cases.items():
            write_json(os.path.join(work, name), bad)
        with open(os.path.join(work, "utf8.json"), "wb") as f:
            f.write(good.replace('"strings": ["', '"strings": ["\xff', 1).encode("latin-1"))
        cases["utf8.json"] = (None, "strings[0]: invalid UTF-8 in a string")
        for name, (_, want) in cases.items():
            rc, out, err = report([name], cwd=work)
            eq((rc, out, err), (1, b"", f"vramtrace report: {name}: {want}\n"), name)
        write_json(os.path.join(work, "good.json"), d)
        eq(report(["good.json"], cwd=work)[0], 0, "the untouched version 2 dump reads")


@test
def dump_shrinking_while_read_is_one_error_line():
    """A dump truncated while `vramtrace report` reads it (here right after
    the CLI maps it, by tests/progs/t_shrink.c) gives status 1 and one
    error line at every offset, never a signal: at a page boundary the
    pages past the new end are gone (SIGBUS where it is not caught), inside
    a page the rest of it reads as zero bytes."""
    with workdir("vt-dump-shrink-") as work:
        with open(bench_dump(work, 20000, 2000), "rb") as f:
            good = f.read()
        size = len(good)
        ok(size > 64 * 4096, f"the dump spans many pages ({size} bytes)")
        shim = os.path.join(T, "libt_shrink.so")
        aligned = [0, 4096, size // 2 // 4096 * 4096, (size - 8192) // 4096 * 4096]
        inside = [1, size // 3, size - 9]
        for at in aligned + inside:
            with open(os.path.join(work, "a.json"), "wb") as f:
                f.write(good)
            r = subprocess.run([CLI, "report", "a.json", "-o", os.devnull], cwd=work, capture_output=True,
                               env=dict(os.environ, LD_PRELOAD=shim, T_SHRINK_TO=str(at)), timeout=120)
            eq(os.path.getsize(os.path.join(work, "a.json")), at, f"the shim shrank the dump to {at}")
            err = r.stderr.decode()
            eq((r.returncode, r.stdout, err.count("\n")), (1, b"", 1), f"shrunk to {at}: {err[-300:]}")
            ok(err.startswith("vramtrace report: a.json: "), f"shrunk to {at}: {err}")
            if at in aligned:
                eq(err, f"vramtrace report: a.json: the file shrank to {at} bytes while it was read (it had {size})\n",
                   f"shrunk to {at}")
        with open(os.path.join(work, "a.json"), "wb") as f:
            f.write(good)
        eq(report(["a.json", "-o", os.devnull], cwd=work)[:2], (0, b""), "the whole dump reads")


@test
def dump_names_past_1024_bytes_cut_once_at_load():
    """A function name of 200,000 bytes (a C++ template instantiation's can
    be several KiB) is cut at load to 1,023 bytes, the last three "...", at
    a whole UTF-8 character: the same in every format from version 1 and
    version 2, and names up to 1,023 bytes are kept whole. (Every format
    but text read the whole name once per frame of every stack: 10,000
    stacks over 100,000-byte names took 80 to 120 s.)"""
    with open(os.path.join(ROOT, "tests", "golden", "phases.r0.json")) as f:
        v1 = json.load(f)
    frame = v1["stacks"][v1["holders"][0]["stack"]]["frames"][0]
    # 1,019 ASCII bytes then a 3-byte character across the cut (bytes
    # 1,019..1,021 of the name): the cut keeps 1,019 bytes, then "...".
    frame["function"] = "f" * 1019 + "\u20ac" + "x" * 200000
    kept = "g" * 1023  # exactly the longest name kept whole
    v1["stacks"][v1["holders"][1]["stack"]]["frames"][0]["function"] = kept
    want = "f" * 1019 + "..."
    with workdir("vt-dump-long-") as work:
        for sub, d in (("v1", v1), ("v2", v2_of(v1))):
            os.makedirs(os.path.join(work, sub))
            write_json(os.path.join(work, sub, "d.json"), d)
            rc, out, err = report(["d.json", "--format", "json"], cwd=os.path.join(work, sub))
            eq((rc, err), (0, ""), f"{sub}: json")
            names = set()

            def walk(x):
                if isinstance(x, dict):
                    for k, v in x.items():
                        if k == "function" and isinstance(v, str):
                            names.add(v)
                        walk(v)
                elif isinstance(x, list):
                    for v in x:
                        walk(v)
            walk(json.loads(out.decode()))
            eq(sorted(n for n in names if n.startswith(("f", "g")) and len(n) > 100), sorted([want, kept]),
               f"{sub}: the long name cut, the 1,023-byte one whole")
            rc, out, err = report(["d.json", "--format", "folded"], cwd=os.path.join(work, sub))
            eq(rc, 0, f"{sub}: folded")
            out = out.decode()
            ok(want + ";" in out or out.split(" ")[0].endswith(want) or ";" + want in out,
               f"{sub}: folded has the cut name")
            ok("x" * 10 not in out, f"{sub}: folded has nothing past the cut")
        same_reports(v1, v2_of(v1), "a 200,000-byte name")


@test
def dump_bytes_not_utf8_written_as_their_escape():
    """A program run from a folder whose name holds the byte 0xE9 (Latin-1's
    é): the dump's argv and frame file hold the text \\xe9 there, as every
    report shows it; before, U+00E9 ("é"), another and real name."""
    with workdir("vt-latin-") as work:
        folder = os.path.join(os.fsencode(work), b"lat\xe9n1")
        os.mkdir(folder)
        prog = os.path.join(folder, b"t_triage")
        shutil.copy(os.path.join(T, "t_triage"), prog)
        out = os.path.join(work, "d.json")
        r = run([os.fsdecode(prog), "keep", "1M"], report="off", env={"VRAMTRACE_OUT": out})
        eq(r.rc, 0, "status")
        d = load_dump(out)
        d["_path"] = out
        want = os.path.join(work, "lat\\xe9n1", "t_triage")
        eq(d["argv"][0], want, "argv[0]: the byte as its escape")
        ok("é" not in json.dumps(d, ensure_ascii=False), "no é anywhere")
        p = subprocess.run([CLI, "report", d["_path"]], capture_output=True, text=True)
        eq(p.returncode, 0, "report")
        ok("é" not in p.stdout and "lat\\xe9n1" in p.stdout, p.stdout[:1500])


KEEP_1M = r'''
import ctypes
cu = ctypes.CDLL("libcuda.so.1")
cu.cuInit(0)
p = ctypes.c_uint64()
def keep():
    return cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(1 << 20))
print(keep())
'''


@test
def dump_python_file_not_utf8_written_as_its_escape():
    """A Python script in a folder whose name holds the byte 0xE9: Python
    holds it as the lone surrogate U+DCE9 (surrogateescape), which was
    written as its three UTF-8 bytes, text no reader takes (every report
    refused the dump: "invalid UTF-8 in a string"). The frame's file holds
    \\xe9, as a native path's does, and every format reads the dump."""
    with workdir("vt-latin-") as work:
        folder = os.path.join(os.fsencode(work), b"caf\xe9")
        os.mkdir(folder)
        script = os.path.join(folder, b"keep.py")
        with open(script, "w") as f:
            f.write(KEEP_1M)
        out = os.path.join(work, "d.json")
        r = run([sys.executable, os.fsdecode(script)], report="off", env={"VRAMTRACE_OUT": out})
        eq((r.rc, r.out), (0, "0\n"), "status")
        with open(out, "rb") as f:
            raw = f.read()
        ok(b"\xed\xb3\xa9" not in raw, "no surrogate's bytes in the dump")
        d = load_dump(out)
        want = os.path.join(work, "caf\\xe9", "keep.py")
        files = {f["file"] for s in d["stacks"] for f in s["frames"] if f["python"]}
        ok(want in files, f"the script's frame file {want!r} among {sorted(x for x in files if x)[:6]}")
        for fmt in ("text", "json", "folded", "html", "torch"):
            p = subprocess.run([CLI, "report", "--format", fmt, "-o", os.path.join(work, "r." + fmt), out],
                               capture_output=True, text=True)
            eq((p.returncode, p.stderr), (0, ""), f"report --format {fmt}")
        with open(os.path.join(work, "r.text")) as f:
            text = f.read()
        ok("caf\\xe9/keep.py:7" in text, text[:2000])


FAILS = r'''
import ctypes
cu = ctypes.CDLL("libcuda.so.1")
cu.cuInit(0)
p = ctypes.c_uint64()
print(cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(1 << 20)),
      cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(0)),
      cu.cuMemAlloc_v2(None, ctypes.c_size_t(4096)))
'''


@test
def dump_failures_on_a_used_device_counted_in_its_row():
    """A failure that is not for lack of memory (a zero-size request, a
    null pointer for the result) on a device already used counts in that
    device's row as in the totals: 2 and 2 (the row said 0)."""
    with workdir("vt-fails-") as work:
        script = os.path.join(work, "fails.py")
        with open(script, "w") as f:
            f.write(FAILS)
        r = run([pythons()[-1], script], report="off")
    eq((r.rc, r.out), (0, "0 1 1\n"), "status and the three results")
    d = r.dumps[0]
    eq((d["totals"]["failed_count"], d["totals"]["oom_count"]), (2, 0), "totals: failed, out of memory")
    eq([(x["ordinal"], x["failed_count"], x["oom_count"]) for x in d["devices"]], [(0, 2, 0)], "device 0's row")
