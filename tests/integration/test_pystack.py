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
