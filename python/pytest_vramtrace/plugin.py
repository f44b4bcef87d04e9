"""pytest-vramtrace: per-test GPU memory checks under libvramtrace.so.

- `pytest --vramtrace` runs the session under vramtrace: when the library
  is not preloaded yet, pytest re-executes itself once with it first on
  LD_PRELOAD (found with --vramtrace-lib, else beside the `vramtrace` on
  PATH or in its ../lib).
- `@pytest.mark.gpu_no_leaks`: the test fails when device or pinned host memory it
  allocated is still allocated when it returns, with the leak report of
  those allocations. With PyTorch the test's tensors are what counts
  (torch.cuda.memory_allocated() before and after), not what the caching
  allocator keeps reserved; the cache is emptied before and, for the
  report, after the test, so that the report shows the test's own
  allocations. Memory PyTorch's allocator did not make (CuPy, ctypes, an
  extension's cudaMalloc) counts as without PyTorch
  (vramtrace_leaks_outside_torch).
- `@pytest.mark.gpu_limit("2 GiB")`: the test fails when its peak of
  device memory (allocated since it began) is over the limit, with what
  held the memory at that peak; with PyTorch, also when its tensors'
  peak on a device over what was allocated there before it is
  (max_memory_allocated; PyTorch's peak stats are reset at the start of
  a test with this marker): they may lie in segments the cache held
  before the test, which make no allocation.
- At the end, the tests with the highest GPU peaks (--vramtrace-top N):
  for every test the same measure, the device memory allocated since it
  began at its highest on one device (vramtrace's count; tensors that lie
  in memory PyTorch's cache held before the test are not in it, as
  gpu_limit's own check of PyTorch's peak counts them).

Each check is of the test's call (its body), as pytest-memray's markers
are: what fixtures set up and tear down is theirs. A test that raises
fails with its own error and is not checked for leaks (its traceback
holds its locals). Under pytest-xdist each worker is a process of its own
under vramtrace, with its own dump; the peaks reach the summary through
the test reports (user property vramtrace_peak_bytes, which JUnit XML
also carries).
"""
import gc
import os
import re
import shutil
import subprocess
import sys

import pytest

from .api import Api, format_bytes, parse_bytes

REEXEC = "PYTEST_VRAMTRACE_REEXEC"  # set in the re-executed process: never twice
PEAK = "vramtrace_peak_bytes"
UNCHECKED = "vramtrace_unchecked"  # a marked test run without vramtrace
_state = pytest.StashKey()
_peaks = []  # (peak bytes, nodeid) of every test's call, this session's
_unchecked = []  # the nodeids of marked tests run without vramtrace, this session's


class _State:
    def __init__(self, api, top):
        self.api, self.top = api, top


def pytest_addoption(parser):
    g = parser.getgroup("vramtrace", "GPU memory checks (vramtrace)")
    g.addoption("--vramtrace", action="store_true", default=False,
                help="run the session under vramtrace's libvramtrace.so (re-executing pytest preloaded), "
                     "checking the gpu_no_leaks and gpu_limit markers")
    g.addoption("--vramtrace-lib", default=None, metavar="PATH",
                help="libvramtrace.so to preload (default: beside `vramtrace` on PATH, or in its ../lib)")
    g.addoption("--vramtrace-top", type=int, default=5, metavar="N",
                help="list the N tests with the highest GPU peaks (default 5, 0: none)")


def _find_lib(given):
    if given:
        return os.path.abspath(given) if os.path.exists(given) else None
    exe = shutil.which("vramtrace")
    if not exe:
        return None
    d = os.path.dirname(os.path.realpath(exe))
    for cand in (os.path.join(d, "libvramtrace.so"), os.path.join(d, "..", "lib", "libvramtrace.so")):
        if os.path.exists(cand):
            return os.path.realpath(cand)
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    """With --vramtrace in a process without the library: exec pytest again,
    the same arguments in the same folder, with it preloaded."""
    if not config.getoption("vramtrace") or Api().active:
        return None
    if os.environ.get(REEXEC):
        raise pytest.UsageError("pytest --vramtrace: re-executed with libvramtrace.so on LD_PRELOAD, but vramtrace "
                                f"is not active in this process (LD_PRELOAD={os.environ.get('LD_PRELOAD', '')!r})")
    args = list(config.invocation_params.args)
    if args != sys.argv[1:]:
        raise pytest.UsageError("pytest --vramtrace: pytest was not started from its command line (pytest.main?), "
                                "so it cannot re-execute itself: preload libvramtrace.so yourself "
                                "(LD_PRELOAD=/path/to/libvramtrace.so, or `vramtrace run -- pytest ...`)")
    lib = _find_lib(config.getoption("vramtrace_lib"))
    if not lib:
        raise pytest.UsageError("pytest --vramtrace: cannot find libvramtrace.so: put `vramtrace` on PATH "
                                "(make install) or pass --vramtrace-lib /path/to/libvramtrace.so")
    env = dict(os.environ)
    env[REEXEC] = "1"
    # First: vramtrace must see the CUDA runtime's calls.
    env["LD_PRELOAD"] = lib + (" " + env["LD_PRELOAD"] if env.get("LD_PRELOAD") else "")
    # The interpreter's own options too (-W error, -X dev, -O, -B...), as the
    # standard library's multiprocessing passes them on: without them a CI
    # job's `python -W error -m pytest --vramtrace` stopped failing on warnings.
    flags = getattr(subprocess, "_args_from_interpreter_flags", lambda: [])()
    if os.path.basename(sys.argv[0]) in ("pytest", "py.test"):
        argv = [sys.executable] + flags + [sys.argv[0]] + args
    else:
        argv = [sys.executable] + flags + ["-m", "pytest"] + args
    sys.stdout.flush()
    sys.stderr.flush()
    os.chdir(str(config.invocation_params.dir))
    os.execve(sys.executable, argv, env)


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu_no_leaks: fail when the test leaves GPU memory allocated (vramtrace)")
    config.addinivalue_line("markers", "gpu_limit(limit): fail when the test's GPU memory peak is over limit, "
                                       "e.g. \"2 GiB\" (vramtrace)")
    config.stash[_state] = _State(Api(), config.getoption("vramtrace_top"))
    _peaks.clear()
    _unchecked.clear()


def _torch():
    """PyTorch, when this process has initialized its CUDA side."""
    t = sys.modules.get("torch")
    try:
        return t if t is not None and t.cuda.is_initialized() else None
    except Exception:
        return None


def _all_suppressed(report):
    """Whether a leak report says every allocation it found is matched by
    a suppression (VRAMTRACE_SUPPRESSIONS): its table of suppressions used,
    and no SUMMARY line, which it writes only for leaks left."""
    lines = report.splitlines()
    return "Suppressions used:" in lines and not any(l.startswith("SUMMARY: vramtrace:") for l in lines)


_SUMMARY = re.compile(r"^SUMMARY: vramtrace: (\d+) byte\(s\) leaked in (\d+) allocation\(s\)\.$", re.M)


def _not_suppressed(report, live, count):
    """What the test left that no suppression matches, as the leak report's
    SUMMARY line counts it (LeakSanitizer's convention: pinned host memory
    too, as the exit check counts it), and what the suppressions matched,
    as their table counts it (None when they matched nothing): (bytes,
    allocations, matched). A report of memory a context's reset released
    is told by the device memory still live, as the usage counts it."""
    m = _SUMMARY.search(report)
    lines = report.splitlines()
    if not m or "    released by a context's reset or destruction without a free" in report:
        if not m or "Suppressions used:" not in lines:
            return live, count, None
        left, n = int(m.group(1)), int(m.group(2))
        return left, n, ((live - left, count - n) if live > left and count > n else None)
    matched = [0, 0]
    if "Suppressions used:" in lines:
        for row in lines[lines.index("Suppressions used:") + 2:]:
            cells = row.split(None, 2)
            if len(cells) < 3 or not (cells[0].isdigit() and cells[1].isdigit()):
                break
            matched[0] += int(cells[1])
            matched[1] += int(cells[0])
    return int(m.group(1)), int(m.group(2)), (tuple(matched) if matched[1] else None)


_SUPPRESSED = re.compile(r"^ *(\d+) +(\d+) \S", re.M)


def _suppressed(report):
    """What the suppressions matched, from the leak report's table of
    suppressions used: (bytes, allocations), or None when they matched
    nothing."""
    lines = report.split("Suppressions used:\n", 1)
    if len(lines) < 2:
        return None
    table = lines[1].split("\n-----", 1)[0]
    rows = [(int(m.group(2)), int(m.group(1))) for m in _SUPPRESSED.finditer(table)]
    return (sum(r[0] for r in rows), sum(r[1] for r in rows)) if rows else None


def _left_text(report, live, count, where):
    """A gpu_no_leaks failure of the leak report `report`: what it counts
    that no suppression matches, `where` said after the count, and what
    suppressions matched. live and count are the mark's live figures
    (vramtrace_usage) that the report covers; None when it covers part of
    them: then the report's own, its SUMMARY line and its table of
    suppressions used."""
    if live is None:
        m = _SUMMARY.search(report)
        left, n = (int(m.group(1)), int(m.group(2))) if m else (0, 0)
        matched = _suppressed(report)
    else:
        left, n, matched = _not_suppressed(report, live, count)
    return (f"gpu_no_leaks: the test left {format_bytes(left)} ({left} bytes) of GPU memory "
            f"allocated in {n} allocation(s){where}"
            + ("" if left else ", and memory a context's reset released without a free")
            + (f", besides {format_bytes(matched[0])} ({matched[0]} bytes) in {matched[1]} "
               "allocation(s) that suppressions match" if matched else "")
            + ":\n" + report)


def _tensor_bytes(t):
    return sum(t.cuda.memory_allocated(d) for d in range(t.cuda.device_count()))


def _tensor_baseline(t):
    """Each device's tensor bytes now, with PyTorch's peak set back to them
    (torch.cuda.reset_peak_memory_stats): the test's tensors may lie in
    segments its cache held before the test, which make no allocation for
    vramtrace to count."""
    if not t:
        return []
    before = []
    for d in range(t.cuda.device_count()):
        before.append(t.cuda.memory_allocated(d))
        t.cuda.reset_peak_memory_stats(d)
    return before


def _tensor_peak(t, before):
    """(bytes, device): the most the test's tensors held at once on one
    device over what it held before (PyTorch's max_memory_allocated), and
    that device; (0, None) without PyTorch. Devices' peaks are not added:
    they need not have come at once."""
    if not t:
        return 0, None
    best = (0, None)
    for d in range(t.cuda.device_count()):
        v = max(0, t.cuda.max_memory_allocated(d) - (before[d] if d < len(before) else 0))
        if v > best[0]:
            best = (v, d)
    return best


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    st = item.config.stash.get(_state, None)
    leaks_marker = item.get_closest_marker("gpu_no_leaks")
    # A parameter's own limit (pytest.param(..., marks=gpu_limit(...)))
    # comes after the function's among the item's marks: the closest.
    own = [m for m in item.own_markers if m.name == "gpu_limit"]
    limit_marker = own[-1] if own else item.get_closest_marker("gpu_limit")
    if st is None or not st.api.active:
        if st is not None and (leaks_marker or limit_marker):
            # Counted from the test's report, so that a pytest-xdist
            # worker's count reaches the controller's summary too.
            item.user_properties.append((UNCHECKED, 1))
        return (yield)
    limit = None
    if limit_marker:
        given = limit_marker.args[0] if limit_marker.args else limit_marker.kwargs.get("limit")
        extra = limit_marker.args[1:] + tuple(k for k in limit_marker.kwargs if k != "limit" or limit_marker.args)
        if extra:
            pytest.fail(f"gpu_limit: takes one limit, also given {', '.join(map(repr, extra))}", pytrace=False)
        try:
            limit, bad = parse_bytes(given), None
        except ValueError as e:
            bad = str(e)
        if bad:  # failed outside the handler: the failure alone, not "during handling of ..."
            pytest.fail(f"gpu_limit: {bad}", pytrace=False)
    gc.collect()  # what earlier tests left to the collector goes before the count
    t = _torch()
    if t:
        t.cuda.empty_cache()  # the test's tensors in memory of its own
    before = _tensor_bytes(t) if t else 0
    # PyTorch's peak stats are reset for a test with a limit only: a test
    # that reads them itself (max_memory_allocated) sees them as they were.
    baseline = _tensor_baseline(t) if limit is not None else None
    mark = st.api.mark()
    if mark <= 0:
        return (yield)
    try:
        try:
            res = yield
        except BaseException:
            item.user_properties.append((PEAK, st.api.device_peak(mark)))
            raise
        # What the test left to the collector is collected only where a
        # leak check would fail without it: a collection only frees, so a
        # check that passes before it passes after. A full collection takes
        # about 95 ms in a process that imported PyTorch; every test paid
        # it, marked or not, leaking or not.
        collected = False

        def collect():
            nonlocal collected
            if not collected:
                gc.collect()
                collected = True
            return True

        live, count, _ = st.api.usage(mark)
        # One measure for every test, limited or not: vramtrace's count of
        # the device memory allocated since it began (PyTorch's peak stats
        # are reset only for a limited test, so its tensors' peak is known
        # for that test alone; the table mixed the two).
        peak = st.api.device_peak(mark)   # one device's: devices' peaks are not added
        tensors, device = _tensor_peak(_torch(), baseline) if baseline is not None else (0, None)
        item.user_properties.append((PEAK, peak))
        failures = []
        if limit is not None and peak > limit:
            failures.append(f"gpu_limit: the test's GPU memory peaked at {format_bytes(peak)} ({peak} bytes), "
                            f"over its limit of {format_bytes(limit)} ({limit} bytes); held at the peak:\n"
                            + st.api.peak(mark))
        elif limit is not None and tensors > limit:
            failures.append(f"gpu_limit: the test's tensors peaked at {format_bytes(tensors)} ({tensors} bytes) on "
                            f"cuda:{device} over what was allocated there before it (torch.cuda.max_memory_allocated), "
                            f"over its limit of {format_bytes(limit)} ({limit} bytes); the GPU memory allocated since "
                            f"it began peaked at {format_bytes(peak)}: the rest lay in memory PyTorch's cache held "
                            "before the test, which vramtrace saw allocated then\n")
        if leaks_marker:
            t = _torch()  # the test may have been the first to use CUDA
            if t:
                left = _tensor_bytes(t) - before
                if left > 0 and collect():
                    left = _tensor_bytes(t) - before
                if left > 0:
                    t.cuda.empty_cache()
                    report = st.api.leaks(mark)
                if left > 0 and not (report and _all_suppressed(report)):
                    failures.append(f"gpu_no_leaks: the test left {format_bytes(left)} ({left} bytes) of tensors "
                                    "allocated (torch.cuda.memory_allocated); "
                                    + ("the GPU memory allocated since it began and still held:\n" + report
                                       if report else "they lie in memory PyTorch's cache held before the test, "
                                       "so vramtrace has no allocation of the test's own to show\n"))
                # Memory that PyTorch's allocator did not make (CuPy,
                # ctypes, an extension's cudaMalloc): PyTorch's count of
                # tensors never sees it, and its cache is not it.
                report = st.api.leaks_outside_torch(mark)
                if report and not _all_suppressed(report) and not collected and collect():
                    report = st.api.leaks_outside_torch(mark)
                if report and not _all_suppressed(report):
                    failures.append(_left_text(report, None, None, " outside PyTorch's caching allocator"))
            else:
                # Also memory a context's reset released without a free
                # (nothing live then; the report says it).
                report = st.api.leaks(mark)
                if report and not _all_suppressed(report) and not collected and collect():
                    live, count, _ = st.api.usage(mark)
                    report = st.api.leaks(mark)
                if report and not _all_suppressed(report):
                    failures.append(_left_text(report, live, count, ""))
        if failures:
            pytest.fail("\n".join(failures), pytrace=False)
        return res
    finally:
        st.api.mark_end(mark)


def pytest_runtest_logreport(report):
    """Every test's peak, and the marked tests run unchecked, from this
    process or from an xdist worker's report."""
    if report.when != "call":
        return
    for k, v in report.user_properties:
        if k == PEAK:
            _peaks.append((v, report.nodeid))
        elif k == UNCHECKED:
            _unchecked.append(report.nodeid)


def pytest_terminal_summary(terminalreporter, config):
    st = config.stash.get(_state, None)
    if st is None:
        return
    tr = terminalreporter
    if _unchecked:
        tr.write_line(f"vramtrace: not active: {len(_unchecked)} test(s) marked gpu_no_leaks or gpu_limit ran "
                      "unchecked (run pytest --vramtrace)")
    if st.top <= 0 or not _peaks:
        return
    top = sorted((p for p in _peaks if p[0] > 0), key=lambda p: (-p[0], p[1]))[:st.top]
    if not top:
        tr.write_line("vramtrace: no test allocated GPU memory")
        return
    tr.write_sep("-", f"vramtrace: the {len(top)} test(s) with the highest GPU peaks")
    for peak, nodeid in top:
        tr.write_line(f"{format_bytes(peak):>10}  {nodeid}")
