"""The report's model keeps a stack as its node in the dump's prefix tree of
frames (cli/model_tree.c): the frames it hands out on demand are the ones the
version 1 listing of the same stack names, and reading a dump of many stacks
takes at most twice the dump's size in resident memory; the folded format
keeps a small group a distinct line, not the line."""
import json

from run_tests import *  # noqa: F401,F403
from test_dump import bench_dump  # loaded before this file (name order)

MODEL_FRAMES = os.path.join(T, "t_model_frames")


def model_frames(path):
    """tests/progs/t_model_frames's listing of the dump at path."""
    p = subprocess.run([MODEL_FRAMES, path], capture_output=True, text=True, timeout=120)
    eq((p.returncode, p.stderr), (0, ""), f"t_model_frames {os.path.basename(path)}")
    return p.stdout


def listing(v1):
    """What t_model_frames prints of a version 1 dump, from its own JSON."""
    out = []
    for k, s in enumerate(v1["stacks"]):
        fr = s["frames"]
        out.append(f"stack {k} frames {len(fr)} site {s['site']} through {s['through']}")
        for f in fr:
            out.append("|".join([f["function"] or "-", f["file"] or "-", str(f["line"]), f["module"] or "-",
                                 "0x%x" % int(f["offset"], 16), "0x%x" % int(f["address"], 16),
                                 str(int(f.get("python", False)))]))
    return "".join(line + "\n" for line in out)


def dump_of(argv, work, env=None):
    """The version 2 dump a run of argv writes, as a dict."""
    path = os.path.join(work, "run.json")
    r = run(argv, env=dict(env or {}, VRAMTRACE_OUT=path), report="off")
    ok(os.path.exists(path), f"{argv[0]} wrote its dump: {r.err[-500:]}")
    with open(path) as f:
        return json.load(f)


@test
def reader_frames_from_the_tree_equal_the_version_1_listing():
    """Each stack's frames from vm_stack_frame, vm_stack_frames and
    vm_stack_flat, and its site, are those its version 1 listing names,
    frame by frame, read from version 2 (the tree) and from version 1."""
    with workdir("vt-reader-") as work:
        cases = [("t_phases", dump_of([os.path.join(T, "t_phases")], work)),
                 ("frames.py", dump_of([pythons()[-1], os.path.join(ROOT, "tests", "py", "frames.py"),
                                        os.path.join(work, "e.out"), "4"], work))]
        with open(bench_dump(work, 300, 400)) as f:
            cases.append(("bench_dump 300 400", json.load(f)))
        for name, d in cases:
            eq(d["version"], 2, f"{name}: the library writes version 2")
            v1 = v1_view(d)
            nframes = sum(len(s["frames"]) for s in v1["stacks"])
            ok(len(d["nodes"]) // 2 < nframes, f"{name}: stacks share nodes ({len(d['nodes']) // 2} nodes, "
                                               f"{nframes} frames)")
            p1, p2 = os.path.join(work, "v1.json"), os.path.join(work, "v2.json")
            for p, x in ((p1, v1), (p2, d)):
                with open(p, "w") as f:
                    json.dump(x, f)
            want = listing(v1)
            eq(model_frames(p2), want, f"{name}: version 2's stacks from the tree as the version 1 listing")
            eq(model_frames(p1), want, f"{name}: version 1's stacks as its listing")
        eq(len(cases[2][1]["stacks"]) // 3, 400, "bench_dump's stacks")


def peak_rss(argv):
    """The peak resident memory of the command argv, in bytes, measured by
    tests/progs/t_peak_rss (Linux carries a parent's peak into a child it
    starts, so Python cannot measure it itself)."""
    p = subprocess.run([os.path.join(T, "t_peak_rss")] + argv, capture_output=True, text=True, timeout=120)
    m = re.fullmatch(r"rc (\d+) maxrss_kb (\d+)\n", p.stdout)
    ok(m is not None, f"t_peak_rss: {p.stdout!r} {p.stderr!r}")
    eq(m.group(1), "0", f"{argv}: {p.stderr}")
    return int(m.group(2)) * 1024


@test
def reader_many_stacks_few_live_within_twice_the_dump():
    """10,000 live allocations over 100,000 stacks of depth 26 (the
    benchmark's second shape): `vramtrace report` peaks at no more than
    twice the dump's size resident in every format. Text measured 1.91x
    once (a model holding each stack's frames as an array of pointers took
    5x), 1.19x now; the page 2.65x with a parent and a frame kept for each
    of its tree's 387,000 nodes and 32-byte events, 1.82x now (cli/html/data.c's
    struct tree, cli/model_events.h)."""
    with workdir("vt-reader-rss-") as work:
        path = bench_dump(work, 10000, 100000)
        size = os.path.getsize(path)
        for fmt in ("text", "json", "folded", "html", "torch"):
            rss = peak_rss([CLI, "report", "--format", fmt, path, "-o", os.devnull])
            ok(rss <= 2 * size, f"{fmt}: peak resident memory {rss / 2**20:.1f} MiB is "
                                f"{rss / size:.2f}x the dump's {size / 2**20:.1f} MiB (at most 2x)")


@test
def reader_many_failures_with_holders_within_twice_the_dump():
    """A dump of 10,000 live allocations over 100,000 stacks with 64
    failures, each with holder lists of every site (as the library keeps
    for its first 64 failures): their lists are read from the text, not
    as a tree of JSON values (3.7x the dump's size at 8 failures of
    100,000 stacks, 7.8x at 64; the whole tree was kept to the end), and
    every format stays within twice the dump's size resident."""
    with workdir("vt-reader-rss-") as work:
        with open(bench_dump(work, 10000, 100000)) as f:
            d = json.load(f)
        ok(len(d["holders"]) >= 3 * 1000, f"holders of many sites: {len(d['holders']) // 3}")
        base = {"requested_bytes": 1 << 40, "api": "cuMemAlloc_v2", "kind": "device", "device": 0, "stack": 0,
                "thread": 1, "free_bytes": 1 << 30, "total_bytes": 1 << 34, "live_bytes": d["totals"]["live_bytes"],
                "time_ns": d["time_ns"] // 2, "holders": d["holders"], "budget": False, "other_processes": None}
        d["ooms"] = [dict(base, time_ns=base["time_ns"] + i) for i in range(64)]
        path = os.path.join(work, "ooms.json")
        with open(path, "w") as f:
            json.dump(d, f, separators=(",", ":"))
        size = os.path.getsize(path)
        for fmt in ("text", "json", "folded", "html", "torch"):
            rss = peak_rss([CLI, "report", "--format", fmt, "--at", "oom", path, "-o", os.devnull])
            ok(rss <= 2 * size, f"{fmt}: peak resident memory {rss / 2**20:.1f} MiB is "
                                f"{rss / size:.2f}x the dump's {size / 2**20:.1f} MiB (at most 2x)")
        p = subprocess.run([CLI, "report", "--at", "oom", path], capture_output=True, text=True)
        eq(p.returncode, 0, p.stderr)
        ok("largest holders at oom by call site (" in p.stdout, "the first failure's holders: " + p.stdout[:3000])


@test
def reader_deep_stacks_that_differ_near_main_within_twice_the_dump():
    """20,000 stacks of over 220 frames that differ near their outermost frames
    (bench_dump's `outer 210`), so that the dump's prefix tree has a node
    for nearly every frame of every stack (4,300,000 nodes, a 44 MB dump):
    `vramtrace report` peaks at no more than twice the dump's size in every
    format. The page took 2.41x when its tree kept each page node's dump
    node beside the table it was built with (cli/html/data.c), 1.75x now;
    the other formats about 1.2x."""
    with workdir("vt-reader-deep-") as work:
        path = bench_dump(work, 20000, 20000, outer=210)
        with open(path) as f:
            d = json.load(f)
        eq(len(d["stacks"]) // 3, 20000, "bench_dump's stacks")
        depth = {}
        nodes = d["nodes"]
        for k in range(len(nodes) // 2):
            parent = nodes[2 * k]
            depth[k] = 1 if parent < 0 else depth[parent] + 1
        depths = sorted({depth[d["stacks"][3 * i]] for i in range(20000)})
        eq(len(depths), 1, f"every stack as deep: {depths}")
        ok(depths[0] >= 221, f"stacks of the ten levels and 211 plain ones and their callers: {depths}")
        ok(len(nodes) // 2 > 20000 * 211, f"the stacks share few nodes: {len(nodes) // 2}")
        del d, nodes, depth
        size = os.path.getsize(path)
        for fmt in ("text", "json", "folded", "html", "torch"):
            rss = peak_rss([CLI, "report", "--format", fmt, path, "-o", os.devnull])
            ok(rss <= 2 * size, f"{fmt}: peak resident memory {rss / 2**20:.1f} MiB is "
                                f"{rss / size:.2f}x the dump's {size / 2**20:.1f} MiB (at most 2x)")


@test
def reader_text_json_folded_count_events_without_keeping_them():
    """The text, json and folded reports need the history's counts, not its
    events (cli/model.h's VM_LOAD_COUNT_EVENTS): a dump of 1,000,000
    events over one stack (700,000 pairs, the ring's last million kept) is
    read, every event checked, and counted exactly; each of the three
    peaks within twice the dump's size resident, and so does `vramtrace
    diff` of the dump with itself. With every event kept (32 bytes each in
    the model) they took 4.5x, and the diff 8.6x. The three reports hold
    under 0.75x: the dump's text is given back as it is read. The page and
    the torch export, which read the events, within 2x too."""
    with workdir("vt-reader-events-") as work:
        p = subprocess.run([os.path.join(BUILD, "bench", "bench_alloc"), "pairs", "cuda", "20", "700000", "1", "cold"],
                           capture_output=True, text=True, timeout=300,
                           env=dict(os.environ, LD_PRELOAD=LIB, VRAMTRACE_OUT=os.path.join(work, "d.json"),
                                    VRAMTRACE_REPORT="off", VRAMTRACE_LIVE="0",
                                    LD_LIBRARY_PATH=os.path.join(BUILD, "bench")))
        eq(p.returncode, 0, p.stderr)
        path = os.path.join(work, "d.json")
        size = os.path.getsize(path)
        out = subprocess.run([CLI, "report", path], capture_output=True, text=True, timeout=120).stdout
        line = [l for l in out.splitlines() if l.startswith("timeline:")]
        eq(len(line), 1, "one timeline line")
        eq(re.sub(r" over [0-9.]+ s", "", line[0].split(";")[0]),
           "timeline: 1000000 events (500000 allocations, 500000 frees, 0 OOMs, older events dropped)",
           "the events counted")
        for fmt in ("text", "json", "folded"):
            rss = peak_rss([CLI, "report", "--format", fmt, path, "-o", os.devnull])
            ok(rss <= 2 * size, f"{fmt}: peak resident memory {rss / 2**20:.1f} MiB is "
                                f"{rss / size:.2f}x the dump's {size / 2**20:.1f} MiB (at most 2x)")
            # The mapped dump's pages are given back while the events'
            # string is searched and skipped, not after it (cli/model_scan.h's
            # `passed`): 0.35x; 1.24x when the whole string was resident.
            ok(rss <= 0.75 * size, f"{fmt}: peak resident memory {rss / 2**20:.1f} MiB is "
                                   f"{rss / size:.2f}x the dump's {size / 2**20:.1f} MiB (at most 0.75x)")
        # The page and the torch export read every event: kept packed
        # (cli/model_events.h), 1.51x and 1.38x; 5.6x and 5.0x as 32-byte
        # structs.
        for fmt in ("html", "torch"):
            rss = peak_rss([CLI, "report", "--format", fmt, path, "-o", os.devnull])
            ok(rss <= 2 * size, f"{fmt}: peak resident memory {rss / 2**20:.1f} MiB is "
                                f"{rss / size:.2f}x the dump's {size / 2**20:.1f} MiB (at most 2x)")
        # `vramtrace diff` reads two dumps' holders: 8.6x with the events kept.
        rss = peak_rss([CLI, "diff", path, path])
        ok(rss <= 2 * size, f"diff of the dump with itself: peak resident memory {rss / 2**20:.1f} MiB is "
                            f"{rss / size:.2f}x the dump's {size / 2**20:.1f} MiB (at most 2x)")


FOLD_COLLIDE = os.path.join(T, "vramtrace_fold_collide")


@test
def reader_folded_lines_merged_only_when_they_read_the_same():
    """The folded format no longer keeps its lines (cli/fmt_folded.c): a
    distinct line is a group found by the line's hash, and two lines of one
    hash are compared as text. The CLI built with that hash narrowed to two
    bits (every line collides with a quarter of the others), and its room
    for frames' texts made once narrowed to 64 bytes (most made at each
    use), writes the same bytes as the real one: on 300 live allocations of distinct stacks
    (bench_dump), a dump
    whose two holders read the same (cli-control.json: one line of their
    summed bytes), the golden dumps, several dumps at once, --at peak and
    --folded-root none. And the folded report of 10,000 live allocations
    over 100,000 stacks stays within twice the dump's size resident (it
    kept every line with a hash entry: 2.28x; 4.2x at 1,000,000 stacks)."""
    with workdir("vt-reader-folded-") as work:
        many = bench_dump(work, 300, 400)
        cases = [[many], [os.path.join(ROOT, "tests", "fuzz", "seeds", "cli-control.json")],
                 [os.path.join(GOLDEN, R0), os.path.join(GOLDEN, R1)], [os.path.join(GOLDEN, "python.json")],
                 [os.path.join(GOLDEN, "hostile.json")]]
        for paths in cases:
            for extra in ([], ["--at", "peak"], ["--folded-root", "none"]):
                argv = ["report", "--format", "folded"] + extra + paths
                a = subprocess.run([CLI] + argv, capture_output=True, timeout=120)
                b = subprocess.run([FOLD_COLLIDE] + argv, capture_output=True, timeout=120)
                what = f"{[os.path.basename(p) for p in paths]} {extra}"
                eq((a.returncode, a.stderr), (0, b""), f"{what}: status")
                eq((b.returncode, b.stdout, b.stderr), (0, a.stdout, b""), f"{what}: the same lines with the narrow hash")
        lines = subprocess.run([CLI, "report", "--format", "folded", many], capture_output=True,
                               timeout=120).stdout.decode().splitlines()
        eq(len(lines), 300, "bench_dump's 300 live allocations, each its own stack: 300 lines")
        eq(sum(int(l.rsplit(" ", 1)[1]) for l in lines), 300 * 256, "their bytes: the 300 live of 256 bytes")
        merged = subprocess.run([FOLD_COLLIDE, "report", "--format", "folded",
                                 os.path.join(ROOT, "tests", "fuzz", "seeds", "cli-control.json")],
                                capture_output=True, timeout=120).stdout.decode().splitlines()
        eq([l.rsplit(" ", 1)[1] for l in merged], ["4194304"], "two holders that read the same: one line, summed")
        path = bench_dump(work, 10000, 100000)
        size = os.path.getsize(path)
        rss = peak_rss([CLI, "report", "--format", "folded", path, "-o", os.devnull])
        ok(rss <= 2 * size, f"folded's peak resident memory {rss / 2**20:.1f} MiB is "
                            f"{rss / size:.2f}x the dump's {size / 2**20:.1f} MiB (at most 2x)")


@test
def reader_json_frames_made_once_write_what_they_did():
    """The JSON report makes each frame's object of a holders list once
    (cli/fmt_json.c: a bounded room, each frame's text after its first
    use copied from it). The CLI built with that room narrowed to 600
    bytes (two frames, then the others made at each use) writes the same
    bytes as the real one: on 300 live allocations of distinct stacks
    (bench_dump), the golden dumps, the fuzz seeds, several dumps at once,
    --at peak and --top 2."""
    with workdir("vt-reader-json-") as work:
        many = bench_dump(work, 300, 400)
        cases = [[many], [os.path.join(GOLDEN, R0), os.path.join(GOLDEN, R1)],
                 [os.path.join(GOLDEN, "python.json")], [os.path.join(GOLDEN, "hostile.json")]]
        cases += [[p] for p in sorted(glob.glob(os.path.join(ROOT, "tests", "fuzz", "seeds", "*.json")))]
        for paths in cases:
            for extra in ([], ["--at", "peak"], ["--top", "2"]):
                argv = ["report", "--format", "json"] + extra + paths
                a = subprocess.run([CLI] + argv, capture_output=True, timeout=120)
                b = subprocess.run([FOLD_COLLIDE] + argv, capture_output=True, timeout=120)
                what = f"{[os.path.basename(p) for p in paths]} {extra}"
                eq((b.returncode, b.stdout, b.stderr), (a.returncode, a.stdout, a.stderr),
                   f"{what}: the same JSON with the narrow room")
        out = subprocess.run([CLI, "report", "--format", "json", many], capture_output=True, timeout=120).stdout
        eq(out.count(b'"function": "alloc_one"'), 300, "each of the 300 holders' frames written")
