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


# The user's own recursion (layers of a model, say) above the library's:
# the innermost layer's line 7 is the call site, 27 Python frames from the
# outermost.
LAYERED_USER = '''import sys
sys.path.insert(0, sys.argv[1])
sys.setrecursionlimit(10000)
import recurse_lib
def layer(k, depth):
    if k == 0:
        recurse_lib.visit(None, depth)
        return
    layer(k - 1, depth)
layer(int(sys.argv[2]), int(sys.argv[3]))
'''


@test
def pydeep_native_frames_past_the_limit_keep_32_python_frames():
    """Python frames that fit in 256 but not with the native ones: the
    outermost 32 frames in all were kept, native ones of the interpreter's
    start-up among them (15 to 17 on 3.11 to 3.13), so only about 23
    Python frames: the innermost layer, 27th from the outermost, went and
    the call site became `layer` line 9 (from an outside check). The
    outermost 32 Python frames and the native ones outside them stay."""
    layers = 25
    with workdir("vt-pydeep-native-") as work:
        lib = os.path.join(work, "lib")
        os.makedirs(lib)
        with open(os.path.join(lib, "recurse_lib.py"), "w") as f:
            f.write(DEEP_LIB)
        script = os.path.join(work, "layered.py")
        with open(script, "w") as f:
            f.write(LAYERED_USER)
        libfile = os.path.join(lib, "recurse_lib.py")
        env = {"VRAMTRACE_LIBRARY": lib, "VRAMTRACE_LEAK_CHECK": "1"}

        def case(py, depth):
            r = run([py, script, lib, str(layers), str(depth)], env=env)
            eq(r.rc, 23, f"{py}: leak check status: {r.err[-1500:]}")
            stack = r.dump["live"][0]["stack"]
            return r, [f for f in frames(r.dump, stack) if not f.get("inlined")]

        for py in pythons():
            # A stack that fits says how many native frames a capture has
            # (3.10's grow with the depth: more of them, none fewer).
            _, fr = case(py, 10)
            pyn = len([f for f in fr if f.get("python")])
            eq(pyn, 10 + 1 + layers + 1 + 1, f"{py}: the Python frames of a stack that fits")
            native = len(fr) - pyn
            outside = [(f["function"], f["module"]) for f in fr[fr.index(next(
                f for f in fr if f.get("python") and f["function"] == "<module>")) + 1:]]
            # Python frames that fit, with native ones that do not.
            total = 256 - native // 2
            depth = total - (1 + layers + 1 + 1)
            ok(native >= 2 and total < 256, f"{py}: {native} native frames")
            r, fr = case(py, depth)
            pyf = [(f["function"], f["file"], f["line"]) for f in fr if f.get("python")]
            cuts = [i for i, f in enumerate(pyf) if f[1] == "<vramtrace>"]
            eq(len(cuts), 1, f"{py}: one frame for those left out")
            cut = cuts[0]
            inner, outer = pyf[:cut], pyf[cut + 1:]
            left = total - len(inner) - len(outer)
            eq(pyf[cut], (f"({left} frames left out)", "<vramtrace>", 0), f"{py}: the cut frame")
            eq(outer, [("visit", libfile, 9)] * (CUT_OUTER - layers - 2) + [("layer", script, 7)] +
               [("layer", script, 9)] * layers + [("<module>", script, 10)], f"{py}: the outermost Python frames")
            eq(inner, [("visit", libfile, 7)] + [("visit", libfile, 9)] * (len(inner) - 1),
               f"{py}: the innermost Python frames")
            k = next(i for i, f in enumerate(fr) if f.get("python") and f["function"] == "<module>")
            eq([(f["function"], f["module"]) for f in fr[k + 1:]], outside,
               f"{py}: the native frames outside the Python ones")
            eq(len(fr), 256, f"{py}: frames kept")
            ok(f"    call site: layer {script}:7 -> visit {libfile}:7\n" in r.err,
               f"{py}: the leak's call site line:\n{r.err[-3000:]}")
