"""The driver API through ctypes (its symbols found by dlsym): two
allocations, the second freed; prints the three results."""
import ctypes

cu = ctypes.CDLL("libcuda.so.1")
cu.cuInit(0)


def alloc(n):
    p = ctypes.c_uint64()
    return cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(n)), p.value


r, a = alloc(5 << 20)
r2, b = alloc(1 << 20)
print(r, r2, cu.cuMemFree_v2(ctypes.c_uint64(b)))
