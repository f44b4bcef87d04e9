"""Stacks deeper than a stack holds (tracker/pystack.h, VT_PYFRAME_CUT): a
library recursing hundreds of Python frames below the user's call keeps
the innermost frames, one frame for those left out and the outermost 32
Python frames, so that the user's line stays the call site. Every CPython
on the machine."""
from run_tests import *  # noqa: F401,F403

# A library walking a deep structure (a nested model, a parse tree), as
# recursive code in a library does: its line 7 allocates at the bottom.
DEEP_LIB = '''import ctypes
rt = ctypes.CDLL("libcudart_sim.so")
rt.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
def visit(node, depth):
    if depth == 0:
        p = ctypes.c_void_p()
        rt.cudaMalloc(ctypes.byref(p), 64 << 20)
        return
    visit(node, depth - 1)
'''

DEEP_USER = '''import sys
sys.path.insert(0, sys.argv[1])
sys.setrecursionlimit(10000)
import recurse_lib
def build_model(depth):
    recurse_lib.visit(None, depth)
build_model(int(sys.argv[2]))
'''

CUT_OUTER = 32


def deep_case(py, work, depth):
    lib = os.path.join(work, "lib")
    script = os.path.join(work, "userdeep.py")
    r = run([py, script, lib, str(depth)],
            env={"VRAMTRACE_LIBRARY": lib, "VRAMTRACE_LEAK_CHECK": "1"})
    eq(r.rc, 23, f"{py}: leak check status: {r.err[-1500:]}")
    return r, lib, script


def python_frames_of(d, stack):
    return [(f["function"], f["file"], f["line"]) for f in frames(d, stack) if f.get("python")]


@test
def pydeep_library_recursion_keeps_the_users_line():
    """300 frames of library recursion under build_model: 301 visit frames,
    build_model and <module>, 303 Python frames. The outermost ones were
    dropped (a stack held 256 frames in all, cut at its outer end): the
    call site was the library's `visit` line, and nothing said frames were
    missing (from an outside check)."""
    with workdir("vt-pydeep-") as work:
        os.makedirs(os.path.join(work, "lib"))
        with open(os.path.join(work, "lib", "recurse_lib.py"), "w") as f:
            f.write(DEEP_LIB)
        with open(os.path.join(work, "userdeep.py"), "w") as f:
            f.write(DEEP_USER)
        for py in pythons():
            r, lib, script = deep_case(py, work, 300)
            libfile = os.path.join(lib, "recurse_lib.py")
            d = r.dump
            eq([a["bytes"] for a in d["live"]], [64 << 20], f"{py}: the allocation")
            stack = d["live"][0]["stack"]
            st = d["stacks"][stack]
            fr = frames(d, stack)
            where = lambda i: (fr[i]["function"], fr[i]["file"], fr[i]["line"])
            eq((where(st["site"]), where(st["through"])),
               (("build_model", script, 6), ("visit", libfile, 7)), f"{py}: call site and library")
            ok(f"    call site: build_model {script}:6 -> visit {libfile}:7\n" in r.err,
               f"{py}: the leak's call site line:\n{r.err[-3000:]}")
            pyf = python_frames_of(d, stack)
            cuts = [i for i, f in enumerate(pyf) if f[1] == "<vramtrace>"]
            eq(len(cuts), 1, f"{py}: one frame for those left out")
            cut = cuts[0]
            inner, outer = pyf[:cut], pyf[cut + 1:]
            # What was left out is what the stack does not show of the 303.
            left = 303 - len(inner) - len(outer)
            eq(pyf[cut], (f"({left} frames left out)", "<vramtrace>", 0), f"{py}: the cut frame")
            eq(outer, [("visit", libfile, 9)] * (CUT_OUTER - 2) +
               [("build_model", script, 6), ("<module>", script, 7)], f"{py}: the outermost Python frames")
            eq(inner, [("visit", libfile, 7)] + [("visit", libfile, 9)] * (len(inner) - 1),
               f"{py}: the innermost Python frames")
            # All of the stack a stack holds: native and Python frames
            # (inlined native frames share an address and count once).
            eq(len([f for f in fr if not f.get("inlined")]), 256, f"{py}: frames kept")
            # The text listing names it alone, as a frame of its own.
            k = fr.index(next(f for f in fr if f["file"] == "<vramtrace>"))
            ok(re.search(rf"\n    #\d+ in \({left} frames left out\)\n", r.err),
               f"{py}: the listing's cut frame:\n{r.err[-3000:]}")
            eq(k > 0 and k < len(fr) - CUT_OUTER, True, f"{py}: the cut frame's place")


@test
def pydeep_shallow_stack_has_no_cut():
    """100 frames of library recursion: every frame fits, none is cut."""
    with workdir("vt-pyshallow-") as work:
        os.makedirs(os.path.join(work, "lib"))
        with open(os.path.join(work, "lib", "recurse_lib.py"), "w") as f:
            f.write(DEEP_LIB)
        with open(os.path.join(work, "userdeep.py"), "w") as f:
            f.write(DEEP_USER)
        for py in pythons():
            r, lib, script = deep_case(py, work, 100)
            libfile = os.path.join(lib, "recurse_lib.py")
            d = r.dump
            stack = d["live"][0]["stack"]
            eq(python_frames_of(d, stack),
               [("visit", libfile, 7)] + [("visit", libfile, 9)] * 100 +
               [("build_model", script, 6), ("<module>", script, 7)], f"{py}: every Python frame")
            ok(f"    call site: build_model {script}:6 -> visit {libfile}:7\n" in r.err, f"{py}: call site")
            ok("left out" not in r.err, f"{py}: no cut frame")
