"""A suite for pytest-vramtrace in PyTorch (on the simulated GPU): a
session fixture's tensor lies in a 20 MiB segment of PyTorch's cache, and
the tests' tensors fit in that segment's free room, so they make no
allocation for vramtrace to count. tests/integration/test_pytest.py runs
it and checks that gpu_limit still sees them (PyTorch's own peak)."""
import pytest
import torch

MiB = 1 << 20


@pytest.fixture(scope="session")
def weights():
    yield torch.empty(2 * MiB, dtype=torch.uint8, device="cuda")


def fifteen_mib():
    xs = [torch.empty(5 * MiB, dtype=torch.uint8, device="cuda") for _ in range(3)]
    assert torch.cuda.memory_reserved() == 20 * MiB, "the tensors lie in the fixture's segment"
    del xs


@pytest.mark.gpu_limit("4 MiB")
def test_over_limit_in_the_fixtures_segment(weights):
    fifteen_mib()


@pytest.mark.gpu_limit("16 MiB")
def test_under_limit_in_the_fixtures_segment(weights):
    fifteen_mib()
