"""Real PyTorch (build/torch-venv, `make torch-env`) under vramtrace.

Without any stand-in PyTorch's CUDA build behaves as on a machine without a
GPU; on the simulated GPU (tests/simgpu/run --torch) it runs its caching
allocator, expandable segments, cudaMallocAsync and its out-of-memory path
for real. Every expected number comes from PyTorch itself in the same
process (tests/gpu/torch_checks.py prints them as JSON), never from here.
Each test is skipped, with its reason printed, when build/torch-venv is
absent.
"""
import atexit
import re

from run_tests import *  # noqa: F401,F403

HAVE_TORCH = os.path.exists(TORCH_PY)


# A CPU training step: what a script does on a machine without a GPU.
CPU_STEP = r"""
import sys, torch
print("cuda available:", torch.cuda.is_available(), "devices:", torch.cuda.device_count())
torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
x, y = torch.randn(64, 16), torch.randn(64, 4)
for step in range(3):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.6f}")
print("to stderr", file=sys.stderr)
sys.exit(7)
"""


@torch_test
def torch_without_any_driver():
    a = run([TORCH_PY, "-c", CPU_STEP], preload=False, sim=False)
    b = run([TORCH_PY, "-c", CPU_STEP], preload=True, sim=False)
    ok(a.out.startswith("cuda available: False devices: 0\nstep 0 loss "), "PyTorch without a driver: " + a.out)
    eq(a.out.count("\nstep "), 3, "three training steps")
    eq(a.rc, 7, "the script's own status")
    eq((b.out, b.err, b.rc), (a.out, a.err, a.rc), "stdout, stderr and status under vramtrace")
    ok("vramtrace" not in b.err, "nothing of vramtrace's printed")
    eq(b.dumps, [], "no GPU memory was used: no dump")


# ------------------------------------------- on the simulated GPU
# tests/gpu/run.sh --sim torch runs every mode of tests/gpu/torch_checks.py
# (the script a GPU runs) on the stand-ins, under vramtrace and without it,
# once for all the tests below: each PyTorch import costs seconds.

_SIM = {}
GPU_CHECKS = {   # the checks torch_checks.py prints for each mode: none may go missing
    "mlp": 8, "train": 19, "expandable": 13, "async": 14, "nocache": 14, "limit": 6, "uw": 8, "viz": 14,
    "truth": 20, "frag": 10, "asynctruth": 7, "evalgraph": 10,
}


def sim_torch():
    if "run" not in _SIM:
        out = tempfile.mkdtemp(prefix="vt-torch-")
        atexit.register(shutil.rmtree, out, True)
        e = {k: v for k, v in os.environ.items()
             if not k.startswith(("VRAMTRACE_", "SIMGPU_")) and k not in ("LD_PRELOAD", "LD_LIBRARY_PATH")}
        e["OUT"] = out
        p = subprocess.run(["bash", os.path.join(ROOT, "tests", "gpu", "run.sh"), "--sim", "torch"], env=e,
                           capture_output=True, text=True, timeout=900)
        _SIM["run"] = (p, out)
    return _SIM["run"]


def sim_file(name):
    p, out = sim_torch()
    path = os.path.join(out, name)
    if not os.path.exists(path):
        raise Failure(f"tests/gpu/run.sh --sim torch wrote no {name}:\n" + p.stdout[-3000:] + p.stderr[-1000:])
    with open(path) as f:
        return f.read()


def all_pass(check_file, modes):
    lines = sim_file(check_file).splitlines()
    bad = [x for x in lines if not x.startswith("PASS ")]
    eq(bad, [], f"{check_file}: checks that did not pass")
    eq(len(lines), sum(GPU_CHECKS[m] for m in modes), f"{check_file}: number of checks")
    return lines


@torch_test
def torch_transparency():
    for mode in ("mlp", "train", "expandable", "async", "nocache"):
        # stderr without the times PyTorch's warnings start with
        for part in ("out", "err.untimed", "rc"):
            eq(sim_file(f"{mode}.{part}"), sim_file(f"{mode}.plain.{part}"), f"{mode}: {part} under vramtrace")
        eq(sim_file(f"{mode}.rc"), "0\n", f"{mode}: status")
        ok("vramtrace" not in sim_file(f"{mode}.err"), f"{mode}: nothing of vramtrace's on stderr (report to a file)")
    mlp = json.loads(sim_file("mlp.out"))
    eq(mlp["cuda_available"], True, "torch.cuda.is_available() on the simulated GPU")
    # Each allocator's own words: the caching allocator's, cudaMallocAsync's, the plain CUDA error check's.
    for mode, start in (("train", "CUDA out of memory. Tried to allocate 502.00 MiB. GPU 0 has a total capacity of "),
                        ("expandable", "CUDA out of memory. Tried to allocate 502.00 MiB. GPU 0 has a total capacity of "),
                        ("async", "Allocation on device 0 would exceed allowed memory. (out of memory)\n"),
                        ("nocache", "CUDA error: out of memory\n")):
        msg = json.loads(sim_file(f"{mode}.out"))["message"]
        ok(msg.startswith(start), f"{mode}: PyTorch's own error text: {msg!r}")


def checks_test(name, *modes):
    """A test that every check of torch_checks.py's modes passed (each mode's
    MODE.check), registered as `name`."""
    def run_checks():
        for mode in modes:
            all_pass(f"{mode}.check", [mode])
    run_checks.__name__ = name
    return torch_test(run_checks)


for _name, _modes in (("torch_mlp_segments_and_lines", ("mlp",)), ("torch_oom_retry", ("train",)),
                      ("torch_oom_expandable_async_nocache", ("expandable", "async", "nocache")),
                      ("torch_budget_limit", ("limit",)), ("torch_unwind_check", ("uw",)),
                      ("torch_export_in_memory_viz", ("viz",)),
                      ("torch_oom_record_under_cudamallocasync_gpu_script", ("asynctruth",)),
                      ("torch_evaluation_graph_gpu_script", ("evalgraph",))):
    checks_test(_name, *_modes)


@torch_test
def torch_gpu_script_on_the_simulated_gpu():
    p, out = sim_torch()
    n = sum(GPU_CHECKS.values())
    eq(p.returncode, 0, "tests/gpu/run.sh --sim torch:\n" + p.stdout[-3000:] + p.stderr[-1000:])
    ok(f"gpu checks: {n} passed, 0 failed" in p.stdout, p.stdout[-1000:])


# ------------------------------------------- the user's own line
CHECKS = os.path.join(ROOT, "tests", "gpu", "torch_checks.py")


def tagged_lines():
    """{line: tag} of torch_checks.py's `# LINE:tag` comments."""
    with open(CHECKS) as f:
        return {i: x.rstrip().rsplit("# LINE:", 1)[1] for i, x in enumerate(f, 1)
                if "# LINE:" in x and not x.lstrip().startswith("#")}


HOLDER_ROW = re.compile(r"^vramtrace: +[\d.]+ \S+ +[\d.]+% +\d+ allocs? +(.*)$")


def summary_sites(report):
    """The call sites of the exit summary's holder rows."""
    rows = report.split("largest holders by call site", 1)[1].split("\nvramtrace: dump:", 1)[0]
    return [m.group(1) for m in map(HOLDER_ROW.match, rows.splitlines()[1:]) if m]


# What each line of the MLP asks PyTorch for, as the installed PyTorch 2.14.1
# runs it: the library frame the call went through (a tensor made straight
# from the script: libtorch_python's entry point for it).
MLP_THROUGH = {"model": "Module.to.<locals>.convert torch/nn/modules/module.py:",
               "data": "torch::autograd::THPVariable_randn (libtorch_python.so+0x",
               "labels": "torch::autograd::THPVariable_randint (libtorch_python.so+0x",
               "weights": "torch::autograd::THPVariable_ones (libtorch_python.so+0x",
               "keep": "torch::autograd::THPVariable_empty (libtorch_python.so+0x",
               "scratch": "torch::autograd::THPVariable_empty (libtorch_python.so+0x",
               "forward": "Linear.forward torch/nn/modules/linear.py:",
               "backward": "_engine_run_backward torch/autograd/graph.py:",
               "step": "Adam."}


@torch_test
def torch_call_sites_are_the_scripts_lines():
    tags = tagged_lines()
    for mode, fn in (("mlp", "mode_mlp"), ("train", "grow_until_oom")):
        sites = summary_sites(sim_file(f"{mode}/report.txt"))
        ok(len(sites) >= 3, f"{mode}: holder rows in the exit summary: {sites}")
        for label in sites:
            m = re.match(rf"^{fn} (\S*/torch_checks\.py):(\d+) -> (.*)$", label)
            ok(m is not None, f"{mode}: the script's line first, then the library's: {label!r}")
            tag = tags.get(int(m.group(2)))
            ok(tag is not None, f"{mode}: {label!r} names a tagged line of the script")
            want = MLP_THROUGH.get(tag, f"(a through for the line tagged {tag})")
            ok(m.group(3).startswith(want) or (tag == "step" and m.group(3).startswith("_multi_tensor_adam ")),
               f"{mode}: {label!r} went through {want!r}")
    # The CLI reads the same choice from the dump: the same labels.
    d = [p for p in os.listdir(os.path.join(_SIM["run"][1], "mlp")) if p.endswith(".json")]
    eq(len(d), 1, "the MLP's dump")
    p = subprocess.run([CLI, "report", "--format", "json", os.path.join(_SIM["run"][1], "mlp", d[0])],
                       capture_output=True, text=True)
    cli_sites = [h["site"] for h in json.loads(p.stdout)["combined_holders"]]
    eq(sorted(cli_sites), sorted(summary_sites(sim_file("mlp/report.txt"))), "vramtrace report's call sites")


# Pinned memory: PyTorch's host allocator pins with cudaHostAlloc, or, with
# pinned_use_cuda_host_register, pins memory of its own with
# cudaHostRegister. The simulated driver says what it holds registered.
PINNED = r"""
import ctypes, json, torch
t = torch.empty(1 << 20, dtype=torch.uint8, pin_memory=True)
u = torch.empty(3 << 20, dtype=torch.uint8).pin_memory()
assert t.is_pinned() and u.is_pinned()
del t
sim = ctypes.CDLL("libcuda.so.1")
sim.simgpu_host_registered.restype = ctypes.c_uint64
n = ctypes.c_uint64()
b = sim.simgpu_host_registered(ctypes.byref(n))
print(json.dumps({"bytes": b, "count": n.value}))
"""


@torch_test
def torch_pinned_memory_registered_or_allocated():
    work = tempfile.mkdtemp(prefix="vt-torch-pin-")
    try:
        with open(os.path.join(work, "pin.py"), "w") as f:
            f.write(PINNED)
        for conf, api, kind in (("pinned_use_cuda_host_register:True,pinned_num_register_threads:1",
                                 "cudaHostRegister", "host_registered"), ("", "cudaHostAlloc", "host")):
            e = {k: v for k, v in os.environ.items()
                 if not k.startswith(("VRAMTRACE_", "SIMGPU_", "PYTORCH_")) and k not in ("LD_PRELOAD", "LD_LIBRARY_PATH")}
            e.update(LD_PRELOAD=LIB, VRAMTRACE_OUT=os.path.join(work, "d.json"), VRAMTRACE_REPORT="off",
                     PYTORCH_CUDA_ALLOC_CONF=conf)
            p = subprocess.run([os.path.join(ROOT, "tests", "simgpu", "run"), "--torch", "--", "python3",
                                os.path.join(work, "pin.py")], env=e, capture_output=True, text=True, timeout=240,
                               cwd=work)
            eq(p.returncode, 0, f"{api}: " + p.stderr[-2000:])
            sim = json.loads(p.stdout.splitlines()[-1])
            d = load_dump(os.path.join(work, "d.json"))
            pinned = [x for x in d["live"] if x["device"] == -1]
            eq(sorted({(x["api"], x["kind"]) for x in pinned}), [(api, kind)], f"{conf or 'default'}: the door")
            eq(len(pinned), 2, f"{api}: two blocks, the freed tensor's kept by PyTorch's cache")
            eq((d["host_memory"]["live_bytes"], d["host_memory"]["live_count"]),
               (sum(x["bytes"] for x in pinned), 2), f"{api}: host memory")
            if kind == "host_registered":
                eq((d["host_memory"]["live_bytes"], 2), (sim["bytes"], sim["count"]),
                   "registered bytes and ranges as the driver holds them")
            else:
                eq((sim["bytes"], sim["count"]), (0, 0), "cudaHostAlloc registers nothing")
                ok(d["host_memory"]["live_bytes"] >= 4 << 20, f"cudaHostAlloc: {d['host_memory']}")
            os.unlink(os.path.join(work, "d.json"))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def traced_mlp(env):
    """The MLP mode under vramtrace with env; its exit dump as `vramtrace report --format json` reads it."""
    out = tempfile.mkdtemp(prefix="vt-torch-app-")
    try:
        e = {k: v for k, v in os.environ.items()
             if not k.startswith(("VRAMTRACE_", "SIMGPU_")) and k not in ("LD_PRELOAD", "LD_LIBRARY_PATH")}
        e.update(env, SIMGPU_CAPACITY="8G", SIMGPU_CONTEXT="300M", LD_PRELOAD=LIB,
                 VRAMTRACE_OUT=os.path.join(out, "d.json"), VRAMTRACE_REPORT="off")
        p = subprocess.run([os.path.join(ROOT, "tests", "simgpu", "run"), "--torch", "--", "python3", CHECKS, "mlp",
                            os.path.join(out, "facts")], env=e, capture_output=True, text=True, timeout=240)
        eq(p.returncode, 0, "the MLP: " + p.stderr[-2000:])
        q = subprocess.run([CLI, "report", "--format", "json", os.path.join(out, "d.json")],
                           capture_output=True, text=True)
        return load_dump(os.path.join(out, "d.json")), json.loads(q.stdout)["combined_holders"]
    finally:
        shutil.rmtree(out, ignore_errors=True)


@torch_test
def torch_app_option_moves_the_call_site():
    lines = {t: n for n, t in tagged_lines().items()}
    # Pointing elsewhere: no frame is the user's, so the innermost frame, as without the rule.
    d, holders = traced_mlp({"VRAMTRACE_APP": "/nowhere/*"})
    for h in d["holders"]:
        st = d["stacks"][h["stack"]]
        innermost = next(i for i, f in enumerate(st["frames"]) if f["python"])
        eq((st["site"], st["through"]), (innermost, -1), "VRAMTRACE_APP elsewhere: the innermost Python frame alone")
    ok(all(" -> " not in h["site"] for h in holders), f"VRAMTRACE_APP elsewhere: {[h['site'] for h in holders]}")
    ok(any(h["site"].startswith("Linear.forward ") for h in holders), "forward's segment named inside torch")
    # Pointing into PyTorch: its module.py frames are the user's.
    d, holders = traced_mlp({"VRAMTRACE_APP": "*/torch/nn/modules/module.py"})
    sites = [h["site"] for h in holders]
    ok(any(re.match(r"^Module\._call_impl \S+/torch/nn/modules/module\.py:\d+ -> Linear\.forward "
                    r"torch/nn/modules/linear\.py:\d+$", x) for x in sites), f"the forward segment: {sites}")
    ok(any(re.match(r"^Module\.to\.<locals>\.convert \S+/module\.py:\d+ -> torch::autograd::THPVariable_to "
                    r"\(libtorch_python\.so\+0x", x)
           for x in sites), f"the model's parameters: module.py, with the native entry point inside it: {sites}")
    ok(not any(x.startswith("mode_mlp ") and " -> " in x for x in sites),
       f"the script is no longer the user's code (its line only where no frame is): {sites}")
    # VRAMTRACE_LIBRARY takes the script itself out: no user frame is left.
    d, holders = traced_mlp({"VRAMTRACE_LIBRARY": "*/torch_checks.py"})
    ok(all(" -> " not in h["site"] and "torch_checks.py:" + str(lines["forward"]) not in h["site"]
           for h in holders), f"VRAMTRACE_LIBRARY: {[h['site'] for h in holders]}")
