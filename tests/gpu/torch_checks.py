"""PyTorch checks, one mode per process: the same script on a GPU
(tests/gpu/run.sh) and on the simulated GPU (run.sh --sim, and
tests/integration/test_torch.py in `make test`).

usage: torch_checks.py MODE FACTS.json       run MODE, write PyTorch's facts
       torch_checks.py check MODE FACTS.json DUMP_DIR [STDERR]
       torch_checks.py viz FACTS.json DUMP_DIR PICKLE OUT_DIR

Each mode runs a piece of PyTorch work (under vramtrace when the caller says
so) and writes what PyTorch itself reported to FACTS.json; on stdout it
prints only what does not depend on addresses, so that the output with and
without vramtrace can be compared byte for byte. `check` compares the facts
with vramtrace's dumps and prints one PASS or FAIL line per check; `viz`
reads vramtrace's torch export with PyTorch's own torch.cuda._memory_viz.
No expected number is written here: every one comes from PyTorch (the
caching allocator's segments from torch.cuda.memory._snapshot(),
memory_reserved(), memory_allocated(), the text of OutOfMemoryError).

modes: mlp (a small MLP trained with Adam; the exit dump against PyTorch's
       segments), train (one tensor kept per step until out of memory),
       expandable (the same, expandable_segments:True), async (the same,
       backend:cudaMallocAsync), nocache (the same,
       PYTORCH_NO_CUDA_MEMORY_CACHING=1), limit (VRAMTRACE_LIMIT below what
       the loop needs), overhead (steps/s), truth (a model with Adam, a
       `history` list kept per step, an OOM: the companion's categories
       against PyTorch's own tensors), frag (free blocks smaller than the
       request in reserved segments), asynctruth (an OOM under
       backend:cudaMallocAsync, as --tensors sets it: PyTorch's record of
       it), evalgraph (three steps, then an evaluation keeping its
       outputs with their graphs, then an OOM: growth per second, held
       by the graph of the list). truth, frag, asynctruth and evalgraph
       need the companion
       (python/vramtrace_torch/_boot on PYTHONPATH).
"""
import glob
import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from dumpview import fmt_bytes, load_dump  # noqa: E402

MiB = 1 << 20
GiB = 1 << 30
KEPT = 500 * MiB + 12345   # bytes of each kept tensor: PyTorch rounds its segment up to 2 MiB
SCRATCH = 64 * MiB         # a tensor made and dropped every step: cached, freed on the retry
OOM_MODES = ("train", "expandable", "async", "nocache")


def line_of(tag):
    """The line of this file that carries the comment `# LINE:tag`."""
    with open(__file__) as f:
        for i, line in enumerate(f, 1):
            if line.rstrip().endswith("# LINE:" + tag):
                return i
    raise KeyError(tag)


def segments(torch):
    """PyTorch's own view of its segments: {address: (total_size, all blocks inactive)}."""
    return {s["address"]: (s["total_size"], all(b["state"] == "inactive" for b in s["blocks"]))
            for s in torch.cuda.memory._snapshot()["segments"]}


def mode_mlp(facts, public):
    import torch
    import torch.nn.functional as F
    dev = torch.device("cuda")
    public["cuda_available"] = torch.cuda.is_available()
    torch.manual_seed(0)
    made = {}     # segment address -> the tag of the line during which PyTorch asked CUDA for it

    def note(tag):
        for a, (n, _) in segments(torch).items():
            made.setdefault(a, tag)

    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(),
                                torch.nn.Linear(4096, 10)).to(dev)  # LINE:model
    note("model")
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(512, 1024, device=dev)  # LINE:data
    note("data")
    y = torch.randint(0, 10, (512,), device=dev)  # LINE:labels
    note("labels")
    for step in range(3):
        opt.zero_grad(set_to_none=True)
        out = model(x)  # LINE:forward
        note("forward")
        loss = F.cross_entropy(out, y)  # LINE:loss
        note("loss")
        loss.backward()  # LINE:backward
        note("backward")
        opt.step()  # LINE:step
        note("step")
    torch.cuda.synchronize()
    segs = segments(torch)
    public.update(reserved=torch.cuda.memory_reserved(), allocated=torch.cuda.memory_allocated(),
                  segments=len(segs), steps=3)
    facts["segments"] = [[a, n, made[a]] for a, (n, _) in sorted(segs.items())]


HELD = []   # tensors that stay alive until the process exits (the exit dump sees them)


def grow_until_oom(facts, public):
    """Keep one KEPT tensor per step (and drop a SCRATCH one) until PyTorch
    raises its out-of-memory error: OutOfMemoryError from the caching
    allocator and cudaMallocAsync; without caching (nocache) its CUDA error
    check raises AcceleratorError "CUDA error: out of memory"."""
    import torch
    dev = torch.device("cuda")
    mode = facts["mode"]
    public["cuda_available"] = torch.cuda.is_available()
    weights = torch.ones(64 * MiB // 4, device=dev)  # LINE:weights
    kept, before = [], {}
    HELD.extend([weights, kept])

    def nbytes():
        return weights.untyped_storage().nbytes() + sum(t.untyped_storage().nbytes() for t in kept)

    try:
        while True:
            before = dict(reserved=torch.cuda.memory_reserved(), allocated=torch.cuda.memory_allocated(),
                          nbytes=nbytes())
            if mode == "train":
                before["cached"] = [[a, n] for a, (n, free) in sorted(segments(torch).items()) if free]
            kept.append(torch.empty(KEPT, dtype=torch.uint8, device=dev))  # LINE:keep
            if len(kept) == 1:
                facts["kept_allocated"] = torch.cuda.memory_allocated() - before["allocated"]
                facts["kept_nbytes"] = kept[0].untyped_storage().nbytes()
                if mode == "train":
                    facts["kept_segment"] = segments(torch)[kept[0].data_ptr()][0]
            scratch = torch.empty(SCRATCH // 4, device=dev)  # LINE:scratch
            scratch.fill_(1.0)
            kept[-1].fill_(1)
            del scratch
    except (torch.OutOfMemoryError, torch.AcceleratorError) as e:
        if not isinstance(e, torch.OutOfMemoryError) and "out of memory" not in str(e):
            raise
        free, total = torch.cuda.mem_get_info()
        public.update(message=str(e), error=type(e).__name__, kept=len(kept), reserved=torch.cuda.memory_reserved(),
                      allocated=torch.cuda.memory_allocated())
        facts.update(before=before, free_after=free, total=total, nbytes_end=nbytes())


def mode_limit(facts, public):
    import torch
    dev = torch.device("cuda")
    limit = int(os.environ["VRAMTRACE_LIMIT_BYTES"])
    held, predicted, failed = [], None, None
    for i in range(64):
        if predicted is None and torch.cuda.memory_reserved() + GiB > limit:
            predicted = i
        try:
            held.append(torch.empty(GiB // 4, device=dev))  # LINE:limit
        except torch.OutOfMemoryError as e:
            failed = i
            public["message"] = str(e)
            break
    public.update(predicted=predicted, failed=failed, limit=limit, reserved=torch.cuda.memory_reserved())


def mode_overhead(facts, public):
    import torch
    dev = torch.device("cuda")
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(2048, 2048) for _ in range(6)]).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(256, 2048, device=dev)
    if os.environ.get("RECORD_HISTORY") == "1":
        torch.cuda.memory._record_memory_history(max_entries=100000)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        # new tensors every step, as a real loop makes them
        return torch.empty(8 << 20, device=dev)

    for _ in range(20):
        step()
    torch.cuda.synchronize()
    n, t0 = 300, time.perf_counter()
    for _ in range(n):
        step()
    torch.cuda.synchronize()
    facts["steps_per_s"] = n / (time.perf_counter() - t0)


def storage_bytes(tensors):
    """Bytes of the distinct storages of tensors (a view counts once)."""
    seen = {}
    for t in tensors:
        st = t.untyped_storage()
        seen[st.data_ptr()] = st.nbytes()
    return sum(seen.values())


def mode_truth(facts, public):
    """Train a small MLP with Adam, keep one HISTORY_BYTES tensor per step in
    `history` until PyTorch raises out of memory; one graph (`graph`) stays
    alive with what it saved for backward."""
    import torch
    dev = torch.device("cuda")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 512)).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(256, 1024, device=dev)
    graph = model(x).sum()      # keeps the ReLU's output for backward
    history = []
    requests = []
    keep = torch.cuda.mem_get_info()[1] // 40 // MiB * MiB   # about 40 steps to the OOM on any device
    torch._C._cuda_attach_out_of_memory_observer(lambda d, a, t, f: requests.append(a))
    steps = 0
    try:
        while True:
            opt.zero_grad(set_to_none=False)
            loss = model(x).sum()
            loss.backward()
            opt.step()
            steps += 1
            del loss
            history.append(torch.empty(keep, dtype=torch.uint8, device=dev))  # LINE:history
    except torch.OutOfMemoryError as e:
        free, total = torch.cuda.mem_get_info()
        params = list(model.parameters())
        state = [v for st in opt.state.values() for v in st.values() if torch.is_tensor(v) and v.is_cuda]
        facts.update(allocated=torch.cuda.memory_allocated(), reserved=torch.cuda.memory_reserved(),
                     free=free, total=total, request=requests[-1] if requests else None, steps=steps,
                     history=len(history), kept_per_step=storage_bytes(history[:1]), categories={
                         "parameter": storage_bytes(params), "buffer": 0,
                         "gradient": storage_bytes([p.grad for p in params]),
                         "optimizer_state": storage_bytes(state),
                         "activation": storage_bytes([model[1](model[0](x[:1]))]) * x.shape[0],
                         "other": storage_bytes(history + [x, graph])})
        public.update(error=type(e).__name__, steps=steps)
    HELD.extend([model, opt, x, graph, history])


def mode_evalgraph(facts, public):
    """Three optimizer steps, then an evaluation that keeps its outputs
    (and so their graphs) in the local list `outputs`, then an
    out-of-memory error with nothing in flight; `KEPT` holds the list at
    exit."""
    import torch
    global KEPT
    dev = torch.device("cuda")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024),
                                torch.nn.ReLU(), torch.nn.Linear(1024, 16)).to(dev)
    opt = torch.optim.Adam(model.parameters())
    for _ in range(3):
        opt.zero_grad()
        model(torch.randn(4096, 1024, device=dev)).sum().backward()
        opt.step()

    def evaluate(batches):
        outputs = []
        before = torch.cuda.memory_allocated()
        for _ in range(batches):
            outputs.append(model(torch.randn(4096, 1024, device=dev)))  # LINE:evaluate
        # What the graphs saved: all evaluate() added but the outputs themselves.
        facts["activation"] = torch.cuda.memory_allocated() - before - storage_bytes(outputs)
        free, total = torch.cuda.mem_get_info()
        try:
            torch.empty(total - 64 * MiB, dtype=torch.uint8, device=dev)
        except torch.OutOfMemoryError as e:
            public.update(error=type(e).__name__, batches=len(outputs))
        return outputs

    KEPT = evaluate(20)
    facts["batches"] = len(KEPT)


def check_eval_graph(c, facts, d):
    """The evaluation's growth is said per second, after the last step,
    held by the graph of `outputs` at the OOM and of `KEPT` at exit."""
    g = (d.get("growing") or [{}])[0]
    span = g.get("last_ns", 0) - g.get("since_ns", 0)
    rise = g.get("end_bytes", 0) - g.get("first_bytes", 0)
    c.say("the growing site is the evaluation's line, said per second over its whole growth",
          (HERE, line_of("evaluate")) in py_lines(d, g.get("stack", 0)) and
          (g.get("unit"), g.get("units"), g.get("rise_bytes"), g.get("span_ns"), g.get("bytes_per_unit")) ==
          ("second", g.get("allocations"), rise, span, int(rise / (span / 1e9)) if span else None),
          str({k: g.get(k) for k in ("unit", "units", "rise_bytes", "span_ns", "bytes_per_unit")}))
    steps = d.get("steps") or [{}]
    c.say("it grew after the last of the 3 steps", d.get("steps_total") == 3 and
          g.get("since_ns", 0) > steps[-1].get("time_ns", 1 << 62), f"{d.get('steps_total')} steps")
    o = d["ooms"][-1]
    for where, rec, name in (("the OOM", torch_entry(o.get("torch")), "outputs"), ("exit", torch_entry(d.get("torch")), "KEPT")):
        acts = [x for x in (rec or {}).get("tensors", []) if x["category"] == "activation"]
        c.say(f"{where}: the activations are held by the graph of `{name}`, with PyTorch's bytes",
              (sorted({x["holder"] for x in acts}), (rec or {}).get("categories", {}).get("activation")) ==
              ([f"graph of {name}"], facts["activation"]),
              f"{sorted({x['holder'] for x in acts})}, {(rec or {}).get('categories', {}).get('activation')} vs "
              f"{facts['activation']}")
        c.say(f"{where}: the growth is held by the graph of `{name}`, with the dump's figures",
              rec is not None and (rec.get("growth") or {}).get("holder") == f"graph of {name}" and
              {k: (rec.get("growth") or {}).get(k) for k in ("stack", "unit", "units", "rise_bytes", "span_ns")} ==
              {k: g.get(k) for k in ("stack", "unit", "units", "rise_bytes", "span_ns")}, str(rec and rec.get("growth")))
    rate = (f"+{fmt_bytes(rise)} over {g.get('allocations')} allocations in {span / 1e9:.3f} s, "
            f"{fmt_bytes(g.get('bytes_per_unit') or 0)} per second, held by `graph of outputs`")
    found = [f["finding"] for f in o["findings"] if f["id"] == "growing_site"]
    c.say("the growing-site finding at the OOM says it per second, held by the graph of `outputs`",
          len(found) == 1 and found[0].endswith(f": {rate}; a leak suspect"), str(found)[:300])


def mode_frag(facts, public):
    """Fill the device with 6 MiB tensors (three to each 20 MiB segment of
    PyTorch's large pool), free the middle one of each three, then ask for
    8 MiB: reserved but unallocated memory is more than the request, and
    no free block is as large."""
    import torch
    dev = torch.device("cuda")
    requests, kept = [], []
    torch._C._cuda_attach_out_of_memory_observer(lambda d, a, t, f: requests.append(a))
    try:
        while True:
            kept.append(torch.empty(6 * MiB, dtype=torch.uint8, device=dev))  # LINE:fill
    except torch.OutOfMemoryError:
        pass
    for i in range(1, len(kept), 3):
        kept[i] = None
    try:
        big = torch.empty(8 * MiB, dtype=torch.uint8, device=dev)  # LINE:frag
        public["error"] = None
        del big
    except torch.OutOfMemoryError as e:
        snap = torch.cuda.memory._snapshot()
        facts.update(allocated=torch.cuda.memory_allocated(), reserved=torch.cuda.memory_reserved(),
                     request=requests[-1], largest_free=max(b["size"] for s in snap["segments"]
                                                            for b in s["blocks"] if b["state"] == "inactive"))
        public["error"] = type(e).__name__
    HELD.append(kept)


def mode_asynctruth(facts, public):
    """Under backend:cudaMallocAsync (what --tensors sets; it has no OOM
    observer): keep three 256 MiB tensors, then ask for more than the
    device holds. PyTorch's allocated and reserved bytes at the failure
    and the request are the facts."""
    import torch
    dev = torch.device("cuda")
    keep = [torch.empty(256 * MiB, dtype=torch.uint8, device=dev) for _ in range(3)]
    request = (torch.cuda.mem_get_info()[1] // GiB + 1) * GiB
    try:
        torch.empty(request, dtype=torch.uint8, device=dev)  # LINE:asynctoo
        public["error"] = None
    except torch.OutOfMemoryError as e:
        facts.update(allocated=torch.cuda.memory_allocated(), reserved=torch.cuda.memory_reserved(), request=request)
        public.update(error=type(e).__name__, backend=torch.cuda.get_allocator_backend())
    HELD.append(keep)


# --------------------------------------------------------------- checks

class Checker:
    def __init__(self, mode):
        self.mode, self.fails = mode, 0

    def say(self, what, ok, detail=""):
        print(f"{'PASS' if ok else 'FAIL'} {self.mode}: {what}" + (f" ({detail})" if detail else ""))
        self.fails += not ok


def load_dumps(dump_dir):
    ds = []
    for p in glob.glob(os.path.join(dump_dir, "*.json")):
        ds.append(load_dump(p))
    return sorted(ds, key=lambda d: d["time_ns"])


def py_lines(d, stack):
    """(file basename, line) of every Python frame of a stack, innermost first."""
    return [(os.path.basename(f["file"] or ""), f["line"]) for f in d["stacks"][stack]["frames"] if f.get("python")]


def via_caching_allocator(d, stack):
    """Whether a stack runs through libc10_cuda.so (PyTorch's CUDA allocator)."""
    return any(os.path.basename(f["module"] or "").startswith("libc10_cuda") for f in d["stacks"][stack]["frames"])


def autograd_thread(d, stack):
    """Whether a stack runs in torch::autograd::Engine::thread_main (backward's own thread)."""
    # Demangled in the dump ("torch::autograd::Engine::thread_main(...)"),
    # mangled where a report could not demangle.
    return any(n in (f["function"] or "") for f in d["stacks"][stack]["frames"]
               for n in ("autograd::Engine::thread_main", "8autograd6Engine11thread_main"))


def script_lines():
    """The lines of this file that carry a `# LINE:` tag."""
    with open(__file__) as f:
        return {i for i, line in enumerate(f, 1) if "# LINE:" in line and not line.lstrip().startswith("#")}


def site_frames(d, stack):
    """The call site's frame and the library frame it went through, as the dump records them."""
    s = d["stacks"][stack]
    fr = s["frames"]
    return (fr[s["site"]] if s.get("site", -1) >= 0 else None,
            fr[s["through"]] if s.get("through", -1) >= 0 else None)


def torch_frame(f):
    """Whether a frame is PyTorch's (a file under torch/, libtorch*, libc10*) or,
    on a GPU, one of the CUDA libraries PyTorch calls (cuBLAS, cuDNN, NCCL)."""
    return bool(f) and ("/torch/" in (f["file"] or "") or os.path.basename(f["module"] or "").startswith(
        ("libtorch", "libc10", "libcublas", "libcudnn", "libnccl")))


def holders_at_script_lines(c, d, holders):
    """Every holder's call site is a line of this script, with a PyTorch frame beside it."""
    lines, wrong = script_lines(), []
    for h in holders:
        site, through = site_frames(d, h["stack"])
        if not (site and site.get("python") and os.path.basename(site["file"] or "") == HERE and
                site["line"] in lines and torch_frame(through)):
            wrong.append(f"{h['bytes']} bytes: {site and (site['function'], site['file'], site['line'])} -> "
                         f"{through and (through['function'], through['file'] or through['module'])}")
    c.say("every holder's call site is a line of this script, with the PyTorch frame it went through",
          bool(holders) and not wrong, "; ".join(wrong) or f"{len(holders)} holders")


def borrowed_only(d, stack):
    """Whether a stack's Python frames are all marked borrowed (another thread's)."""
    py = [f for f in d["stacks"][stack]["frames"] if f.get("python")]
    return bool(py) and all(f.get("borrowed") for f in py)


WARNING = re.compile(r"(?:memory allocation|memory mapping) failed with OOM on device (\d+) while trying to "
                     r"(?:allocate|map) (\d+) bytes \(free: (\d+), total: (\d+)\)")


def pytorch_oom_warnings(err_path):
    """The (device, bytes, free, total) of each warning PyTorch's allocator
    printed for a failed CUDA call."""
    if not err_path or not os.path.exists(err_path):
        return None
    with open(err_path) as f:
        got = [tuple(int(x) for x in m.groups()) for m in WARNING.finditer(f.read())]
    # PyTorch before 2.14 prints no such warning (2.11 on an H100 printed
    # none): nothing to compare with, not a failure.
    return got or None


def device_live(d):
    return [a for a in d["live"] if a["kind"] not in ("host", "imported")]


def outside(d):
    """Live device memory that did not come through PyTorch's allocator."""
    return [a for a in device_live(d) if not via_caching_allocator(d, a["stack"])]


def describe(d, allocs):
    return ", ".join(f"{a['api']} {a['bytes']} at {py_lines(d, a['stack'])[:1] or 'native'}" for a in allocs)


HERE = os.path.basename(__file__)


def check(mode, facts_path, dump_dir, err_path=None):
    facts = json.load(open(facts_path))
    pub = facts["public"]
    c = Checker(mode)
    dumps = load_dumps(dump_dir)
    exits = [d for d in dumps if d["reason"] == "exit"]
    c.say("an exit dump was written", len(exits) == 1, f"{len(exits)} of {len(dumps)} dumps")
    if not exits:
        return 1
    d = exits[0]
    live = device_live(d)
    c.say("the dump's live bytes are the sum of its live allocations",
          d["totals"]["live_bytes"] == sum(a["bytes"] for a in live), f"{d['totals']['live_bytes']}")

    if mode == "mlp":
        out = outside(d)
        mine = {int(a["address"], 16): a for a in live if via_caching_allocator(d, a["stack"])}
        want = {a: n for a, n, _ in facts["segments"]}
        c.say("the allocations through the caching allocator are PyTorch's segments",
              {a: x["bytes"] for a, x in mine.items()} == want,
              f"{len(mine)} allocations, {len(want)} segments in torch.cuda.memory._snapshot()")
        c.say("live bytes = torch.cuda.memory_reserved() + what vramtrace saw outside it",
              d["totals"]["live_bytes"] == pub["reserved"] + sum(a["bytes"] for a in out),
              f"{d['totals']['live_bytes']} = {pub['reserved']} + {sum(a['bytes'] for a in out)}"
              + (f": {describe(d, out)}" if out else ""))
        # Every segment holds the line that ran, those made by backward on
        # autograd's own thread (no Python frames there) too: that thread
        # borrows the frames of the Python thread waiting in backward(),
        # marked "borrowed" in the dump.
        wrong, on_autograd = [], 0
        for a, n, tag in facts["segments"]:
            x = mine.get(a)
            if x is not None and (HERE, line_of(tag)) in py_lines(d, x["stack"]):
                if autograd_thread(d, x["stack"]):
                    on_autograd += tag == "backward" and borrowed_only(d, x["stack"])
                continue
            wrong.append(f"{n} bytes made at {tag} (line {line_of(tag)}): "
                         f"{py_lines(d, x['stack'])[:2] if x else 'not live'}")
        c.say("every segment's stack holds the line that made PyTorch ask for it",
              not wrong, "; ".join(wrong) or f"{len(facts['segments'])} segments, {on_autograd} on autograd's thread")
        c.say("backward asked for segments on autograd's thread, whose Python frames are all borrowed",
              on_autograd >= 1, f"{on_autograd}")
        holders_at_script_lines(c, d, d["holders"])

    elif mode in OOM_MODES:
        ooms = d["ooms"]
        want_error = "AcceleratorError" if mode == "nocache" else "OutOfMemoryError"
        c.say(f"PyTorch raised {want_error}", pub.get("error") == want_error,
              pub.get("message", "no error").splitlines()[0])
        c.say("OOMs recorded", len(ooms) >= 1, f"{len(ooms)}")
        if not ooms or "message" not in pub:
            return 1
        want_api = {"train": "cudaMalloc", "nocache": "cudaMalloc", "expandable": "cuMemCreate",
                    "async": "cudaMallocAsync"}[mode]
        c.say("the failing API", all(o["api"] == want_api for o in ooms), str([o["api"] for o in ooms]))
        first = ooms[0]
        if mode == "train":
            c.say("the request is the segment PyTorch asked CUDA for", first["requested_bytes"] == facts["kept_segment"],
                  f"{first['requested_bytes']} vs {facts['kept_segment']} in torch.cuda.memory._snapshot()")
        elif mode in ("async", "nocache"):
            c.say("the request is the tensor's storage nbytes", first["requested_bytes"] == facts["kept_nbytes"],
                  f"{first['requested_bytes']} vs {facts['kept_nbytes']}")
        b = facts["before"]
        if mode != "expandable":   # expandable segments map part of the request before the failure
            # Without caching PyTorch 2.14 keeps no statistics (memory_allocated() is 0):
            # the tensors' own sizes are the figure.
            key, name = {"train": ("reserved", "memory_reserved()"), "nocache": ("nbytes", "the tensors' storage nbytes"),
                         "async": ("nbytes", "the tensors' storage nbytes")}[mode]
            c.say(f"live bytes at the failure = {name} before the step", first["live_bytes"] == b[key],
                  f"{first['live_bytes']} vs {b[key]}")
        warned = pytorch_oom_warnings(err_path)
        if warned is not None and mode in ("train", "expandable"):
            got = [(o["device"], o["requested_bytes"], o["free_bytes"], o["total_bytes"]) for o in ooms]
            c.say("each failed call's request, free and total as PyTorch's own warning prints them", got == warned,
                  f"{got} vs {warned}")
        last = ooms[-1]
        c.say("device total = torch.cuda.mem_get_info", last["total_bytes"] == facts["total"],
              f"{last['total_bytes']} vs {facts['total']}")
        if mode == "train":
            c.say("two failed calls: the first and PyTorch's retry", len(ooms) == 2, f"{len(ooms)}")
            if len(ooms) >= 2:
                t0, t1 = ooms[-2]["time_ns"], ooms[-1]["time_ns"]
                freed = sorted([int(e[2], 16), e[3]] for e in d["events"] if e[1] == "free" and t0 < e[0] < t1)
                c.say("the frees between the two failures are PyTorch's cached segments", freed == b["cached"],
                      f"{freed} vs {b['cached']}")
                ids = [x["id"] for x in last["findings"]]
                c.say("the retry is stated (allocator_retry)", "allocator_retry" in ids, str(ids))
                c.say("the first failure is not a retry", "allocator_retry" not in [x["id"] for x in first["findings"]])
        where = py_lines(d, first["stack"])
        c.say("the OOM names the script's line", where[:1] == [(HERE, line_of("keep"))], str(where[:2]))
        holders = first.get("holders") or []
        holders_at_script_lines(c, d, holders)
        top = py_lines(d, holders[0]["stack"])[:1] if holders else None
        c.say("the largest holder is the script's line", top == [(HERE, line_of("keep"))], str(top))
        ids = [x["id"] for x in first["findings"]]
        c.say("findings name the growth or the dominant site",
              "growing_site" in ids or "one_site_dominates" in ids, str(ids))
        key, name = {"train": ("reserved", "memory_reserved()"), "expandable": ("reserved", "memory_reserved()"),
                     "nocache": (None, "the tensors' storage nbytes"), "async": (None, "the tensors' storage nbytes")}[mode]
        want = pub[key] if key else facts["nbytes_end"]
        c.say(f"live bytes at exit = {name} after the error", d["totals"]["live_bytes"] == want,
              f"{d['totals']['live_bytes']} vs {want}; memory_allocated() {pub['allocated']}")

    elif mode in ("truth", "frag"):
        check_torch_truth(c, mode, facts, d, dump_dir)

    elif mode == "evalgraph":
        check_eval_graph(c, facts, d)
    elif mode == "asynctruth":
        check_async_record(c, facts, d)

    elif mode == "limit":
        c.say("PyTorch raised out of memory under the budget", pub["failed"] is not None,
              pub.get("message", "").split("\n")[0])
        c.say("at the tensor its own reserved memory says", pub["failed"] == pub["predicted"],
              f"failed at tensor {pub['failed']}, predicted {pub['predicted']}")
        c.say("the OOMs are marked budget", bool(d["ooms"]) and all(o["budget"] for o in d["ooms"]),
              str([o["budget"] for o in d["ooms"]]))
        ids = [x["id"] for x in d["ooms"][0]["findings"]] if d["ooms"] else []
        c.say("the budget finding first", ids[:1] == ["budget"], str(ids))
    return 1 if c.fails else 0


def torch_entry(entries, device=0):
    return next((t for t in entries or [] if t["device"] == device), None)


def check_async_record(c, facts, d):
    """PyTorch's record of an OOM under cudaMallocAsync, which has no
    observer: taken once, as PyTorch made its OutOfMemoryError, for the
    failed cudaMallocAsync call (PyTorch may retry it: the last one)."""
    pub = facts["public"]
    c.say("PyTorch raised OutOfMemoryError under cudaMallocAsync",
          (pub.get("error"), pub.get("backend")) == ("OutOfMemoryError", "cudaMallocAsync"), str(pub))
    ooms = d["ooms"]
    last = ooms[-1] if ooms else {}
    c.say("the failed call is cudaMallocAsync of the request, at this script's line",
          (last.get("api"), last.get("requested_bytes")) == ("cudaMallocAsync", facts.get("request")) and
          py_lines(d, last["stack"])[:1] == [(HERE, line_of("asynctoo"))],
          f"{last.get('api')} {last.get('requested_bytes')} vs {facts.get('request')}")
    recorded = [i for i, o in enumerate(ooms) if o.get("torch")]
    c.say("one record of PyTorch's, on the last failed call", recorded == [len(ooms) - 1],
          f"{recorded} of {len(ooms)} OOMs")
    t = torch_entry(last.get("torch")) or {}
    got = (t.get("allocated_bytes"), t.get("reserved_bytes"), t.get("request_bytes"))
    c.say("allocated, reserved and the request are PyTorch's at the failure",
          got == (facts.get("allocated"), facts.get("reserved"), facts.get("request")),
          f"{got} vs {(facts.get('allocated'), facts.get('reserved'), facts.get('request'))}")


def check_torch_truth(c, mode, facts, d, dump_dir):
    """The companion's records in the dump against PyTorch's own figures."""
    ooms = [o for o in d["ooms"] if o.get("torch")]
    c.say("the last OOM carries PyTorch's record", bool(ooms) and ooms[-1] is d["ooms"][-1],
          f"{len(ooms)} of {len(d['ooms'])} OOMs")
    t = torch_entry(ooms[-1]["torch"]) if ooms else None
    if t is None:
        return
    c.say("allocated = torch.cuda.memory_allocated() at the OOM", t["allocated_bytes"] == facts["allocated"],
          f"{t['allocated_bytes']} vs {facts['allocated']}")
    c.say("reserved = torch.cuda.memory_reserved() at the OOM", t["reserved_bytes"] == facts["reserved"],
          f"{t['reserved_bytes']} vs {facts['reserved']}")
    c.say("the failed request is the one PyTorch's observer saw", t.get("request_bytes") == facts["request"],
          f"{t.get('request_bytes')} vs {facts['request']}")
    if mode == "frag":
        c.say("the largest free block is _snapshot()'s largest inactive block",
              t["largest_free_block_bytes"] == facts["largest_free"],
              f"{t['largest_free_block_bytes']} vs {facts['largest_free']}")
        c.say("fragmentation: reserved but unallocated holds the request, no free block does",
              t["reserved_bytes"] - t["allocated_bytes"] >= t["request_bytes"] > t["largest_free_block_bytes"],
              f"{t['reserved_bytes'] - t['allocated_bytes']} unallocated, request {t['request_bytes']}, "
              f"largest free {t['largest_free_block_bytes']}")
        want = (f"PyTorch's cache holds {fmt_bytes(facts['reserved'] - facts['allocated'])} reserved but unallocated, "
                f"more than the {fmt_bytes(facts['request'])} asked for, yet its largest free block is "
                f"{fmt_bytes(facts['largest_free'])}: the cache is fragmented")
        said = [f["finding"] for f in d["ooms"][-1]["findings"] if f["id"] == "fragmented_cache"]
        c.say("the fragmented_cache finding gives the largest free block and the request as _snapshot() shows them",
              said == [want], f"{said} vs {want!r}")
        return
    c.say("outside PyTorch = total - free - reserved", t["outside_bytes"] == facts["total"] - facts["free"] -
          facts["reserved"], f"{t['outside_bytes']} vs {facts['total'] - facts['free'] - facts['reserved']}")
    c.say("categories are PyTorch's tensors' bytes", t["categories"] == facts["categories"],
          f"{t['categories']} vs {facts['categories']}")
    c.say("steps are the optimizer's", t["steps"] == facts["steps"], f"{t['steps']} vs {facts['steps']}")
    c.say("the library's step boundaries are the optimizer's steps", d.get("steps_total") == facts["steps"],
          f"{d.get('steps_total')} vs {facts['steps']}")
    # Each step's `history` tensor is a segment of its own, its size rounded
    # up to PyTorch's 2 MiB for large blocks.
    seg = -(-facts["kept_per_step"] // (2 * MiB)) * 2 * MiB
    g = d.get("growing") or [{}]
    c.say("the growing site is said per step, at a `history` segment a step",
          (g[0].get("unit"), g[0].get("bytes_per_unit")) == ("step", seg),
          f"{g[0].get('unit')} {g[0].get('bytes_per_unit')} over {g[0].get('units')} vs {seg}")
    # The library's one figure of growth, and what holds it, named from
    # PyTorch's record of the OOM (at exit `history` is no name of the
    # program's any more: HELD keeps it).
    g0 = d["growing"][0] if d.get("growing") else {}
    # The rise and span the rate is of (per step: the steps' own), which a
    # steady staircase gains over its whole growth.
    span = g0.get("span_ns", 0) / 1e9
    c.say("the rate per step is of the whole growth",
          (g0.get("rise_bytes"), g0.get("span_ns")) ==
          (g0.get("end_bytes", 0) - g0.get("first_bytes", 0), g0.get("last_ns", 0) - g0.get("since_ns", 0)),
          f"{g0.get('rise_bytes')} in {g0.get('span_ns')} ns")
    rate = (f"+{fmt_bytes(g0.get('bytes_per_unit', 0))} per step over the last {g0.get('units')} steps "
            f"(+{fmt_bytes(g0.get('rise_bytes', 0))} in {span:.3f} s), held by `history`")
    found = [f["finding"] for f in d["ooms"][-1]["findings"] if f["id"] == "growing_site"]
    c.say("the growing-site finding at the OOM names `history` as the holder, at this script's line",
          len(found) == 1 and found[0].endswith(f": {rate}; a leak suspect") and
          py_lines(d, g0["stack"])[:1] == [(HERE, line_of("history"))], str(found)[:300])
    text = open(os.path.join(dump_dir, "report.txt")).read() if os.path.exists(os.path.join(dump_dir, "report.txt")) else ""
    grew = [x for x in text.splitlines() if f"growth: {rate} in " in x]
    g = t.get("growth") or {}
    c.say("PyTorch's record at the OOM says it with its holder, and so does the post-mortem",
          len(grew) == 1 and (g.get("holder"), g.get("bytes_per_unit"), g.get("units"), g.get("stack")) ==
          ("history", g0.get("bytes_per_unit"), g0.get("units"), g0.get("stack")), f"{grew}; {g}")
    hist = [x for x in t["tensors"] if x["holder"] == "history"]
    c.say("every tensor of `history` is named as held by it",
          sorted(x["name"] for x in hist) == sorted(f"history[{i}]" for i in range(facts["history"])),
          f"{len(hist)} of {facts['history']}")
    wrong = [x["name"] for x in hist if x["stack"] is None or
             py_lines(d, x["stack"])[:1] != [(HERE, line_of("history"))]]
    c.say("each tensor of `history` has the line that made its segment", not wrong and bool(hist), str(wrong[:5]))
    live = {a["stack"] for a in device_live(d)}
    c.say("each listed tensor's stack is that of a live segment", all(x["stack"] in live for x in t["tensors"]),
          str([x["name"] for x in t["tensors"] if x["stack"] not in live][:5]))
    top = torch_entry(d.get("torch"))
    c.say("the exit dump carries PyTorch's record", top is not None and top["categories"] == facts["categories"],
          str(top and top["categories"]))
    report = os.path.join(dump_dir, "report.txt")
    text = open(report).read() if os.path.exists(report) else ""
    c.say("the report states the breakdown", "vramtrace: PyTorch on device 0: " in text and
          "vramtrace:   by category: parameter " in text, report)


def viz(facts_path, dump_dir, pickle_path, out_dir):
    """Read vramtrace's torch export with PyTorch's own torch.cuda._memory_viz
    and compare its numbers with the dump's. The pages trace_plot and
    segment_plot write are not rendered: they import MemoryViz.js from
    cdn.jsdelivr.net (PyTorch's main branch; the wheel does not ship it),
    which imports d3 7 from the network; Debian ships d3 3.5 (libjs-d3) and
    5.16 (node-d3) and no MemoryViz.js."""
    import pickle
    from torch.cuda import _memory_viz as mv
    c = Checker("viz")
    d = [x for x in load_dumps(dump_dir) if x["reason"] == "exit"][-1]
    snap = pickle.load(open(pickle_path, "rb"))
    for name, fn in (("trace_plot", mv.trace_plot), ("segment_plot", mv.segment_plot)):
        try:
            html = fn(snap)
            with open(os.path.join(out_dir, name + ".html"), "w") as f:
                f.write(html)
            c.say(f"{name} writes its page", "add_local_files" in html, f"{len(html)} bytes")
        except Exception as e:  # the viewer's own failure is the finding
            c.say(f"{name} writes its page", False, repr(e))
    live = device_live(d)
    segs = snap["segments"]
    c.say("one segment per live allocation", len(segs) == len(live), f"{len(segs)} vs {len(live)}")
    c.say("segment sizes are the live allocations'", sorted(s["total_size"] for s in segs) ==
          sorted(a["bytes"] for a in live), f"{sum(s['total_size'] for s in segs)} vs {d['totals']['live_bytes']}")
    c.say("blocks fill their segments", all(sum(b["size"] for b in s["blocks"]) == s["total_size"] for s in segs))
    try:
        text = mv.segsum(snap)
        with open(os.path.join(out_dir, "segsum.txt"), "w") as f:
            f.write(text)
        want = [f"segments: {len(live)}", f"total_reserved: {mv.Bytes(d['totals']['live_bytes'])}"]
        got = [x for x in text.splitlines() if x.startswith(("segments: ", "total_reserved: "))]
        c.say("stats (segsum) totals are the dump's", got == want, f"{got} vs {want}")
    except Exception as e:
        c.say("stats (segsum) totals are the dump's", False, repr(e))
    try:
        text = mv.trace(snap)
        with open(os.path.join(out_dir, "trace.txt"), "w") as f:
            f.write(text)
        ev = d["events"]
        dev = [e for e in ev if e[6] not in ("host", "imported")] if ev and len(ev[0]) > 6 else ev
        n_alloc = sum(1 for e in dev if e[1] == "alloc")
        n_free = sum(1 for e in dev if e[1] == "free")
        lines = text.splitlines()
        got = (sum(" = cudaMalloc(" in x for x in lines), sum(x.startswith("cudaFree(") for x in lines))
        c.say("trace: one cudaMalloc per allocation event, one cudaFree per free", got == (n_alloc, n_free),
              f"{got} vs {(n_alloc, n_free)}")
    except Exception as e:
        c.say("trace: one cudaMalloc per allocation event, one cudaFree per free", False, repr(e))
    return 1 if c.fails else 0


def main():
    mode = sys.argv[1]
    if mode in ("check", "viz"):
        what = sys.argv[2] if mode == "check" else "viz"
        try:
            sys.exit(check(*sys.argv[2:6]) if mode == "check" else viz(*sys.argv[2:6]))
        except (OSError, KeyError, IndexError, ValueError, TypeError) as e:  # a missing file or field fails the checks
            print(f"FAIL {what}: {type(e).__name__}: {e}")
            sys.exit(1)
    facts, public = {"mode": mode}, {}
    fn = {"mlp": mode_mlp, "limit": mode_limit, "overhead": mode_overhead, "truth": mode_truth,
          "frag": mode_frag, "asynctruth": mode_asynctruth, "evalgraph": mode_evalgraph}.get(mode)
    if fn is None and mode in OOM_MODES:
        fn = grow_until_oom
    fn(facts, public)
    facts["public"] = public
    with open(sys.argv[2], "w") as f:
        json.dump(facts, f)
    # Only what does not depend on addresses or timing: the same with and without vramtrace.
    print(json.dumps(public, sort_keys=True))


if __name__ == "__main__":
    main()
