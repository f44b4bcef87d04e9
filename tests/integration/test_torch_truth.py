"""The PyTorch companion (python/vramtrace_torch/) with real PyTorch on the
simulated GPU: what PyTorch itself says (tests/gpu/torch_checks.py's truth
and frag modes write it) against the "torch" records of vramtrace's dumps,
run through `vramtrace run` (its sitecustomize); and processes the companion
must leave alone byte for byte. Skipped without build/torch-venv.
"""
import html
import pickle
import re

from run_tests import *  # noqa: F401,F403
from dumpview import fmt_bytes, v1_view

SIMRUN = os.path.join(ROOT, "tests", "simgpu", "run")
CHECKS = os.path.join(ROOT, "tests", "gpu", "torch_checks.py")
BOOT = os.path.join(ROOT, "python", "vramtrace_torch", "_boot")


def clean_env(**extra):
    e = {k: v for k, v in os.environ.items()
         if not k.startswith(("VRAMTRACE_", "SIMGPU_")) and k not in ("LD_PRELOAD", "LD_LIBRARY_PATH", "PYTHONPATH")}
    e.update(extra)
    return e


def in_dir(argv, work, env, timeout=300):
    """argv run in work; a run that PyTorch ended by std::terminate at exit
    (run_tests.TERMINATED_AT_EXIT) is run again, up to four times more (the
    files it left in work removed first: it writes no exit dump). Seen in 1
    and 2 of 12 runs of the healthy loop, with this build and the one
    before; a fresh-clone CI run once met it twice in a row."""
    def files():
        return {os.path.join(d, f) for d, _, fs in os.walk(work) for f in fs}
    before = files()
    p = subprocess.run(argv, env=env, cwd=work, capture_output=True, text=True, timeout=timeout)
    for _ in range(4):
        if p.returncode not in (-6, 134) or TERMINATED_AT_EXIT not in p.stderr:
            break
        for f in files() - before:
            os.unlink(f)
        p = subprocess.run(argv, env=env, cwd=work, capture_output=True, text=True, timeout=timeout)
    return p


def checked_mode(mode, n):
    """Run torch_checks.py MODE under `vramtrace run` on an 8 GiB simulated
    GPU and its check; every one of its n checks must pass."""
    work = tempfile.mkdtemp(prefix="vt-truth-")
    os.mkdir(os.path.join(work, "d"))
    try:
        env = clean_env(SIMGPU_CAPACITY="8G", SIMGPU_CONTEXT="300M")
        p = in_dir([SIMRUN, "--torch", "--", CLI, "run", "--out", os.path.join(work, "d", "d.%p.json"),
                    "--report", os.path.join(work, "d", "report.txt"), "--",
                    "python3", CHECKS, mode, os.path.join(work, "facts.json")], work, env)
        eq(p.returncode, 0, f"{mode} under vramtrace run: {p.stderr[-2000:]}")
        c = in_dir([sys.executable, CHECKS, "check", mode, os.path.join(work, "facts.json"),
                    os.path.join(work, "d")], work, clean_env())
        lines = c.stdout.splitlines()
        eq([x for x in lines if not x.startswith("PASS ")], [], f"{mode}: checks that did not pass")
        eq(len(lines), n, f"{mode}: number of checks")
        # Computed once, printed twice: the CLI's lines for the OOM are the
        # post-mortem's, from the same record.
        with open(os.path.join(work, "d", "report.txt")) as f:
            lib = [x[len("vramtrace: "):] for x in f.read().splitlines()]
        lib = lib[lib.index("inside PyTorch at this out-of-memory error:") + 1:]
        lib = lib[:next(i for i, x in enumerate(lib) if not x.startswith(("PyTorch on", "  ")))]
        dump = glob.glob(os.path.join(work, "d", "d.*.json"))
        r = in_dir([CLI, "report"] + dump, work, clean_env())
        cli = [x[2:] for x in r.stdout.splitlines() if x.startswith("  ")]
        start = cli.index(lib[0])
        eq(cli[start:start + len(lib)], lib, f"{mode}: vramtrace report's breakdown is the post-mortem's")
        ok(len(lib) >= 3, f"{mode}: {lib}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


@torch_test
def torch_truth_categories_at_oom():
    checked_mode("truth", 19)


@torch_test
def torch_truth_evaluation_graph_checks():
    # tests/gpu/torch_checks.py's evalgraph mode, as the GPU runs it.
    checked_mode("evalgraph", 9)


@torch_test
def torch_truth_fragmentation_measured():
    checked_mode("frag", 9)


def untimed(err):
    """stderr without the times PyTorch's warnings start with ("[W1201 08:04:57.440355900 ")."""
    return re.sub(r"(?m)^\[([WEI])[0-9]{4} [0-9:.]+ ", r"[\1 ", err)


def same_under_vramtrace_run(argv, sim, extra_env=None, want_dumps=0):
    """Run argv plainly and under `vramtrace run`: stdout, stderr and status
    must be the same; return the plain result."""
    work = tempfile.mkdtemp(prefix="vt-truth-")
    try:
        env = clean_env(**(extra_env or {}))
        pre = [SIMRUN, "--torch", "--"] if sim else []
        if not sim:
            env["PATH"] = os.path.join(TORCH_VENV, "bin") + ":" + env.get("PATH", "")
        a = in_dir(pre + argv, work, env)
        b = in_dir(pre + [CLI, "run", "--out", os.path.join(work, "d.%p.json"), "--report", "off", "--"] + argv,
                   work, env)
        eq((b.stdout, untimed(b.stderr), b.returncode), (a.stdout, untimed(a.stderr), a.returncode),
           f"{argv[:2]} under vramtrace run")
        eq(len(glob.glob(os.path.join(work, "d.*.json"))), want_dumps, "dumps written")
        return a
    finally:
        shutil.rmtree(work, ignore_errors=True)


CHECKPOINTED = r"""
import gc, torch, torch.nn as nn
from torch.utils.checkpoint import checkpoint
calls = [0]
class Block(nn.Module):
    def __init__(s):
        super().__init__()
        s.a, s.b = nn.Linear(4096, 16384), nn.Linear(16384, 4096)
    def forward(s, x):
        calls[0] += 1
        return x + s.b(torch.relu(s.a(x)))
blocks = nn.ModuleList([Block() for _ in range(4)]).cuda()
h = torch.randn(16384, 4096, device="cuda")
for blk in blocks:
    h = checkpoint(blk, h, use_reentrant=False)
loss = h.square().mean()
print("forward calls before backward", calls[0])
try:
    loss.backward()
except torch.OutOfMemoryError:
    gc.collect()   # the companion's walk moves the collector's passes (see below)
    print("out of memory in backward: forward calls", calls[0], "allocated", torch.cuda.memory_allocated())
"""


@torch_test
def torch_truth_checkpointed_backward_is_not_computed_again():
    """An out-of-memory error in a backward through activation checkpointing:
    the companion reads the graph's saved tensors without unpacking them.
    Unpacking runs checkpoint's unpack hook, which computes the block's
    forward again: 15 forward calls instead of 6, more memory asked for at
    the error, PyTorch's allocation warnings repeated. memory_allocated() is
    read after a collection: the walk holds the garbage collector off while
    it runs (bench/bench_companion.py), which moves its passes, and a
    block's input that only a reference cycle keeps was still allocated
    after the walk in about half the runs without one."""
    a = same_under_vramtrace_run(["python3", "-c", CHECKPOINTED], sim=True,
                                 extra_env={"SIMGPU_CAPACITY": "8G", "SIMGPU_CONTEXT": "300M"}, want_dumps=1)
    eq(a.stdout, "forward calls before backward 4\nout of memory in backward: forward calls 6 allocated 4094067712\n",
       "the program's own view")


RECOMPUTED = r"""
import torch, torch.nn as nn
from torch.utils.checkpoint import checkpoint
blk = nn.Sequential(nn.Linear(4096, 4096), nn.ReLU()).cuda()
x = torch.randn(8192, 4096, device="cuda", requires_grad=True)
y = checkpoint(blk, x, use_reentrant=False)
hog = [torch.empty(64 << 20, dtype=torch.uint8, device="cuda") for _ in range(5)]
try:
    y.sum().backward()   # backward
except torch.OutOfMemoryError:
    print("out of memory in backward")
"""


@torch_test
def torch_truth_checkpoint_recomputation_names_the_users_backward_line():
    """Checkpoint's recomputation runs on an autograd thread, entered in
    PyTorch's unpack hook: its Python frames are PyTorch's alone (a block of
    PyTorch's modules). The failure there is told under the line that called
    backward() (the frames of the thread that waits for it, borrowed,
    outermost), as the traceback PyTorch raises ends there; before, the
    failing call named `Linear.forward torch/nn/modules/linear.py` and no
    line of the program."""
    out, dumps, report = traced(RECOMPUTED, capacity="1G")
    eq(out, "out of memory in backward\n", "the run")
    line = RECOMPUTED.splitlines().index("    y.sum().backward()   # backward") + 1
    failing = re.findall(r"failing call: (.*)", report)
    eq(len(failing), 1, "one post-mortem")
    ok(re.fullmatch(rf"<module> /\S*/train\.py:{line} -> Linear\.forward torch/nn/modules/linear\.py:\d+", failing[0]),
       failing[0])
    o = dumps["exit"]["ooms"][-1]
    frames = v1_view(dumps["exit"])["stacks"][o["stack"]]["frames"]
    eq([(f["function"], f.get("borrowed", False)) for f in frames if (f.get("file") or "").endswith("train.py")],
       [("<module>", True)], "the program's one frame, borrowed from the thread that waits in backward()")


FRACTION_BACKWARD = r"""
import torch, torch.nn as nn
torch.cuda.set_per_process_memory_fraction(0.5)
model = nn.Sequential(nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, 4096)).cuda()
opt = torch.optim.Adam(model.parameters())
try:
    for bs in (1024, 8192):
        x = torch.randn(bs, 4096, device="cuda")
        loss = model(x).square().mean()
        loss.backward()   # backward
        opt.step(); opt.zero_grad()
except torch.OutOfMemoryError:
    print("out of memory in backward", bs)
"""


@torch_test
def torch_truth_memory_fraction_refused_in_backward_names_the_backward_line():
    """A memory fraction's refusal in backward: PyTorch refuses on the
    autograd thread, where no driver call fails, so the failure is the
    companion's record, made inside PyTorch's out-of-memory observer,
    whose Python frames (the companion's) are that thread's only ones. The
    failing call named the companion's own code (`_submit
    vramtrace_torch/__init__.py:61`, an outside check); a thread entered
    in the companion now borrows the waiting thread's frames as one
    entered in PyTorch does: the backward() line."""
    out, dumps, report = traced(FRACTION_BACKWARD, capacity="2G")
    eq(out, "out of memory in backward 8192\n", "the run")
    line = FRACTION_BACKWARD.splitlines().index("        loss.backward()   # backward") + 1
    failing = re.findall(r"failing call: (.*)", report)
    eq(len(failing), 1, "one post-mortem")
    ok(re.fullmatch(rf"<module> /\S*/train\.py:{line} -> _engine_run_backward torch/autograd/graph\.py:\d+",
                    failing[0]), failing[0])
    eq([x for x in report.splitlines() if "vramtrace_torch" in x], [], "no line names the companion")
    # The graph the program's `loss` holds is named by it, not by PyTorch's
    # own local in backward (`graph of t_outputs`, an outside check).
    ok("(held by graph of loss)" in report and "t_outputs" not in report, report[-2500:])


FIRST_STEP_TOO_BIG = r"""
import torch, torch.nn as nn
model = nn.Sequential(*[nn.Linear(4096, 4096) for _ in range(4)]).cuda()   # 4 x 64 MiB
opt = torch.optim.Adam(model.parameters())
x = torch.randn(512, 4096, device="cuda")
model(x).square().mean().backward()   # gradients
try:
    opt.step()   # Adam's state: two tensors a parameter
except torch.OutOfMemoryError:
    print("the first step does not fit")
"""


@torch_test
def torch_truth_a_first_step_too_big_names_no_holder_to_free():
    """Adam's first step does not fit: the finding says the model, its
    gradients and the optimizer's state are being made, not yet a leak;
    PyTorch's part of the same post-mortem said "growth: ... held by
    `gradient of model.0.weight`" and "next: free what `gradient of
    model.0.weight` keeps from one step to the next" (an outside check).
    Parameters, buffers, gradients and optimizer state are never a
    growth's holder."""
    out, dumps, report = traced(FIRST_STEP_TOO_BIG, capacity="960M")
    eq(out, "the first step does not fit\n", "the run")
    ok("before the program's second optimizer step: the model, its gradients and the optimizer's state being made, "
       "not yet a leak" in report, "the first step's finding")
    eq([x for x in report.splitlines() if "`gradient of" in x or "growth: " in x], [],
       "no holder to free, no growth line in PyTorch's part")
    eq([(o["torch"][0].get("growth") or {}).get("holder") for o in dumps["exit"]["ooms"] if o.get("torch")], [None],
       "the dump's record names no holder")


MODEL_DOMINATES = r"""
import torch, torch.nn as nn
model = nn.Sequential(nn.Linear(4096, 8192), nn.ReLU(), nn.Linear(8192, 4096)).cuda()   # 2 x 128 MiB
try:
    model(torch.randn(16384, 4096, device="cuda")).sum().backward()
except torch.OutOfMemoryError:
    print("out of memory")
"""


@torch_test
def torch_truth_a_model_that_dominates_is_not_told_to_use_smaller_batches():
    """The model's parameters hold most of the device: the advice was a
    smaller micro-batch, no_grad or checkpointing at `model.cuda()`'s line,
    none of which shrinks parameters (an outside check); now what shrinks a
    model. Nor is the model's load a growing site, "a leak suspect"."""
    out, dumps, report = traced(MODEL_DOMINATES, capacity="1G", env={"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync"})
    eq(out, "out of memory\n", "the run")
    o = dumps["exit"]["ooms"][0]
    f = {x["id"]: x for x in o["findings"]}
    ok("one_site_dominates" in f, f"the finding: {sorted(f)}")
    ok(re.fullmatch(r"the model's own parameters \(made or moved to the device at <module> /\S*/train\.py:3 -> "
                    r"Module\.cuda\.<locals>\.<lambda> torch/nn/modules/module\.py:\d+\): mixed precision \(bf16 "
                    r"weights\), a smaller model, or sharding or offloading \(FSDP, ZeRO, device_map\) across devices",
                    f["one_site_dominates"]["next"]), f["one_site_dominates"]["next"])
    eq([x["finding"] for x in o["findings"] if x["id"] == "growing_site" and "Module.cuda" in x["finding"]], [],
       "the model's load is no growing site")


FIRST_BATCH = r"""
import torch, torch.nn as nn, sys
if sys.argv[1] == "direct":   # built on the device
    model = nn.Sequential(*[nn.Linear(2048, 2048, device="cuda") for _ in range(12)])
else:
    model = nn.Sequential(*[nn.Linear(2048, 2048) for _ in range(12)]).cuda()
opt = torch.optim.Adam(model.parameters())
try:
    for step in range(10):
        loss = model(torch.randn(16384, 2048, device="cuda")).sum()   # forward
        loss.backward()
        opt.step(); opt.zero_grad()
except torch.OutOfMemoryError:
    print("out of memory")
"""


@torch_test
def torch_truth_a_first_batch_too_big_is_not_called_a_leak_alone():
    """A first batch too big fails in its forward, before any optimizer
    step: its activations rise as a leak does, and the finding called them
    "a leak suspect" with a leak's advice alone (an outside check). It now
    says both readings and both remedies. A model built on the device
    (nn.Linear(..., device="cuda")) is the model's parameters, as one moved
    there is: not a growing site, and their advice is not a smaller batch."""
    for how in ("cuda", "direct"):
        out, dumps, report = traced(FIRST_BATCH, how, capacity="1100M")
        eq(out, "out of memory\n", f"{how}: the run")
        line = FIRST_BATCH.splitlines().index('        loss = model(torch.randn(16384, 2048, device="cuda")).sum()   # forward') + 1
        o = dumps["exit"]["ooms"][0]
        g = [x for x in o["findings"] if x["id"] == "growing_site"]
        eq(len(g), 1, f"{how}: one growing site: {o['findings']}")
        ok(re.search(rf"train\.py:{line} -> .* grew through the run from 0 B to .*, before any optimizer step: the first "
                     r"batch's work if the program trains, a leak suspect if it loops without steps$", g[0]["finding"]),
           g[0]["finding"])
        ok(g[0]["next"].startswith("a first batch that does not fit: a smaller batch (with gradient accumulation), mixed "
                                   "precision or activation checkpointing; a loop without steps (evaluation): free what "),
           g[0]["next"])
        eq([x["finding"] for x in o["findings"] if "Linear.__init__" in x["finding"] or "Module.cuda" in x["finding"]
            if x["id"] == "growing_site"], [], f"{how}: the model is no growing site")
        dom = [x for x in o["findings"] if x["id"] == "one_site_dominates"]
        for x in dom:
            ok(x["next"].startswith("the model's own parameters") or "train.py:" + str(line) in x["finding"], x["next"])


ASYNC_TRIMMED = r"""
import torch
keep = torch.empty(300 << 20, dtype=torch.uint8, device="cuda")
t = torch.empty(100 << 20, dtype=torch.uint8, device="cuda"); del t
torch.cuda.synchronize()
try:
    x = torch.empty(400 << 20, dtype=torch.uint8, device="cuda")
except torch.OutOfMemoryError:
    print("out of memory")
"""


@torch_test
def torch_truth_async_pool_advice_is_not_empty_cache():
    """Under backend:cudaMallocAsync, PyTorch trims its pool and asks again
    before it raises: the stream-ordered pool's finding at the failed call
    advised torch.cuda.empty_cache(), whose work was done already (an
    outside check)."""
    out, dumps, report = traced(ASYNC_TRIMMED, capacity="800M", env={"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync"})
    eq(out, "out of memory\n", "the run")
    nexts = [x["next"] for o in dumps["exit"]["ooms"] for x in o["findings"] if x["id"] in ("stream_pool", "fragmented_cache")]
    ok(nexts, "a pool finding at the failed call")
    eq([n for n in nexts if not n.startswith(("not torch.cuda.empty_cache()", "PYTORCH_CUDA_ALLOC_CONF without"))], [],
       "no advice to empty the cache")


OTHER_STREAM = r"""
import torch
s2 = torch.cuda.Stream()
with torch.cuda.stream(s2):
    big = torch.empty(200 << 20, dtype=torch.uint8, device="cuda")
    del big
    small = torch.empty(50 << 20, dtype=torch.uint8, device="cuda")
try:
    x = torch.empty(120 << 20, dtype=torch.uint8, device="cuda")
except torch.OutOfMemoryError:
    print("out of memory")
"""


@torch_test
def torch_truth_a_free_block_of_another_stream_is_said_to_be_its():
    """A 150 MiB free block made on a side stream, a 120 MiB request on the
    default stream fails: PyTorch's part said the request "fits in it",
    which PyTorch had just refused (an outside check); it now says why."""
    out, dumps, report = traced(OTHER_STREAM, capacity="600M")
    eq(out, "out of memory\n", "the run")
    ok("150.00 MiB reserved but unallocated (largest free block 150.00 MiB; the failed request of 120.00 MiB fits in it "
       "by size, yet failed: a free block serves only the stream it was made on, so that one is another stream's)"
       in report, report[-3000:])


UNCAUGHT_IN_BACKWARD = r"""
import torch
model = torch.nn.Sequential(torch.nn.Linear(4096, 8192), torch.nn.ReLU(), torch.nn.Linear(8192, 8192), torch.nn.ReLU(),
                            torch.nn.Linear(8192, 10)).cuda()
x = torch.randn(32768, 4096, device="cuda")
logits = model(x)
loss = logits.logsumexp(1).mean()
loss.backward()
"""


@torch_test
def torch_truth_an_uncaught_failure_in_backward_names_the_programs_holder_at_exit():
    """backward() fails and the error ends the program: at exit the graph
    the program's `logits` holds was named after PyTorch's own local in
    backward ("graph of t_outputs"), the exception's traceback frames being
    read without leaving PyTorch's out (an outside check); at the failure
    it was named right."""
    out, dumps, report = traced(UNCAUGHT_IN_BACKWARD, capacity="4396M", status=1)
    d = dumps["exit"]
    for where, rec in (("the OOM", d["ooms"][-1]["torch"][0]), ("exit", d["torch"][0])):
        acts = [x for x in rec["tensors"] if x["category"] == "activation"]
        eq(sorted({x.get("holder") for x in acts}), ["graph of logits"], f"{where}: what holds the activations")
    ok("t_outputs" not in report, report[-3000:])


HALVING = r"""
import torch
model = torch.nn.Sequential(torch.nn.Linear(4096, 8192), torch.nn.ReLU(), torch.nn.Linear(8192, 4096)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
def train_step(bs):
    x = torch.randn(bs, 4096, device="cuda")
    h = model(x)
    h.float().pow(2).mean().backward()
    opt.step()
    opt.zero_grad()
bs = 16384
while True:
    try:
        train_step(bs)
        break
    except torch.OutOfMemoryError:
        bs //= 2
        torch.cuda.empty_cache()
print(bs)
"""


@torch_test
def torch_truth_one_line_through_two_library_calls_dominates():
    """A batch too big at `h = model(x)`: its memory lies in two call sites,
    the line through Linear.forward and through relu, 34.6% and 32.6%, so
    no site held half and the only finding was the CUDA context's 15% (an
    outside check); the line holds 67% and is told so, with the batch's
    advice."""
    out, dumps, report = traced(HALVING, capacity="2G")
    eq(out, "4096\n", "the batch that fitted")
    f = dumps["exit"]["ooms"][0]["findings"][0]
    eq(f["id"], "one_site_dominates", "the first finding")
    ok(re.fullmatch(r"train_step \S+/train\.py:7 holds 67% of the tracked memory \(1\.03 GiB in 3 allocations, "
                    r"through 2 call sites: Linear\.forward torch/nn/modules/linear\.py:\d+, "
                    r"relu torch/nn/functional\.py:\d+\)", f["finding"]), f["finding"])
    ok(f["next"].startswith("at train_step ") and "a smaller micro-batch" in f["next"], f["next"])


ATTRIBUTES = r"""
import torch
model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU()).cuda()

class Trainer:
    seen = []
    def __init__(self):
        self.history = []

class Recorder:
    def __init__(self):
        self.features = []
    def __call__(self, module, inp, out):
        self.features.append(out)

trainer, rec = Trainer(), Recorder()
model[1].register_forward_hook(rec)
for step in range(3):
    out = model(torch.randn(64, 256, device="cuda"))
    trainer.history.append(out.detach().clone())
    Trainer.seen.append(out.detach() * 2)
    out.sum().backward()
print("done")
"""


@torch_test
def torch_truth_tensors_kept_in_attributes_are_named_by_them():
    """Tensors an instance attribute, a class attribute and a forward
    hook's list keep: they were "a list[0]", held by nothing named, and the
    growth named no holder (an outside check); they are named through the
    attribute (`trainer.history[0]`, `Trainer.seen[2]`, `rec.features[1]`),
    which holds them."""
    out, dumps, report = traced(ATTRIBUTES)
    eq(out, "done\n", "the run")
    t = dumps["exit"]["torch"][0]
    got = sorted((x["name"], x.get("holder")) for x in t["tensors"] if x["category"] == "other")
    # The last step's output is the program's `out` too: named so, held by
    # the hook's list.
    eq(got, sorted([(f"{a}[{i}]", a) for a in ("Trainer.seen", "trainer.history") for i in range(3)] +
                   [("rec.features[0]", "rec.features"), ("rec.features[1]", "rec.features"), ("out", "rec.features")]),
       "the attributes' tensors")


RETRY_KEEPS_ERROR = r"""
import torch, torch.nn as nn
model = nn.Sequential(nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, 10)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
def step(bs):
    x = torch.randn(bs, 4096, device="cuda")
    y = torch.randint(0, 10, (bs,), device="cuda")
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
bs = 65536
last_error = None
while bs >= 1024:
    try:
        step(bs)
        break
    except torch.cuda.OutOfMemoryError as e:
        last_error = e          # kept for the log at the end
        print("failed at", bs, torch.cuda.memory_allocated())
        bs //= 2
print("done at", bs)
"""


@torch_test
def torch_truth_a_kept_exception_names_the_failed_attempt_it_keeps():
    """The retry loop that catches OutOfMemoryError, keeps it (`last_error
    = e`) and halves the batch: the traceback keeps the first attempt's
    frames, 3 GiB of its tensors, and the second attempt fails for them.
    They were "a dict['x']", "a dict['input']" and "graph of a dict" (a
    finished frame's locals), and at exit "a tuple[0]", with a smaller
    batch as the only advice (an outside check); they are named for the
    frame and held by the exception's traceback, and the failure says that
    a caught exception keeps a failed attempt alive, with PyTorch FAQ's
    remedy."""
    out, dumps, report = traced(RETRY_KEEPS_ERROR, capacity="4G")
    eq(out, "failed at 65536 3389719040\nfailed at 32768 705102336\ndone at 16384\n", "the run")
    d = dumps["exit"]
    short = lambda x: re.sub(r"\S+/train\.py", "train.py", x)
    kept = lambda t: [(x["bytes"] >> 20, x["shape"], x["category"], x["name"], short(x["holder"]))
                      for x in t["tensors"] if "traceback" in x["holder"]]
    at = "the traceback of last_error at step train.py:8"
    second = d["ooms"][-1]
    eq(second["requested_bytes"], 512 << 20, "the second attempt's request")
    eq(kept(second["torch"][0]), [(1024, "[65536, 4096]", "activation", "AddmmBackward0.mat1", "graph of " + at),
                                  (1024, "[65536, 4096]", "other", "input", at),
                                  (1024, "[65536, 4096]", "other", "x", at),
                                  (0, "[65536]", "other", "y", at)], "the first attempt's tensors at the second failure")
    f = [x for x in second["findings"] if x["id"] == "kept_exception"]
    eq([(x["finding"] if False else short(x["finding"]), x["next"]) for x in f],
       [("3.00 GiB of PyTorch's memory is still alive because a caught exception is kept: the traceback of "
         "`last_error` keeps the frames of the attempt that failed, with their tensors (4 listed; the largest: "
         "input, float32 [65536, 4096], at step train.py:8), no less than the 512.00 MiB asked for",
         "do not keep the exception or its traceback: keep str(e) (or `del e` once it is logged) and retry outside "
         "the except block; a kept exception's traceback keeps every frame it went through alive (PyTorch's FAQ: "
         "recover from out-of-memory errors outside the except clause)")], "the finding")
    eq(second["findings"][0]["id"], "kept_exception", "said first")
    # At exit the second attempt's, which the second exception keeps.
    eq(kept(d["torch"][0]), [(512, "[32768, 4096]", "other", "x", at), (0, "[32768]", "other", "y", at)],
       "the second attempt's tensors at exit")
    ok("a dict[" not in report and "a tuple[" not in report, report)


@torch_test
def torch_truth_a_kept_traceback_names_the_failed_attempt_it_keeps():
    """The same retry loop keeping the exception's traceback alone
    (`last_tb = e.__traceback__`): the traceback keeps the frames as the
    exception did, but its tensors were "a tuple[0]" and "(unnamed)", with
    no kept_exception finding and a smaller batch as the advice (the next
    outside check); they are held by the traceback of `last_tb`."""
    script = RETRY_KEEPS_ERROR.replace("last_error = e          # kept for the log at the end",
                                       "last_tb = e.__traceback__   # kept for the log at the end")
    out, dumps, report = traced(script, capacity="4G")
    eq(out, "failed at 65536 3389719040\nfailed at 32768 705102336\ndone at 16384\n", "the run")
    d = dumps["exit"]
    short = lambda x: re.sub(r"\S+/train\.py", "train.py", x)
    kept = lambda t: [(x["bytes"] >> 20, x["shape"], x["category"], x["name"], short(x["holder"]))
                      for x in t["tensors"] if "traceback" in x["holder"]]
    at = "the traceback of last_tb at step train.py:8"
    second = d["ooms"][-1]
    eq(kept(second["torch"][0]), [(1024, "[65536, 4096]", "activation", "AddmmBackward0.mat1", "graph of " + at),
                                  (1024, "[65536, 4096]", "other", "input", at),
                                  (1024, "[65536, 4096]", "other", "x", at),
                                  (0, "[65536]", "other", "y", at)], "the first attempt's tensors at the second failure")
    eq(second["findings"][0]["id"], "kept_exception", "said first")
    ok("the traceback of `last_tb` keeps the frames of the attempt that failed" in second["findings"][0]["finding"],
       second["findings"][0]["finding"])
    eq(kept(d["torch"][0]), [(512, "[32768, 4096]", "other", "x", at), (0, "[32768]", "other", "y", at)],
       "the second attempt's tensors at exit")


CLOSURE_AND_BUFFER = r"""
import sys, torch, torch.nn as nn
model = nn.Sequential(nn.Linear(2048, 2048), nn.ReLU(), nn.Linear(2048, 2048)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
class Stats(nn.Module):
    def __init__(s):
        super().__init__()
        s.register_buffer("hist", torch.zeros(0, 2048, device="cuda"))
    def forward(s, x):
        s.hist = torch.cat([s.hist, x.detach()[:256]])   # a buffer that grows 2 MiB a step
        return x
if sys.argv[1] == "buffer":
    model.append(Stats().cuda())
def make_logger():
    seen = []
    def log(t):
        seen.append(t.detach())   # the closure keeps every step's output
    return log
logger = make_logger()
for step in range(int(sys.argv[2])):
    out = model(torch.randn(1024, 2048, device="cuda"))
    loss = out.square().mean()
    if sys.argv[1] == "closure":
        logger(out)
    opt.zero_grad()
    loss.backward()
    opt.step()
print(torch.cuda.memory_allocated())
"""


@torch_test
def torch_truth_a_buffer_that_grows_every_step_holds_its_growth():
    """A registered buffer assigned a larger tensor every step (torch.cat
    onto it): the leak itself, but buffers were "made once and kept on
    purpose, never a growth's holder", so the growth was said held by
    `graph of x`, an 8 MiB activation freed every step (an outside check).
    The buffer holds it, with what it grew by per step (2 MiB: what
    PyTorch's allocated bytes grow by; the site's own rate counts the
    segments PyTorch's cache keeps for the earlier copies too)."""
    out, dumps, report = traced(CLOSURE_AND_BUFFER, "buffer", "40", capacity="4G")
    d = dumps["exit"]
    holder = "model.3.hist, a buffer grown from 0 B to 80.00 MiB in 40 steps (+2.00 MiB a step)"
    t = [(x["name"], x["bytes"], x["holder"]) for x in d["torch"][0]["tensors"] if x["category"] == "buffer"]
    eq(t, [("model.3.hist", 80 << 20, holder)], "the buffer")
    eq(d["torch"][0]["growth"]["holder"], holder, "the growth's holder")
    lines = [x for x in report.splitlines() if "per step" in x and "train.py:10 -> " in x]
    ok(lines and all(x.count(f"held by `{holder}`") == 1 for x in lines), report)
    ok("held by `graph of" not in report, report)


@torch_test
def torch_truth_a_list_a_closure_keeps_is_named_by_its_variable():
    """Each step's output appended to a list a closure keeps (`seen`, a
    free variable of `log`, which the global `logger` is): "a list[0]",
    held by nothing, and the growth named no holder, where a global dict
    is named (an outside check). Named `seen[i]`, held by `seen (closure
    of logger)`, which the growth says holds it."""
    out, dumps, report = traced(CLOSURE_AND_BUFFER, "closure", "40", capacity="4G")
    d = dumps["exit"]
    t = sorted((x["name"], x["holder"]) for x in d["torch"][0]["tensors"] if x["category"] == "other")
    # The last step's output is the program's `out` too (the list's item is
    # its .detach(), the same storage): named so.
    eq(t, sorted([(f"seen[{i}]", "seen (closure of logger)") for i in range(39)] + [("loss", ""), ("out", "")]),
       "the closure's tensors")
    eq(d["torch"][0]["growth"]["holder"], "seen (closure of logger)", "the growth's holder")


EVAL_KEPT = r"""
import sys, time, torch
model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 4096)).cuda()
if sys.argv[1] == "trained":
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        model(torch.randn(256, 1024, device="cuda")).mean().backward()
        opt.step()
        opt.zero_grad()
preds = []
try:
    with torch.no_grad():
        for i in range(10000):
            preds.append(model(torch.randn(1024, 1024, device="cuda")))
            time.sleep(0.002)  # the batch's wait for its kernels (the simulated GPU's take no time)
except torch.OutOfMemoryError:
    print("out of memory")
"""


@torch_test
def torch_truth_evaluation_under_no_grad_is_not_told_to_use_no_grad():
    """An evaluation loop under torch.no_grad() keeping every batch's
    output: the advice said torch.no_grad() and .detach(), which change
    nothing there (an outside check); with PyTorch's record showing no
    activations, it says to keep fewer or move them to the host. Each batch
    waits 2 ms, as for its kernels: without, the growth of a run that marks
    no step took a few milliseconds, no longer than a busy machine's pause
    before the failure."""
    out, dumps, report = traced(EVAL_KEPT, "trained", capacity="2348M")
    eq(out, "out of memory\n", "the run, after training")
    o = [o for o in dumps["exit"]["ooms"] if "torch" in o][-1]
    f = {x["id"]: x["next"] for x in o["findings"]}
    ok(f["growing_site"].endswith("keeps from one step to the next (results appended to a list: keep fewer, or "
                                  ".cpu() them); no graph is kept here, so .detach() and torch.no_grad() change nothing"),
       f["growing_site"])
    out, dumps, report = traced(EVAL_KEPT, "untrained", capacity="2348M")
    eq(out, "out of memory\n", "the run")
    o = [o for o in dumps["exit"]["ooms"] if "torch" in o][-1]
    eq(o["torch"][0]["categories"]["activation"], 0, "no activations in PyTorch's record")
    f = {x["id"]: x["next"] for x in o["findings"]}
    ok(f["growing_site"].endswith("keeps from one pass to the next: keep fewer of its results, or .cpu() them "
                                  "(.detach() and torch.no_grad() change nothing here)"), f["growing_site"])
    g = [x["finding"] for x in o["findings"] if x["id"] == "growing_site"][0]
    ok(g.endswith(", before any optimizer step, with no graph kept (no activations saved for backward): a loop that "
                  "keeps its results; a leak suspect"), g)
    ok(f["one_site_dominates"].endswith(": a smaller micro-batch, or keep fewer of its results (.cpu() moves them to the "
                                        "host); no activations are kept for backward here (torch.no_grad() is on, or "
                                        "nothing needs gradients), so no_grad() and checkpointing change nothing"),
       f["one_site_dominates"])


ACCUMULATED = r"""
import sys, time, torch
from torch.utils.checkpoint import checkpoint
ckpt = sys.argv[1] == "ckpt"
class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.f = torch.nn.Sequential(torch.nn.Linear(2048, 8192), torch.nn.GELU(), torch.nn.Linear(8192, 2048))
    def forward(self, x):
        return x + self.f(x)
blocks = torch.nn.ModuleList([Block() for _ in range(4)]).cuda()
total = 0
try:
    for micro in range(8):
        x = torch.randn(1024, 2048, device="cuda")
        for b in blocks:
            x = checkpoint(b, x, use_reentrant=False) if ckpt else b(x)
        total = total + x.pow(2).mean() / 8
        time.sleep(0.01)  # the micro-batch's wait for its kernels (the simulated GPU's take no time)
    total.backward()
except torch.OutOfMemoryError:
    print("out of memory")
"""


@torch_test
def torch_truth_a_loss_summed_over_micro_batches_is_told_to_call_backward_on_each():
    """Gradient accumulation with the losses of 8 micro-batches summed for
    one backward() (every micro-batch's graph kept), before any optimizer
    step: the advice was a smaller batch or checkpointing (an outside
    check); with PyTorch's record naming the graph of `total`, it says to
    call backward() on each; and with checkpointing in use it is not
    advised again. Each micro-batch waits 10 ms, as for its kernels: the
    simulated GPU's take no time, and the 3 ms its growth then took was
    shorter than a busy machine's pause before the failure (no growth
    found, once in CI)."""
    for mode, capacity, ckpt in (("plain", "3174M", "or activation checkpointing"),
                                 ("ckpt", "1500M", "(activation checkpointing is on already)")):
        out, dumps, report = traced(ACCUMULATED, mode, capacity=capacity)
        eq(out, "out of memory\n", f"{mode}: the run")
        o = [o for o in dumps["exit"]["ooms"] if "torch" in o][-1]
        f = {x["id"]: x["next"] for x in o["findings"]}
        ok("growing_site" in f, f"{mode}: {o['findings']}")
        ok(f["growing_site"].startswith(f"a first batch that does not fit: a smaller batch (with gradient "
                                        f"accumulation), mixed precision {ckpt}; if `total` sums the losses of "
                                        f"micro-batches for one backward(), it keeps every micro-batch's graph until "
                                        f"then: call backward() on each; "), f"{mode}: {f['growing_site']}")


FORWARD_TOO_BIG = r"""
import torch
model = torch.nn.Sequential(torch.nn.Linear(4096, 8192), torch.nn.ReLU(), torch.nn.Linear(8192, 8192)).cuda()
x = torch.randn(32768, 4096, device="cuda")
try:
    logits = model(x)
except torch.OutOfMemoryError:
    print("out of memory")
"""


@torch_test
def torch_truth_a_forward_in_flight_is_named_for_the_programs_call():
    """A forward pass too big: the layers' outputs between layers are held
    only by PyTorch's own frames, and were "a tuple[0]", the activations
    "graph of a tuple" (an outside check); they are named for the program's
    call they are in flight in."""
    out, dumps, report = traced(FORWARD_TOO_BIG, capacity="3000M")
    eq(out, "out of memory\n", "the run")
    rec = [o for o in dumps["exit"]["ooms"] if "torch" in o][-1]["torch"][0]
    call = [x["holder"] for x in rec["tensors"] if x["category"] == "other" and x["name"] == "input"]
    eq(len(call), 1, f"the layers' input: {rec['tensors']}")
    ok(re.fullmatch(r"the call at <module> \S+/train\.py:6", call[0]), call[0])
    ok("a tuple" not in report, report[-3000:])
    # A deeper model: the first layer's input, saved by its backward and
    # held by nothing else, is an activation of the graph in flight.
    out, dumps, report = traced(UNCAUGHT_IN_BACKWARD, capacity="4G", status=1)
    rec = [o for o in dumps["exit"]["ooms"] if "torch" in o][-1]["torch"][0]
    acts = sorted({x["holder"] for x in rec["tensors"] if x["category"] == "activation"})
    eq(len(acts), 1, f"what holds the activations: {acts}")
    ok(re.fullmatch(r"graph of the call at <module> \S+/train\.py:6", acts[0]), acts[0])
    ok("a tuple" not in report, report[-3000:])


BARE_PARAMETER = r"""
import torch
w = torch.nn.Parameter(torch.randn(1024, 1024, device="cuda"))
opt = torch.optim.Adam([w])
for step in range(3):
    (w * 2).sum().backward()
    opt.step()
print("done")
"""


@torch_test
def torch_truth_a_parameter_no_module_holds_is_a_parameter():
    """A bare nn.Parameter a variable and an optimizer keep, no module: it
    was in no category ("in no tensor Python reaches", 4 MiB; an outside
    check); it is a parameter named `w`, its gradient and Adam's state
    named after it."""
    out, dumps, report = traced(BARE_PARAMETER)
    eq(out, "done\n", "the run")
    t = dumps["exit"]["torch"][0]
    eq({k: v >> 20 for k, v in t["categories"].items()},
       {"parameter": 4, "buffer": 0, "gradient": 4, "optimizer_state": 8, "activation": 0, "other": 0}, "the categories")
    eq(sorted((x["name"], x["category"]) for x in t["tensors"]),
       [("w", "parameter"), ("w.exp_avg", "optimizer_state"), ("w.exp_avg_sq", "optimizer_state"),
        ("w.grad", "gradient")], "the tensors")
    ok("in no tensor Python reaches" not in report, report[-2000:])


OTHER_ALLOCATOR = r"""
import ctypes, torch
x = [torch.empty(256 << 20, dtype=torch.uint8, device="cuda") for _ in range(6)]
del x
keep = torch.empty(100 << 20, dtype=torch.uint8, device="cuda")
rt = ctypes.CDLL("libcudart.so.13")
p = ctypes.c_void_p()
print(rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(1 << 30)), torch.cuda.memory_reserved() >> 20,
      torch.cuda.memory_allocated() >> 20)
rt.cudaGetLastError()   # the failure's error, taken: PyTorch's next check would raise it
try:
    torch.empty(1800 << 20, dtype=torch.uint8, device="cuda")
except torch.OutOfMemoryError:
    print("out of memory")
"""


@torch_test
def torch_truth_another_allocators_failure_names_pytorchs_cache():
    """A ctypes cudaMalloc of 1 GiB fails while PyTorch's cache keeps 1.5
    GiB of segments its tensors let go of: the post-mortem said only that
    the tensors' line held 100% and advised a smaller micro-batch (an
    outside check); it now says first that PyTorch's cache holds them and
    gives them to no other allocator. PyTorch's own failure after it
    (PyTorch empties its cache before it raises) is not told so."""
    out, dumps, report = traced(OTHER_ALLOCATOR, capacity="2248M")
    eq(out, "2 1536 100\nout of memory\n", "the run")
    ooms = dumps["exit"]["ooms"]
    eq([o["requested_bytes"] for o in ooms], [1 << 30, 1800 << 20, 1800 << 20], "the failures")
    # Without PyTorch's figures of a step the finding comes after a
    # growing site, which the list's six allocations in one instant may or
    # may not make by the time windows: before any other.
    ids = [x["id"] for x in ooms[0]["findings"]]
    ok("torch_cache_holds" in ids and ids.index("torch_cache_holds") == ("growing_site" in ids), ids)
    first = ooms[0]["findings"][ids.index("torch_cache_holds")]
    eq(first["finding"], "PyTorch's caching allocator holds 1.50 GiB of device 0 in 6 segments (100% of the tracked memory), "
       "and this request did not come through it: PyTorch keeps the segments its tensors let go of for its own next "
       "tensors and gives them to no other allocator; how much of them no tensor uses is not known (PyTorch's own "
       "figures come at its optimizer steps)", "its text")
    ok(first["next"].startswith("torch.cuda.empty_cache() before <module> "), first["next"])
    ok("/train.py:8 gives back the segments no tensor uses" in first["next"], first["next"])
    eq([x["id"] for o in ooms[1:] for x in o["findings"] if x["id"] == "torch_cache_holds"], [],
       "PyTorch's own failures")
    ok(re.search(r"\n {0,}vramtrace:   [12]\. PyTorch's caching allocator holds 1\.50 GiB of device 0 in 6 segments",
                 report), report[:3000])


LEAK_THEN_OTHER = r"""
import ctypes, torch
w = torch.nn.Parameter(torch.zeros(1 << 20, device="cuda"))
opt = torch.optim.SGD([w], lr=0.1)
x = []
for step in range(6):
    x.append(torch.empty(1 << 30, dtype=torch.uint8, device="cuda"))
    (w * 2).sum().backward()
    opt.step()
    opt.zero_grad()
rt = ctypes.CDLL("libcudart.so.13")
p = ctypes.c_void_p()
print(rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(2 << 30)))
"""

FREED_THEN_OTHER = r"""
import ctypes, torch
w = torch.nn.Parameter(torch.zeros(1 << 20, device="cuda"))
opt = torch.optim.SGD([w], lr=0.1)
x = [torch.empty(256 << 20, dtype=torch.uint8, device="cuda") for _ in range(6)]
del x
(w * 2).sum().backward()
opt.step()
opt.zero_grad()
rt = ctypes.CDLL("libcudart.so.13")
p = ctypes.c_void_p()
print(rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(1 << 30)))
"""


@torch_test
def torch_truth_another_allocators_failure_asks_what_the_cache_has_free():
    """A ctypes cudaMalloc of 2 GiB fails while PyTorch's segments (6 GiB)
    are full of tensors a list keeps, 1 GiB a step: the first finding said
    PyTorch's cache holds them and advised torch.cuda.empty_cache(), which
    gives back a few MiB, the leak second (an outside check); with the
    companion's figures at the last optimizer step it is not said, the
    leak is first. Where the tensors let their segments go before that
    step, it is said first, with what no tensor used then."""
    out, dumps, report = traced(LEAK_THEN_OTHER, capacity="8G")
    eq(out, "2\n", "the run")
    ooms = dumps["exit"]["ooms"]
    eq(ooms[0]["requested_bytes"], 2 << 30, "the failure")
    ids = [x["id"] for x in ooms[0]["findings"]]
    eq(ids[0], "growing_site", f"the first finding: {ids}")
    ok("torch_cache_holds" not in ids, f"the cache's finding: {ids}")
    out, dumps, report = traced(FREED_THEN_OTHER, capacity="2248M")
    eq(out, "2\n", "the run")
    first = dumps["exit"]["ooms"][0]["findings"][0]
    eq(first["id"], "torch_cache_holds", "the first finding")
    ok(re.fullmatch(r"PyTorch's caching allocator holds 1\.5\d GiB of device 0 in \d+ segments \(100% of the tracked "
                    r"memory\), and this request did not come through it: PyTorch keeps the segments its tensors let "
                    r"go of for its own next tensors and gives them to no other allocator; 1\.5\d GiB of them held no "
                    r"tensor at its last optimizer step", first["finding"]), first["finding"])
    ok(first["next"].startswith("torch.cuda.empty_cache() before <module> "), first["next"])


LIST_OF_LISTS = r"""
import torch
kept = []
for step in range(3):
    kept.append([torch.empty(1 << 20, dtype=torch.uint8, device="cuda") for _ in range(2)])
try:
    torch.empty(2 << 30, dtype=torch.uint8, device="cuda")
except torch.OutOfMemoryError:
    print("out of memory")
"""


@torch_test
def torch_truth_tensors_in_a_list_of_lists_are_named_through_it():
    """Tensors in lists a named list keeps were "a list[0]", held by no
    name (an outside check): now `kept[1][0]`, held by `kept`."""
    out, dumps, report = traced(LIST_OF_LISTS, capacity="1G")
    eq(out, "out of memory\n", "the run")
    rows = sorted(set(re.findall(r"other  (kept\[\d\]\[\d\]) \(held by (\w+)\)", report)))
    eq(rows, [(f"kept[{i}][{j}]", "kept") for i in range(3) for j in range(2)], "names and holder")
    ok("a list[" not in report, "no unnamed list")


THREAD_LEAK_ENDED = r"""
import threading, time, torch
model = torch.nn.Linear(1024, 8192).cuda()
def train():
    feats = []
    try:
        while True:
            f = model(torch.randn(1024, 1024, device="cuda"))   # 32 MiB kept a pass
            feats.append(f)
            f.sum().backward()
            time.sleep(0.05)
    except torch.OutOfMemoryError:
        print("out of memory after", len(feats) > 10)
t = threading.Thread(target=train)
t.start()
t.join()
"""


@torch_test
def torch_truth_a_leak_let_go_is_held_by_no_tensor_at_exit():
    """A thread keeps 32 MiB a pass in a list until the device is full, then
    returns (the list let go): at the failure the growth is held by `feats`;
    at exit every tensor of the device is listed (fewer than the record
    lists at most) and the site's add up to far less than its rise, so no
    holder is named (it was "held by `gradient of weight`", a 32 MiB
    gradient that lay in one of the site's segments; from an outside
    check)."""
    out, dumps, report = traced(THREAD_LEAK_ENDED, capacity="1G")
    eq(out, "out of memory after True\n", "the run")
    grew = [l for l in report.splitlines() if " growth: " in l]
    ok(grew and all("held by `feats` in " in l for l in grew), f"at the failure, held by the list: {grew}")
    d = dumps["exit"]
    # Whether the site still counts as growing at exit depends on how long
    # the exit comes after its last allocation (on a loaded machine, 3.6 s
    # later it did not): either way, no holder.
    ok(len(d["growing"]) <= 1, f"at most the one site: {d['growing']}")
    eq([g["holder"] for g in d["growing"] if "holder" in g], [], "no holder at exit")
    exit_part = report[report.index("vramtrace: exit in pid"):]
    ok("held by `" not in exit_part, exit_part)


DICT_KEYS = r"""
import weakref
from vramtrace_torch import collect
class Handle: pass
h = Handle()
t = object()
for key in ("name", 3, ("a", 1), weakref.ref(h), h, (h, 1)):
    print(collect._name(("cache", 0, {key: t}), t), collect._name((None, 0, {key: t}), t))
"""


@test
def torch_companion_names_dict_entries_without_addresses():
    """A tensor a dict holds is named by its key where the key is plain data
    (a string, a number, a tuple of those), else by the key's type: a key's
    repr holds addresses that differ from run to run (checkpoint's entries
    were "a dict[<weakref at 0x7f..; to '_Handle' at 0x..>]"; from an
    outside check)."""
    p = subprocess.run([sys.executable, "-c", DICT_KEYS], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python")))
    eq(p.returncode, 0, p.stderr)
    eq(p.stdout.splitlines(), ["cache['name'] a dict['name']", "cache[3] a dict[3]", "cache[('a', 1)] a dict[('a', 1)]",
                               "cache[<weakref>] a dict[<weakref>]", "cache[<Handle>] a dict[<Handle>]",
                               "cache[<tuple>] a dict[<tuple>]"], "the names")


LEAF_GRADS = r"""
import torch
x = torch.randn(1024, 1024, device="cuda", requires_grad=True)   # 4 MiB each
w = torch.randn(1024, 1024, device="cuda", requires_grad=True)
(x @ w).sum().backward()
"""


@torch_test
def torch_truth_gradients_of_leaf_tensors_are_gradients():
    """Two leaf tensors made with requires_grad=True, not parameters: their
    gradients are in the gradient category, named for them (they fell in
    no category: 8 MiB PyTorch had allocated that no category counted;
    from an outside check)."""
    out, dumps, _ = traced(LEAF_GRADS)
    t = dumps["exit"]["torch"][0]
    eq((t["categories"]["gradient"], t["categories"]["other"]), (8 << 20, 8 << 20), "the categories")
    eq(sorted((x["name"], x["category"], x.get("holder")) for x in t["tensors"] if x["name"] in ("x.grad", "w.grad")),
       [("w.grad", "gradient", "gradient of w"), ("x.grad", "gradient", "gradient of x")], "the gradients")


NO_TORCH = r"""
import sys, json
print(json.dumps([p for p in sys.path if "vramtrace_torch" in p]), "vramtrace_torch" in sys.modules)
"""


@torch_test
def torch_truth_process_without_torch_untouched():
    a = same_under_vramtrace_run(["python3", "-c", NO_TORCH], sim=False)
    eq(a.stdout, "[] False\n", "no companion, nothing of its folder on sys.path")


NO_CUDA = r"""
import sys, torch
m = torch.nn.Linear(8, 4)
opt = torch.optim.Adam(m.parameters())
for _ in range(3):
    opt.zero_grad(); m(torch.ones(2, 8)).sum().backward(); opt.step()
print("cuda", torch.cuda.is_available(), "initialized", torch.cuda.is_initialized())
sys.exit(3)
"""


@torch_test
def torch_truth_torch_without_cuda_untouched():
    # No driver at all: PyTorch's CUDA build runs on the CPU.
    a = same_under_vramtrace_run(["python3", "-c", NO_CUDA], sim=False)
    eq((a.stdout, a.returncode), ("cuda False initialized False\n", 3), "the CPU run")


USERS_SITE = "import sys\nMARK = 'users'\nprint('user sitecustomize ran', file=sys.stderr)\n"
SEES_SITE = "import sitecustomize, torch\nprint(sitecustomize.MARK, torch.ones(2, device='cuda').shape[0])\n"


@torch_test
def torch_truth_users_sitecustomize_still_runs():
    site = tempfile.mkdtemp(prefix="vt-site-")
    try:
        with open(os.path.join(site, "sitecustomize.py"), "w") as f:
            f.write(USERS_SITE)
        a = same_under_vramtrace_run(["python3", "-c", SEES_SITE], sim=True, extra_env={"PYTHONPATH": site},
                                     want_dumps=1)
        eq(a.stdout, "users 2\n", "the program's own sitecustomize is the one it imports")
        ok(a.stderr.startswith("user sitecustomize ran\n"), a.stderr[:300])
    finally:
        shutil.rmtree(site, ignore_errors=True)


FAILING_SNAPSHOT = r"""
import torch
def broken(*a, **k):
    raise RuntimeError("snapshot broke")
torch.cuda.memory._snapshot = broken
try:
    torch.empty(1 << 40, dtype=torch.uint8, device="cuda")
except torch.OutOfMemoryError as e:
    print(type(e).__name__, str(e).splitlines()[0][:49])
"""


@torch_test
def torch_truth_companion_failure_stays_inside():
    # The companion's collection raises inside PyTorch's OOM observer and at
    # exit: the program sees PyTorch's error only, as without vramtrace.
    a = same_under_vramtrace_run(["python3", "-c", FAILING_SNAPSHOT], sim=True, want_dumps=1)
    eq(a.stdout, "OutOfMemoryError CUDA out of memory. Tried to allocate 1024.00 GiB\n", "PyTorch's own error")


SUBMIT = r"""
import ctypes, random, sys
lib = ctypes.CDLL(None)
f = lib.vt_torch_submit
f.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
good = (b"vramtrace-torch\t1\texit\t-1\t0\t2\n"
        b"D\t0\t1024\t2048\t512\t100\t4096\t1\t2\t3\t4\t5\t6\tconf\n"
        b"T\t0\t512\t1\t1\tfloat32\tparameter\t[128]\tm.weight\t\n"
        b"F\t0\t4096\t2048\n")
bad = [b"", b"\n", good[:-1], good.replace(b"exit", b"oops"), good.replace(b"\t1\t2\t3", b"\t1\t-2\t3"),
       good.replace(b"1024", b"99999999999999999999999"), good.replace(b"parameter", b"weights"),
       good.replace(b"T\t0", b"T\t1"), good + b"D\t0\t1\t1\t1\t-\t-\t0\t0\t0\t0\t0\t0\t\n",
       good.replace(b"m.weight", b"m.w\0eight"), good.replace(b"m.weight", b"x" * 201),
       good + b"".join(b"T\t0\t1\t1\t1\tf\tother\t[]\tn\t\n" for _ in range(64)),
       good.replace(b"exit\t-1", b"oom\t-1"), good.replace(b"exit\t-1", b"exit\t0"), good + b"X\n",
       good.replace(b"\tconf\n", b"\n"), good.replace(b"F\t0", b"F\t1"), good.replace(b"\t4096\t2048\n", b"\t4096\t0\n"),
       good + b"F\t0\t1\t2\t3\n", good + b"".join(b"F\t0\t%d\t1\n" % k for k in range(4096))]
print([f(x, len(x)) for x in bad].count(-1), len(bad), f(good, len(good)))
rng = random.Random(7)
for _ in range(3000):
    b = bytearray(good)
    for _ in range(rng.randint(1, 6)):
        b[rng.randrange(len(b))] = rng.randrange(256)
    b = bytes(b[:rng.randint(0, len(b))])
    f(b, len(b))
print("survived")
"""


@test
def torch_truth_records_refused_whole():
    # Any text but the grammar of report/torch.h is refused (-1), one
    # warning, no crash; a good record is kept.
    r = run([sys.executable, "-c", SUBMIT], sim=False)
    eq(r.out, "20 20 0\nsurvived\n", "malformed records refused, the good one kept")
    eq(r.err.count("vramtrace: warning:"), 1, "one warning: " + r.err[-500:])


BACKEND = r"""
import os, torch
x = torch.empty(1000, device="cuda")  # LINE:x
print(torch.cuda.get_allocator_backend(), os.environ.get("PYTORCH_CUDA_ALLOC_CONF"),
      os.environ.get("PYTORCH_ALLOC_CONF"), os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING"))
"""


@torch_test
def torch_truth_tensors_flag_switches_backend():
    # --tensors: cudaMallocAsync, the program's other settings kept, one
    # allocation for the tensor; --tensors=nocache: the old way.
    for flag, want, api in (("--tensors", "cudaMallocAsync backend:cudaMallocAsync,max_split_size_mb:128 "
                             "backend:cudaMallocAsync,max_split_size_mb:128 None\n", "cudaMallocAsync"),
                            ("--tensors=nocache", "native max_split_size_mb:128 None 1\n", "cudaMalloc")):
        work = tempfile.mkdtemp(prefix="vt-truth-")
        try:
            p = in_dir([SIMRUN, "--torch", "--", CLI, "run", flag, "--out", os.path.join(work, "d.%p.json"),
                        "--report", "off", "--", "python3", "-c", BACKEND], work,
                       clean_env(PYTORCH_CUDA_ALLOC_CONF="max_split_size_mb:128"))
            eq(p.stdout, want, f"{flag}: PyTorch's backend and settings ({p.stderr[-500:]})")
            d = [load_dump(x) for x in glob.glob(os.path.join(work, "d.*.json"))]
            eq(len(d), 1, f"{flag}: one dump")
            x = [a for a in d[0]["live"] if any(f.get("python") and f["line"] == 3 for f in frames(d[0], a["stack"]))]
            eq([(a["api"], a["bytes"]) for a in x], [(api, 4000)],
               f"{flag}: the tensor is its own allocation")
        finally:
            shutil.rmtree(work, ignore_errors=True)


ON_SIGNAL = r"""
import os, signal, time, torch
w = torch.empty(1 << 20, device="cuda")
kept = [torch.empty(1 << 18, device="cuda") for _ in range(3)]
os.kill(os.getpid(), signal.SIGUSR2)
time.sleep(3)   # the dump is written by vramtrace's watcher thread
print(torch.cuda.memory_allocated(), torch.cuda.memory_reserved())
"""


TWO_COLLECTIONS = r"""
import gc, json, torch
from vramtrace_torch import collect
gc.disable()   # no collector pass between the two
w = torch.ones(1024, 1024, device="cuda", requires_grad=True)
x = torch.randn(256, 1024, device="cuda")
graph = torch.relu(x @ w).sum()     # saves relu's output (an activation) for backward
def categories():
    return sorted([e[4], e[1]] for e in collect.tensors(torch))
first = categories()
print(json.dumps([first, categories()]))
"""


@torch_test
def torch_truth_second_collection_sees_what_the_first_did():
    # The companion's look at the program's frames once kept its own frame
    # in a cycle, and with it the caller's list of every tensor: until the
    # garbage collector's next pass, the next collection found that list
    # among the containers and took every unnamed tensor, activations too,
    # for one a list holds ("other"). Whether the exit record said so
    # depended on when the collector had last run.
    work = tempfile.mkdtemp(prefix="vt-truth-")
    try:
        p = in_dir([SIMRUN, "--torch", "--", "python3", "-c", TWO_COLLECTIONS], work,
                   clean_env(PYTHONPATH=os.path.join(ROOT, "python")))
        eq(p.returncode, 0, p.stderr[-2000:])
        first, second = json.loads(p.stdout)
        eq(first, [["activation", 1 << 20], ["other", 4], ["other", 1 << 20], ["other", 1 << 22]],
           "the first collection")
        eq(second, first, "the second collection, with no garbage collection between")
    finally:
        shutil.rmtree(work, ignore_errors=True)


TENSOR_LINES = r"""
import os, signal, time, torch
a = torch.empty(1 << 20, device="cuda")
b = torch.empty(1 << 19, device="cuda")
c = torch.empty(3 << 18, device="cuda")
os.kill(os.getpid(), signal.SIGUSR2)
time.sleep(3)
"""


@torch_test
def torch_truth_tensor_stacks_are_their_holders():
    # Each listed tensor's stack is that of the live allocation holding its
    # block, found for all of a device's tensors in one pass over the live
    # list: the same whether the list is in memory or spilled to a file
    # (VRAMTRACE_SPILL=0), and it names the tensor's own line (--tensors:
    # one allocation a tensor).
    for spill in ("16", "0"):
        work = tempfile.mkdtemp(prefix="vt-truth-")
        try:
            in_dir([SIMRUN, "--torch", "--", CLI, "run", "--tensors", "--out", os.path.join(work, "d.%p.json"),
                    "--report", "off", "--", "python3", "-c", TENSOR_LINES], work, clean_env(VRAMTRACE_SPILL=spill))
            d = next(y for y in (load_dump(x) for x in glob.glob(os.path.join(work, "d.*.json")))
                     if y["reason"] == "signal")
            t = d["torch"][0]
            lines = {}
            for x in t["tensors"]:
                at = int(x["block_address"], 16)
                holders = [a for a in d["live"] if a["device"] == 0 and
                           int(a["address"], 16) <= at < int(a["address"], 16) + a["bytes"]]
                eq(len(holders), 1, f"spill {spill}: one live allocation holds {x['name']}")
                eq(x["stack"], holders[0]["stack"], f"spill {spill}: the stack of {x['name']}")
                py = [f for f in frames(d, x["stack"]) if f.get("python")]
                lines[x["name"]] = py[0]["line"] if py else None
            eq(lines, {"a": 3, "b": 4, "c": 5}, f"spill {spill}: each tensor's line")
        finally:
            shutil.rmtree(work, ignore_errors=True)


@torch_test
def torch_truth_on_demand_dump_has_torch():
    # The dump signal asks the companion first: the on-demand dump's
    # top-level record is PyTorch's state then.
    work = tempfile.mkdtemp(prefix="vt-truth-")
    try:
        p = in_dir([SIMRUN, "--torch", "--", CLI, "run", "--out", os.path.join(work, "d.%p.json"),
                    "--report", "off", "--", "python3", "-c", ON_SIGNAL], work, clean_env())
        allocated, reserved = (int(x) for x in p.stdout.split())
        ds = {json.load(open(x))["reason"]: json.load(open(x)) for x in glob.glob(os.path.join(work, "d.*.json"))}
        eq(sorted(ds), ["exit", "signal"], "an on-demand dump and the exit dump")
        t = ds["signal"]["torch"][0]
        eq((t["allocated_bytes"], t["reserved_bytes"]), (allocated, reserved), "memory_allocated(), memory_reserved()")
        eq(sorted(x["name"] for x in t["tensors"]), ["kept[0]", "kept[1]", "kept[2]", "w"], "the tensors by name")
        eq(t["categories"]["other"], (1 << 22) + 3 * (1 << 20), "their bytes")
    finally:
        shutil.rmtree(work, ignore_errors=True)


@test
def torch_truth_report_prints_the_breakdown():
    # vramtrace report on a dump with torch records (a fuzz seed): the
    # breakdown at the OOM and at exit, exact; a control character in a
    # name is shown, not sent.
    p = subprocess.run([CLI, "report", os.path.join(ROOT, "tests", "fuzz", "seeds", "torch.json")],
                       capture_output=True, text=True)
    eq(p.returncode, 0, p.stderr)
    block = ["PyTorch on device 0: 3.00 MiB allocated by PyTorch, 1.00 MiB reserved but unallocated (largest free "
             "block 512.00 KiB{}), 300.00 MiB outside PyTorch; 7 optimizer steps",
             "  by category: parameter 1.00 MiB, buffer 0 B, gradient 1.00 MiB, optimizer_state 0 B, activation 512 B, "
             "other 512.00 KiB; in no tensor Python reaches 511.50 KiB (library workspaces such as cuBLAS's, "
             "autograd's buffers in flight, tensors only C++ holds)",
             "  growth: +1.00 MiB per step over the last 6 steps (+6.00 MiB in 0.600 s), held by `history\\x1b[31m` in "
             "steady_state tests/progs/t_phases.c:20",
             "     next: free what `history\\x1b[31m` keeps from one step to the next (its tensors lie in segments "
             "PyTorch's cache made at that line, which need not be where they were made: `vramtrace run --tensors` "
             "records each tensor's own line)",
             "  largest tensors:",
             "      1.00 MiB  float32 [512, 512]  parameter  model.0.weight  warmup_buffer tests/progs/t_phases.c:14",
             "    512.00 KiB  uint8 [1024]  other  history[0]\\x1b[31m (held by history)",
             "  (a tensor's line is where PyTorch's cache made the segment it lies in, which later tensors reuse; "
             "`vramtrace run --tensors` records each tensor's own line)"]
    lines = p.stdout.splitlines()
    oom = ["  " + x for x in block]
    oom[0] = oom[0].format("; the failed request of 14.00 MiB does not fit in it")
    i = lines.index(oom[0])
    eq(lines[i:i + len(oom)], oom, "the OOM's breakdown")
    top = list(block)
    top[0] = top[0].format("")
    i = lines.index(top[0])
    eq(lines[i:i + len(top)], top, "the exit breakdown")


def traced(script, *args, flags=(), env=None, capacity="8G", status=0):
    """Run the Python script (text) under `vramtrace run` on a simulated GPU
    of `capacity`, which exits with `status`; return (its stdout, its dumps
    by reason, the report)."""
    work = tempfile.mkdtemp(prefix="vt-truth-")
    try:
        with open(os.path.join(work, "train.py"), "w") as f:
            f.write(script)
        p = in_dir([SIMRUN, "--torch", "--", CLI, "run", *flags, "--out", os.path.join(work, "d.%p.json"),
                    "--report", os.path.join(work, "report.txt"), "--", "python3", "train.py", *args], work,
                   clean_env(SIMGPU_CAPACITY=capacity, SIMGPU_CONTEXT="300M", **(env or {})))
        eq(p.returncode, status, f"train.py under vramtrace run: {p.stderr[-2000:]}")
        dumps = {}
        for x in glob.glob(os.path.join(work, "d.*.json")):
            d = json.load(open(x))
            dumps[d["reason"]] = d
        report = open(os.path.join(work, "report.txt")).read() if os.path.exists(os.path.join(work, "report.txt")) else ""
        return p.stdout, dumps, report
    finally:
        shutil.rmtree(work, ignore_errors=True)


DELETED_AFTER_OOM = r"""
import torch
MiB = 1 << 20
def attempt(n):
    return torch.empty(n, dtype=torch.uint8, device="cuda")
def train():
    a = torch.empty(100 * MiB, dtype=torch.uint8, device="cuda")
    x = torch.empty(200 * MiB, dtype=torch.uint8, device="cuda")
    try:
        attempt(100000 * MiB)
    except torch.OutOfMemoryError:
        pass
    del a
    x = torch.empty(1 * MiB, dtype=torch.uint8, device="cuda")
    print(torch.cuda.memory_allocated() // MiB)
def held(keep):
    d = locals()
    try:
        attempt(100000 * MiB)
    except torch.OutOfMemoryError:
        pass
    return "keep" in d
def caller():
    mine = 5
    d = locals()
    print(held(1), "mine" in d)
train()
caller()
"""


@torch_test
def torch_truth_what_a_function_deletes_after_a_caught_oom_is_freed():
    """The companion read the running functions' locals for names at a
    caught OutOfMemoryError; before Python 3.13 that fills a dict the frame
    keeps, which held what the function then deleted (`del a`) or bound
    again (`x`, as a retry with a smaller batch does): 300 MiB the program
    had let go stayed allocated under vramtrace and not without it (an
    outside check). The dicts are emptied once the record is made: 1 MiB
    is left, as without vramtrace, and the failure's record still names
    both tensors by the function's locals. A dict the program keeps from
    locals() itself is left whole (emptying it emptied the program's
    dict, and its callers': the next outside check)."""
    out, dumps, report = traced(DELETED_AFTER_OOM, capacity="2G")
    eq(out, "1\nTrue True\n", "MiB allocated after the del and the new x, as without vramtrace; the program's own "
       "locals() dicts, its caller's too, whole")
    o = [o for o in dumps["exit"]["ooms"] if "torch" in o][0]
    got = sorted((x["name"], x["bytes"]) for x in o["torch"][0]["tensors"])
    eq(got, [("a", 100 << 20), ("x", 200 << 20)], "the failure's tensors, named by train's locals")


FRACTION = r"""
import torch
torch.cuda.set_per_process_memory_fraction(0.5)
kept = []
try:
    while True:
        kept.append(torch.empty(512 << 20, dtype=torch.uint8, device="cuda"))
except torch.OutOfMemoryError as e:
    print(len(kept), "4.00 GiB allowed" in str(e))
"""


REFUSALS = r"""
import torch
torch.cuda.set_per_process_memory_fraction(0.3)
for g in (8, 4, 2, 1):
    try:
        torch.empty(g << 30, dtype=torch.float32, device="cuda")
    except torch.OutOfMemoryError:
        print(g, "failed")
"""


@torch_test
def torch_truth_memory_fraction_is_named_as_the_limit():
    """A failure of PyTorch's per-process memory fraction: the fraction is
    named, with what it allows (PyTorch's "4.00 GiB allowed"), and the
    device's free memory is not called fragmented, in the post-mortem too
    (written once PyTorch's record, which made the failure, came)."""
    out, dumps, report = traced(FRACTION)
    eq(out, "8 True\n", "eight 512 MiB tensors, then PyTorch's refusal")
    text = ("PyTorch's per-process memory fraction (0.5) allows 4.00 GiB of the device's 8.00 GiB: 4.00 GiB reserved "
            "and the 512.00 MiB asked would pass it")
    # Written once the record came: in the post-mortem's own findings, the
    # first (a limit, as the budget is), before "holds 100%".
    ok(f"vramtrace:   1. {text}\nvramtrace:      next: raise torch.cuda.set_per_process_memory_fraction, or lower "
       "what the holders keep\n" in report, "the post-mortem's findings")
    eq((report.count("out of memory in pid"), report.count("inside PyTorch at this out-of-memory error:"),
        "fragmented" in report, "what PyTorch's record adds" in report), (1, 1, False, False),
       "one post-mortem, with PyTorch's part, no fragmentation said")
    o = dumps["exit"]["ooms"][0]
    eq([(f["id"], f["finding"]) for f in o["findings"] if f["id"] in ("memory_fraction", "fragmentation")],
       [("memory_fraction", text)], "the limit named, the free memory not called fragmented")
    # Refusals one after another, no allocation between: each its own
    # failure (each took the one before as its own, every other dropped).
    out, dumps, report = traced(REFUSALS)
    eq(out, "8 failed\n4 failed\n2 failed\n1 failed\n", "four refusals")
    eq([(o["api"], o["requested_bytes"] >> 30) for o in dumps["exit"]["ooms"]], [("PyTorch", g) for g in (32, 16, 8, 4)],
       "four failures, each its request")
    # Under cudaMallocAsync (no observer: the error's message says what was
    # asked), the same; before, one failure of 0 bytes called fragmentation.
    out, dumps, report = traced(REFUSALS, env={"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync"})
    eq(out, "8 failed\n4 failed\n2 failed\n1 failed\n", "four refusals under cudaMallocAsync")
    ooms = dumps["exit"]["ooms"]
    eq([(o["api"], o["requested_bytes"] >> 30) for o in ooms], [("PyTorch", g) for g in (32, 16, 8, 4)],
       "four failures, each its request, under cudaMallocAsync")
    eq([[f["id"] for f in o["findings"]][0] for o in ooms], ["memory_fraction"] * 4, "each one's limit named first")
    # A fraction of 0: PyTorch refuses the first tensor, the process's
    # first touch of a GPU (no allocation made: nothing was written).
    out, dumps, report = traced(FRACTION.replace("(0.5)", "(0.0)"))
    eq(out, "0 False\n", "no tensor, then PyTorch's refusal")
    eq((report.count("out of memory in pid"), sorted(dumps), dumps["exit"]["totals"]["oom_count"]), (1, ["exit"], 1),
       "a post-mortem, an exit report and the dump")
    eq([f["finding"] for f in dumps["exit"]["ooms"][0]["findings"]],
       ["PyTorch's per-process memory fraction (0) allows 0 B of the device's 8.00 GiB: 0 B reserved and the 512.00 "
        "MiB asked would pass it"], "the finding")


# Under cudaMallocAsync with a fraction: _foreach_sqrt's fifth output is
# refused (4.00 GiB allocated + 256 MiB > 4.00 GiB), and C++ frees the four
# it made before the error reaches Python.
ASYNC_FRACTION_UNWOUND = r"""
import torch
torch.cuda.set_per_process_memory_fraction(0.5)
L = [torch.ones(64 << 20, device="cuda") for _ in range(8)]
filler = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
try:
    out = torch._foreach_sqrt(L)
except torch.OutOfMemoryError as e:
    print("Currently allocated     : 4.00 GiB" in str(e), torch.cuda.memory_allocated() >> 20)
"""

# Under cudaMallocAsync with a fraction: 3.00 GiB allocated, 512 MiB more
# kept unused in the pool, then 1.50 GiB asked (3.00 + 1.50 > 4.00).
ASYNC_FRACTION_ALLOCATED = r"""
import torch
torch.cuda.set_per_process_memory_fraction(0.5)
a = [torch.empty(512 << 20, dtype=torch.uint8, device="cuda") for _ in range(7)]
del a[0], a[0]
b = torch.empty(512 << 20, dtype=torch.uint8, device="cuda")
try:
    c = torch.empty(1536 << 20, dtype=torch.uint8, device="cuda")
except torch.OutOfMemoryError as e:
    print(torch.cuda.memory_allocated() >> 20, torch.cuda.memory_reserved() >> 20)
"""


@torch_test
def torch_truth_async_fraction_refusal_is_told_as_pytorch_counts_it():
    """Under backend:cudaMallocAsync a memory fraction's refusal (no CUDA
    call failed) reaches vramtrace only as PyTorch's error reaches Python,
    after the failing operation freed its outputs: the post-mortem says
    its figures are of that moment and gives PyTorch's own figure of the
    refusal; the fraction is reasoned on allocated bytes, as that backend
    counts them; no stream-pool or fragmented-pool finding (before: "3.00
    GiB live at the failure" against PyTorch's 4.00 GiB, the pool's 1.00
    GiB "unused" called fragmented, and cudaMemPoolTrimTo advised)."""
    env = {"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync"}
    out, dumps, report = traced(ASYNC_FRACTION_UNWOUND, env=env)
    eq(out, "True 3072\n", "PyTorch refused with 4.00 GiB allocated; 3 GiB once the four outputs were freed")
    ok("vramtrace:   tracked on device 0: 3.00 GiB live in 9 allocations when PyTorch raised the error; peak "
       "4.00 GiB at " in report, "the tracked line says its moment")
    said = ("PyTorch had 4.00 GiB allocated when it refused (its error says so); vramtrace learnt of the refusal only "
            "as the error reached Python, once the failing operation had freed any outputs it had made: the figures "
            "above are of that later moment")
    eq(report.count("vramtrace:   " + said + "\n"), 1, "PyTorch's figure of the refusal, in the post-mortem")
    eq(report.count("vramtrace: inside PyTorch as this out-of-memory error reached Python (4.00 GiB allocated when "
                    "it refused, as its error says):\n"), 1, "PyTorch's part says when it was taken")
    (o,) = dumps["exit"]["ooms"]
    eq((o["api"], o["requested_bytes"], o["live_bytes"], o["raised_allocated_bytes"]),
       ("PyTorch", 256 << 20, 3 << 30, 4 << 30), "the failure, its tracked bytes and PyTorch's")
    eq([f["id"] for f in o["findings"]], ["memory_fraction", "one_site_dominates"], "only what applies to a refusal")
    eq(o["findings"][0]["finding"], "PyTorch's per-process memory fraction (0.5) allows 4.00 GiB of the device's "
       "8.00 GiB: its cudaMallocAsync backend counts the bytes allocated to tensors, about 4.00 GiB when it refused, "
       "and about 256.00 MiB asked would pass it by 250.87 MiB to 261.13 MiB (PyTorch's error gives its figures to two "
       "decimals)", "the fraction on PyTorch's figure of the refusal")
    eq(("stream-ordered memory pools keep" in report, "fragmented" in report, "cudaMemPoolTrimTo" in report),
       (False, False, False), "no pool finding")
    # The CLI's report of the dump says the same.
    work = tempfile.mkdtemp(prefix="vt-truth-")
    try:
        path = os.path.join(work, "d.json")
        with open(path, "w") as f:
            json.dump(dumps["exit"], f)
        p = subprocess.run([CLI, "report", path], capture_output=True, text=True, timeout=60)
        eq(p.returncode, 0, "vramtrace report: " + p.stderr)
        eq(p.stdout.count("  tracked on device 0: 3.00 GiB live in 9 allocations when PyTorch raised the error;"), 1,
           "the CLI's tracked line")
        eq(p.stdout.count("  " + said + "\n"), 1, "the CLI's line of PyTorch's figure")
        p = subprocess.run([CLI, "report", "--format", "json", path], capture_output=True, text=True, timeout=60)
        eq([o.get("raised_allocated_bytes") for o in json.loads(p.stdout)["processes"][0]["ooms"]], [4 << 30],
           "the JSON's figure")
        p = subprocess.run([CLI, "report", "--format", "html", path], capture_output=True, text=True, timeout=60)
        eq((p.stdout.count("tracked live when PyTorch raised the error</p>"),
            p.stdout.count("<li>PyTorch had 4.00 GiB allocated when it refused (its error says so);")), (1, 1),
           "the HTML's")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    # The fraction counts allocated bytes, not what the pool keeps.
    out, dumps, report = traced(ASYNC_FRACTION_ALLOCATED, env=env)
    eq(out, "3072 3584\n", "3 GiB allocated, 3.5 GiB reserved")
    (o,) = dumps["exit"]["ooms"]
    eq((o["findings"][0]["id"], o["findings"][0]["finding"], o["findings"][0]["next"]),
       ("memory_fraction", "PyTorch's per-process memory fraction (0.5) allows 4.00 GiB of the device's 8.00 GiB: "
        "its cudaMallocAsync backend counts the bytes allocated to tensors, about 3.00 GiB when it refused, and about "
        "1.50 GiB asked would pass it by 501.76 MiB to 522.24 MiB (PyTorch's error gives its figures to two decimals)", "raise torch.cuda.set_per_process_memory_fraction, or lower what the holders keep "
        "(what the pool keeps unused does not count against the fraction: trimming it changes nothing)"),
       "allocated bytes, as that backend counts them")
    eq([f["id"] for f in o["findings"] if f["id"] in ("stream_pool", "fragmented_cache")], [], "no pool finding")


# Under cudaMallocAsync with a fraction of 0.5 (4.00 GiB of 8.00): 3.00 GiB
# allocated, then the MiB of argv[1] asked; PyTorch's error gives both to
# two decimals.
ASYNC_FRACTION_ROUNDED = r"""
import sys, torch
torch.cuda.set_per_process_memory_fraction(0.5)
keep = [torch.empty(1 << 30, dtype=torch.uint8, device="cuda") for _ in range(3)]
try:
    c = torch.empty(int(sys.argv[1]) << 20, dtype=torch.uint8, device="cuda")
except torch.OutOfMemoryError as e:
    print([l for l in str(e).splitlines() if l.startswith("Requested")][0])
"""


@torch_test
def torch_truth_async_fraction_request_is_said_as_rounded():
    """Under backend:cudaMallocAsync a memory fraction's refusal is known
    only from PyTorch's error, which gives the request to two decimals:
    1100 MiB (1153433600 bytes) asked was told as "1.07 GiB (1148903752
    bytes)", in the dump's requested_bytes and PyTorch's request_bytes
    alike, and with 1025 MiB asked "3.00 GiB when it refused, and the
    1.00 GiB asked would pass it" read as false against the 4.00 GiB
    allowed. Now every output says the figure is about that much (no byte
    count), the dump says it is rounded, and the fraction's finding says
    between which figures they pass it (71.68 MiB
    said "about" was 76 MiB in truth), or that the rounding hides it."""
    env = {"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync"}
    rounded = 1148903752   # round(1.07 * 2**30): what the error says of 1100 MiB
    for mib, shown, by in (
            (1100, "1.07 GiB", " by 61.44 MiB to 81.92 MiB (PyTorch's error gives its figures to two decimals)"),
            (1025, "1.00 GiB", ": PyTorch's error gives its figures to two decimals, which hide by how much they "
                               "pass the 4.00 GiB")):
        out, dumps, report = traced(ASYNC_FRACTION_ROUNDED, str(mib), env=env)
        eq(out, f"Requested               : {shown}\n", "PyTorch's error")
        line = f"request: about {shown} (PyTorch's error gives it to two decimals) by PyTorch on device 0 ("
        eq(report.count("vramtrace:   " + line), 1, f"{mib} MiB: the post-mortem's request")
        eq(re.findall(r"\(\d+ bytes\)", report), [], f"{mib} MiB: no byte count")
        finding = ("PyTorch's per-process memory fraction (0.5) allows 4.00 GiB of the device's 8.00 GiB: its "
                   "cudaMallocAsync backend counts the bytes allocated to tensors, about 3.00 GiB when it refused, "
                   f"and about {shown} asked would pass it{by}")
        eq(report.count("vramtrace:   1. " + finding + "\n"), 1, f"{mib} MiB: the post-mortem's finding")
        (o,) = dumps["exit"]["ooms"]
        want = rounded if mib == 1100 else 1 << 30
        eq((o["api"], o["requested_bytes"], o.get("requested_rounded"), o["findings"][0]["finding"]),
           ("PyTorch", want, True, finding), f"{mib} MiB: the dump's failure")
        eq([(t["request_bytes"], t.get("request_rounded")) for t in o["torch"] if "request_bytes" in t],
           [(want, True)], f"{mib} MiB: PyTorch's request in the dump")
        with workdir("vt-truth-rounded-") as work:
            path = os.path.join(work, "d.json")
            json.dump(dumps["exit"], open(path, "w"))
            text = subprocess.run([CLI, "report", path], capture_output=True, text=True).stdout
            eq((text.count("  " + line), len(re.findall(r"\(\d+ bytes\)", text)),
                text.count("    1. " + finding + "\n")), (1, 0, 1), f"{mib} MiB: vramtrace report")
            j = json.loads(subprocess.run([CLI, "report", "--format", "json", path], capture_output=True,
                                          text=True).stdout)["processes"][0]["ooms"][0]
            eq((j["requested_bytes"], j.get("requested_rounded"),
                [(t["request_bytes"], t.get("request_rounded")) for t in j["torch"] if "request_bytes" in t]),
               (want, True, [(want, True)]), f"{mib} MiB: vramtrace report's JSON")
            page = subprocess.run([CLI, "report", "--format", "html", path], capture_output=True, text=True).stdout
            eq(len(re.findall(f": about {shown} requested by PyTorch on device 0;", page)), 1,
               f"{mib} MiB: the page")


EXPANDABLE_FRAGMENTED = r"""
import torch
kept, i = [], 0
try:
    while True:
        kept.append(torch.empty(((7 + i % 5) << 20) + (123 << 10), dtype=torch.uint8, device="cuda"))
        i += 1
except torch.OutOfMemoryError:
    pass
kept[::2] = [None] * len(kept[::2])
try:
    torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
except torch.OutOfMemoryError:
    print("failed")
"""


@torch_test
def torch_truth_expandable_segments_on_are_not_the_advice():
    """A cache fragmented with expandable segments on already: the finding
    does not advise turning them on."""
    out, dumps, report = traced(EXPANDABLE_FRAGMENTED, env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"})
    eq(out, "failed\n", "the run")
    nexts = [f["next"] for o in dumps["exit"]["ooms"] for f in o["findings"]
             if f["id"] in ("fragmented_cache", "fragmentation")]
    ok(nexts, "a fragmentation finding")
    eq(set(nexts), {"expandable segments are on already, and PyTorch gave back the pages it could before it raised: "
                    "what its cache keeps free lies among live tensors; lower the peak (the holders above), or allocate "
                    "the largest tensors first"}, "its advice: not empty_cache(), which PyTorch did before it raised")
    ok("next: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" not in report, "not advised in the post-mortem")


@torch_test
def torch_truth_expandable_segments_on_are_not_the_advice_after_another_setting():
    """The same, with another setting made at run time
    (torch.cuda.memory._set_allocator_settings): PyTorch's
    allocator_settings["PYTORCH_CUDA_ALLOC_CONF"] then holds that setting's
    text alone, while expandable segments stay on; the reports read that
    text and advised expandable_segments:True. The record carries the
    settings in force."""
    script = EXPANDABLE_FRAGMENTED.replace(
        "import torch\n", "import torch\ntorch.cuda.memory._set_allocator_settings(\"pinned_num_register_threads:1\")\n", 1)
    out, dumps, report = traced(script, env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"})
    eq(out, "failed\n", "the run")
    eq([t["settings"] for t in dumps["exit"]["torch"]],
       ["expandable_segments:True,max_split_size:-1,pinned_num_register_threads:1"], "the exit record's settings")
    nexts = [f["next"] for o in dumps["exit"]["ooms"] for f in o["findings"]
             if f["id"] in ("fragmented_cache", "fragmentation")]
    ok(nexts, "a fragmentation finding")
    eq(set(nexts), {"expandable segments are on already, and PyTorch gave back the pages it could before it raised: "
                    "what its cache keeps free lies among live tensors; lower the peak (the holders above), or allocate "
                    "the largest tensors first"}, "its advice")
    ok("next: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" not in report, "not advised in the post-mortem")


ASYNC_BACKWARD = r"""
import torch, torch.nn as nn, torch.nn.functional as F
model = nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, 1000)).cuda()
x = torch.randn(131072, 1024, device="cuda")
y = torch.randint(0, 1000, (131072,), device="cuda")
try:
    F.cross_entropy(model(x), y).backward()
except torch.OutOfMemoryError as e:
    print(str(e).splitlines()[0])
"""


@torch_test
def torch_truth_async_failure_in_backward_is_one_failure():
    """Under cudaMallocAsync (no allocator observer: the companion learns
    of the failure as PyTorch makes the error), a failure in backward fails
    on an autograd thread and is raised on the main one: PyTorch's record
    belongs to the failed call's record, not a failure of 0 bytes of its
    own; its pool's free blocks are not known, so no largest block is
    claimed. The pool's unused bytes at the failed call are the driver's
    (628 MiB, less than the 2 GiB asked): no fragmentation is claimed; it
    was claimed from PyTorch's record, made after autograd let go of its
    buffers (2.00 GiB "unused"; an outside check)."""
    out, dumps, report = traced(ASYNC_BACKWARD, env={"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync"})
    eq(out, "Allocation on device 0 would exceed allowed memory. (out of memory)\n", "PyTorch's error")
    ooms = dumps["exit"]["ooms"]
    eq([(o["api"], o["requested_bytes"]) for o in ooms], [("cudaMallocAsync", 2 << 30)] * 2,
       "the failed call and its retry, no failure of PyTorch's own")
    eq(dumps["exit"]["totals"]["oom_count"], 2, "failures counted")
    ok("optimizer step" not in report, "no optimizer in this program: no first step's findings")
    ok("(in its cudaMallocAsync pool, whose free blocks are not known)" in report and "largest free block" not in report,
       "the pool's blocks not claimed")
    eq([(o["pool_reserved_bytes"] - o["pool_used_bytes"]) >> 20 for o in ooms], [628, 0],
       "the pool's unused bytes at each failed call")
    eq([f["id"] for o in ooms for f in o["findings"] if f["id"] in ("fragmented_cache", "fragmentation", "stream_pool")],
       [], "no fragmentation claimed")
    ok("stream-ordered memory pools: 7.29 GiB reserved, 6.67 GiB of it in use by allocations" in report,
       "the post-mortem's pool line")
    with workdir("vt-truth-html-") as work:   # the page's PyTorch table says so too
        path = os.path.join(work, "d.json")
        json.dump(dumps["exit"], open(path, "w"))
        page = subprocess.run([CLI, "report", "--format", "html", path], capture_output=True, text=True).stdout
        eq((page.count("<td class=n>unknown (cudaMallocAsync)</td>"), "(does not fit)" in page, "(fits)" in page),
           (2, False, False), "the page's largest free block, at the OOM and at exit")


SURVIVED_THEN_FATAL = r"""
import torch
MiB = 1 << 20
a = [torch.empty(100 * MiB, dtype=torch.uint8, device="cuda") for _ in range(60)]
del a
b = torch.empty(3000 * MiB, dtype=torch.uint8, device="cuda")
try:
    c = torch.empty(6000 * MiB, dtype=torch.uint8, device="cuda")
except torch.OutOfMemoryError:
    print("failed")
"""


@torch_test
def torch_truth_the_error_pytorch_raises_gets_a_post_mortem():
    """A failure PyTorch survives (its retry after emptying its cache) gets
    the post-mortem; the one PyTorch raises less than a second later, of
    another request at another line, gets its own when PyTorch's record of
    it comes (not PyTorch's part alone under the first one's)."""
    out, dumps, report = traced(SURVIVED_THEN_FATAL)
    eq(out, "failed\n", "the run")
    eq([(o["api"], o["requested_bytes"] >> 20) for o in dumps["exit"]["ooms"]],
       [("cudaMalloc", 3000), ("cudaMalloc", 6000), ("cudaMalloc", 6000)], "the failures")
    eq(re.findall(r"request: (.*) by cudaMalloc", report), ["2.93 GiB (3145728000 bytes)", "5.86 GiB (6291456000 bytes)"],
       "a post-mortem for the survived failure, one for the raised one")
    second = report[report.rindex("out of memory in pid"):]
    ok("\nvramtrace: inside PyTorch at this out-of-memory error:\n" in second and "the failed request of 5.86 GiB" in second,
       "PyTorch's part under the raised failure's post-mortem")
    ok("had no post-mortem" not in report, "nothing left to tell at exit")
    ok("failed 3 (out of memory 3; 1 of them got past: the same request, asked again, succeeded)" in report,
       "the exit summary counts the failure PyTorch's retry got past")


EXPANDABLE_FAILS_AGAIN = r"""
import torch
kept = [torch.empty(64 << 20, dtype=torch.uint8, device="cuda") for _ in range(20)]
del kept[0:4]
try:
    big = torch.empty(1000 << 20, dtype=torch.uint8, device="cuda")
except torch.OutOfMemoryError:
    print("failed")
"""


@torch_test
def torch_truth_expandable_pages_mapped_then_refused_again_did_not_get_past():
    """Expandable segments: the 1000 MiB tensor's 20 MiB pages are mapped
    until one is refused; PyTorch gives back its cache, maps pages of the
    same size again, is refused again and raises. The exit summary said 1
    of the 2 failures got past (the same request had succeeded between
    them); nothing did (from an outside check)."""
    out, dumps, report = traced(EXPANDABLE_FAILS_AGAIN, capacity="2G",
                                env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"})
    eq(out, "failed\n", "the run")
    eq([(o["api"], o["requested_bytes"] >> 20) for o in dumps["exit"]["ooms"]],
       [("cuMemCreate", 20), ("cuMemCreate", 20)], "the failures: one page, twice")
    eq((dumps["exit"]["totals"]["oom_count"], dumps["exit"]["totals"]["oom_survived"]), (2, 0), "none got past")
    ok("failed 2 (out of memory 2)\n" in report, "the exit summary: " + report[-1500:])


@torch_test
def torch_truth_a_retry_in_a_fragmented_cache_is_not_called_no_cache_problem():
    """A cache whose free memory lies between live tensors: PyTorch's retry
    gives back its empty segments only and fails again. The retry's finding
    does not say the cache is not the problem, which the fragmentation
    finding beside it says it is."""
    out, dumps, report = traced(EXPANDABLE_FRAGMENTED)
    eq(out, "failed\n", "the run")
    o = dumps["exit"]["ooms"][-1]
    f = {x["id"]: x for x in o["findings"]}
    ok("fragmented_cache" in f and "allocator_retry" in f, f"both findings: {sorted(f)}")
    eq(f["allocator_retry"]["next"], "what the cache held empty was given back and did not suffice; what it still "
       "keeps free lies among live tensors (the fragmentation above): act on the holders or on that", "the retry's next")
    # Not torch.cuda.empty_cache(), which it advised: PyTorch's retry had
    # given back every empty segment already (an outside check).
    eq(f["fragmented_cache"]["next"], "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (segments that grow instead of "
       "splitting) or max_split_size_mb:N (blocks over N MiB never split for smaller tensors); not "
       "torch.cuda.empty_cache(): PyTorch gave back its empty segments before it raised", "the fragmentation's next")


@torch_test
def torch_truth_max_split_size_set_is_not_advised_again():
    """The same fragmented cache with max_split_size_mb set already: the
    finding advised setting it (an outside check); it says it did not
    prevent this and gives expandable segments alone."""
    out, dumps, report = traced(EXPANDABLE_FRAGMENTED, env={"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:64"})
    eq(out, "failed\n", "the run")
    nexts = {x["next"] for o in dumps["exit"]["ooms"] for x in o["findings"] if x["id"] == "fragmented_cache"}
    eq(nexts, {"PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (segments that grow instead of splitting; the "
               "max_split_size_mb set did not prevent it); not torch.cuda.empty_cache(): PyTorch gave back its empty "
               "segments before it raised"}, "the fragmentation's next")


HUGE_EMBEDDING = r"""
import torch
emb = torch.nn.Embedding(2_000_000, 2048).to("cuda")
"""


@torch_test
def torch_truth_a_parameter_larger_than_the_device_is_not_told_of_batches():
    """An embedding of 15.26 GiB moved to an 8 GiB device: the advice said
    to make the tensor smaller "(batch or sequence length)" (an outside
    check); it is the model's own parameter."""
    out, dumps, report = traced(HUGE_EMBEDDING, status=1)
    f = {x["id"]: x for x in dumps["exit"]["ooms"][0]["findings"]}
    ok(f["request_exceeds_device"]["next"].startswith("no allocator setting can fit it: it is one of the model's own "
                                                     "parameters (made or moved to the device at <module> "),
       f["request_exceeds_device"]["next"])
    ok("batch or sequence length" not in report, report[-2000:])


SIGNALLED = r"""
import os, signal, sys, threading, torch, torch.nn as nn
model = nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 1024)).cuda()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
if sys.argv[1] == "signal":   # a dump on request, sent from outside the loop, mid-run
    threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGUSR2)).start()
# Steps until 20 after the dump on request is written (its symbols take
# seconds), 200 at least.
asked = os.environ["VRAMTRACE_OUT"].replace("%p", str(os.getpid())).replace(".json", ".1.json")
after, step = 0, 0
while step < 200 or (sys.argv[1] == "signal" and after < 20 and step < 20000):
    x = torch.randn(256, 1024, device="cuda")
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    step += 1
    after += os.path.exists(asked)
print(sorted(t.name for t in threading.enumerate() if t.name != "Thread-1"), "done")
"""


@torch_test
def torch_truth_a_dump_on_request_leaves_the_program_as_it_was():
    """A dump on request (SIGUSR2) in a program that steps: PyTorch's record
    is taken at the next step boundary, so the program's memory ends as it
    does without the dump. Taken at once, mid-step, the walk held tensors
    backward was letting go of, and the cache made new segments, kept for
    good (18 MiB more reserved at exit, then read as growth)."""
    out, plain, _ = traced(SIGNALLED, "none")
    eq(out, "['MainThread'] done\n", "the run without the dump")
    out, dumps, report = traced(SIGNALLED, "signal")
    # No thread of the library's is left registered with threading (a
    # "Dummy-1" after current_thread() was asked on it).
    eq((out, sorted(dumps)), ("['MainThread'] done\n", ["exit", "signal"]), "the run, a dump on request and one at exit")
    eq(dumps["exit"]["totals"]["live_bytes"], plain["exit"]["totals"]["live_bytes"], "live at exit as without the dump")
    eq(dumps["exit"]["totals"]["peak_bytes"], plain["exit"]["totals"]["peak_bytes"], "the peak as without it")
    ok(dumps["signal"].get("torch"), "PyTorch's record in the dump on request")
    ok("growing call sites" not in report, "no growth")


SIGNAL_MOMENT = r"""
import os, signal, threading, time, torch
model = torch.nn.Linear(256, 256).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
keep = []
threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGUSR2)).start()
asked = os.environ["VRAMTRACE_OUT"].replace("%p", str(os.getpid())).replace(".json", ".1.json")
step = 0
while not os.path.exists(asked) and step < 600:
    model(torch.randn(64, 256, device="cuda")).sum().backward()
    opt.step()
    opt.zero_grad()
    keep.append(torch.empty(1 << 20, device="cuda"))   # 4 MiB a step, kept
    time.sleep(0.1)
    step += 1
print("done")
"""


@torch_test
def torch_truth_a_dump_on_request_is_of_one_moment():
    """A dump on request: PyTorch's record (taken at the step boundary after
    the signal) and the tracked memory (the snapshot) are of the same step,
    in a program that keeps 4 MiB a step: the symbols, which take most of a
    second, are made before the record is asked for, not between the two
    (then 6 steps of 0.1 s lay between them, and the tracked bytes were
    24 MiB past PyTorch's)."""
    out, dumps, _ = traced(SIGNAL_MOMENT)
    eq((out, sorted(dumps)), ("done\n", ["exit", "signal"]), "the run")
    d = dumps["signal"]
    t = d["torch"][0]
    ok(0 <= d["steps_total"] - t["steps"] <= 1, f"the snapshot's steps {d['steps_total']}, the record's {t['steps']}")
    # PyTorch's cache takes a 4 MiB tensor from a 20 MiB segment: the
    # tensor kept after the step boundary, or a step between the two, adds
    # no segment or one (on a busy machine, once in a run of the suite).
    ok(d["totals"]["live_bytes"] - t["reserved_bytes"] in (0, 20 << 20),
       f"tracked {d['totals']['live_bytes']} against PyTorch's reserved {t['reserved_bytes']}, "
       f"steps {d['steps_total']} and {t['steps']}")


STALE_RECORD = r"""
import ctypes, json, os, signal, time, torch
model = torch.nn.Linear(256, 256).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
base = os.environ["VRAMTRACE_OUT"].replace("%p", str(os.getpid()))
def dump(n):
    os.kill(os.getpid(), signal.SIGUSR2)
    path = base.replace(".json", f".{n}.json")
    for _ in range(600):
        if os.path.exists(path):
            return json.load(open(path))
        model(torch.randn(64, 256, device="cuda")).sum().backward()
        opt.step()
        opt.zero_grad()
        time.sleep(0.05)
first = dump(1)
# As the companion does at exit: no record comes for the next dump.
ctypes.CDLL(None).vt_torch_set_refresh(None)
second = dump(2)
print("torch" in first, "torch" in second)
"""


@torch_test
def torch_truth_a_dump_on_request_without_a_record_has_none():
    """A dump on request for which the companion sends no record (the
    interpreter exiting): it has no PyTorch part, not the record of the
    dump before it (which the report then showed beside memory 300 MiB
    larger, as current)."""
    out, dumps, _ = traced(STALE_RECORD)
    eq(out, "True False\n", "PyTorch's record in the first dump on request, none in the second")


MLP_STEPS = r"""
import sys, torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 16)).cuda()
opt = torch.optim.Adam(model.parameters())
other = torch.optim.SGD(model.parameters(), lr=0.0)   # steps with opt: one step of the run, not two
x, y = torch.randn(64, 256, device="cuda"), torch.randn(64, 16, device="cuda")
for _ in range(int(sys.argv[1])):
    opt.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    opt.step()
    other.step()
print("done")
"""


@torch_test
def torch_truth_optimizer_steps_are_step_boundaries():
    out, dumps, _ = traced(MLP_STEPS, "7")
    eq((out, sorted(dumps)), ("done\n", ["exit"]), "the run")
    d = dumps["exit"]
    eq((d["steps_total"], [s["step"] for s in d["steps"]]), (7, list(range(1, 8))), "one boundary per step")
    ev = [s["event"] for s in d["steps"]]
    ok(ev == sorted(ev) and 0 < ev[0] and ev[-1] <= len(d["events"]), f"each boundary's first event: {ev}")
    eq(d["torch"][0]["steps"], 7, "the companion's own count")


STAGES = r"""
import torch
model = torch.nn.Linear(256, 256).cuda()
x = torch.randn(32, 256, device="cuda")
for stage in range(2):   # a new optimizer each stage; the first one's is gone
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(30):
        opt.zero_grad(); model(x).sum().backward(); opt.step()
print("done")
"""


@torch_test
def torch_truth_a_new_optimizer_leads_the_steps():
    """A new optimizer per stage: its steps are the run's steps from its
    first (before, only once it had made as many as the one before: 30 of
    60 steps counted, no growth or forecast per step in the second stage)."""
    out, dumps, _ = traced(STAGES)
    eq(out, "done\n", "the run")
    eq((dumps["exit"]["steps_total"], dumps["exit"]["torch"][0]["steps"]), (60, 60), "every step counted")


FIRST_STEP = r"""
import torch, torch.nn as nn
layers = []
for i in range(40):
    layers.append(nn.Linear(4096, 4096).cuda())
model = nn.Sequential(*layers)
opt = torch.optim.Adam(model.parameters())
model(torch.randn(64, 4096, device="cuda")).sum().backward()
try:
    opt.step()   # Adam makes its state here: two tensors a parameter
except torch.OutOfMemoryError:
    print("failed")
"""


@torch_test
def torch_truth_a_first_step_that_does_not_fit_is_no_leak():
    """An OOM in the first optimizer step (Adam's state made then): what
    rose is the model, its gradients and the optimizer's state, and the
    finding says so instead of "a leak suspect"."""
    out, dumps, report = traced(FIRST_STEP)
    eq(out, "failed\n", "the run")
    grew = [f for o in dumps["exit"]["ooms"] for f in o["findings"] if f["id"] == "growing_site"]
    ok(grew, "a growing site")
    for f in grew:
        ok(f["finding"].endswith(" before the program's second optimizer step: the model, its gradients and the "
                                 "optimizer's state being made, not yet a leak"), f["finding"])
        # No activations are listed at the optimizer's step: whether the
        # program runs in mixed precision cannot be told, so it is not
        # advised.
        eq(f["next"], "the first step does not fit: a smaller batch or model, a lighter optimizer (SGD, Adafactor, "
           "8-bit Adam: Adam keeps two tensors a parameter), or sharding (FSDP, ZeRO)", "its next step")
    ok("a leak suspect" not in report[:report.index("vramtrace: exit in pid")], "no leak suspect in the post-mortem")


HEALTHY = r"""
import torch
model = torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(40)]).cuda()   # LINE:load
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(30):
    x = torch.randn(64, 256, device="cuda")
    model(x).sum().backward()                                                       # LINE:backward
    opt.step()
    opt.zero_grad()
print("done")
"""


@torch_test
def torch_truth_a_healthy_loop_has_no_growing_site():
    """A model loaded from one line (six 2 MiB segments, a staircase of its
    own) and backward's cache filled in the first of 30 steps, then kept:
    phases, not leaks. Both were listed as growing call sites, leak
    suspects, at the exit of every healthy training run."""
    out, dumps, report = traced(HEALTHY)
    eq((out, sorted(dumps)), ("done\n", ["exit"]), "the run")
    d = dumps["exit"]
    eq(d["steps_total"], 30, "the steps")
    site_allocs = {}
    for e in v1_view(d)["events"]:
        if e[1] == "alloc":
            site_allocs[e[5]] = site_allocs.get(e[5], 0) + 1
    ok(max(site_allocs.values()) >= 4, f"a site with a staircase of its own: {site_allocs}")
    eq(d["growing"], [], "no growing site")
    ok("growing call site" not in report, report)
    ok(d["live"], "memory live at exit")


def preloaded(script, capacity="8G"):
    """Run the Python script (text) with the library preloaded and nothing
    else (no `vramtrace run`, so no companion and no step marked) on a
    simulated GPU of `capacity`; return (its stdout, its exit dump, its
    exit summary)."""
    work = tempfile.mkdtemp(prefix="vt-truth-pre-")
    try:
        with open(os.path.join(work, "train.py"), "w") as f:
            f.write(script)
        p = in_dir([SIMRUN, "--torch", "--", "python3", "train.py"], work,
                   clean_env(SIMGPU_CAPACITY=capacity, SIMGPU_CONTEXT="300M", LD_PRELOAD=LIB,
                             VRAMTRACE_OUT=os.path.join(work, "d.json"),
                             VRAMTRACE_REPORT=os.path.join(work, "report.txt")))
        eq(p.returncode, 0, f"train.py with the library preloaded: {p.stderr[-2000:]}")
        d = json.load(open(os.path.join(work, "d.json")))
        return p.stdout, d, open(os.path.join(work, "report.txt")).read()
    finally:
        shutil.rmtree(work, ignore_errors=True)


@torch_test
def torch_truth_a_healthy_loop_preloaded_has_no_growing_site():
    """The same healthy loop with the library preloaded alone: no step is
    marked, and backward's cache, filled in the first step and served from
    for the other 29 without an event, was the history's last events, so
    it read as still rising: a leak suspect at the exit of every healthy
    run started as `LD_PRELOAD=libvramtrace.so python train.py`. Without
    steps, the time up to the exit counts the work now (report/growth.c)."""
    out, d, report = preloaded(HEALTHY)
    eq(out, "done\n", "the run")
    eq((d["reason"], d["steps_total"]), ("exit", 0), "the exit dump, no step marked")
    allocs = [e for e in v1_view(d)["events"] if e[1] == "alloc"]
    last = [e for e in allocs if e[5] == allocs[-1][5]]
    ok(len(last) >= 4, f"the history's last allocations, a staircase of their own: {len(last)}")
    eq(d["growing"], [], "no growing site")
    ok("growing call site" not in report, report)


LEAK_PRELOADED = r"""
import time, torch
model = torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(4)]).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
kept = []
for step in range(1500):
    model(torch.randn(64, 256, device="cuda")).sum().backward()
    opt.step()
    opt.zero_grad()
    kept.append(torch.zeros(1 << 20, device="cuda"))  # LINE:kept
    time.sleep(0.004)  # the step's wait for its kernels: 6 s in all
print("done", len(kept))
"""


@torch_test
def torch_truth_a_leak_preloaded_is_still_a_growing_site():
    """A loop keeping a 4 MiB tensor at each of its 1,500 steps (each
    waiting 4 ms, as for its kernels), with the library preloaded alone:
    the caching allocator takes a 20 MiB segment every five steps until the
    end, so the kept line is still rising at exit by the time since its
    first allocation (the interpreter's own exit after the loop, 1.5 s
    here, is much shorter than the loop's 6 s; a loop shorter than it reads
    as a phase, README), and it is the one growing site, with every one of
    its segments."""
    out, d, report = preloaded(LEAK_PRELOADED, capacity="16G")
    eq(out, "done 1500\n", "the run")
    eq(d["steps_total"], 0, "no step marked")
    line = next(i for i, x in enumerate(LEAK_PRELOADED.splitlines(), 1) if "LINE:kept" in x)
    g = d["growing"]
    eq(len(g), 1, f"one growing site: {g}")
    eq((g[0]["first_bytes"], g[0]["end_bytes"], g[0]["allocations"]), (0, 300 * 20 * MiB, 300), "its rise")
    ok(f"train.py:{line}" in report.split("growing call site")[1].splitlines()[1], report)


HISTORY = r"""
import torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 16)).cuda()
opt = torch.optim.Adam(model.parameters())
x, y = torch.randn(64, 256, device="cuda"), torch.randn(64, 16, device="cuda")
history = []
try:
    for step in range(1000):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        history.append(torch.full((64 << 20,), float(step), device="cuda"))  # LINE:append
except torch.OutOfMemoryError:
    print(len(history), history[0].nbytes)
"""


@torch_test
def torch_truth_growth_said_per_step():
    # A tensor kept per optimizer step, until the device is full: the
    # growing site's rise per step and its steps (the library's one
    # figure), and what holds it (the `history` list, from PyTorch's record
    # of the failure), in one line of the same words in the post-mortem,
    # the exit summary, the dump's finding and vramtrace report's text and
    # JSON.
    out, dumps, report = traced(HISTORY)
    kept, each = (int(v) for v in out.split())
    eq((kept, each), (30, 256 << 20), "what the script kept")
    line = 1 + HISTORY.splitlines().index(next(x for x in HISTORY.splitlines() if "LINE:append" in x))
    d = dumps["exit"]
    g = [(x["unit"], x["units"], x["bytes_per_unit"], x["allocations"], x.get("holder")) for x in d["growing"]]
    eq(g, [("step", kept, each, kept, "history")], "the dump's growing site")
    span = (d["growing"][0]["last_ns"] - d["growing"][0]["since_ns"]) / 1e9
    rate = f"+256.00 MiB per step over the last {kept} steps (+7.50 GiB in {span:.3f} s), held by `history`"
    short = lambda s: re.sub(r"/\S*/train\.py", "train.py", s)
    lines = [short(x) for x in report.splitlines()]
    # The site: the script's line, then the library line it went through.
    summary = [x for x in lines if x.startswith(f"vramtrace:   <module> train.py:{line} -> ")]
    eq(len(summary), 1, f"the exit summary's growing site: {summary}")
    site = summary[0][len("vramtrace:   "):summary[0].index(": 0 B -> ")]
    eq(summary[0], f"vramtrace:   {site}: 0 B -> 7.50 GiB, {rate}", "the exit summary's growing site")
    finding = f"{site} grew through the run from 0 B to 7.50 GiB: {rate}; a leak suspect"
    # The failure PyTorch's record belongs to (its retry, the last) says
    # it with the holder; the post-mortem written before the record came
    # says the same figure, and the record's breakdown the holder.
    oom = [short(f["finding"]) for f in d["ooms"][-1]["findings"] if f["id"] == "growing_site"]
    eq(oom, [finding], "the dump's finding")
    torch_line = f"growth: {rate} in {site}"
    eq([x for x in lines if "held by `" in x],
       [f"vramtrace:   {torch_line}", summary[0], f"vramtrace:   {torch_line}"],
       "the post-mortem's (at the OOM) and the exit's lines that name the holder")
    advice = ("   next: free what `history` keeps from one step to the next (its tensors lie in segments PyTorch's "
              "cache made at that line, which need not be where they were made: `vramtrace run --tensors` records "
              "each tensor's own line)")
    eq([lines[i + 1] for i, x in enumerate(lines) if torch_line in x], [f"vramtrace:   {advice}"] * 2,
       "what to do next, under the holder's line: free what the holder keeps; the line is the cache's")
    eq(d["ooms"][-1]["torch"][0]["growth"]["holder"], "history", "the OOM record's growth")
    work = tempfile.mkdtemp(prefix="vt-truth-")
    try:
        path = os.path.join(work, "d.json")
        with open(path, "w") as f:
            json.dump(d, f)
        r = in_dir([CLI, "report", path], work, clean_env())
        cli = [short(x) for x in r.stdout.splitlines() if "held by `" in x]
        eq(cli, [f"    1. {finding}", f"    {torch_line}", f"  {torch_line}", f"  {site}: 0 B -> 7.50 GiB, {rate}"],
           "vramtrace report says what the library said")
        out = r.stdout.splitlines()
        eq([out[i + 1] for i, x in enumerate(out) if torch_line in short(x)], [f"    {advice}", f"  {advice}"],
           "vramtrace report's advice under the holder's line")
        j = json.loads(in_dir([CLI, "report", "--format", "json", path], work, clean_env()).stdout)["processes"][0]
        eq([(short(x["site"]), x["steps"], x["bytes_per_step"], x["holder"]) for x in j["growing"]],
           [(site, kept, each, "history")], "vramtrace report's JSON")
        eq([short(f["finding"]) for f in j["ooms"][-1]["findings"] if f["id"] == "growing_site"], [finding],
           "vramtrace report's JSON finding")
    finally:
        shutil.rmtree(work, ignore_errors=True)


ASYNC_OOM = r"""
import sys, torch
import vramtrace_torch as companion
sent = []   # the reasons of the records the companion sends
lib = companion._state["lib"]
submit = lib[1]
companion._state["lib"] = (lib[0], lambda text, n: (sent.append(text.split(b"\t")[2].decode()), submit(text, n))[1]) + lib[2:]
keep = [torch.empty(1 << 28, dtype=torch.uint8, device="cuda") for _ in range(3)]
try:
    torch.empty(7 << 30, dtype=torch.uint8, device="cuda")
except torch.OutOfMemoryError as e:
    print(torch.cuda.get_allocator_backend(), torch.cuda.memory_allocated(), torch.cuda.memory_reserved(), sent)
"""


@torch_test
def torch_truth_oom_record_under_cudamallocasync():
    # --tensors (cudaMallocAsync, no OOM observer): the record is taken as
    # PyTorch makes its OutOfMemoryError, once, and belongs to the failed
    # cudaMallocAsync; under the caching allocator the observer's record is
    # the only one.
    for flags, backend, api in ((["--tensors"], "cudaMallocAsync", "cudaMallocAsync"), ([], "native", "cudaMalloc")):
        out, dumps, report = traced(ASYNC_OOM, flags=flags)
        b, allocated, reserved, sent = out.split(" ", 3)
        eq((b, sent), (backend, "['oom']\n"), f"{flags}: one record at the OOM")
        d = dumps["exit"]
        o = d["ooms"][-1]
        eq((o["api"], o["requested_bytes"]), (api, 7 << 30), f"{flags}: the failed call")
        t = o["torch"][0]
        eq((t["allocated_bytes"], t["reserved_bytes"], t["request_bytes"]), (int(allocated), int(reserved), 7 << 30),
           f"{flags}: PyTorch's state at the failure")
        ok("vramtrace: inside PyTorch at this out-of-memory error:\n" in report, f"{flags}: the post-mortem has it")


@torch_test
def torch_truth_user_line_first_everywhere():
    # Every call-site label of the run is the script's line, then the
    # library line it went through: the post-mortem's failing call, its
    # holders and findings, the exit summary's holders, and vramtrace
    # report's text, JSON and HTML page (the leak report, the folded
    # stacks and the torch export: tests/integration/test_sitefirst.py).
    # torch.full goes through libtorch_python's entry point.
    _, dumps, report = traced(HISTORY)
    line = 1 + HISTORY.splitlines().index(next(x for x in HISTORY.splitlines() if "LINE:append" in x))
    site = re.compile(rf"<module> \S*/train\.py:{line} -> torch::autograd::THPVariable_full "
                      r"\(libtorch_python\.so\+0x[0-9a-f]+\)")
    lines = report.splitlines()
    for start in ("vramtrace:   failing call: ", "vramtrace:   1. ", "vramtrace:      next: free what "):
        # (PyTorch's breakdown names the holder there: "free what `history` ...")
        got = [x for x in lines if x.startswith(start) and not x[len(start):].startswith("`")]
        ok(got and all(site.match(x[len(start):]) for x in got), f"{start!r}: {got[:2]}")
    rows = [x for x in lines if re.match(r"^vramtrace: +7\.50 GiB +\d+\.\d% +30 allocs ", x)]
    ok(rows and all(site.search(x) for x in rows), f"the holders of 7.50 GiB: {rows}")
    # Every holder of the run: a line of the script, then the library's.
    holders = [m.group(1) for m in (re.match(r"^vramtrace: +[\d.]+ \S+ +[\d.]+% +\d+ allocs? +(.*)$", x)
                                    for x in lines) if m]
    ok(len(holders) >= 4 and all(re.match(r"<module> \S*/train\.py:\d+ -> \S", x) for x in holders),
       f"every holder row: {holders}")
    work = tempfile.mkdtemp(prefix="vt-truth-")
    try:
        path = os.path.join(work, "d.json")
        with open(path, "w") as f:
            json.dump(dumps["exit"], f)
        text = in_dir([CLI, "report", path], work, clean_env()).stdout.splitlines()
        ok(any(x.startswith("  failing call: ") and site.match(x[len("  failing call: "):]) for x in text),
           "vramtrace report's failing call")
        j = json.loads(in_dir([CLI, "report", "--format", "json", path], work, clean_env()).stdout)
        top = j["processes"][0]["growing"][0]["site"]
        ok(site.fullmatch(top), f"the JSON's growing site: {top}")
        ok(site.fullmatch(j["combined_holders"][0]["site"]), f"the JSON's first holder: {j['combined_holders'][0]}")
        in_dir([CLI, "report", "--format", "html", "-o", os.path.join(work, "p.html"), path], work, clean_env())
        page = html.unescape(open(os.path.join(work, "p.html")).read())
        ok(site.search(page), "the HTML page's labels")
    finally:
        shutil.rmtree(work, ignore_errors=True)


MULTI_GPU = r"""
import torch
a = [torch.empty(1 << 20, device="cuda:0") for _ in range(2)]
b = [torch.empty(1 << 20, device="cuda:1") for _ in range(3)]
try:
    torch.empty(1 << 40, dtype=torch.uint8, device="cuda:1")
except torch.OutOfMemoryError:
    pass
print(*(torch.cuda.memory_allocated(d) for d in (0, 1)), *(torch.cuda.memory_reserved(d) for d in (0, 1)))
"""


@torch_test
def torch_truth_per_device():
    # Two GPUs: one "torch" entry per device, each with its own figures
    # and tensors; the OOM on device 1 gets that device's record.
    out, dumps, _ = traced(MULTI_GPU, env={"SIMGPU_DEVICES": "2"})
    a0, a1, r0, r1 = (int(x) for x in out.split())
    d = dumps["exit"]
    eq([(t["device"], t["allocated_bytes"], t["reserved_bytes"]) for t in d["torch"]], [(0, a0, r0), (1, a1, r1)],
       "memory_allocated() and memory_reserved() per device at exit")
    eq([sorted(x["name"] for x in t["tensors"]) for t in d["torch"]],
       [["a[0]", "a[1]"], ["b[0]", "b[1]", "b[2]"]], "each device's tensors")
    o = d["ooms"][-1]
    t = [x for x in o["torch"] if x.get("request_bytes") is not None]
    eq((o["device"], [(x["device"], x["request_bytes"], x["allocated_bytes"]) for x in t]),
       (1, [(1, 1 << 40, a1)]), "the OOM on device 1: its record")


def rate_said(g):
    """A dump's growing site's rate as every report says it, from its
    figures: per step, else per second (the whole growth)."""
    span = g.get("span_ns") / 1e9
    if g["unit"] == "step":
        return (f"+{fmt_bytes(g['bytes_per_unit'])} per step over the last {g['units']} steps "
                f"(+{fmt_bytes(g.get('rise_bytes'))} in {span:.3f} s)")
    return (f"+{fmt_bytes(g.get('rise_bytes'))} over {g['units']} allocations in {span:.3f} s, "
            f"{fmt_bytes(g['bytes_per_unit'])} per {g['unit']}")


EVALUATE = r"""
import torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024),
                            torch.nn.ReLU(), torch.nn.Linear(1024, 16)).cuda()
opt = torch.optim.Adam(model.parameters())


def train(steps):
    for _ in range(steps):
        opt.zero_grad()
        model(torch.randn(4096, 1024, device="cuda")).sum().backward()
        opt.step()


def evaluate(batches):
    outputs = []
    for _ in range(batches):
        outputs.append(model(torch.randn(4096, 1024, device="cuda")))  # LINE:keep
    try:   # the out-of-memory error, with nothing in flight
        torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    except torch.OutOfMemoryError:
        print(len(outputs))
    return outputs


train(3)
kept = evaluate(20)
"""
_evaluated = []


def evaluated():
    """EVALUATE under vramtrace run on a 2 GiB simulated GPU, run once for
    the tests that read it: (stdout, dumps, report)."""
    if not _evaluated:
        _evaluated.append(traced(EVALUATE, capacity="2G"))
    return _evaluated[0]


@torch_test
def torch_truth_growth_after_steps_said_per_second():
    # Three optimizer steps, then an evaluation loop that keeps its outputs
    # (and their graphs), then an out-of-memory error: the growth happened in
    # no step, so it is said per second over its own span (its first event
    # to its last allocation, all after the last step boundary), the same
    # in the finding, the post-mortem's and exit's PyTorch lines, the exit
    # summary and vramtrace report's text and JSON.
    out, dumps, report = evaluated()
    d = dumps["exit"]
    eq((out, d["steps_total"]), ("20\n", 3), "three steps, then the evaluation")
    g = d["growing"][0]
    line = 1 + EVALUATE.splitlines().index(next(x for x in EVALUATE.splitlines() if "LINE:keep" in x))
    short = lambda s: re.sub(r"/\S*/train\.py", "train.py", s)
    grew = [short(f["finding"]) for f in d["ooms"][-1]["findings"] if f["id"] == "growing_site"]
    site = grew[0][:grew[0].index(" grew through the run")] if grew else None
    ok(site and site.startswith(f"evaluate train.py:{line} -> relu torch/nn/functional.py:"), f"the finding: {grew}")
    span = g["last_ns"] - g["since_ns"]
    eq((g["unit"], g["units"], g.get("rise_bytes"), g.get("span_ns"), g["bytes_per_unit"], g["holder"]),
       ("second", g["allocations"], g["end_bytes"] - g["first_bytes"], span,
        int((g["end_bytes"] - g["first_bytes"]) / (span / 1e9)), "graph of kept"),
       "the dump's growing site: per second over its whole growth")
    ok(g["since_ns"] > d["steps"][-1]["time_ns"], f"it grew after the last step: {g['since_ns']} vs {d['steps']}")
    rate = rate_said(g)
    o = d["ooms"][-1]
    t = o["torch"][0]["growth"]
    eq((t["stack"], t["unit"], t["units"], t.get("rise_bytes"), t.get("span_ns"), t["bytes_per_unit"], t["holder"]),
       (g["stack"], "second", g["units"], g.get("rise_bytes"), g.get("span_ns"), g["bytes_per_unit"], "graph of outputs"),
       "the OOM record's growth: the same figures, held by the list evaluate() fills")
    finding = (f"{site} grew through the run from 0 B to {fmt_bytes(g['end_bytes'])}: {rate}, "
               "held by `graph of outputs`; a leak suspect")
    eq([short(f["finding"]) for f in o["findings"] if f["id"] == "growing_site"], [finding], "the dump's finding")
    lines = [short(x) for x in report.splitlines()]
    at_oom = f"growth: {rate}, held by `graph of outputs` in {site}"
    at_exit = f"growth: {rate}, held by `graph of kept` in {site}"
    row = f"{site}: 0 B -> {fmt_bytes(g['end_bytes'])}, {rate}, held by `graph of kept`"
    # PyTorch frees its cache and asks again: two failures, and one
    # post-mortem unless the retry came a second or more after the first
    # was written (a machine that stalled the program that long: the pace
    # is by the clock; oom_post_mortems_paced_from_the_last_one_written
    # tests it); each post-mortem has the finding.
    pm = report.count("vramtrace: out of memory in pid")
    eq(len(d["ooms"]), 2, "two OOMs")
    ok(pm in (1, 2), f"one post-mortem, or two after a stall: {pm}")
    eq([x for x in lines if f" {site}" in x and ("held by `" in x or " grew through the run " in x)],
       [f"vramtrace:   1. {finding[:finding.index(', held by')]}; a leak suspect"] * pm + [
        f"vramtrace:   {at_oom}", f"vramtrace:   {row}", f"vramtrace:   {at_exit}"],
       "the post-mortem's finding (written before PyTorch's record came: no holder), the PyTorch line at the OOM, "
       "the exit summary's row and the exit's PyTorch line")
    work = tempfile.mkdtemp(prefix="vt-truth-")
    try:
        path = os.path.join(work, "d.json")
        with open(path, "w") as f:
            json.dump(d, f)
        cli = [x for x in map(short, in_dir([CLI, "report", path], work, clean_env()).stdout.splitlines())
               if "held by `" in x and f" {site}" in x]
        eq(cli, [f"    1. {finding}", f"    {at_oom}", f"  {at_exit}", f"  {row}"], "vramtrace report's text")
        j = json.loads(in_dir([CLI, "report", "--format", "json", path], work, clean_env()).stdout)["processes"][0]
        eq([(short(x["site"]), x.get("steps"), x["holder"]) for x in j["growing"][:1]], [(site, None, "graph of kept")],
           "vramtrace report's JSON: no steps")
    finally:
        shutil.rmtree(work, ignore_errors=True)


@torch_test
def torch_truth_graph_held_by_the_list():
    # What evaluate()'s kept outputs saved for backward is held by the
    # graph of `outputs`, the function's local list, at the OOM (not by
    # one of the graph's own intermediate tensors, which PyTorch keeps
    # alive with it); at exit, after evaluate() returned it, by the graph
    # of `kept`, the global it went to.
    out, dumps, _ = evaluated()
    n = int(out)
    d = dumps["exit"]
    for where, rec, name in (("the OOM", d["ooms"][-1]["torch"][0], "outputs"), ("exit", d["torch"][0], "kept")):
        acts = [x for x in rec["tensors"] if x["category"] == "activation"]
        eq((sorted({x["holder"] for x in acts}), rec["categories"]["activation"]),
           ([f"graph of {name}"], 3 * n * (16 << 20)),
           f"{where}: what holds the activations listed; every batch's input and two ReLU outputs")
        eq(rec["growth"]["holder"], f"graph of {name}", f"{where}: the growth's holder")


KEPT_PER_STEP = r"""
import sys, torch
model = torch.nn.Linear(256, 256).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
history = []
for step in range(int(sys.argv[1])):
    opt.zero_grad()
    model(torch.randn(64, 256, device="cuda")).sum().backward()
    for _ in range(4):
        history.append(torch.empty(64 << 20, dtype=torch.uint8, device="cuda"))
    opt.step()
print(len(history))
"""


@torch_test
def torch_truth_growth_per_step_needs_three_steps():
    # Four 64 MiB tensors kept in each step: over 2 steps that is no rate
    # per step (per second instead); over 3 it is, +256 MiB per step.
    for steps, unit, units in ((2, "second", 8), (3, "step", 3)):
        out, dumps, report = traced(KEPT_PER_STEP, str(steps))
        d = dumps["exit"]
        eq((out, d["steps_total"]), (f"{4 * steps}\n", steps), f"{steps} steps: the run")
        g = d["growing"][0]
        want = (unit, units, 4 * steps * (64 << 20), g["last_ns"] - g["since_ns"],
                256 << 20 if unit == "step" else int(4 * steps * (64 << 20) / ((g["last_ns"] - g["since_ns"]) / 1e9)))
        eq((g["unit"], g["units"], g.get("rise_bytes"), g.get("span_ns"), g["bytes_per_unit"]), want,
           f"{steps} steps: the dump's growing site")
        rows = [x for x in report.splitlines() if x.startswith("vramtrace:   <module> ") and ": 0 B -> " in x]
        eq([x[x.index(": 0 B -> "):] for x in rows][:1], [f": 0 B -> {fmt_bytes(4 * steps * (64 << 20))}, {rate_said(g)}, held by `history`"],
           f"{steps} steps: the exit summary")


FRACTION_OOM = '''
import torch
keep = []
try:
    while True:
        keep.append(torch.empty(64 << 20, device="cuda"))        # a real CUDA OOM
except torch.OutOfMemoryError:
    print("first", torch.cuda.memory_allocated())
keep.clear()
torch.cuda.empty_cache()
import time
time.sleep(1.2)                                                  # past the post-mortems' pace
torch.cuda.set_per_process_memory_fraction(0.3)
other = []
try:
    while True:
        other.append(torch.empty(8 << 20, device="cuda"))        # PyTorch's own refusal
except torch.OutOfMemoryError:
    print("second", torch.cuda.memory_allocated())
'''


@torch_test
def torch_truth_pytorchs_own_refusal_is_an_oom_of_its_own():
    """A caught CUDA OOM, then PyTorch refusing a request itself (its memory
    fraction; no CUDA call fails): the refusal is an OOM of its own, API
    "PyTorch", its request (32 MiB) and the user's line, with a post-mortem,
    and each OOM carries its own record of PyTorch's state (before, the
    refusal had no post-mortem and its record replaced the first OOM's)."""
    work = tempfile.mkdtemp(prefix="vt-frac-")
    try:
        script = os.path.join(work, "frac.py")
        with open(script, "w") as f:
            f.write(FRACTION_OOM)
        env = clean_env(SIMGPU_CAPACITY="1G", SIMGPU_CONTEXT="100M")
        out = os.path.join(work, "d.json")
        p = in_dir([SIMRUN, "--torch", "--", CLI, "run", "--out", out, "--", "python3", script], work, env)
        eq(p.returncode, 0, f"status: {p.stderr[-2000:]}")
        eq(p.stdout, f"first {768 << 20}\nsecond {288 << 20}\n", "the program's own figures")
        eq(p.stderr.count("vramtrace: out of memory in pid "), 2, "a post-mortem for each failure")
        ok("request: 32.00 MiB (33554432 bytes) by PyTorch on device 0" in p.stderr, p.stderr[-3000:])
        # The refusal is recorded inside the companion's call: its frames are
        # never what the user's line went through (it read "-> _submit").
        failing = [l for l in p.stderr.splitlines() if "failing call:" in l]
        eq(len(failing), 2, "a failing call in each post-mortem")
        ok(failing[1].split("failing call: ")[1].startswith(f"<module> {script}:17 -> torch::autograd::THPVariable_empty ("),
           failing[1])
        ok("vramtrace_torch" not in p.stderr and "_submit" not in p.stderr, p.stderr[-3000:])
        d = load_dump(out)
        eq([(o["api"], o["requested_bytes"]) for o in d["ooms"]],
           [("cudaMalloc", 256 << 20), ("cudaMalloc", 256 << 20), ("PyTorch", 32 << 20)], "the OOMs")
        eq([[t["allocated_bytes"] for t in (o.get("torch") or [])] for o in d["ooms"]],
           [[], [768 << 20], [288 << 20]], "each OOM's own record of PyTorch (the retry's for the first)")
        eq(d["totals"]["oom_count"], 3, "counted")
        r = in_dir([CLI, "report", out], work, clean_env())
        ok("frac.py:17" in r.stdout, "the user's line names the refusal")
    finally:
        shutil.rmtree(work, ignore_errors=True)


CACHE_GROWS = r"""
import json, sys, torch
MiB = 1 << 20
m = torch.nn.Sequential(torch.nn.Linear(512, 2048), torch.nn.GELU(), torch.nn.Linear(2048, 512)).cuda()
opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
keep = []
for step in range(120):
    # Longer sequences later in the run: the cache makes bigger segments.
    L = 64 if step < 4 else 256 if step < 30 else 512 if step < 70 else 1024
    x = torch.randn(8, L, 512, device="cuda")
    loss = m(x).pow(2).mean()
    loss.backward()  # LINE:backward
    opt.step()
    opt.zero_grad()
    if sys.argv[1] == "leak":
        keep.append(torch.empty(4 << 20, dtype=torch.uint8, device="cuda"))
# PyTorch's own word on its segments that hold no tensor, the last thing
# before the exit's record.
empty = [[s["address"], s["total_size"]] for s in torch.cuda.memory._snapshot()["segments"] if s["allocated_size"] == 0]
print(json.dumps(empty))
"""


@torch_test
def torch_truth_a_cache_that_grew_with_longer_sequences_is_no_leak_suspect():
    """Sequences that get longer through a run make PyTorch's cache take
    bigger segments, kept for reuse: backward's call site rises step after
    step, and was a leak suspect at the exit of a healthy run. With
    PyTorch's record at exit, the site's allocations that are segments of
    the cache holding no tensor (which empty_cache() gives back) are its
    cache: a site mostly cache is said apart, with that figure, and no
    holder. A real leak at the same line still is a suspect, and so is one
    whose small tensors pin each step's segment (the cache bound that came
    first, bytes past every tensor PyTorch allocated, called that one
    cache: none of those segments can be given back), and so is a leak in
    a function's locals, gone before the exit's record: PyTorch's tensors
    at the optimizer steps rose with it."""
    line = 1 + next(i for i, l in enumerate(CACHE_GROWS.split("\n")) if "LINE:backward" in l)
    out, dumps, report = traced(CACHE_GROWS, "cache")
    empty = {tuple(x) for x in json.loads(out)}
    d = dumps["exit"]
    eq(len(d["growing"]), 1, "one growing site")
    g = d["growing"][0]
    v = v1_view(d)

    def site_of(stack):   # the call site's frame: its function, file and line
        st = v["stacks"][stack]
        f = st["frames"][st["site"]] if st["site"] is not None and st["site"] >= 0 else {}
        return f.get("function"), f.get("file"), f.get("line")

    site = site_of(g["stack"])
    address = lambda a: int(a, 16) if isinstance(a, str) else a
    truth = sum(a["bytes"] for a in v["live"] if site_of(a["stack"]) == site and (address(a["address"]), a["bytes"]) in empty)
    eq(g["cache_bytes"], truth, "the site's segments that PyTorch's snapshot says hold no tensor")
    ok(g["cache_bytes"] * 2 >= g["end_bytes"], f"mostly cache: {g}")
    ok("growing call site" not in report and "leak suspect" not in report, report)
    ok("call site where PyTorch's cache grew (most of its memory holds no tensor" in report, report)
    lines = [l for l in report.splitlines() if f"train.py:{line} -> _engine_run_backward" in l and "per step" in l]
    eq(len(lines), 1, f"the site's line: {report}")
    ok("held by" not in lines[0], lines[0])
    ok(f"{fmt_bytes(g['cache_bytes'])} of {fmt_bytes(g['end_bytes'])} are segments that hold no tensor" in report,
       report)
    eq(d["torch"][0]["growth"], None, "PyTorch's part names no growth")
    with tempfile.TemporaryDirectory() as work:
        path = os.path.join(work, "d.json")
        with open(path, "w") as f:
            json.dump(d, f)
        r = subprocess.run([CLI, "report", path], capture_output=True, text=True)
        ok("call site where PyTorch's cache grew" in r.stdout and "leak suspect" not in r.stdout, r.stdout)
        r = subprocess.run([CLI, "report", "--format", "json", path], capture_output=True, text=True)
        j = json.loads(r.stdout)
        gj = j["processes"][0]["growing"] if "processes" in j else j["growing"]
        eq([(x["cache_bytes"], x["mostly_cache"]) for x in gj], [(g["cache_bytes"], True)], "report --format json")
    for script, mode, holder in ((CACHE_GROWS, "leak", "keep"), (PINNED, "pinned", None), (LOCAL_LEAK, "local", None)):
        out, dumps, report = traced(script, mode)
        d = dumps["exit"]
        ok("growing call site (live bytes rose through the run; a leak suspect)" in report, f"{mode}: {report}")
        ok("cache grew" not in report, f"{mode}: {report}")
        grew = [x for x in d["growing"] if vt_growth_is_cache(x)]
        eq(grew, [], f"{mode}: no site said to be cache")
        if holder:
            ok(d["torch"][0]["growth"] is not None and d["torch"][0]["growth"]["holder"] == holder,
               d["torch"][0]["growth"])


PINNED = r"""
import torch
MiB = 1 << 20
w = torch.zeros(4, device="cuda", requires_grad=True)
opt = torch.optim.SGD([w], lr=0.1)
keep = []
for step in range(30):
    # A bigger activation each step (a new, larger segment, as longer
    # sequences make), and a 1.5 MiB tensor kept that lands in the tail of
    # that segment and pins it: empty_cache() can give none of them back.
    t = torch.empty((10 + 2 * step) * MiB + 1, dtype=torch.uint8, device="cuda")
    keep.append(torch.empty(3 * MiB // 2, dtype=torch.uint8, device="cuda"))
    del t
    (w * 2).sum().backward()
    opt.step()
    opt.zero_grad()
print("done")
"""


LOCAL_LEAK = r"""
import torch


def main():
    # The classic leak, in a function's locals: each step's graph kept.
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 1024)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    losses = []
    for i in range(30):
        loss = model(torch.randn(256, 1024, device="cuda")).pow(2).mean()
        opt.zero_grad()
        loss.backward(retain_graph=True)
        opt.step()
        losses.append(loss)


main()   # its locals, the leak among them, are gone before the exit's record
print("done")
"""


def vt_growth_is_cache(g):
    """common/summary.h's vt_growth_mostly_cache."""
    c, rise = g.get("cache_bytes", 0), max(0, g["end_bytes"] - g["first_bytes"])
    return c > 0 and c >= rise // 2 and c >= g["end_bytes"] // 2


EXPANDABLE = r"""
import sys, torch
if sys.argv[1] == "big":
    a = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    try:
        b = torch.empty(3 << 30, dtype=torch.uint8, device="cuda")
    except torch.OutOfMemoryError:
        print("oom")
else:   # a leak of 16 MiB a step
    m = torch.nn.Linear(256, 256).cuda()
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    keep = []
    for step in range(40):
        m(torch.randn(64, 256, device="cuda")).sum().backward()
        opt.step()
        opt.zero_grad()
        keep.append(torch.empty(4 << 20, device="cuda"))
    print("done")
"""


@torch_test
def torch_truth_one_tensor_in_expandable_segments_is_no_staircase():
    """Under expandable segments PyTorch maps a 1 GiB tensor as 52 pages of
    20 MiB, one after the other: a staircase of 52 steps, so the failure
    after it called the tensor's line a site that "grew through the run: a
    leak suspect". A site's handles made one right after another are one
    burst, one request; a leak a step apart is still a growing site."""
    env = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    out, dumps, report = traced(EXPANDABLE, "big", env=env, capacity="2G")
    eq(out, "oom\n", "the run")
    d = dumps["exit"]
    eq([o["api"] for o in d["ooms"]][:1], ["cuMemCreate"], "the failure: a page of the segment")
    eq([f["id"] for o in d["ooms"] for f in o["findings"] if f["id"] == "growing_site"], [], "no growing site")
    eq(d["growing"], [], "none at exit")
    ok("leak suspect" not in report, report)
    out, dumps, report = traced(EXPANDABLE, "leak", env=env)
    eq(out, "done\n", "the leaking run")
    g = dumps["exit"]["growing"]
    eq([(x["unit"], x.get("holder")) for x in g], [("step", "keep")], "the leak, per step, held by keep")


EMPTIED_THEN_SMALLER = r"""
import torch
a = torch.empty(200 * 2**20, dtype=torch.uint8, device="cuda")
del a
torch.cuda.empty_cache()
b = torch.empty(40 * 2**20, dtype=torch.uint8, device="cuda")
print("max reserved", torch.cuda.max_memory_reserved() >> 20, "reserved", torch.cuda.memory_reserved() >> 20)
"""

VIZ_TOOLS = r"""
import json, pickle, sys
from torch.cuda import _memory_viz as mv
snap = pickle.load(open(sys.argv[1], "rb"))
pages = [mv.trace_plot(snap), mv.trace_plot(snap, plot_segments=True), mv.trace_plot(snap, filter_freed=True),
         mv.segment_plot(snap)]
stats, trace = mv.segsum(snap), mv.trace(snap)
print(json.dumps({"pages": [len(x) > 0 for x in pages], "stats": [x for x in stats.splitlines() if x.startswith(
    ("segments: ", "total_reserved: "))], "mallocs": trace.count(" = cudaMalloc("), "frees": trace.count("cudaFree(")}))
"""


def trace_peaks(trace):
    """The most bytes a trace has allocated (alloc to free_completed) and
    reserved (segment_alloc to segment_free) at once, replayed from an
    empty device as memory_viz's timelines do."""
    now, peak = {"alloc": 0, "segment": 0}, {"alloc": 0, "segment": 0}
    sign = {"alloc": ("alloc", 1), "free_completed": ("alloc", -1), "segment_alloc": ("segment", 1),
            "segment_free": ("segment", -1)}
    for e in trace:
        if e["action"] in sign:
            k, s = sign[e["action"]]
            now[k] += s * e["size"]
            peak[k] = max(peak[k], now[k])
    return peak["alloc"], peak["segment"]


@torch_test
def torch_truth_expandable_pages_freed_before_the_dump_are_in_the_export():
    """Under expandable segments a 200 MiB tensor is ten pages of 20 MiB
    (a cuMemCreate and a cuMemMap each), given back by empty_cache()
    (cuMemUnmap, cuMemRelease) before a 40 MiB tensor maps two pages at the
    segment's start again. The torch export has every page where it was
    mapped: ten made and freed, side by side, then the two kept, so that
    the trace replays to PyTorch's own peak of 200 MiB, and PyTorch's own
    _memory_viz reads it. (Before: only the two kept pages, 2 segment_alloc
    and 2 alloc entries, a peak of 40 MiB: the event ring knows a handle by
    its value alone, and only a live handle's address was known.)"""
    from test_cli import replay
    from test_torch_export import export
    P = 20 * MiB
    out, dumps, _ = traced(EMPTIED_THEN_SMALLER, env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"},
                           capacity="1G")
    eq(out, "max reserved 200 reserved 40\n", "PyTorch's own figures")
    d = dumps["exit"]
    v1 = v1_view(d)
    events = [(e[1], e[3], e[6]) for e in v1["events"]]
    eq(events, [("alloc", P, "vmm")] * 10 + [("free", P, "vmm")] * 10 + [("alloc", P, "vmm")] * 2,
       "the dump: ten pages made and freed, two made")
    eq(d["totals"]["peak_bytes"], 200 * MiB, "vramtrace's peak")
    base = min(int(a["address"], 16) for a in v1["live"])   # the segment's start
    with workdir("vt-truth-export-") as work:
        path, pk = os.path.join(work, "d.json"), os.path.join(work, "d.pickle")
        with open(path, "w") as f:
            json.dump(d, f)
        raw = export(path)
        with open(pk, "wb") as f:
            f.write(raw)
        snap = pickle.loads(raw)
        p = subprocess.run([TORCH_PY, "-c", VIZ_TOOLS, pk], capture_output=True, text=True, timeout=300)
    eq(sorted((s["address"] - base, s["total_size"], s["is_expandable"]) for s in snap["segments"]),
       [(0, P, True), (P, P, True)], "segments: the two pages kept")
    eq(len(snap["device_traces"]), 1, "one device")
    trace = snap["device_traces"][0]
    eq([(e["action"], e["addr"] - base, e["size"]) for e in trace],
       [(a, k * P, P) for k in range(10) for a in ("segment_alloc", "alloc")] +
       [(a, k * P, P) for k in range(10) for a in ("free_requested", "free_completed", "segment_free")] +
       [(a, k * P, P) for k in range(2) for a in ("segment_alloc", "alloc")],
       "the trace: every page at its address, freed before the dump or not")
    eq(trace_peaks(trace), (200 * MiB, 200 * MiB), "the replay's peak, allocated and reserved")
    replay(snap)
    eq(p.returncode, 0, "torch.cuda._memory_viz:\n" + p.stderr[-2000:])
    eq(json.loads(p.stdout.splitlines()[-1]),
       {"pages": [True] * 4, "stats": ["segments: 2", "total_reserved: 40.0MiB"], "mallocs": 12, "frees": 10},
       "trace_plot (of blocks, of segments, without freed ones), segment_plot, stats and trace of PyTorch's own "
       "_memory_viz")
    eq([(int(m[1], 16) - base, m[2], m[3], m[6] is None) for m in d["mappings"]],
       [(k * P, P, 0, False) for k in range(10)] + [(0, P, 0, True), (P, P, 0, True)],
       "the dump's mappings: ten unmapped, two still mapped at the segment's start")


MIXED = r"""
import ctypes, torch
torch.zeros(1, device="cuda")
cu = ctypes.CDLL("libcuda.so.1")
cu.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
def raw_alloc(n):
    p = ctypes.c_uint64()
    return cu.cuMemAlloc_v2(ctypes.byref(p), n)
n = 0
while raw_alloc(256 << 20) == 0:
    n += 1
try:
    torch.empty(512 << 20, dtype=torch.uint8, device="cuda")
except torch.OutOfMemoryError:
    print(n, "torch OOM")
"""


@test
def torch_truth_advice_for_memory_that_is_not_pytorchs():
    """A PyTorch program whose memory is held by raw driver allocations
    (ctypes) when PyTorch's allocation fails: the call site holding it is
    told to shrink or free what it allocates, not to use torch.no_grad()
    or a smaller micro-batch (before: PyTorch's advice, because PyTorch's
    allocator was read at the failure; from an outside check)."""
    out, dumps, report = traced(MIXED, capacity="4G")
    eq(out, "14 torch OOM\n", "fourteen raw allocations, then PyTorch's failure")
    ooms = dumps["exit"]["ooms"]
    dom = [f["next"] for o in ooms for f in o["findings"] if f["id"] == "one_site_dominates"]
    ok(dom, "one_site_dominates: " + json.dumps([o["findings"] for o in ooms])[:2000])
    for n in dom:
        ok(re.fullmatch(r"shrink or free what raw_alloc \S*train\.py:8 allocates before the failing call", n),
           "the general next step: " + n)


CACHE_HOLES = r"""
import torch
MiB = 1 << 20
big = [torch.empty(100 * MiB, dtype=torch.uint8, device="cuda") for _ in range(20)]   # LINE:made
del big
keep = []
for i in range(20):
    keep.append(torch.empty(60 * MiB, dtype=torch.uint8, device="cuda"))   # a 40 MiB hole in each segment
try:
    torch.empty(900 * MiB, dtype=torch.uint8, device="cuda")
except torch.OutOfMemoryError:
    print("failed")
"""


@torch_test
def torch_truth_a_fragmented_cache_counts_the_free_device_memory():
    """800 MiB of holes among live tensors in PyTorch's cache and 872 MiB
    free on the device, 900 MiB asked: expandable segments join the two.
    The fragmentation went unsaid (the holes alone were not the request),
    and the line whose tensors were all deleted, whose segments the
    program's `keep` fills now, was told to shrink its micro-batch."""
    out, dumps, report = traced(CACHE_HOLES, capacity="3172M")
    eq(out, "failed\n", "the run")
    f = {x["id"]: x for x in dumps["exit"]["ooms"][-1]["findings"]}
    eq((f["fragmented_cache"]["finding"], f["fragmented_cache"]["next"]),
       ("PyTorch's cache holds 800.00 MiB reserved but unallocated and the device had 872.00 MiB free, together more "
        "than the 900.00 MiB asked for, yet the cache's largest free block is 40.00 MiB: the cache is fragmented",
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (segments that grow instead of splitting) or "
        "max_split_size_mb:N (blocks over N MiB never split for smaller tensors); not torch.cuda.empty_cache(): "
        "PyTorch gave back its empty segments before it raised"), "the fragmentation")
    made = 1 + next(i for i, x in enumerate(CACHE_HOLES.split("\n")) if "LINE:made" in x)
    ok(re.match(r"these are segments of PyTorch's cache, made at <listcomp> /\S*/train\.py:%d -> "
                r"torch::autograd::THPVariable_empty " % made, f["one_site_dominates"]["next"]),
       f["one_site_dominates"]["next"])
    ok(f["one_site_dominates"]["next"].endswith(" and reused since: what lies in them now is mostly `keep`'s "
                                                "(1.17 GiB), not that line's; free or shrink what `keep` keeps, and "
                                                "see the fragmentation finding"), f["one_site_dominates"]["next"])
    # The post-mortem, written before PyTorch's record came, says both
    # once it came.
    added = report[report.index("vramtrace: what PyTorch's record adds to the findings:"):]
    ok("the cache is fragmented\n" in added and "mostly `keep`'s" in added, added[:3000])


RETRY_WITH_FREE_MEMORY = r"""
import torch
keep = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
x = torch.empty(100 << 20, dtype=torch.uint8, device="cuda")
del x   # cached: PyTorch's retry gives it back
try:
    torch.empty(512 << 20, dtype=torch.uint8, device="cuda")
except torch.OutOfMemoryError:
    print("failed")
"""


@torch_test
def torch_truth_a_retry_with_more_free_than_asked_is_not_called_held():
    """No block of 512 MiB to be had (SIMGPU_MAX_BLOCK) with 1.74 GiB free:
    PyTorch's retry, after it gave back its cache, fails again. The
    retry's finding said the memory was held by live allocations and not
    to touch allocator settings, beside the fragmentation finding that
    advised one."""
    out, dumps, report = traced(RETRY_WITH_FREE_MEMORY, capacity="2148M", env={"SIMGPU_MAX_BLOCK": "256M"})
    eq(out, "failed\n", "the run")
    o = dumps["exit"]["ooms"][-1]
    f = {x["id"]: x for x in o["findings"]}
    ids = [x["id"] for x in o["findings"]]
    eq((ids[0], ids[-1]), ("fragmentation", "allocator_retry"), f"the first finding (more was free than asked) and the "
                                                                 f"last: {ids}")
    eq(f["fragmentation"]["finding"], "1.74 GiB was free, more than the 512.00 MiB asked for, yet it failed: free "
       "memory is fragmented or a pool limit applies", "the fragmentation")
    eq((f["allocator_retry"]["finding"], f["allocator_retry"]["next"]),
       ("this is a retry: after the failure before it the process freed 1 allocation (100.00 MiB), as a caching "
        "allocator releasing its cache does, and the same 512.00 MiB still failed",
        "what the release gave back left more free than asked, and it still failed: the free memory is fragmented "
        "(the fragmentation above), not held by live allocations; act on that"), "the retry")
    ok("held by live allocations; act on the holders" not in report, "no contradiction in the post-mortem")


ONE_STEP_THEN_A_LARGER_BATCH = r"""
import torch, torch.nn as nn
model = nn.Sequential(*[nn.Linear(4096, 4096) for _ in range(8)]).cuda()   # 512 MiB
opt = torch.optim.Adam(model.parameters())
for step, bs in enumerate([1024, 8192]):
    x = torch.randn(bs, 4096, device="cuda")
    loss = model(x).square().mean()
    opt.zero_grad(); loss.backward(); opt.step()
"""


@torch_test
def torch_truth_a_job_dying_at_step_two_has_no_leak_suspects():
    """Adam's state and the gradients made at step 1, the job dead in
    step 2's forward: the post-mortem said "not yet a leak", while the
    exit summary, the dump's `growing` and `vramtrace report` listed
    Adam._init_group and backward as growing call sites, leak suspects, at
    terabytes a second."""
    work = tempfile.mkdtemp(prefix="vt-truth-")
    try:
        out, dumps, report = traced(ONE_STEP_THEN_A_LARGER_BATCH, capacity="3172M", status=1)
        d = dumps["exit"]
        eq((d["steps_total"], d["growing"]), (1, []), "one step, no growing site")
        ok("growing call sites" not in report and "per second" not in report, report[-3000:])
        path = os.path.join(work, "d.json")
        with open(path, "w") as f:
            json.dump(d, f)
        r = in_dir([CLI, "report", path], work, clean_env())
        eq(r.returncode, 0, r.stderr)
        ok("growing call sites" not in r.stdout and "leak suspect" not in r.stdout, r.stdout[-3000:])
        ok("not yet a leak" in r.stdout, "the post-mortem's finding, in the report")
    finally:
        shutil.rmtree(work, ignore_errors=True)


MOVED_AFTER_ONE_STEP = r"""
import torch, torch.nn as nn
model = nn.Sequential(*[nn.Linear(4096, 4096) for _ in range(8)]).to("cuda:0")   # 512 MiB
opt = torch.optim.Adam(model.parameters())
x = torch.randn(256, 4096, device="cuda:0"); model(x).sum().backward(); opt.step()
model.to("cuda:1")   # Adam's state stays on cuda:0
for bs in [4096, 16384, 65536]:
    x = torch.randn(bs, 4096, device="cuda:1")
    model(x).sum().backward()
"""


UNDER_AUTOCAST = r"""
import torch, torch.nn as nn
model = nn.Sequential(*[nn.Linear(4096, 4096) for _ in range(12)]).cuda()   # 768 MiB
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
scaler = torch.amp.GradScaler("cuda")
for step in range(3):
    x = torch.randn(512, 4096, device="cuda")
    with torch.autocast("cuda", dtype=torch.float16):
        loss = model(x).float().square().mean()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    opt.zero_grad(set_to_none=True)
"""


@torch_test
def torch_truth_first_steps_advice_fits_the_step_the_device_and_the_precision():
    """"The first step does not fit: ... a lighter optimizer, mixed
    precision" was said of a failure in step 2 after step 1 fitted, of a
    device that holds no optimizer state (Adam's on cuda:0, the failure on
    cuda:1), and to a program under torch.autocast."""
    def grew(dumps):
        return [x["next"] for o in dumps["exit"]["ooms"] for x in o["findings"] if x["id"] == "growing_site"]
    # Step 2's batch of 8192 after step 1's of 1024: its activations, in
    # float32 (no autocast: mixed precision is advised).
    out, dumps, report = traced(ONE_STEP_THEN_A_LARGER_BATCH, capacity="3172M", status=1)
    eq(grew(dumps)[-1], "step 2 does not fit though the 1 optimizer step before it did: the model, its gradients and "
       "the optimizer's state fit; what does not is this step's own work (its activations: 384.00 MiB at the "
       "failure), a larger batch or longer sequences than before: a smaller batch here (with gradient "
       "accumulation), mixed precision, or activation checkpointing", "step 2's advice")
    ok("the first step does not fit" not in report, "no first step said")
    # Two devices: cuda:1 holds no optimizer state.
    out, dumps, report = traced(MOVED_AFTER_ONE_STEP, capacity="3172M", status=1, env={"SIMGPU_DEVICES": "2"})
    eq([o["device"] for o in dumps["exit"]["ooms"]], [1, 1, 1], "the failures on cuda:1")
    eq(grew(dumps), ["step 2 does not fit though the 1 optimizer step before it did: the model and its gradients "
                     "fit; what does not is this step's own work, a larger batch or longer sequences than before: a "
                     "smaller batch here (with gradient accumulation), or activation checkpointing"],
       "cuda:1's advice")
    ok("lighter optimizer" not in report, "no optimizer advice for cuda:1")
    # Under autocast, the failure in Adam's first step: no mixed precision.
    out, dumps, report = traced(UNDER_AUTOCAST, capacity="3172M", status=1)
    eq(set(grew(dumps)), {"the first step does not fit: a smaller batch or model, a lighter optimizer (SGD, "
                          "Adafactor, 8-bit Adam: Adam keeps two tensors a parameter), or sharding (FSDP, ZeRO)"},
       "the first step's advice under autocast")
    ok("mixed precision" not in report, "no mixed precision advised under autocast")


ONE_HUGE_REQUEST = r"""
import torch, torch.nn as nn
class Big(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * 2
    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        scratch = torch.empty(x.shape[0] * 80, x.shape[1], device=x.device)   # LINE:huge
        return g * 2 + scratch[: x.shape[0]]
lin = nn.Linear(2048, 2048).cuda()
x = torch.randn(4096, 2048, device="cuda", requires_grad=True)
Big.apply(lin(x)).sum().backward()
"""


EVALUATION_WITH_GRAD = r"""
import torch, torch.nn as nn
model = nn.Sequential(*[nn.Sequential(nn.Linear(4096, 4096), nn.GELU()) for _ in range(6)]).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(3):
    x = torch.randn(1024, 4096, device="cuda")
    loss = model(x).square().mean(); opt.zero_grad(); loss.backward(); opt.step()
def evaluate():
    model.eval()
    total = 0.0
    for i in range(3):
        xb = torch.randn(16384, 4096, device="cuda")
        out = model(xb)   # LINE:eval
        total += out.mean().item()
    return total
evaluate()
"""


@torch_test
def torch_truth_post_mortems_that_said_nothing():
    """A request of 2.50 GiB on a 2.73 GiB device whose context takes 300
    MiB: more than the process can ever have, with nothing said (only a
    request above the device's total was). An evaluation without
    torch.no_grad() keeping 1.25 GiB of activations, its line at 48%: no
    finding either (one_site_dominates wants 50%)."""
    out, dumps, report = traced(ONE_HUGE_REQUEST, capacity="2800M", status=1)
    huge = 1 + next(i for i, x in enumerate(ONE_HUGE_REQUEST.split("\n")) if "LINE:huge" in x)
    f = dumps["exit"]["ooms"][0]["findings"]
    eq([(x["id"], x["finding"]) for x in f],
       [("request_exceeds_device", "the request alone (2.50 GiB) is more than this process can ever have of the "
         "device, by 60.00 MiB: 2.44 GiB of its 2.73 GiB, the rest (300.00 MiB) held outside its allocations (the "
         "CUDA context, other processes); it fails even with everything else freed"),
        ("outside_tracked", "300.00 MiB (11% of the device) is held outside this process's tracked allocations")],
       "the request's finding, then what holds the rest")
    ok(re.match(r"no allocator setting can fit it: make that tensor smaller at Big\.backward /\S*/train\.py:%d -> "
                % huge, f[0]["next"]), f[0]["next"])
    out, dumps, report = traced(EVALUATION_WITH_GRAD, capacity="3172M", status=1)
    line = 1 + next(i for i, x in enumerate(EVALUATION_WITH_GRAD.split("\n")) if "LINE:eval" in x)
    f = {x["id"]: x for x in dumps["exit"]["ooms"][-1]["findings"]}
    eq((f["evaluation_keeps_graph"]["finding"], re.sub(r" /\S*/train\.py:", " train.py:", f["evaluation_keeps_graph"]["next"])),
       ("the model is in evaluation mode (training is False) with grad mode on: autograd keeps 1.25 GiB of "
        "activations (48% of what PyTorch allocated) for a backward that evaluation never runs",
        f"run the evaluation at evaluate train.py:{line} under torch.no_grad() or torch.inference_mode(): no "
        "activations are kept then"), "the evaluation's finding")
    ok("the model is in evaluation mode (training is False) with grad mode on" in report, report[-3000:])


LARGER_THAN_THE_DEVICE = r"""
import torch
MiB = 1 << 20
small = torch.empty(100 * MiB, dtype=torch.uint8, device="cuda")
try:
    x = torch.empty(9 * 1024 * MiB, dtype=torch.uint8, device="cuda")
except torch.OutOfMemoryError as e:
    print(str(e).splitlines()[0][:48])
"""


@torch_test
def torch_truth_expandable_tensor_larger_than_the_device_is_the_requests_own():
    """Expandable segments, a 9 GiB tensor on an 8 GiB device: PyTorch
    makes its 20 MiB pages one after another, the 390th is refused, it
    releases the 389 it made (7.60 GiB), tries once more and raises. Those
    pages were told as the largest holder ("holds 99% of the tracked
    memory", a smaller micro-batch advised), and the request was never said
    to be larger than the device, as it is without expandable segments.
    They are the request's own: said with the request, left out of the
    holders; the finding is the request's, and once PyTorch's record says
    it asked 9 GiB, request_exceeds_device, in the dump and in `vramtrace
    report` as in the post-mortem."""
    out, dumps, report = traced(LARGER_THAN_THE_DEVICE, env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"})
    report = re.sub(r"/\S*/train\.py", "train.py", report)
    eq(out, "CUDA out of memory. Tried to allocate 9.00 GiB. \n", "PyTorch's error")
    taken = ("taken by this request before that call: 7.60 GiB in 389 handles made one after another at this call "
             "site and not mapped yet (a request made of pages, as PyTorch's expandable segments make them): the "
             "request's own, not memory the program holds; counted in the tracked bytes below, not among the holders")
    pm = report[:report.index("vramtrace: inside PyTorch at this out-of-memory error:")]
    eq([l for l in pm.splitlines() if "taken by this request" in l], ["vramtrace:   " + taken], "the request's own")
    rows = pm[pm.index("vramtrace: largest holders by call site"):pm.index("vramtrace: largest live allocations")]
    eq([l.split(" -> ")[0] for l in rows.splitlines()],
       ["vramtrace: largest holders by call site (1 call site):",
        "vramtrace:   100.00 MiB 100.0%      5 allocs  <module> train.py:4"], "the holders: the rest")
    first = ("this request made 389 handles (7.60 GiB) before the one of 20.00 MiB that failed: 7.62 GiB asked so "
             "far, no less than everything else the program holds on the device (100.00 MiB); that much fits the "
             "7.71 GiB this process can have of the device, and with what is held it does not (how much more the "
             "request wanted is not known here)")
    exceeds = "the request alone (9.00 GiB) is larger than the device (8.00 GiB)"
    eq(re.findall(r"vramtrace:   \d\. (.*)", report), [first, exceeds],
       "the findings: the post-mortem's, then what PyTorch's record adds")
    ok("what PyTorch's record adds to the findings:\nvramtrace:   1. " + exceeds + "\nvramtrace:      next: no "
       "allocator setting can fit it: make that tensor smaller at <module> train.py:6" in report, "its next step")
    ok("of the tracked memory" not in report and "micro-batch" not in report, "no holder, no batch advice")
    ooms = dumps["exit"]["ooms"]
    eq([(o["api"], o["requested_bytes"], o["taken_bytes"], o["taken_count"]) for o in ooms],
       [("cuMemCreate", 20 << 20, 389 * (20 << 20), 389)] * 2, "the failures: the page, twice, after 389 pages")
    eq([[(f["id"], f["finding"]) for f in o["findings"]] for o in ooms],
       [[("request_takes_most", first)], [("request_exceeds_device", exceeds)]], "the dump's findings")
    with workdir("vt-truth-taken-") as work:
        path = os.path.join(work, "d.json")
        json.dump(dumps["exit"], open(path, "w"))
        text = subprocess.run([CLI, "report", path], capture_output=True, text=True).stdout
        eq(text.count("  " + taken + "\n"), 2, "vramtrace report: the request's own, at each failure")
        eq(re.findall(r"\n    \d\. (.*)", text), [first, exceeds], "vramtrace report: the same findings")


HELD_AND_ASKED = r"""
import torch
x = torch.empty(3 << 30, dtype=torch.uint8, device="cuda")
try:
    y = torch.empty(6 << 30, dtype=torch.uint8, device="cuda")
except torch.OutOfMemoryError as e:
    print(str(e).splitlines()[0][:48])
"""


@torch_test
def torch_truth_expandable_request_that_fits_alone_names_the_holders_too():
    """Expandable segments, 3 GiB held, then a 6 GiB tensor on an 8 GiB
    device (7.71 GiB of it this process's): its pages fail at 4.71 GiB.
    The request fits without what is held, and what is held fits without
    it: it was told "it is the request that does not fit, not what is
    held", steering away from the holder. Now the post-mortem says what
    is known at the first failure (4.71 GiB so far fits; with what is held
    it does not; how much more is not known), and what PyTorch's record
    adds (6.00 GiB in all, which fits alone) comes after it on stderr as
    in the dump's and `vramtrace report`'s second failure, with both
    remedies."""
    out, dumps, report = traced(HELD_AND_ASKED, env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"})
    report = re.sub(r"/\S*/train\.py", "train.py", report)
    eq(out, "CUDA out of memory. Tried to allocate 6.00 GiB. \n", "PyTorch's error")
    head = ("this request made 240 handles (4.69 GiB) before the one of 20.00 MiB that failed: 4.71 GiB asked so far, "
            "no less than everything else the program holds on the device (3.01 GiB)")
    first = (head + "; that much fits the 7.71 GiB this process can have of the device, and with what is held it "
             "does not (how much more the request wanted is not known here)")
    second = (head + "; PyTorch asked 6.00 GiB in all; the request alone fits the 7.71 GiB this process can have of "
              "the device, and with what is held it does not")
    site = "<module> train.py:5 -> torch::autograd::THPVariable_empty (libtorch_python.so+0x"
    first_next = (f"make that tensor smaller at {site}", "(batch or sequence length), or free what the program "
                  "holds on the device before it (3.01 GiB, the holders)")
    second_next = (f"either would let it fit: free what the program holds on the device before {site}",
                   "(3.01 GiB, the holders), or make that tensor smaller there (batch or sequence length) than the "
                   "4.70 GiB left beside them")
    got = re.findall(r"vramtrace:   (\d)\. (.*)\nvramtrace:      next: (.*)", report)
    eq([(k, t) for k, t, _ in got], [("1", first), ("1", second)], "the post-mortem's finding, then the record's")
    eq([(nx.startswith(a), nx.split(") ", 1)[1]) for (_, _, nx), (a, b) in zip(got, (first_next, second_next))],
       [(True, first_next[1]), (True, second_next[1])], "their next steps")
    ok("what PyTorch's record adds to the findings:\nvramtrace:   1. " + second in report, "said as the record's")
    eq("not what is held" in report, False, "the request is not said to be what does not fit alone")
    ooms = dumps["exit"]["ooms"]
    eq([[(f["id"], f["finding"]) for f in o["findings"]] for o in ooms],
       [[("request_takes_most", first)], [("request_takes_most", second)]], "the dump's findings, by failure")
    with workdir("vt-truth-held-") as work:
        path = os.path.join(work, "d.json")
        json.dump(dumps["exit"], open(path, "w"))
        text = re.sub(r"/\S*/train\.py", "train.py", subprocess.run([CLI, "report", path], capture_output=True,
                                                                     text=True).stdout)
        eq(re.findall(r"\n    \d\. (.*)", text), [first, second], "vramtrace report: the same findings")
