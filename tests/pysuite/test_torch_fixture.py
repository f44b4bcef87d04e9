"""A suite for pytest-vramtrace in PyTorch (on the simulated GPU, two
devices): a session fixture's tensor lies in a 20 MiB segment of
PyTorch's cache, and the tests' tensors fit in that segment's free room,
so they make no allocation for vramtrace to count.
tests/integration/test_pytest.py runs it and checks that gpu_limit still
sees them (PyTorch's own peak), that devices' peaks are not added, and
that a test without a limit reads PyTorch's peak stats as they were, and
that a test's peak in the summary is the same measure with a limit or
without."""
import pytest
import torch

MiB = 1 << 20


@pytest.fixture(scope="session")
def weights():
    passing = torch.empty(8 * MiB, dtype=torch.uint8, device="cuda")  # PyTorch's peak: 8 MiB
    del passing
    yield torch.empty(2 * MiB, dtype=torch.uint8, device="cuda")


def test_a_test_without_a_limit_reads_the_peak_as_it_was(weights):
    assert torch.cuda.max_memory_allocated() == 8 * MiB, torch.cuda.max_memory_allocated()


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


def test_no_limit_in_the_fixtures_segment(weights):
    fifteen_mib()


@pytest.mark.gpu_limit("16 MiB")
def test_two_devices_one_after_the_other(weights):
    for d in (0, 1):
        x = torch.empty(12 * MiB, dtype=torch.uint8, device=f"cuda:{d}")
        del x


@pytest.mark.gpu_limit("32 MiB")
def test_two_devices_at_once(weights):
    xs = [torch.empty(24 * MiB, dtype=torch.uint8, device=f"cuda:{d}") for d in (0, 1)]
    del xs


@pytest.mark.gpu_limit("4 MiB")
@pytest.mark.parametrize("n", [pytest.param(15, marks=pytest.mark.gpu_limit("16 MiB"))])
def test_a_parameters_own_limit(weights, n):
    fifteen_mib()
