"""Allocations whose native stack is the same every time while the Python
frames differ by one line, one function or one process, and runs of the
same line: what tracker/pystack_id.c's memo of the last stack must tell
apart and must not split. Run under vramtrace by
tests/integration/test_pymemo.py, which compares every allocation's
Python frames in the dump with traceback.extract_stack()'s.

usage: memo.py OUT.json      (a forked child writes OUT.json.child)
"""
import ctypes
import json
import os
import sys
import threading
import traceback

cu = ctypes.CDLL("libcuda.so.1")
cu.cuInit(0)
cu.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
RECORDS = []
LOCK = threading.Lock()
SIZE = [4096]


def alloc(group):
    with LOCK:
        n = SIZE[0]
        SIZE[0] += 256
    p = ctypes.c_uint64()
    # The frames as Python gives them, innermost first, taken on the line of
    # the call (every function here is at module level: its name is its
    # qualified name).
    here, r = traceback.extract_stack(), cu.cuMemAlloc_v2(ctypes.byref(p), n)
    assert r == 0, r
    mine = [[fs.filename, fs.lineno, fs.name] for fs in reversed(here)]
    with LOCK:
        RECORDS.append({"address": "0x%x" % p.value, "bytes": n, "frames": mine, "group": group})


def same_line(k, group):
    for _ in range(k):
        alloc(group)


def two_lines(k, group):
    for _ in range(k):
        alloc(group)
        alloc(group)


def via_a(group):
    alloc(group)


def via_b(group):
    alloc(group)


def other_functions(k, group):
    for i in range(k):
        (via_a if i % 2 else via_b)(group)


def all_shapes(tag):
    same_line(40, tag + "same")
    two_lines(20, tag + "two")
    other_functions(40, tag + "other")


def around_fork():
    """Allocates from one line, forks, and allocates from that line again
    in both processes: the child's first stack is the parent's last, the
    same frames, numbered anew in the child."""
    pid = -1
    for i in range(2):
        alloc("child-fork" if pid == 0 else "main-fork")
        if i == 0:
            sys.stdout.flush()
            pid = os.fork()
            if pid == 0:
                del RECORDS[:]
    return pid


def main():
    all_shapes("main-")
    threads = [threading.Thread(target=all_shapes, args=("thread%d-" % i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    pid = around_fork()
    if pid == 0:
        same_line(5, "child-same")
        with open(sys.argv[1] + ".child", "w") as f:
            json.dump(RECORDS, f)
        sys.exit(0)
    _, status = os.waitpid(pid, 0)
    same_line(3, "main-after")
    with open(sys.argv[1], "w") as f:
        json.dump(RECORDS, f)
    print("allocations", len(RECORDS), "child status", status)


main()
