"""A suite for pytest-vramtrace in PyTorch (on the simulated GPU): device
memory that PyTorch's allocator did not make (cudaMalloc through ctypes,
as CuPy or an extension makes it) in a process whose PyTorch has set up
CUDA. tests/integration/test_pytest.py runs it and checks every outcome
and report."""
import ctypes

import pytest
import torch

MiB = 1 << 20
rt = ctypes.CDLL("libcudart.so.13")
kept = []


def raw(n):
    p = ctypes.c_void_p()
    assert rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(n)) == 0
    return p


@pytest.mark.gpu_no_leaks
def test_raw_leak():
    torch.empty(1, device="cuda")
    kept.append(raw(7 * MiB))


@pytest.mark.gpu_no_leaks
def test_raw_freed():
    assert rt.cudaFree(raw(3 * MiB)) == 0


@pytest.mark.gpu_no_leaks
def test_cache_kept_is_not_a_leak():
    x = torch.empty(5 * MiB, dtype=torch.uint8, device="cuda")
    del x  # its segment stays in PyTorch's cache


@pytest.mark.gpu_no_leaks
def test_raw_and_tensor_leak():
    kept.append(torch.ones(256 * 1024, device="cuda"))
    kept.append(raw(3 * MiB))


def kept_by_a_pool(n):
    return raw(n)


@pytest.mark.gpu_no_leaks
def test_raw_suppressed():
    kept.append(kept_by_a_pool(1 * MiB))


@pytest.mark.gpu_no_leaks
def test_raw_partly_suppressed():
    kept.append(kept_by_a_pool(2 * MiB))
    kept.append(raw(1 * MiB))
