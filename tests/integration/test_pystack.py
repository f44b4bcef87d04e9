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
