"""The torch export (PyTorch's memory snapshot pickle, cli/fmt_torch.c): each
distinct frame and each stack's frame list written once and shared through
the pickle memo, what PyTorch's viewers mutate never shared, and PyTorch's
own torch.cuda._memory_viz reading it."""
import pickle
import sys

from run_tests import *
from dumpview import v1_view

sys.path.insert(0, os.path.join(ROOT, "bench"))
import bench_html  # noqa: E402  (the generated dump's shape: shared library frames, distinct user frames)


def generated_dump(work, nevents=3000, nlive=300, nstacks=40):
    path = os.path.join(work, "gen.json")
    with open(path, "w") as f:
        json.dump(bench_html.dump(nevents, nlive, nstacks, seed=18), f)
    return path


def export(path):
    p = subprocess.run([CLI, "report", path, "--format", "torch"], capture_output=True)
    eq((p.returncode, p.stderr), (0, b""), f"torch export of {path}")
    return p.stdout


def frame_lists(snap):
    """Every frames list of the snapshot: segments', blocks', trace entries'."""
    out = []
    for s in snap["segments"]:
        out.append(s["frames"])
        out += [b["frames"] for b in s["blocks"]]
    for trace in snap["device_traces"]:
        out += [e["frames"] for e in trace]
    return out


@test
def torch_export_writes_each_frame_once():
    """A frame shared by several stacks is one dict object, a stack's list one
    list object wherever it is used; trace entries and blocks (which
    memory_viz.js annotates in place) are each their own object; and the
    export of a dump whose 40 stacks share 12 of their 13 frames is smaller
    than the frames written out per stack."""
    work = tempfile.mkdtemp(prefix="vt-torch-")
    try:
        path = generated_dump(work)
        raw = export(path)
        snap = pickle.loads(raw)
        lists = frame_lists(snap)
        frames = [f for l in lists for f in l]
        contents = {(f["filename"], f["line"], f["name"]) for f in frames}
        eq(len({id(f) for f in frames}), len(contents), "one dict per distinct frame")
        by_content = {}
        for l in lists:
            by_content.setdefault(tuple(id(f) for f in l), set()).add(id(l))
        eq(sorted(len(ids) for ids in by_content.values()), [1] * len(by_content), "one list per stack")
        dump = json.load(open(path))
        eq(len(by_content), len({e[5] for e in dump["events"] if e[1] != "oom"} | {a["stack"] for a in dump["live"]}),
           "as many lists as stacks used")
        entries = [e for t in snap["device_traces"] for e in t] + [b for s in snap["segments"] for b in s["blocks"]]
        eq(len({id(e) for e in entries}), len(entries), "trace entries and blocks never shared")
        sites = {(f["filename"], f["line"], f["name"]) for l in lists for f in l[:1]}
        ok(all(x[2].endswith(" (call site)") for x in sites), "each list starts at its call site")
        eq(len(contents - sites), len({(f["file"] or f["module"], f["line"], f["function"])
                                       for s in dump["stacks"] for f in s["frames"]}), "distinct frames")
        # Each trace entry of an allocation fetches its address, size and
        # time from the first entry's scratch slots: the values, not a copy.
        for t in snap["device_traces"]:
            for a, b in zip(t, t[1:]):
                if (a["action"], b["action"]) == ("segment_alloc", "alloc"):
                    eq((b["addr"], b["size"], b["time_us"]), (a["addr"], a["size"], a["time_us"]), "alloc entry")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def memo_fetches(raw):
    """Replays the pickle's stack and memo by opcode: each object the
    memo was given (a string as ("str", text), a list or dict as (kind,
    serial)), the memo index it went to, each fetch's opcode, and each
    dict's "name" value."""
    import pickletools
    stack, memo, marks, serial = [], {}, [], 0
    puts, fetches, named = {}, [], {}
    for op, arg, _ in pickletools.genops(raw):
        n = op.name
        if n in ("EMPTY_DICT", "EMPTY_LIST"):
            serial += 1
            stack.append((n, serial))
        elif n == "MARK":
            marks.append(len(stack))
        elif n in ("SETITEMS", "APPENDS"):
            m = marks.pop()
            items = stack[m:]
            for k, v in zip(items[::2], items[1::2]):
                if n == "SETITEMS" and k == ("str", "name"):
                    named[stack[m - 1]] = v[1]
            del stack[m:]
        elif n == "APPEND":
            stack.pop()
        elif n == "BINUNICODE":
            stack.append(("str", arg))
        elif n in ("BININT", "BININT1", "BININT2", "LONG1", "NEWTRUE", "NEWFALSE"):
            stack.append(("int", arg))
        elif n in ("BINGET", "LONG_BINGET"):
            fetches.append((n, memo[arg]))
            stack.append(memo[arg])
        elif n in ("BINPUT", "LONG_BINPUT"):
            memo[arg] = stack[-1]
            puts.setdefault(stack[-1], arg)
        else:
            ok(n in ("PROTO", "STOP"), f"opcode {n}")
    return puts, fetches, named


@test
def torch_export_fetches_names_and_busiest_objects_in_two_bytes():
    """A memo index below 256 is fetched in two bytes, any other in five.
    In the export of a dump with 600 stacks (a memo of more than 600
    entries), every fetch of a key or a repeated name (an action, a
    segment's type, a block's state) is a two-byte BINGET, even those of
    the trace entries, which are first written after every segment's
    frames; and the 189 frame lists and frame dicts fetched most (the
    indices left below 256), call-site frames among them, are never
    fetched less often than any numbered above."""
    work = tempfile.mkdtemp(prefix="vt-torch-")
    try:
        path = generated_dump(work, nevents=4000, nlive=400, nstacks=600)
        dump = json.load(open(path))
        for st in dump["stacks"]:   # each stack's call site: its innermost line of train.py
            st["site"] = next(i for i, f in enumerate(st["frames"]) if (f["file"] or "").endswith("train.py"))
        with open(path, "w") as f:
            json.dump(dump, f)
        raw = export(path)
        snap = pickle.loads(raw)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    names = {"small", "large", "active_allocated"}
    for s in snap["segments"]:
        names |= set(s) | {k for b in s["blocks"] for k in b}
    for t in snap["device_traces"]:
        for e in t:
            names |= set(e) | {e["action"]}
    names |= {k for l in frame_lists(snap) for f in l for k in f}
    puts, fetches, dict_names = memo_fetches(raw)
    named = [(op, v[1]) for op, v in fetches if v[0] == "str" and v[1] in names]
    eq(sorted({v for _, v in named}), sorted(names - {"oom", "device_free"}),
       "every name fetched but the one OOM entry's own")
    eq([x for x in named if x[0] != "BINGET"], [], "names fetched in two bytes")
    uses = {}
    for op, v in fetches:
        if v[0] in ("EMPTY_LIST", "EMPTY_DICT"):
            uses[v] = uses.get(v, 0) + 1
    lists = sum(v[0] == "EMPTY_LIST" for v in uses)
    ok(lists > 300, f"{lists} frame lists fetched: more than the low indices hold")
    def kind(v):
        return "list" if v[0] == "EMPTY_LIST" else "site" if dict_names[v].endswith(" (call site)") else "frame"
    low = [(n, kind(v)) for v, n in uses.items() if puts[v] < 256]
    high = [(n, kind(v)) for v, n in uses.items() if puts[v] >= 256]
    eq(len(low), 189, "frame lists and dicts with an index below 256")
    ok(min(low)[0] >= max(high)[0], f"the busiest below 256: fetched {min(low)} times at least, "
       f"the others {max(high)} at most")
    kinds = {k for _, k in low}
    eq(kinds, {"list", "site", "frame"}, "frame lists, call-site frames and other frames below 256")
    ok(max(puts.values()) > 600, f"a memo of {max(puts.values())} entries")


VIZ = r'''
import copy, json, pickle, sys
from torch.cuda import _memory_viz as mv
snap = pickle.load(open(sys.argv[1], "rb"))
frames = copy.deepcopy([s["frames"] for s in snap["segments"]])
first = (mv.segsum(snap), mv.trace(snap))
pages = [len(mv.trace_plot(snap)) > 0, len(mv.segment_plot(snap)) > 0]
again = (mv.segsum(snap), mv.trace(snap))
out = {"same_after": first == again, "pages": pages,
       "frames_unchanged": frames == [s["frames"] for s in snap["segments"]],
       "segsum": [x for x in first[0].splitlines() if x.startswith(("segments: ", "total_reserved: "))],
       "mallocs": sum(" = cudaMalloc(" in x for x in first[1].splitlines()),
       "frees": sum(x.startswith("cudaFree(") for x in first[1].splitlines()),
       "want": str(mv.Bytes(int(sys.argv[2])))}
print(json.dumps(out))
'''


@torch_test
def torch_export_read_by_memory_viz():
    """PyTorch's own torch.cuda._memory_viz reads the export of a generated
    dump: its summary has one segment per live allocation and their bytes,
    its trace one cudaMalloc per allocation event and one cudaFree per free,
    it writes both pages, and nothing it does changes the shared frames (its
    text is the same before and after the pages)."""
    work = tempfile.mkdtemp(prefix="vt-torch-")
    try:
        path = generated_dump(work)
        pk = os.path.join(work, "gen.pickle")
        with open(pk, "wb") as f:
            f.write(export(path))
        dump = json.load(open(path))
        live = sum(a["bytes"] for a in dump["live"])
        p = subprocess.run([TORCH_PY, "-c", VIZ, pk, str(live)], capture_output=True, text=True, timeout=300)
        eq(p.returncode, 0, "memory_viz:\n" + p.stderr[-2000:])
        got = json.loads(p.stdout.splitlines()[-1])
        eq(got["segsum"], [f"segments: {len(dump['live'])}", f"total_reserved: {got['want']}"], "segsum")
        eq((got["mallocs"], got["frees"]), (sum(e[1] == "alloc" for e in dump["events"]),
                                            sum(e[1] == "free" for e in dump["events"])), "trace")
        eq((got["pages"], got["same_after"], got["frames_unchanged"]), ([True, True], True, True),
           "pages written, nothing changed")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def vmm_run(argv, work, reuse, capacity="4G"):
    """argv (a program of build/) on the simulated GPU under the library,
    handles given again after their memory ends when `reuse`
    (SIMGPU_REUSE_HANDLES); its stdout, dump and torch export."""
    out = os.path.join(work, f"d{int(reuse)}.json")
    env = dict(os.environ, LD_LIBRARY_PATH=SIM, SIMGPU_CAPACITY=capacity, LD_PRELOAD=LIB, VRAMTRACE_OUT=out,
               VRAMTRACE_REPORT="off", SIMGPU_REUSE_HANDLES="1" if reuse else "0")
    p = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)
    eq((p.returncode, p.stderr), (0, ""), f"{argv[0]}")
    return p.stdout, load_dump(out), pickle.loads(export(out))


@test
def torch_export_many_vmm_handles_each_at_its_mapped_address():
    """bench/bench_vmm.c on the simulated GPU: 400 handles made, mapped,
    unmapped and released at one address, then 400 mapped side by side and
    kept. The export has the 400 kept ones as expandable segments at their
    mapped addresses, and every handle's trace entries at the address it
    was mapped at: the released ones' creation and end (at that one
    address, one after the other), the kept ones' creation; the same when
    the driver gives each released handle's value to the next (before, the
    released handles' entries were left out: the event ring knows a handle
    by its value, and only a live one's address was known). (A handle's
    events were matched to its live record by a pass over every live
    allocation per handle; 40,000 handles took 5.3 s against 0.13 s with
    the table of handles, bench_torch_export.py.)"""
    n = 400
    for reuse in (False, True):
        with workdir("vt-torch-vmm-") as work:
            out, dump, snap = vmm_run([os.path.join(BUILD, "bench", "bench_vmm"), str(n), str(n)], work, reuse)
        g = int(out.split()[1])
        handles = {e[2] for e in dump["events"] if e[1] == "alloc"}
        eq(len(handles), n if reuse else 2 * n, "handles: each released one given to the next, or all new")
        base = min(int(a["address"], 16) for a in dump["live"])
        eq(sorted((a["kind"], int(a["address"], 16) - base, a["bytes"]) for a in dump["live"]),
           [("vmm", i * g, g) for i in range(n)], "the dump: the kept handles, side by side")
        eq(sorted((s["device"], s["address"] - base, s["total_size"], s["is_expandable"]) for s in snap["segments"]),
           [(0, i * g, g, True) for i in range(n)], "one expandable segment per kept handle")
        eq(len(snap["device_traces"]), 1, "one device")
        trace = snap["device_traces"][0]
        # Each handle's entries together, in the order of creation.
        churn = ("segment_alloc", "alloc", "free_requested", "free_completed", "segment_free")
        eq([(e["action"], e["addr"] - base, e["size"]) for e in trace],
           [(a, 0, g) for i in range(n) for a in churn] +
           [(a, i * g, g) for i in range(n) for a in ("segment_alloc", "alloc")],
           f"each handle's creation and end at the address it was mapped at (handles given again: {reuse})")


T_VMM_LIVES = [  # t_vmm's handles: (granules, the last place mapped in its reserved range, in granules, freed)
    (1, 0, True),     # released while mapped, then unmapped
    (2, 6, True),     # mapped at 2 and at 6, released, unmapped from both
    (1, 10, True),    # a reference retained and released, unmapped, the creator's released
    (1, 12, True), (1, 13, True),   # two released, unmapped at once
    (1, 20, False),   # released, still mapped at exit
    (4, 26, True),    # unmapped, then released
]                     # and one released without a mapping: no address, left out


@test
def torch_export_places_each_vmm_handle_where_it_was_mapped():
    """tests/progs/t_vmm.c: handles made, mapped, unmapped and released
    before the dump, in every order the driver allows (a handle mapped at
    two addresses, released while mapped, unmapped before its release, two
    ended by one unmap), one still mapped at exit, one never mapped. The
    torch export has each handle's creation and end at the address it was
    mapped at last (the one never mapped left out), the one kept as the
    only segment, and the trace replays inside its segments; the same when
    the driver gives each handle's value to the next one made (before:
    only the handle kept at exit, its creation)."""
    g = 2 * MiB
    for reuse in (False, True):
        with workdir("vt-torch-vmm-") as work:
            _, dump, snap = vmm_run([os.path.join(T, "t_vmm")], work, reuse, capacity="1G")
        allocs = [e[2] for e in dump["events"] if e[1] == "alloc"]
        eq(len(allocs), 8, "eight handles made")
        eq(len(set(allocs)), 3 if reuse else 8, "their values: given again, or all new")
        eq([(a["kind"], a["bytes"]) for a in dump["live"]], [("vmm", g)], "live at exit: one handle")
        va = int(dump["live"][0]["address"], 16) - 20 * g   # t_vmm's reserved range
        eq([(s["address"] - va, s["total_size"], s["is_expandable"]) for s in snap["segments"]],
           [(20 * g, g, True)], "the one handle live at exit")
        trace = [(e["action"], (e["addr"] - va) // g, e["size"] // g) for e in snap["device_traces"][0]]
        made = [("segment_alloc", at, n) for n, at, _ in T_VMM_LIVES]
        made = [x for m in made for x in (m, ("alloc",) + m[1:])]
        ended = {at: [(a, at, n) for a in ("free_requested", "free_completed", "segment_free")]
                 for n, at, freed in T_VMM_LIVES if freed}
        want = (made[0:2] + ended[0] + made[2:4] + ended[6] + made[4:6] + ended[10] + made[6:10] + ended[12] +
                ended[13] + made[10:14] + ended[26])
        eq(trace, want, f"every handle where it was mapped, in order (handles given again: {reuse})")
        from test_cli import replay
        replay(snap)
        eq([(int(m[1], 16) - va, m[2], m[6] is None) for m in dump["mappings"]],
           [(0, g, False), (2 * g, 2 * g, False), (6 * g, 2 * g, False), (10 * g, g, False), (12 * g, g, False),
            (13 * g, g, False), (20 * g, g, True), (26 * g, 4 * g, False)],
           "the dump's mappings: where, how many bytes, and which one stays")


@test
def torch_export_mappings_checked_by_the_dump_reader():
    """The dump's history of mappings read back: a version 2 dump's (cut out
    of the document, read by the scanner) and its version 1 view's (through
    jansson) export the same pickle; a dump without it (of an earlier
    vramtrace) exports its live handle alone, as before; and each way the
    history can be wrong is one error line naming it, in either version."""
    with workdir("vt-torch-vmm-") as work:
        env = dict(os.environ, LD_LIBRARY_PATH=SIM, SIMGPU_CAPACITY="1G", LD_PRELOAD=LIB,
                   VRAMTRACE_OUT=os.path.join(work, "d.json"), VRAMTRACE_REPORT="off")
        p = subprocess.run([os.path.join(T, "t_vmm")], capture_output=True, text=True, timeout=120, env=env)
        eq(p.returncode, 0, p.stderr)
        with open(os.path.join(work, "d.json")) as f:
            d = json.load(f)

        def exported(dump):
            path = os.path.join(work, "x.json")
            with open(path, "w") as f:
                json.dump(dump, f)
            p = subprocess.run([CLI, "report", path, "--format", "torch"], capture_output=True)
            return p.returncode, p.stdout, p.stderr.decode().replace(path, "DUMP")

        rc, v2, err = exported(d)
        eq((rc, err), (0, ""), "the dump as written")
        eq(len(pickle.loads(v2)["device_traces"][0]), 32, "its trace: seven handles' entries")
        eq(exported(v1_view(d)), (0, v2, ""), "its version 1 view: the same pickle")
        old = {k: v for k, v in d.items() if k not in ("mappings", "mapping_fields", "mappings_total")}
        rc, out, err = exported(old)
        eq((rc, err), (0, ""), "a dump from before the history")
        eq([e["action"] for e in pickle.loads(out)["device_traces"][0]], ["segment_alloc", "alloc"],
           "without it: the live handle's creation alone")
        row = lambda i, k, v: lambda x: x["mappings"][i].__setitem__(k, v)
        fields = ('["handle", "address", "bytes", "device", "time_ns", "event", "unmap_ns", "unmap_event"], '
                  'the columns this vramtrace reads (a newer vramtrace\'s dump?)')
        cases = [
            ("event past the events", row(1, 5, d["nevents"] + 1), "mappings[1] is malformed"),
            ("event going back", row(2, 5, 0), "mappings[2] is malformed"),
            ("time going back", row(3, 4, 0), "mappings[3] is malformed"),
            ("unmapped before it was mapped", row(0, 7, 0), "mappings[0] is malformed"),
            ("unmapped before in time", row(0, 6, 0), "mappings[0] is malformed"),
            ("unmap time alone", row(6, 6, 5), "mappings[6] is malformed: not an integer"),
            ("unmap event alone", row(7, 6, None), "mappings[7] is malformed"),
            ("device out of range", row(0, 3, 4096), "mappings[0] is malformed"),
            ("address not hex", row(0, 1, 123), "mappings[0] is malformed: not a hex address"),
            ("a column missing", lambda x: x["mappings"][4].pop(), "mappings[4] is malformed"),
            ("a column more", lambda x: x["mappings"][4].append(0), "mappings[4] is malformed"),
            ("columns moved", lambda x: x.update(mapping_fields=x["mapping_fields"][::-1]),
             "dump: field \"mapping_fields\" is not " + fields),
            ("no mapping_fields", lambda x: x.pop("mapping_fields"), "dump: field \"mapping_fields\" is not " + fields),
            ("no mappings_total", lambda x: x.pop("mappings_total"),
             "dump: field \"mappings_total\" is missing or not a count"),
            ("mappings_total below the rows", lambda x: x.update(mappings_total=7),
             "\"mappings_total\" (7) is below the 8 mappings kept"),
        ]
        for what, change, err in cases:
            for version, of in ((2, lambda x: x), (1, v1_view)):
                bad = json.loads(json.dumps(d))
                change(bad)
                eq(exported(of(bad)), (1, b"", f"vramtrace report: DUMP: {err}\n"), f"{what} (version {version})")
        bad = dict(d, mappings={})
        eq(exported(bad), (1, b"", "vramtrace report: DUMP: dump: field \"mappings\" is not an array of rows\n"),
           "not an array (version 2)")
        eq(exported(v1_view(bad)), (1, b"", "vramtrace report: DUMP: dump: field \"mappings\" is not an array\n"),
           "not an array (version 1)")


@test
def torch_export_repeated_live_address_is_one_segment():
    """A dump listing one address twice (on one device; a corrupt or
    edited dump) exports it as one segment, the first listed (its size and
    stack), while the same address on another device is its own segment.
    The trace keeps exactly the entries the backward replay from the
    segments agrees with: an address freed and allocated again keeps both
    (and its first allocation), an address not live at the end keeps its
    pair, and a free of a live segment's address with no allocation after
    it (the corrupt dump's last word) is left out."""
    work = tempfile.mkdtemp(prefix="vt-torch-")
    try:
        d = json.load(open(os.path.join(GOLDEN, "phases.r0.json")))
        first = d["live"][0]
        a0 = int(first["address"], 16)
        d["live"] = [first, dict(first, bytes=4096, stack=2, time_ns=first["time_ns"] + 5),
                     dict(first, device=1, bytes=8192)] + d["live"][1:]
        d["devices"] = d["devices"] + [dict(d["devices"][0], ordinal=1)]
        gone = 0x7000dead0000
        t = d["events"][-1][0]
        ev = [[t + 1, "alloc", hex(gone), 512, 0, 0, "device"], [t + 2, "free", hex(gone), 512, 0, 0, "device"],
              [t + 3, "free", hex(a0), first["bytes"], 0, 1, "device"],
              [t + 4, "alloc", hex(a0), first["bytes"], 0, 1, "device"],
              [t + 5, "free", hex(a0), first["bytes"], 0, 1, "device"]]
        d["events"] = d["events"] + ev
        path = os.path.join(work, "rep.json")
        json.dump(d, open(path, "w"))
        snap = pickle.loads(export(path))
        segs = sorted((s["device"], s["address"], s["total_size"]) for s in snap["segments"])
        eq([x for x in segs if x[1] == a0], [(0, a0, first["bytes"]), (1, a0, 8192)],
           "one segment per device for the repeated address, the first listed")
        seg0 = [s for s in snap["segments"] if (s["device"], s["address"]) == (0, a0)][0]
        want_site = d["stacks"][first["stack"]]["frames"][0]
        ok(seg0["frames"][1]["name"] == want_site["function"], "the first listed's stack")
        trace = snap["device_traces"][0]
        tail = [(e["action"], e["addr"]) for e in trace if e["addr"] in (gone, a0)]
        eq(tail, [("segment_alloc", a0), ("alloc", a0),
                  ("segment_alloc", gone), ("alloc", gone), ("free_requested", gone), ("free_completed", gone),
                  ("segment_free", gone), ("free_requested", a0), ("free_completed", a0), ("segment_free", a0),
                  ("segment_alloc", a0), ("alloc", a0)],
           "the replay's entries: a0's first allocation, the pair of an address gone, a0 freed and allocated "
           "again, and not the free after that")
        sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
        from test_cli import replay
        replay(snap)
    finally:
        shutil.rmtree(work, ignore_errors=True)


@test
def torch_export_replay_set_forgets_and_finds_past_marks():
    """The replay's set of addresses freed within the window
    (cli/fmt_torch.c's key_set: open addressing over the free events'
    indexes with a byte of hash beside, a removed key marked in place and
    its slot taken again, the set remade bigger and without marks when
    three quarters are used, from 1,024 slots): 5,000 addresses each
    allocated and freed in two rounds (all allocations of a round, then all
    its frees), so that the backward replay holds 5,000 at once (the set
    remade as it fills), takes them out, and puts the same keys back past
    their marks and into marked slots. It fails when a look-up stops at a
    mark, or when a remaking drops its keys. Every one of the
    20,000 events keeps its trace entries (2 an allocation, 3 a free), in
    time order, and the trace replays from the segments."""
    work = tempfile.mkdtemp(prefix="vt-torch-set-")
    try:
        d = json.load(open(os.path.join(GOLDEN, "phases.r0.json")))
        t = d["events"][-1][0]
        base = 0x7e0000000000
        ev = []
        for rnd in range(2):
            for kind in ("alloc", "free"):
                for k in range(5000):
                    t += 1
                    ev.append([t, kind, hex(base + k * 0x1000), 4096, 0, 0, "device"])
        d["events"] = d["events"] + ev
        path = os.path.join(work, "set.json")
        json.dump(d, open(path, "w"))
        snap = pickle.loads(export(path))
        trace = snap["device_traces"][0]
        mine = [(e["action"], e["addr"]) for e in trace if base <= e["addr"] < base + 5000 * 0x1000]
        want = []
        for rnd in range(2):
            for k in range(5000):
                want += [("segment_alloc", base + k * 0x1000), ("alloc", base + k * 0x1000)]
            for k in range(5000):
                a = base + k * 0x1000
                want += [("free_requested", a), ("free_completed", a), ("segment_free", a)]
        eq(len(mine), 50000, "the 20,000 events' trace entries")
        eq(mine == want, True, "each in time order, an allocation's two and a free's three")
        sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
        from test_cli import replay
        replay(snap)
    finally:
        shutil.rmtree(work, ignore_errors=True)


@test
def torch_export_replay_in_parts_marks_what_one_pass_does():
    """A ring of frees whose allocations were dropped puts each of their
    addresses in the replay's set of added keys, which would then hold
    them all at once (16 MB for 1,000,000 such frees, 1.6 times their
    dump). Past its room (a quarter of the packed events, 1 MiB at least)
    the replay starts again in parts, each over the addresses whose hash
    falls in it. 250,000 such frees, 1,000 addresses allocated and freed
    after them, and 1,000 of the first addresses freed again (their first
    free then left out): the trace is what a replay of every address at
    once keeps, in time order. It fails when an address falls in no part,
    or a part's pass stops short of the first event."""
    work = tempfile.mkdtemp(prefix="vt-torch-parts-")
    try:
        d = json.load(open(os.path.join(GOLDEN, "phases.r0.json")))
        t = d["events"][-1][0]
        base = 0x7f0000000000
        top = base + 300000 * 0x1000
        ev = []
        def add(kind, a):
            nonlocal t
            t += 1
            ev.append([t, kind, hex(a), 4096, 0, 0, "device"])
        for k in range(250000):
            add("free", base + k * 0x1000)
        for k in range(1000):
            add("alloc", base + (260000 + k) * 0x1000)
            add("free", base + (260000 + k) * 0x1000)
        for k in range(1000):
            add("free", base + k * 0x7000)
        d["events"] = d["events"] + ev
        path = os.path.join(work, "parts.json")
        json.dump(d, open(path, "w"))
        snap = pickle.loads(export(path))
        mine = [(e["action"], e["addr"]) for e in snap["device_traces"][0] if base <= e["addr"] < top]
        # The replay, last to first: an allocation is kept where its
        # address is there after it, a free where it is not.
        have, kept = set(), []
        for _, kind, a, *_ in reversed(ev):
            a = int(a, 16)
            if kind == "alloc" and a in have:
                have.discard(a)
                kept.append([("segment_alloc", a), ("alloc", a)])
            elif kind == "free" and a not in have:
                have.add(a)
                kept.append([("free_requested", a), ("free_completed", a), ("segment_free", a)])
        want = [x for entries in reversed(kept) for x in entries]
        eq(len(mine), len(want), "as many trace entries as one pass keeps")
        eq(mine == want, True, "the same entries, in time order")
    finally:
        shutil.rmtree(work, ignore_errors=True)


@test
def torch_export_sizes_past_int64_are_int64_max():
    """A request of SIZE_MAX (a negative size cast to size_t, the bug a
    post-mortem is for) was pickled exactly, as a 9-byte LONG1, which
    memory_viz's own unpickler makes a BigInt its size formatting throws
    on. PyTorch's snapshot holds int64s: the export writes INT64_MAX, and
    no integer in more than eight bytes."""
    import pickletools
    with workdir("vt-torch-huge-") as work:
        out = os.path.join(work, "d.json")
        r = run([os.path.join(T, "t_triage"), "keep", "1M", "fail", str(2**64 - 1)], report="off",
                env={"VRAMTRACE_OUT": out})
        eq(r.rc, 0, "t_triage")
        eq([o["requested_bytes"] for o in json.load(open(out))["ooms"]], [2**64 - 1], "the dump keeps the request")
        raw = export(out)
        longs = [(arg, raw[pos + 1]) for op, arg, pos in pickletools.genops(raw) if op.name == "LONG1"]
        eq([a for a, n in longs if n > 8], [], "no integer past eight bytes")
        snap = pickle.loads(raw)
        eq([(e["action"], e["size"]) for e in snap["device_traces"][0] if e["action"] == "oom"], [("oom", 2**63 - 1)],
           "the failed request, as int64's most")


@test
def torch_export_escapes_control_characters():
    """A name with a control character (ESC, a line break, a bidirectional
    override) is written in the pickle in its display form, as the text
    and folded reports write it (common/display.h): it was written as it
    was, and memory_viz's flame graph of it was an SVG no XML reader
    takes."""
    path = os.path.join(ROOT, "tests", "fuzz", "seeds", "cli-control.json")
    snap = pickle.loads(export(path))
    shown = r"\x1b[31m{}\x1b[0m\x1b]0;title\x07\x0d\x0a;x\u009b2J\u202eevil\x09\x7f\x01end"
    first = snap["device_traces"][0][0]
    eq((first["action"], [(f["filename"], f["name"], f["line"]) for f in first["frames"]]),
       ("segment_alloc", [(shown.format("file"), shown.format("function") + " (call site)", 14)]
        + [(shown.format("file"), shown.format("function"), line) for line in (14, 37, 58, 360, 0)]),
       "the first entry's frames, escaped")
    names = {s for frames in frame_lists(snap) for f in frames for s in (f["filename"], f["name"])}
    eq(sorted(n for n in names if any(ord(c) < 0x20 or 0x7f <= ord(c) <= 0x9f or 0x202a <= ord(c) <= 0x202e
                                      for c in n)), [], "no control character in any frame")
    eq(len(snap["device_traces"][0]), 16, "the trace entries")


# A program whose one tensor of 3,000,000,000 bytes does not fit a 2 GiB
# simulated GPU: PyTorch's caching allocator fails, frees its cache, fails
# again and raises (under expandable segments each try makes 20 MiB pages
# until one is refused). PyTorch's own history, recorded alongside, gives
# the oom entries of its own snapshot.
OOM_PROG = r'''
import json, sys, torch
torch.cuda.memory._record_memory_history(max_entries=100000, stacks="python")
model = torch.nn.Sequential(torch.nn.Linear(512, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 512)).cuda()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for _ in range(2):
    opt.zero_grad()
    torch.nn.functional.mse_loss(model(torch.randn(256, 512, device="cuda")), torch.zeros(256, 512, device="cuda")).backward()
    opt.step()
keep = [torch.empty(3 * 2**20 + 12345, dtype=torch.uint8, device="cuda") for _ in range(3)]
del keep[1]
try:
    torch.empty(3000000000, dtype=torch.uint8, device="cuda")
except torch.OutOfMemoryError:
    pass
own = torch.cuda.memory._snapshot()
print(json.dumps({"ooms": [(e["size"], e["device_free"]) for t in own["device_traces"] for e in t if e["action"] == "oom"],
                  "settings": own["allocator_settings"]}))
'''


def oom_export(conf, companion):
    """OOM_PROG on a 2 GiB simulated GPU under PYTORCH_CUDA_ALLOC_CONF=conf,
    through `vramtrace run` (the companion's records in the dump) or the
    library alone: PyTorch's own oom entries, the dump, and the (size,
    device_free) of the export's oom entries, with its allocator_settings."""
    from test_torch_truth import SIMRUN, clean_env, in_dir
    with workdir("vt-torch-oom-") as work:
        out = os.path.join(work, "d.json")
        with open(os.path.join(work, "prog.py"), "w") as f:
            f.write(OOM_PROG)
        env = clean_env(SIMGPU_CAPACITY="2G", PYTORCH_CUDA_ALLOC_CONF=conf)
        if companion:
            argv = [SIMRUN, "--torch", "--", CLI, "run", "--out", out, "--report", "off", "--", "python3", "prog.py"]
        else:
            env.update(LD_PRELOAD=LIB, VRAMTRACE_OUT=out, VRAMTRACE_REPORT="off")
            argv = [SIMRUN, "--torch", "--", "python3", "prog.py"]
        p = in_dir(argv, work, env)
        eq(p.returncode, 0, f"{conf or 'default'} (companion: {companion}): {p.stderr[-2000:]}")
        own = json.loads(p.stdout.splitlines()[-1])
        dump = load_dump(out)
        snap = pickle.loads(export(out))
    ooms = [(e["size"], e["device_free"]) for t in snap["device_traces"] for e in t if e["action"] == "oom"]
    return own, dump, ooms, snap["allocator_settings"]


def segment_of(n):
    """The segment PyTorch's caching allocator asks CUDA for, for a
    request of n bytes past 10 MiB: n rounded up to 2 MiB (its OOM
    observer's figure, the dump's torch request_bytes)."""
    return -(-n // (2 * MiB)) * (2 * MiB)


@torch_test
def torch_export_one_oom_entry_per_pytorch_request():
    """PyTorch's failed request of 3,000,000,000 bytes, its first try and
    its retry after freeing its cache each a failure of the dump (two
    cudaMalloc of the 2 MiB-rounded segment, or under expandable segments
    two cuMemCreate of a 20 MiB page after 96 pages each), is one `oom`
    entry in PyTorch's own snapshot. With the companion's record of the
    OOM, the export has one too: of PyTorch's request as its observer
    gives it (the segment size) and of the device's free bytes PyTorch
    says (the last try's, with the pages it took back: 1.88 GiB, not the
    4 MiB left beside them). Before, each try was an entry of the failed
    call's size and free bytes (two entries of 20 MiB pages with 4 and 6
    MiB free under expandable segments, whose 1.88 GiB of pages, never
    mapped, the trace does not show)."""
    want = segment_of(3000000000)
    for conf in ("", "expandable_segments:True"):
        own, dump, got, _ = oom_export(conf, True)
        eq([s for s, _ in own["ooms"]], [3000000000], f"{conf or 'default'}: PyTorch's own snapshot, one oom entry")
        last = dump["ooms"][-1]
        eq((len(dump["ooms"]), [t["request_bytes"] for t in last["torch"]]), (2, [want]),
           f"{conf or 'default'}: the dump: two failures, PyTorch's record with its request on the last")
        eq(got, [(want, own["ooms"][0][1])], f"{conf or 'default'}: the export: one oom entry, PyTorch's request and free bytes")


@torch_test
def torch_export_oom_entries_without_the_companion():
    """The same program under the library alone (no companion, no record of
    PyTorch's): nothing says the two failures are one request, and the
    export keeps an entry for each. With the default allocator, each is
    the failed cudaMalloc's size and free bytes, as before; under
    expandable segments, each is what the request asked so far, its pages
    taken and the page refused, with the free bytes before those pages
    were taken (the trace leaves pages never mapped out: before, two
    entries of a 20 MiB page with 4 and 6 MiB free, beside a timeline of
    124 MiB on a 2 GiB device)."""
    want = segment_of(3000000000)
    _, dump, got, _ = oom_export("", False)
    eq(got, [(want, o["free_bytes"]) for o in dump["ooms"]], "default: each failed cudaMalloc, as it was")
    eq(len(got), 2, "default: two failures")
    _, dump, got, _ = oom_export("expandable_segments:True", False)
    eq([(o["requested_bytes"], o["taken_count"]) for o in dump["ooms"]], [(20 * MiB, 96)] * 2,
       "expandable: two refused pages, each after 96 made")
    eq(got, [(97 * 20 * MiB, o["free_bytes"] + 96 * 20 * MiB) for o in dump["ooms"]],
       "expandable: what each try asked so far, and the free bytes before its pages")


@torch_test
def torch_export_allocator_settings_are_pytorchs():
    """The export's allocator_settings were {'source': 'vramtrace'} alone
    even where the dump's PyTorch record has PyTorch's settings: now
    each `name:value` of that record is there too, beside 'source', as
    _snapshot()'s allocator_settings has it (True and False as booleans,
    whole numbers as integers, any other value as its text: 0.0 reads
    '0.0'). The companion keeps 200 characters of the text: of the
    default allocator's longer text, the items before the 200th."""
    for conf, keys in (("", ["PYTORCH_CUDA_ALLOC_CONF", "max_split_size", "garbage_collection_threshold",
                             "expandable_segments", "pinned_num_register_threads", "release_lock_on_cudamalloc"]),
                       ("expandable_segments:True", ["expandable_segments", "max_split_size"])):
        own, _, _, settings = oom_export(conf, True)
        mine = {k: (str(v) if isinstance(settings[k], str) else v) for k, v in own["settings"].items()
                if k in settings}
        eq(settings, dict({"source": "vramtrace"}, **{k: mine.get(k) for k in keys}),
           f"{conf or 'default'}: PyTorch's settings, its own snapshot's values")
        eq(settings["expandable_segments"], bool(conf), f"{conf or 'default'}: expandable segments")
