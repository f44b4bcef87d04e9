"""A suite for pytest-vramtrace in PyTorch (on the simulated GPU): one test
of each kind. tests/integration/test_pytest.py runs it and checks every
outcome and report."""
import pytest
import torch

MiB = 1 << 20
kept = []


def mib(n):
    return torch.empty(n * MiB, dtype=torch.uint8, device="cuda")


@pytest.mark.gpu_no_leaks
def test_clean():
    x = torch.ones(1024, device="cuda")
    assert x.shape == (1024,)


@pytest.mark.gpu_no_leaks
def test_cache_is_not_a_leak():
    before = torch.cuda.memory_allocated()
    x = mib(64)
    del x
    assert torch.cuda.memory_allocated() == before and torch.cuda.memory_reserved() >= 64 * MiB


@pytest.mark.gpu_no_leaks
def test_leaks():
    kept.append(torch.ones(256 * 1024, device="cuda"))


@pytest.mark.gpu_limit("100 MiB")
def test_under_limit():
    a = mib(64)
    del a
    c = mib(32)
    del c


@pytest.mark.gpu_limit("100 MiB")
def test_over_limit():
    a = mib(96)
    b = mib(32)
    del a, b


@pytest.mark.gpu_no_leaks
def test_raises():
    kept.append(mib(8))
    raise RuntimeError("the test's own error")
