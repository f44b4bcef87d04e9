"""A suite for pytest-vramtrace in PyTorch (on the simulated GPU): memory
held only by garbage the collector has not reached yet (objects in a
reference cycle, with automatic collection off) is no leak, whether a
tensor or memory PyTorch's allocator did not make; a test that also keeps
memory fails with that memory alone. tests/integration/test_pytest.py
runs it and checks every outcome and report."""
import ctypes
import gc

import pytest
import torch

MiB = 1 << 20
rt = ctypes.CDLL("libcudart.so.13")
kept = []


class Raw:
    """Device memory through ctypes, freed when the object goes."""

    def __init__(self, n):
        self.p = ctypes.c_void_p()
        assert rt.cudaMalloc(ctypes.byref(self.p), ctypes.c_size_t(n)) == 0

    def __del__(self):
        rt.cudaFree(self.p)


def in_a_cycle(x):
    """x held by an object that holds itself: garbage once dropped, freed
    only by the collector."""
    c = {"x": x}
    c["self"] = c


@pytest.fixture(autouse=True)
def no_automatic_collection():
    gc.disable()
    yield
    gc.enable()


@pytest.mark.gpu_no_leaks
def test_tensor_in_a_cycle():
    in_a_cycle(torch.ones(256 * 1024, device="cuda"))


@pytest.mark.gpu_no_leaks
def test_raw_in_a_cycle():
    torch.empty(1, device="cuda")
    in_a_cycle(Raw(3 * MiB))


@pytest.mark.gpu_no_leaks
def test_cycle_and_a_kept_tensor():
    in_a_cycle(torch.ones(256 * 1024, device="cuda"))
    kept.append(torch.ones(512 * 1024, device="cuda"))


@pytest.mark.gpu_no_leaks
def test_cycle_and_kept_raw():
    torch.empty(1, device="cuda")
    in_a_cycle(Raw(3 * MiB))
    kept.append(Raw(5 * MiB))
