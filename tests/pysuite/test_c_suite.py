"""A suite for pytest-vramtrace: GPU memory through the CUDA driver API
(ctypes), one test of each kind. tests/integration/test_pytest.py runs it
and checks every outcome and report."""
import ctypes

import pytest

cu = ctypes.CDLL("libcuda.so.1")
cu.cuInit(0)
kept = []


def alloc(n):
    p = ctypes.c_uint64()
    assert cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(n)) == 0
    return p.value


def free(p):
    assert cu.cuMemFree_v2(ctypes.c_uint64(p)) == 0


@pytest.mark.gpu_no_leaks
def test_clean():
    free(alloc(1 << 20))


@pytest.mark.gpu_no_leaks
def test_leaks():
    kept.append(alloc(3 << 20))
    free(alloc(1 << 20))


@pytest.mark.gpu_limit("4 MiB")
def test_under_limit():
    a, b = alloc(2 << 20), alloc(2 << 20)
    free(a)
    free(b)


@pytest.mark.gpu_limit("4 MiB")
def test_over_limit():
    a = alloc(3 << 20)
    b = alloc(2 << 20)
    free(a)
    free(b)


@pytest.mark.gpu_no_leaks
def test_raises():
    kept.append(alloc(1 << 20))
    raise RuntimeError("the test's own error")


def test_unmarked_leak():
    kept.append(alloc(6 << 20))


def test_frees_what_came_before():
    while kept:
        free(kept.pop())
