"""Allocate and free through ctypes at a depth of 30 Python frames.

usage: py_frames.py N [alternate|twoways]
    prints "ns_per_pair X" (the fastest fifth of N pairs); with `alternate`
    the loop allocates from two lines in turn, so that no stack is the one
    before it (the remembered stack never answers); with `twoways` the two
    lines call two native ways in (the driver's cuMemAlloc_v2 and the
    runtime's cudaMalloc), so that the native frames change too.
"""
import ctypes
import sys
import time

cu = ctypes.CDLL("libcuda.so.1")
alloc, free = cu.cuMemAlloc_v2, cu.cuMemFree_v2
alloc.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
free.argtypes = [ctypes.c_uint64]
rt = ctypes.CDLL("libcudart.so")
rt_alloc, rt_free = rt.cudaMalloc, rt.cudaFree
rt_alloc.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
rt_free.argtypes = [ctypes.c_uint64]


def loop(n):
    p = ctypes.c_uint64()
    ref = ctypes.byref(p)
    t0 = time.perf_counter()
    for _ in range(n):
        alloc(ref, 256)
        free(p.value)
    return time.perf_counter() - t0


def loop_alternate(n):
    p = ctypes.c_uint64()
    ref = ctypes.byref(p)
    t0 = time.perf_counter()
    for i in range(n):
        if i & 1:
            alloc(ref, 256)
        else:
            alloc(ref, 256)
        free(p.value)
    return time.perf_counter() - t0


def loop_twoways(n):
    p = ctypes.c_uint64()
    ref = ctypes.byref(p)
    t0 = time.perf_counter()
    for i in range(n):
        if i & 1:
            alloc(ref, 256)
            free(p.value)
        else:
            rt_alloc(ref, 256)
            rt_free(p.value)
    return time.perf_counter() - t0


def deep(d, n):
    if d <= 1:
        return loop_twoways(n) if TWOWAYS else loop_alternate(n) if ALTERNATE else loop(n)
    return deep(d - 1, n)


n = int(sys.argv[1])
ALTERNATE = sys.argv[2:] == ["alternate"]
TWOWAYS = sys.argv[2:] == ["twoways"]
deep(30, n // 4)                      # warm-up
# 30 frames: deep x 29 + loop ... + <module>. The fastest of five timed
# stretches: a Python pair is 1 to 3 us, and the machine's slow spells would
# otherwise decide the difference between the runs.
dt = min(deep(30, n // 5) for _ in range(5))
print("ns_per_pair %.1f" % (dt * 1e9 / (n // 5)))
