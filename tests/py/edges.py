"""Python edge cases under vramtrace: a native thread with no Python state,
a subinterpreter, an atexit handler and a __del__ at interpreter shutdown.

usage: edges.py LIBT_NATIVETHREAD.so
"""
import atexit
import ctypes
import sys

cu = ctypes.CDLL("libcuda.so.1")
cu.cuInit(0)
cu.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]


def alloc(n):
    p = ctypes.c_uint64()
    return cu.cuMemAlloc_v2(ctypes.byref(p), n)


class Late:
    def __del__(self):
        alloc(3 << 20)  # at interpreter shutdown


late = Late()
atexit.register(alloc, 2 << 20)

native = ctypes.CDLL(sys.argv[1])
print("native thread", native.alloc_in_native_thread(ctypes.c_size_t(4 << 20)))

code = ("import ctypes\n"
        "cu = ctypes.CDLL('libcuda.so.1')\n"
        "p = ctypes.c_uint64()\n"
        "cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(5 << 20))\n")
ran = False
for name in ("_interpreters", "_xxsubinterpreters"):
    try:
        mod = __import__(name)
        interp = mod.create()
        mod.run_string(interp, code)
        ran = True
        break
    except Exception:
        continue
print("subinterpreter", ran)
