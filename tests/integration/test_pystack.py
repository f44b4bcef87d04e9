"""Borrowed Python frames (tracker/pystack.h, tracker/pyborrow.c): a thread
without Python frames that allocates while one Python thread waits in
PyTorch's autograd gets that thread's frames, marked borrowed; two waiting
threads, or a waiting one that holds the GIL, lend nothing. Every CPython
on the machine; PyTorch itself is tested in test_torch.py."""
from run_tests import *  # noqa: F401,F403


@test
def pystack_foreign_reader_on_hostile_pointers():
    p = subprocess.run([os.path.join(T, "t_pyforeign")], capture_output=True, text=True, timeout=60)
    eq((p.returncode, p.stdout), (0, "pyforeign: 30 passed, 0 failed\n"), "t_pyforeign:\n" + p.stderr[-2000:])


@test
def pystack_borrows_the_waiting_threads_frames():
    lib = os.path.join(T, "libt_pyborrow.so")
    script = os.path.join(ROOT, "tests", "py", "borrow.py")
    for py in pythons():
        work = tempfile.mkdtemp(prefix="vt-borrow-")
        try:
            r = same_as_without([py, script, lib, work])
            eq(r.rc, 0, f"{py}: status")
            facts = json.loads(r.out)
            eq(facts["results"], [0, 0, 0], f"{py}: the three allocations")
            d = r.dump
            by = {a["bytes"]: a for a in d["live"]}
            want = [[facts["graph"], facts["wait"], "_engine_run_backward", True],
                    None,
                    [script, facts["module"], "<module>", True]]
            for mib, case in ((4, "one"), (6, "gil")):
                got = [[f["file"], f["line"], f["function"], f.get("borrowed", False)]
                       for f in frames(d, by[mib << 20]["stack"]) if f.get("python")]
                want[1] = [script, facts[case], case, True]
                eq(got, want, f"{py}: the {mib} MiB allocation borrows the waiting main thread's frames")
                eq(frames(d, by[mib << 20]["stack"])[0]["python"], False, f"{py}: native frames stay innermost")
            eq(python_frames(d, by[5 << 20]["stack"]), [], f"{py}: two threads wait: nothing borrowed")
        finally:
            shutil.rmtree(work, ignore_errors=True)


LONG_NAMES = PY_NAMED_ALLOCS + r'''
mk("f" * 600 + "_one", "/x/long.py")(1 << 20)
mk("f" * 600 + "_two", "/x/long.py")(2 << 20)
mk("g" * 1800, "/x/long.py")(3 << 20)
mk("h" * 1019, "/x/long.py")(4 << 20)
'''


@test
def pystack_long_names_kept_as_the_reports_keep_them():
    """Python functions whose names share their first 600 bytes are two
    call sites; a name of 1,024 bytes or more is cut to 1,023 ending in
    "..." (as `vramtrace report` cuts every name); one of 1,019 is whole.
    Names were cut at 507 bytes with no mark: the two were one site (from
    an outside check)."""
    with workdir("vt-pynames-") as work:
        script = os.path.join(work, "long.py")
        with open(script, "w") as f:
            f.write(LONG_NAMES)
        for py in [p for p in pythons() if "3.10" not in p]:   # co_qualname: 3.11 and later
            r = run([py, script])
            eq(r.rc, 0, f"{py}: {r.err[-1500:]}")
            by = {a["bytes"] >> 20: a for a in r.dump["live"]}
            names = {mib: next(fr["function"] for fr in frames(r.dump, by[mib]["stack"]) if fr.get("python"))
                     for mib in (1, 2, 3, 4)}
            eq(names, {1: "f" * 600 + "_one", 2: "f" * 600 + "_two", 3: "g" * 1020 + "...", 4: "h" * 1019},
               f"{py}: the names")


RECOMPILED = r'''
import ctypes
cu = ctypes.CDLL("libcuda.so.1")
cu.cuInit(0)
cu.cuMemFree_v2.argtypes = [ctypes.c_uint64]
src = "def generated(n):\n    p = ctypes.c_uint64()\n    cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(n))\n    return p.value\n"
kept = []
for i in range(70000):
    ns = {"cu": cu, "ctypes": ctypes}
    exec(compile(src, "/gen/generated_%d.py" % (i % 7), "exec"), ns)
    p = ns["generated"](4096 + i)   # LINE:call
    if i % 500 == 0:
        kept.append(p)
    else:
        cu.cuMemFree_v2(p)
print(len(kept))
'''


@test
def pystack_code_compiled_again_and_again_keeps_its_frames():
    """A program that compiles the same source 70,000 times (exec in a
    loop, as generated code is made), each time a new code object, often
    at an address an earlier one had: the code objects filled vramtrace's
    table of 65,536 and every Python frame of every later stack was lost
    without a word (the live allocations made after it had no Python
    frame, and the leak's call site was libffi; an outside check). A
    function is interned by its file, name, first line and line table:
    the seven files' one function are seven functions, however often
    compiled. A code object at an earlier one's address, its strings at
    theirs, is told apart by their tails (another file's function passed
    for the earlier one: "generated_0.py" for "generated_4.py")."""
    line = 1 + next(i for i, l in enumerate(RECOMPILED.splitlines()) if "LINE:call" in l)
    for py in pythons():
        with workdir("vt-recompile-") as work:
            script = os.path.join(work, "recompile.py")
            with open(script, "w") as f:
                f.write(RECOMPILED)
            r = same_as_without([py, script])
        eq(r.out, "140\n", f"{py}: the program")
        d = r.dump
        got = sorted((a["bytes"] - 4096, python_frames(d, a["stack"])) for a in d["live"])
        want = [(i, [[f"/gen/generated_{i % 7}.py", 3, "generated"], [script, line, "<module>"]])
                for i in range(0, 70000, 500)]
        eq(got, want, f"{py}: every live allocation's Python frames (its bytes less 4096 the iteration's number)")


CELLS = r"""
import ctypes
cu = ctypes.CDLL("libcuda.so.1")
cu.cuInit(0)
ns = {"cu": cu, "ctypes": ctypes}
for i in range(12):
    # cell i: its own file name and, by blank lines, its own line
    src = "\n" * (i % 4) + "p = ctypes.c_uint64(); cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(%d << 20))\n" % (i + 1)
    exec(compile(src, "<ipython-input-%d>" % i, "exec"), ns)   # LINE:exec
print("ok")
"""


@test
def pystack_cells_run_one_after_another_keep_their_own_lines():
    """Code compiled and run one string after another, as IPython runs
    notebook cells: each cell's code object is freed when it has run, the
    next made at its address and run from a frame at the same address and
    the same instruction, so every frame memo (the thread's memo of frames,
    its last stack) answered with the first cell's file and line, or the
    cell before's (an outside check: cell 3's 300 MiB at cell 1's line 1,
    on every CPython). Each cell's allocation has its own file and line."""
    line = 1 + next(i for i, l in enumerate(CELLS.splitlines()) if "LINE:exec" in l)
    for py in pythons():
        with workdir("vt-cells-") as work:
            script = os.path.join(work, "cells.py")
            with open(script, "w") as f:
                f.write(CELLS)
            r = same_as_without([py, script])
        eq(r.out, "ok\n", f"{py}: the program")
        d = r.dump
        got = sorted((a["bytes"] >> 20, python_frames(d, a["stack"])) for a in d["live"])
        want = [(i + 1, [[f"<ipython-input-{i}>", 1 + i % 4, "<module>"], [script, line, "<module>"]])
                for i in range(12)]
        eq(got, want, f"{py}: each cell's allocation (MiB: its number + 1) and its Python frames")
