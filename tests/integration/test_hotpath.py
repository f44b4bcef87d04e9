"""What the hot path and the start cost a traced process: a process that
never touches the GPU loads no library beyond vramtrace itself."""
from run_tests import *


def mapped_libraries(r):
    return sorted({os.path.basename(line.split()[-1]) for line in r.out.splitlines()
                   if ".so" in line.split()[-1]})


@test
def start_loads_no_extra_library():
    # libunwind and libdw (with libelf, libz, libbz2, liblzma) are loaded at
    # their first use, not at start.
    a = run(["/bin/cat", "/proc/self/maps"], preload=False)
    b = run(["/bin/cat", "/proc/self/maps"])
    eq(b.rc, 0, "cat's exit status")
    eq(mapped_libraries(b), sorted(mapped_libraries(a) + ["libvramtrace.so"]), "libraries mapped at start")
    eq(b.dumps, [], "dumps of a process without GPU use")
