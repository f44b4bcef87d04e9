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


# A ctypes call: every native frame is the interpreter's, CPython's own
# _ctypes module (lib-dynload/_ctypes.cpython-3XY-...so) or libffi, none a
# call site; with no frame of the user's, nothing the innermost runtime
# frame called but the driver, the call site is the innermost frame: not
# `_call_function_pointer Modules/_ctypes/callproc.c` as it was.
CTYPES = """import ctypes, sys
cu = ctypes.CDLL("libcuda.so.1"); cu.cuInit(0)
def alloc(n):
    p = ctypes.c_uint64()
    cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(n))
class Holder:
    def __del__(self):
        alloc(5 << 20)
h = Holder()
def weights(): alloc(100 << 20)
def activations(): alloc(50 << 20)
weights(); activations()
"""
LIBFFI = r"\?\? \(libffi\.so[.0-9]*\+0x[0-9a-f]+\)"


def ctypes_rows(python):
    with workdir("vt-nativesite-") as work:
        with open(os.path.join(work, "c.py"), "w") as f:
            f.write(CTYPES)
        e = {k: v for k, v in os.environ.items()
             if not k.startswith(("VRAMTRACE_", "SIMGPU_")) and k not in ("LD_PRELOAD", "LD_LIBRARY_PATH")}
        e["SIMGPU_CAPACITY"] = "1G"
        p = subprocess.run([os.path.join(ROOT, "tests", "simgpu", "run"), "--", CLI, "run", "--python", python,
                            "--out", "off", "--", sys.executable, "c.py"],
                           env=e, cwd=work, capture_output=True, text=True, timeout=120)
        eq(p.returncode, 0, "the script under vramtrace run --python " + python + ":\n" + p.stderr[-2000:])
        rows = p.stderr.split("largest holders by call site (", 1)
        eq(len(rows), 2, "the exit summary's holders heading:\n" + p.stderr[-2000:])
        return rows[1].replace(work + "/", "WORK/").splitlines()


@test
def ctypes_native_stacks_name_no_cpython_module():
    rows = ctypes_rows("0")
    want = [r"1 call site\):", r"vramtrace:   155\.00 MiB 100\.0%      3 allocs  " + LIBFFI]
    for row, w in zip(rows, want):
        ok(re.fullmatch(w, row), f"holder row {row!r}, want {w!r}")


@test
def ctypes_call_in_del_at_shutdown_names_no_cpython_module():
    # Python frames are not read while the interpreter finalizes: the
    # __del__ run by Py_FinalizeEx has native frames alone.
    rows = ctypes_rows("1")
    want = [r"2 call sites\):",
            r"vramtrace:   150\.00 MiB  96\.8%      2 allocs  alloc WORK/c\.py:5",
            r"vramtrace:     5\.00 MiB   3\.2%      1 alloc   " + LIBFFI]
    for row, w in zip(rows, want):
        ok(re.fullmatch(w, row), f"holder row {row!r}, want {w!r}")
