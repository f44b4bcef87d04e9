"""The library's own reports demangle C++ names even when the only C++
runtime in the process came with a library loaded RTLD_LOCAL (as a Python
extension brings it): tests/progs/t_cxxlocal.c."""
from run_tests import *


@test
def inprocess_demangles_with_a_local_cxx_runtime():
    prog = os.path.join(T, "t_cxxlocal")
    lib = os.path.join(T, "libt_cxxlocal.so")
    r = run([prog, lib])
    eq((r.rc, r.out), (0, "run -> 0\n"), "status and output")
    want = "vtcheck::keep_in_local_library(unsigned long)"
    line = [l for l in r.err.splitlines() if "1.00 MiB 100.0%" in l]
    eq(len(line), 1, "one holder row of 1 MiB in the exit summary:\n" + r.err)
    ok(want in line[0] and "_ZN" not in line[0], f"the holder is named {want}: {line[0]!r}")
    fn = [f["function"] for s in r.dump["stacks"] for f in s["frames"] if f.get("function")]
    ok(want in fn, f"the dump's frame is {want}: {fn}")
    ok(not any(x.startswith("_Z") for x in fn), "no mangled name left in the dump")
