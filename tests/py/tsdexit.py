"""A thread's key destructor that runs Python and allocates, after
vramtrace's own destructors ran: what tracker/pystack.c's per-thread memo
of Python frames must survive. The C library runs a thread's key
destructors at its exit in the order the keys were made; vramtrace's memo
key is made at the process's first Python capture, before the key made
here. The destructor is a ctypes callback: ctypes gives the ending thread
a new thread state, and the callback's frames are Python frames. Run
under vramtrace by tests/integration/test_exitorder.py.

usage: tsdexit.py once|twice    (twice: the destructor sets its key again,
                                 so the C library runs it a second time)
"""
import ctypes
import sys
import threading

libc = ctypes.CDLL(None)
libc.pthread_setspecific.argtypes = [ctypes.c_uint, ctypes.c_void_p]
cu = ctypes.CDLL("libcuda.so.1")
cu.cuInit(0)
cu.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
cu.cuMemFree_v2.argtypes = [ctypes.c_uint64]

RUNS = 2 if sys.argv[1:] == ["twice"] else 1
key = ctypes.c_uint()
ran = []
done = threading.Event()


def alloc(n):
    p = ctypes.c_uint64()
    assert cu.cuMemAlloc_v2(ctypes.byref(p), n) == 0
    return p.value


def keep_in_destructor(arg):
    assert cu.cuMemFree_v2(alloc(1 << 20)) == 0
    kept = ctypes.c_uint64()
    assert cu.cuMemAlloc_v2(ctypes.byref(kept), 3 << 20) == 0
    ran.append(arg)
    if len(ran) < RUNS:
        assert libc.pthread_setspecific(key.value, 1) == 0
    else:
        done.set()


DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(keep_in_destructor)


def body():
    # The process's first Python capture: vramtrace's memo key is made here.
    assert cu.cuMemFree_v2(alloc(1 << 20)) == 0
    assert libc.pthread_key_create(ctypes.byref(key), DESTRUCTOR) == 0
    assert libc.pthread_setspecific(key.value, 1) == 0


t = threading.Thread(target=body)
t.start()
t.join()
# The thread's destructors run after join() returns (its Python state goes
# first): wait for the last of them.
print("destructor ran", done.wait(30) and len(ran), "time(s)")
