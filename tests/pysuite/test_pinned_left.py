"""A suite for pytest-vramtrace: a gpu_no_leaks test that leaves pinned
host memory behind (tests/integration/test_pytest.py runs it): it fails
with the leak report, as the exit check would report it."""
import ctypes

import pytest

cu = ctypes.CDLL("libcuda.so.1")
cu.cuInit(0)
kept = []


def staging_buffer(n):
    p = ctypes.c_void_p()
    assert cu.cuMemAllocHost_v2(ctypes.byref(p), ctypes.c_size_t(n)) == 0
    kept.append(p.value)


@pytest.mark.gpu_no_leaks
def test_pinned_left():
    staging_buffer(5000)
