# -*- coding: utf-8 -*-
"""Allocations from Python through ctypes, with the frames Python itself
reports at the same call. Run under vramtrace by tests/run_tests.py, which
compares the dump's Python frames with the ones written here.

usage: frames.py OUT.json [threads]
"""
import ctypes
import json
import sys
import threading
import traceback

cu = ctypes.CDLL("libcuda.so.1")
cu.cuInit(0)
cu.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
RECORDS = []
LOCK = threading.Lock()


def frames_here():
    """The caller's frames, innermost first: (file, line, qualified name)."""
    f = sys._getframe(1)
    out = []
    while f is not None:
        co = f.f_code
        out.append([co.co_filename, f.f_lineno, getattr(co, "co_qualname", co.co_name)])
        f = f.f_back
    return out


def alloc(n):
    p = ctypes.c_uint64()
    mine, theirs, r = frames_here(), traceback.extract_stack(), cu.cuMemAlloc_v2(ctypes.byref(p), n)
    assert r == 0, r
    summary = [[fs.filename, fs.lineno, fs.name] for fs in reversed(theirs)]
    with LOCK:
        RECORDS.append({"address": "0x%x" % p.value, "bytes": n, "frames": mine, "traceback": summary})
    return p.value


def level2(n):
    return alloc(n)


def level1(n):
    return level2(n)


def recurse(depth, n):
    if depth == 0:
        return alloc(n)
    return recurse(depth - 1, n)


def generator(n):
    yield alloc(n)
    yield alloc(n + 1)


async def coroutine(n):
    return alloc(n)


class Model:
    def forward(self, n):
        return alloc(n)

    class Inner:
        @staticmethod
        def make(n):
            return (lambda: alloc(n))()


def résumé_缓存(n):
    return alloc(n)


def worker(i):
    recurse(10 + 7 * i, 4096 + i)
    list(generator(8192 + 2 * i))


def main():
    level1(1 << 20)
    recurse(40, 2 << 20)
    for _ in generator(3 << 20):
        pass
    c = coroutine(4 << 20)
    try:
        c.send(None)
    except StopIteration:
        pass
    Model().forward(5 << 20)
    Model.Inner.make(6 << 20)
    résumé_缓存(7 << 20)
    threads = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    ts = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    with open(sys.argv[1], "w") as f:
        json.dump(RECORDS, f)
    print("allocations", len(RECORDS))


main()
