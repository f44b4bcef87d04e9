"""A suite for pytest-vramtrace: a gpu_no_leaks test whose leaks a
suppression matches in part (tests/integration/test_pytest.py runs it with
VRAMTRACE_SUPPRESSIONS naming kept_by_a_cache)."""
import ctypes

import pytest

cu = ctypes.CDLL("libcuda.so.1")
cu.cuInit(0)
kept = []


def alloc(n):
    p = ctypes.c_uint64()
    assert cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(n)) == 0
    return p.value


def kept_by_a_cache(n):
    kept.append(alloc(n))


@pytest.mark.gpu_no_leaks
def test_partly_suppressed():
    kept_by_a_cache(1 << 20)
    kept.append(alloc(2 << 20))
