"""The call site of a stack of native frames alone: the interpreter's own
frames (libpython, the python executable) are never one. With `--python 0`
(or a Python vramtrace cannot read) a PyTorch script's stacks hold no frame
of the user's, so each names the library function the interpreter called,
not CPython's `cfunction_call Objects/methodobject.c`."""
from run_tests import *  # noqa: F401,F403

SCRIPT = """import torch
x = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
y = torch.ones(32 << 20, dtype=torch.uint8, device="cuda")
"""
ENTRY = r"torch::autograd::THPVariable_{}\(_object\*, _object\*, _object\*\) \(libtorch_python\.so\+0x[0-9a-f]+\)"


@torch_test
def torch_native_stacks_name_the_library_entry_not_the_interpreter():
    with workdir("vt-nativesite-") as work:
        with open(os.path.join(work, "n.py"), "w") as f:
            f.write(SCRIPT)
        e = {k: v for k, v in os.environ.items()
             if not k.startswith(("VRAMTRACE_", "SIMGPU_")) and k not in ("LD_PRELOAD", "LD_LIBRARY_PATH")}
        e["SIMGPU_CAPACITY"] = "8G"
        p = subprocess.run([os.path.join(ROOT, "tests", "simgpu", "run"), "--torch", "--", CLI, "run", "--python", "0",
                            "--out", "d.json", "--", "python3", "n.py"],
                           env=e, cwd=work, capture_output=True, text=True, timeout=240)
        eq(p.returncode, 0, "the script under vramtrace run --python 0:\n" + p.stderr[-2000:])
        rows = p.stderr.split("largest holders by call site (2 call sites):\n", 1)
        eq(len(rows), 2, "the exit summary's holders heading:\n" + p.stderr[-2000:])
        rows = rows[1].splitlines()[:2]
        want = [r"vramtrace:    64\.00 MiB  66\.7%      1 alloc   " + ENTRY.format("empty"),
                r"vramtrace:    32\.00 MiB  33\.3%      1 alloc   " + ENTRY.format("ones")]
        for row, w in zip(rows, want):
            ok(re.fullmatch(w, row), f"holder row {row!r}, want {w!r}")
        q = subprocess.run([CLI, "report", "--format", "json", os.path.join(work, "d.json")],
                           capture_output=True, text=True)
        eq(q.returncode, 0, "vramtrace report:\n" + q.stderr)
        holders = json.loads(q.stdout)["combined_holders"]
        eq([h["bytes"] for h in holders], [64 * MiB, 32 * MiB], "vramtrace report's holders")
        for h, name in zip(holders, ("empty", "ones")):
            ok(re.fullmatch(ENTRY.format(name), h["site"]), f"vramtrace report's site {h['site']!r}")
