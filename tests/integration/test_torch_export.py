"""The torch export (PyTorch's memory snapshot pickle, cli/fmt_torch.c): each
distinct frame and each stack's frame list written once and shared through
the pickle memo, what PyTorch's viewers mutate never shared, and PyTorch's
own torch.cuda._memory_viz reading it."""
import pickle
import sys

from run_tests import *

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
