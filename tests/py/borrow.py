"""Borrowed Python frames (tracker/pystack.h): a native thread allocates
while Python threads wait in a file under a torch/autograd/ folder (written
here: no PyTorch needed), in three cases, one allocation each:

  4 MiB: only the main thread waits there: its frames are borrowed;
  5 MiB: two threads wait there: nothing is borrowed;
  6 MiB: the main thread waits there and another thread spins there
         holding the GIL: the spinner does not count, main's are borrowed.

usage: borrow.py LIBT_PYBORROW.so DIR     prints the lines the frames name
"""
import ctypes
import importlib.util
import json
import os
import sys
import threading
import time

GRAPH = '''
def _engine_run_backward(native, n):
    return native.alloc_after(n, 100)  # LINE:wait


def _engine_block(lock):
    lock.acquire()  # LINE:block


def _spin(state):
    state["spinning"] = True
    while not state["stop"]:
        pass
'''

lib, work = sys.argv[1], sys.argv[2]
folder = os.path.join(work, "torch", "autograd")
os.makedirs(folder, exist_ok=True)
path = os.path.join(folder, "graph.py")
with open(path, "w") as f:
    f.write(GRAPH)
spec = importlib.util.spec_from_file_location("graph", path)
graph = importlib.util.module_from_spec(spec)
spec.loader.exec_module(graph)
native = ctypes.CDLL(lib)


def line(text, where=__file__):
    with open(where) as f:
        return next(i for i, x in enumerate(f, 1) if x.rstrip().endswith("# LINE:" + text))


def one():
    return graph._engine_run_backward(native, 4 << 20)  # LINE:one


def two():
    lock = threading.Lock()
    lock.acquire()
    t = threading.Thread(target=graph._engine_block, args=(lock,))
    t.start()
    time.sleep(0.2)   # the thread is now blocked in lock.acquire(), the GIL released
    r = graph._engine_run_backward(native, 5 << 20)  # LINE:two
    lock.release()
    t.join()
    return r


def gil():
    state = {"spinning": False, "stop": False}
    t = threading.Thread(target=graph._spin, args=(state,))
    t.start()
    while not state["spinning"]:
        time.sleep(0.001)
    r = graph._engine_run_backward(native, 6 << 20)  # LINE:gil
    state["stop"] = True
    t.join()
    return r


results = [one(), two(), gil()]  # LINE:module
print(json.dumps({"results": results, "graph": path, "wait": line("wait", path), "one": line("one"),
                  "gil": line("gil"), "module": line("module")}))
