#!/usr/bin/env python3
"""Integration tests: programs with known answers run under libvramtrace.so.

Each test runs a program from build/tests on the simulated GPU (or the real
CUDA runtime without a driver), with and without the library, and checks the
dump and the output with exact numbers. Run by `make test`; the last line
reads "N passed, N failed".
"""
import contextlib
import glob
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dumpview import load_dump, v1_view  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(ROOT, "build")
LIB = os.path.join(BUILD, "libvramtrace.so")
CLI = os.path.join(BUILD, "vramtrace")
T = os.path.join(BUILD, "tests")
SIM = os.path.join(BUILD, "sim")
MiB = 1 << 20

TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


# The real PyTorch's virtual environment (`make torch-env`), for the tests
# that run it on the simulated GPU.
TORCH_VENV = os.path.join(BUILD, "torch-venv")
TORCH_PY = os.path.join(TORCH_VENV, "bin", "python3")


def test_if(path, why):
    """A decorator that registers a test when `path` exists and otherwise
    says it is skipped, and why."""
    def register(fn):
        if os.path.exists(path):
            return test(fn)
        print(f"SKIP {fn.__name__}: {why}")
        return fn
    return register


torch_test = test_if(TORCH_PY, "no build/torch-venv (`make torch-env` creates it)")


# PyTorch's own end, not vramtrace's: CPython 3.11 ends a thread that asks
# for the GIL while the interpreter finalizes (pthread_exit), and an
# autograd device thread doing so from a destructor (a GraphTask's last
# release) unwinds through noexcept code: std::terminate, status 134 after
# the script's last line. Seen without vramtrace in 6 of 60 runs of the
# healthy loop on a loaded machine (gdb on the core: Engine::thread_main,
# ~ThreadLocalState, take_gil, PyThread_exit_thread).
TERMINATED_AT_EXIT = "terminate called without an active exception"


class Failure(Exception):
    pass


def eq(got, want, what):
    if got != want:
        raise Failure(f"{what}: got {got!r}, want {want!r}")


def ok(cond, what):
    if not cond:
        raise Failure(what)


class Run:
    def __init__(self, rc, out, err, dumps):
        self.rc, self.out, self.err, self.dumps = rc, out, err, dumps

    @property
    def dump(self):
        eq(len(self.dumps), 1, "number of dumps")
        return self.dumps[0]


@contextlib.contextmanager
def workdir(prefix):
    """A fresh folder for a test (its name starts with prefix), removed with
    all it holds when the test is done, passed or failed."""
    work = tempfile.mkdtemp(prefix=prefix)
    try:
        yield work
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run(argv, preload=True, sim=True, env=None, report="stderr", cwd=None, lib=None, first=None):
    """Run argv in a fresh folder; return its status, output and dumps. `lib`
    replaces libvramtrace.so (a sanitized build), preloaded after `first`
    (that sanitizer's runtime)."""
    work = tempfile.mkdtemp(prefix="vt-test-")
    e = {k: v for k, v in os.environ.items()
         if not k.startswith(("VRAMTRACE_", "SIMGPU_")) and k not in ("LD_PRELOAD", "LD_LIBRARY_PATH")}
    if sim:
        e["LD_LIBRARY_PATH"] = SIM
    if preload:
        e["LD_PRELOAD"] = " ".join(x for x in (first, lib or LIB) if x)
        e["VRAMTRACE_OUT"] = os.path.join(work, "dump.%p.json")
        e["VRAMTRACE_REPORT"] = report
    e.update(env or {})
    p = subprocess.run(argv, env=e, cwd=cwd or work, capture_output=True, text=True, timeout=120)
    dumps = []
    for path in sorted(glob.glob(os.path.join(work, "**", "*.json"), recursive=True)):
        d = load_dump(path)
        d["_path"] = path
        dumps.append(d)
    leftovers = glob.glob(os.path.join(work, "*.tmp.*"))
    shutil.rmtree(work, ignore_errors=True)
    if leftovers:
        raise Failure(f"temporary files left behind: {leftovers}")
    return Run(p.returncode, p.stdout, p.stderr, dumps)


def same_as_without(argv, **kw):
    """Run with and without vramtrace (report off); output and status must match."""
    a = run(argv, preload=False, **kw)
    b = run(argv, preload=True, report="off", **kw)
    eq(b.out, a.out, f"{os.path.basename(argv[0])} stdout under vramtrace")
    eq(b.err, a.err, f"{os.path.basename(argv[0])} stderr under vramtrace")
    eq(b.rc, a.rc, f"{os.path.basename(argv[0])} exit status under vramtrace")
    return b


def source_line(prog, text):
    """The first line of tests/progs/PROG that contains text."""
    with open(os.path.join(ROOT, "tests", "progs", prog)) as f:
        return 1 + next(i for i, line in enumerate(f) if text in line)


def frames(d, stack):
    return d["stacks"][stack]["frames"]


def site(d, stack):
    """The call site as the report picks it: the innermost Python frame, else the
    innermost frame outside the CUDA runtime and driver."""
    for f in frames(d, stack):
        if f.get("python"):
            return f
    for f in frames(d, stack):
        m = os.path.basename(f["module"] or "")
        fn = f["function"] or ""
        if m.startswith("libcuda.") or m.startswith("libcudart"):
            continue
        if fn.startswith("cuda") or fn.startswith("__cudart"):
            continue
        return f
    return None


def live_by_api(d):
    out = {}
    for a in d["live"]:
        out.setdefault(a["api"], []).append(a)
    return out


def check_dump_shape(d):
    eq(d["format"], "vramtrace-dump", "format")
    eq(d["version"], 1, "version")
    for k in ("reason", "pid", "argv", "devices", "totals", "ooms", "holders", "live", "events", "stacks"):
        ok(k in d, f"dump has {k}")
    for a in d["live"]:
        ok(0 <= a["stack"] < len(d["stacks"]), "live stack index in range")
    names = {f["function"] for s in d["stacks"] for f in s["frames"]}
    ok(not any(n and n.startswith("vt_") for n in names), "no vramtrace frames in stacks")


# ------------------------------------------------------------- routes


@test
def driver_direct_calls():
    r = same_as_without([os.path.join(T, "t_driver")])
    d = r.dump
    check_dump_shape(d)
    eq(d["reason"], "exit", "reason")
    t = d["totals"]
    live = 3 * MiB + 1 * MiB + 1024 * 10 + 4096 + 65536
    eq(t["live_bytes"], live, "live bytes")
    eq(t["live_count"], 5, "live count")
    eq(t["peak_bytes"], 5 * MiB, "peak bytes")
    eq(t["alloc_count"], 9, "allocations (7 device + 2 pinned)")
    eq(t["free_count"], 3, "frees")
    eq(t["failed_count"], 0, "failures")
    eq(t["unknown_frees"], 1, "frees of unknown pointers")
    eq(d["host_memory"], {"live_bytes": 8192, "live_count": 1, "peak_bytes": 12288}, "pinned host memory")
    eq(len(d["devices"]), 1, "devices")
    dev = d["devices"][0]
    eq((dev["name"], dev["total_bytes"], dev["live_bytes"], dev["peak_bytes"]),
       ("vramtrace simulated GPU", 16 << 30, live, 5 * MiB), "device facts")
    eq(dev["uuid"], "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f", "device uuid")
    holders = [(h["bytes"], h["count"], site(d, h["stack"])["function"]) for h in d["holders"]]
    eq(holders, [(3 * MiB, 1, "alloc_weights"), (1 * MiB, 1, "alloc_activations"),
                 (65536, 1, "alloc_stream"), (10240, 1, "alloc_image"), (4096, 1, "alloc_shared")],
       "holders by call site")
    f = site(d, d["holders"][0]["stack"])
    eq((os.path.basename(f["file"]), f["line"]), ("t_driver.c", 12), "file:line of alloc_weights")
    kinds = sorted((a["api"], a["kind"], a["bytes"]) for a in d["live"])
    eq(kinds, [("cuMemAllocAsync", "async", 65536), ("cuMemAllocHost_v2", "host", 8192),
               ("cuMemAllocManaged", "managed", 4096), ("cuMemAllocPitch_v2", "pitched", 10240),
               ("cuMemAlloc_v2", "device", 1 * MiB), ("cuMemAlloc_v2", "device", 3 * MiB)],
       "live allocations by api and kind")
    eq(sum(1 for e in d["events"] if e[1] == "alloc"), 9, "alloc events")
    eq(sum(1 for e in d["events"] if e[1] == "free"), 3, "free events")


@test
def dlsym_on_handle_and_variants():
    r = same_as_without([os.path.join(T, "t_dlsym")])
    ok("driver calls: cuMemAlloc=1 cuMemAlloc_v2=2 cuMemAllocAsync_ptsz=1 cuMemAllocAsync=0" in r.out,
       "each wrapper reached its exact driver variant: " + r.out)
    ok("missing symbol -> NULL" in r.out, "unhooked missing symbol still NULL")
    d = r.dump
    check_dump_shape(d)
    eq(d["totals"]["live_bytes"], 1 * MiB + 4096 + 8192, "live bytes")
    eq(d["totals"]["live_count"], 3, "live count")
    got = sorted((a["api"], a["bytes"], site(d, a["stack"])["function"]) for a in d["live"])
    eq(got, [("cuMemAlloc", 4096, "grab_v1"), ("cuMemAllocAsync_ptsz", 8192, "grab_ptsz"),
             ("cuMemAlloc_v2", 1 * MiB, "grab_v2")], "live allocations")


def runtime_case(prog, apis):
    r = same_as_without([os.path.join(T, prog)])
    ok("driver calls: cuMemAllocAsync=1 cuMemAllocAsync_ptsz=1 cuMemAlloc_v2=2" in r.out,
       "runtime reached the exact driver variants: " + r.out)
    ok("bad free -> 1" in r.out, "unknown free passes its error through")
    d = r.dump
    check_dump_shape(d)
    t = d["totals"]
    eq(t["live_bytes"], 2 * MiB + 4096 + 8192 + 16384 + 2048, "live bytes")
    eq(t["live_count"], 5, "one record per allocation, not one per layer")
    eq(t["alloc_count"], 8, "allocations")
    eq(t["free_count"], 2, "frees")
    eq(t["unknown_frees"], 1, "frees of unknown pointers (the bad one; cudaFree(NULL) is not)")
    eq(t["peak_bytes"], 3 * MiB, "peak")
    eq(d["host_memory"]["live_bytes"], 4096, "pinned host live")
    got = sorted((a["api"], a["kind"], a["bytes"], site(d, a["stack"])["function"]) for a in d["live"])
    eq(got, sorted(apis), "live allocations")


# What t_runtime leaves live: (runtime API, the driver API the static
# runtime reaches through cuGetProcAddress, kind, bytes, function).
RUNTIME_LIVE = [
    ("cudaMalloc", "cuMemAlloc_v2", "device", 2 * MiB, "load_model"),
    ("cudaMallocAsync", "cuMemAllocAsync", "async", 4096, "stream_buffer"),
    ("cudaMallocAsync_ptsz", "cuMemAllocAsync_ptsz", "async", 8192, "stream_buffer"),
    ("cudaMallocManaged", "cuMemAllocManaged", "managed", 16384, "main"),
    ("cudaMallocPitch", "cuMemAllocPitch_v2", "pitched", 2048, "main"),
    ("cudaMallocHost", "cuMemAllocHost_v2", "host", 4096, "main")]


@test
def runtime_shared_library():
    runtime_case("t_runtime", [(rt, kind, n, fn) for rt, _, kind, n, fn in RUNTIME_LIVE])


@test
def runtime_static_through_cuGetProcAddress():
    runtime_case("t_runtime_static", [(drv, kind, n, fn) for _, drv, kind, n, fn in RUNTIME_LIVE])


@test
def driver_entry_points_and_vmm():
    r = same_as_without([os.path.join(T, "t_entry")])
    ok("release unknown -> 1" in r.out, "unknown handle release error passes through")
    d = r.dump
    check_dump_shape(d)
    va = r.out.split("va ")[1].split()[0]
    handle = r.out.split("handle ")[1].split()[0]
    vmm = [a for a in d["live"] if a["kind"] == "vmm"]
    eq(len(vmm), 1, "one live VMM handle (the other was released)")
    eq((vmm[0]["bytes"], vmm[0]["api"], vmm[0]["address"], vmm[0]["handle"]),
       (2 * MiB, "cuMemCreate", "0x" + va, "0x" + handle), "VMM handle attributed to its mapping")
    eq(site(d, vmm[0]["stack"])["function"], "make_segment", "VMM call site")
    plain = [a for a in d["live"] if a["kind"] == "device"]
    eq([(a["api"], a["bytes"]) for a in plain], [("cuMemAlloc_v2", 4096)], "entry-point cuMemAlloc")
    eq(d["totals"]["peak_bytes"], 6 * MiB, "peak includes both handles")
    eq(d["totals"]["unknown_frees"], 1, "unknown release counted")


@test
def vmm_memory_ends_at_the_last_release_or_unmap():
    """A handle's memory lasts until its last reference is released and its
    last mapping unmapped, whichever comes last (cuda.h, cuMemRelease): the
    CUDA samples release right after mapping, NCCL frees with a retained
    reference; the simulated driver frees the same way."""
    a = run([os.path.join(T, "t_vmm")], preload=False)
    r = run([os.path.join(T, "t_vmm")], report="off")
    eq((re.sub(r"vramtrace=\d+", "", r.out), r.err, r.rc), (re.sub(r"vramtrace=\d+", "", a.out), a.err, a.rc),
       "t_vmm's results, output and status without vramtrace")
    g = 2 * MiB
    want = [("released-while-mapped", g), ("then-unmapped", 0), ("two-maps-released", 2 * g),
            ("one-map-left", 2 * g), ("no-map-left", 0), ("retained-released", g), ("retained-unmapped", g),
            ("creator-released", 0), ("two-handles-released", 2 * g), ("both-unmapped-at-once", 0),
            ("refused-calls", g), ("usual-mapped", 5 * g), ("usual-unmapped", 5 * g), ("usual-released", g)]
    got = [(m[1], int(m[2]), int(m[3])) for m in re.finditer(r"^(\S+) driver=(\d+) vramtrace=(\d+)$", r.out, re.M)]
    eq(got, [(n, b, b) for n, b in want], "the driver's used bytes and vramtrace's live bytes after each step")
    eq(re.findall(r"^(cuMem\w+)\(.*-> (\d+)$", r.out, re.M).count(("cuMemRelease", "1")), 1,
       "the second release of a released handle refused")
    ok("cuMemUnmap(va + 24 * g, g) -> 1" in r.out, "an unmap where nothing is mapped refused")
    ok("retained the same handle: 1" in r.out, "cuMemRetainAllocationHandle")
    d = r.dump
    check_dump_shape(d)
    eq([(a["kind"], a["bytes"], a["api"]) for a in d["live"]], [("vmm", g, "cuMemCreate")],
       "live at exit: the handle released while still mapped")
    eq(d["totals"]["unknown_frees"], 0, "no release taken for a free of something unknown")
    eq((d["totals"]["peak_bytes"], len([e for e in d["devices"] if e["ordinal"] == 0])), (5 * g, 1), "peak")
    # Two threads ending one handle at once, 3,000 times each way: both saw
    # it kept before the unmaps and releases were one step with their
    # bookkeeping (2 to 123 handles of 20,000 left counted).
    r = run([os.path.join(T, "t_vmm"), "race", "3000"], report="off")
    eq((r.out, r.rc), ("race-unmaps driver=0 vramtrace=0\nrace-release-and-unmap driver=0 vramtrace=0\n", 0),
       "nothing left counted after the races")
    eq((r.dump["totals"]["live_count"], r.dump["totals"]["alloc_count"], r.dump["totals"]["free_count"]),
       (0, 6000, 6000), "every handle freed once")


@test
def python_ctypes_dlsym_route():
    r = same_as_without([sys.executable, os.path.join(ROOT, "tests", "py", "ctypes_driver.py")])
    eq(r.out, "0 0 0\n", "ctypes results")
    d = r.dump
    eq([(a["api"], a["bytes"]) for a in d["live"]], [("cuMemAlloc_v2", 5 * MiB)], "ctypes allocation")
    eq(d["totals"]["free_count"], 1, "ctypes free")


@test
def cpp_names_are_demangled():
    r = same_as_without([os.path.join(T, "t_cpp")])
    d = r.dump
    eq(len(d["holders"]), 1, "one call site")
    h = d["holders"][0]
    f = site(d, h["stack"])
    eq((h["bytes"], h["count"]), (3 * 4096, 3), "three layers")
    eq(f["function"], "model::Buffer<float>::Buffer(unsigned long)", "demangled C++ name")
    eq((os.path.basename(f["file"]), f["line"]), ("t_cpp.cc", 10), "file:line")
    ok("model::Buffer<float>::Buffer(unsigned long) tests/progs/t_cpp.cc:10" in
       run([os.path.join(T, "t_cpp")]).err, "post-mortem shows the demangled name")


@test
def stripped_binary_falls_back_to_module_offset():
    plain = run([os.path.join(T, "t_driver")], report="off").dump
    r = run([os.path.join(T, "t_stripped")])
    d = r.dump
    eq(d["totals"]["live_bytes"], plain["totals"]["live_bytes"], "same numbers")
    f = frames(d, d["holders"][0]["stack"])[0]
    want = frames(plain, plain["holders"][0]["stack"])[0]
    eq((f["function"], f["file"], f["line"]), (None, None, 0), "no symbols in a stripped binary")
    eq(os.path.basename(f["module"]), "t_stripped", "module")
    eq(f["offset"], want["offset"], "offset matches the unstripped build")
    ok(f"?? (t_stripped+{f['offset']})" in r.err, "report names module+offset")


@test
def arrays_and_ipc_memory():
    for prog, apis in (("t_arrays", {"cudaMallocArray": 65536, "cudaMallocMipmappedArray": 21504,
                                     "cudaIpcOpenMemHandle": 1 << 20, "cudaMalloc": 1 << 20}),
                       ("t_arrays_static", {"cuArrayCreate_v2": 65536, "cuMipmappedArrayCreate": 21504,
                                            "cuIpcOpenMemHandle_v2": 1 << 20, "cuMemAlloc_v2": 1 << 20})):
        r = same_as_without([os.path.join(T, prog)])
        ok("bad array free -> 1" in r.out, "an unknown array's free error passes through")
        d = r.dump
        eq({a["api"]: a["bytes"] for a in d["live"]}, apis, f"{prog}: live allocations by API")
        kinds = sorted(a["kind"] for a in d["live"])
        eq(kinds, ["array", "array", "device", "imported"], f"{prog}: kinds")
        eq((d["totals"]["live_bytes"], d["totals"]["live_count"]), (65536 + 21504 + (1 << 20), 3),
           f"{prog}: arrays count as this process's memory, the IPC mapping does not")
        eq(d["imported_memory"], {"live_bytes": 1 << 20, "live_count": 1}, f"{prog}: the IPC mapping apart")
        eq((d["totals"]["alloc_count"], d["totals"]["free_count"]), (5, 1), f"{prog}: counts")
        sites = sorted(site(d, a["stack"])["function"] for a in d["live"])
        eq(sites, ["image_array", "main", "open_peer_buffer", "texture_pyramid"], f"{prog}: call sites")
        holders = {site(d, h["stack"])["function"] for h in d["holders"]}
        ok("open_peer_buffer" not in holders, "memory of another process is not a holder")


# ------------------------------------------------------- out of memory


@test
def oom_post_mortem():
    r = run([os.path.join(T, "t_oom")], env={"SIMGPU_CAPACITY": "64M", "SIMGPU_CONTEXT": "4M"})
    eq(r.rc, 1, "exit status kept")
    ok("big request -> 2 (out of memory)" in r.out, "the program saw its OOM")
    d = r.dump
    check_dump_shape(d)
    eq(len(d["ooms"]), 1, "one OOM")
    o = d["ooms"][0]
    eq((o["requested_bytes"], o["api"], o["device"], o["free_bytes"], o["total_bytes"], o["live_bytes"]),
       (32 * MiB, "cudaMalloc", 0, 12 * MiB, 64 * MiB, 48 * MiB), "OOM record")
    eq(site(d, o["stack"])["function"], "big_request", "OOM call site")
    eq(d["totals"]["failed_count"], 1, "failed count")
    err = r.err
    for line in ["vramtrace: out of memory in pid",
                 "request: 32.00 MiB (33554432 bytes) by cudaMalloc on device 0 (vramtrace simulated GPU, "
                 "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f)",
                 "failing call: big_request",
                 "device: 12.00 MiB free of 64.00 MiB",
                 "held outside this process's tracked allocations: 4.00 MiB",
                 "tracked on device 0: 48.00 MiB live in 3 allocations",
                 "48.00 MiB 100.0%      3 allocs  grow_cache",
                 "what the numbers say, most likely first:",
                 f"1. grow_cache tests/progs/t_oom.c:{source_line('t_oom.c', 'cudaMalloc(&p, n);')} holds 100% "
                 "of the tracked memory (48.00 MiB in 3 allocations)",
                 "vramtrace: dump: "]:
        ok(line in err, f"post-mortem has {line!r}:\n{err}")
    ok(err.index("out of memory in pid") < err.index("vramtrace: exit in pid"), "post-mortem before exit summary")


@test
def oom_dump_survives_a_killed_job():
    r = run([os.path.join(T, "t_oom"), "_exit"], env={"SIMGPU_CAPACITY": "64M"}, report="off")
    eq(r.rc, 3, "exit status")
    d = r.dump
    eq(d["reason"], "oom", "the dump written at the OOM is the one left")
    eq(d["ooms"][0]["requested_bytes"], 32 * MiB, "request")
    eq(d["ooms"][0]["free_bytes"], 16 * MiB, "free at the failure")


@test
def oom_retries_write_once_but_record_all():
    r = run([os.path.join(T, "t_oom"), "repeat"], env={"SIMGPU_CAPACITY": "64M"})
    eq(r.err.count("out of memory in pid"), 1, "post-mortem written once within a second")
    eq(len(r.dump["ooms"]), 3, "every OOM recorded")
    eq(r.dump["totals"]["oom_count"], 3, "oom count")


@test
def oom_last_failure_without_a_post_mortem_is_told_at_exit():
    # A failure the program caught (a batch-size search) gets the
    # post-mortem; the one that ends it, less than a second later, is left
    # without one by the pace: the exit report tells of it (request, device
    # then, findings). A retry of the reported request is not told again.
    r = run([os.path.join(T, "t_oom"), "probe"], env={"SIMGPU_CAPACITY": "64M"})
    eq(r.err.count("out of memory in pid"), 1, "one post-mortem, the probe's")
    eq(re.findall(r"request: (.*) by cudaMalloc", r.err), ["1.00 GiB (1073741824 bytes)", "32.00 MiB (33554432 bytes)"],
       "the probe's request in the post-mortem, the last failure's at exit")
    ex = r.err[r.err.index("vramtrace: exit in pid"):]
    head = ("vramtrace: out-of-memory failure #2, the last, had no post-mortem of its own (at most one a second is "
            "written; 1 of 2 failures got one):\n")
    ok(head in ex, "the exit report tells of the last failure")
    tail = ex[ex.index(head) + len(head):].splitlines()
    eq(tail[:2], ["vramtrace:   request: 32.00 MiB (33554432 bytes) by cudaMalloc on device 0 (vramtrace simulated "
                  "GPU, GPU-00010203-0405-0607-0809-0a0b0c0d0e0f)",
                  f"vramtrace:   failing call: big_request tests/progs/t_oom.c:{source_line('t_oom.c', 'return cudaMalloc(p, n);')}"],
       "its request and call")
    ok("vramtrace:   1. grow_cache tests/progs/t_oom.c:" in ex and "holds 100% of the tracked memory (48.00 MiB in 3 "
       "allocations)" in ex, "its findings")
    eq(len(r.dump["ooms"]), 2, "both recorded")
    r = run([os.path.join(T, "t_oom"), "repeat"], env={"SIMGPU_CAPACITY": "64M"})
    ok("had no post-mortem" not in r.err, "retries of the reported request not told again")
    r = run([os.path.join(T, "t_oom"), "twice"], env={"SIMGPU_CAPACITY": "64M"})
    ok("had no post-mortem" not in r.err, "nor from another call of the same call site")
    r = run([os.path.join(T, "t_oom"), "later-probe"], env={"SIMGPU_CAPACITY": "64M"})
    eq(r.err.count("out of memory in pid"), 2, "two post-mortems, 1.2 s apart")
    ok("vramtrace: out-of-memory failure #3, the last, had no post-mortem of its own (at most one a second is "
       "written; 2 of 3 failures got one):\nvramtrace:   request: 1.00 GiB" in r.err, "post-mortems counted, not failures")
    r = run([os.path.join(T, "t_oom"), "many", "4100"], env={"SIMGPU_CAPACITY": "64M"})
    ok("vramtrace: out-of-memory failure #4101, the last, had no post-mortem of its own (at most one a second is "
       "written; 1 of 4101 failures got one):\nvramtrace:   request: 1.00 GiB" in r.err,
       "a last failure past the first ones kept: the newest are kept too")


@test
def oom_post_mortems_paced_from_the_last_one_written():
    # The pace is at most one a second counted from the end of the last
    # post-mortem's writing: a failure 1.2 s after the one written gets its
    # own; each names its own failure (the second's dump has both).
    r = run([os.path.join(T, "t_oom"), "later"], env={"SIMGPU_CAPACITY": "64M"})
    eq(r.err.count("out of memory in pid"), 2, "two post-mortems, 1.2 s apart")
    eq(re.findall(r"request: (.*) by cudaMalloc", r.err), ["32.00 MiB (33554432 bytes)"] * 2, "each one's request")
    eq(len(r.dump["ooms"]), 2, "both OOMs recorded")
    t = [o["time_ns"] for o in r.dump["ooms"]]
    ok(t[1] - t[0] >= 1_200_000_000, f"the failures 1.2 s apart at least: {t}")


# ------------------------------------------------------- transparency


@test
def real_cudart_without_driver():
    for prog in ("t_real_cudart", "t_real_cudart_static"):
        a = run([os.path.join(T, prog)], preload=False, sim=False)
        b = run([os.path.join(T, prog)], preload=True, sim=False)
        ok("-> 35" in a.out, "the real runtime answers insufficient driver")
        eq((b.out, b.err, b.rc), (a.out, a.err, a.rc), f"{prog} identical under vramtrace")
        eq(b.dumps, [], f"{prog}: no GPU was used, no dump")


@test
def rtld_local_library_resolves_itself():
    r = same_as_without([os.path.join(T, "t_rtld_local"), T])
    eq(r.rc, 0, "exit status")
    ok("RTLD_DEFAULT own symbol: found -> 42" in r.out, "RTLD_DEFAULT from a RTLD_LOCAL library")
    ok("RTLD_NEXT dependency: found -> 7" in r.out, "RTLD_NEXT from a RTLD_LOCAL library")
    eq(r.dumps, [], "no dump")


@test
def python_extension_modules():
    code = ("import json, sqlite3, ctypes, decimal, hashlib, ssl, zlib, _ctypes, math\n"
            "print(json.dumps({'a': 1}), sqlite3.sqlite_version_info >= (3,),\n"
            "      decimal.Decimal('1.1') + 1, hashlib.sha256(b'x').hexdigest()[:8], zlib.crc32(b'x'))\n")
    pythons = [sys.executable] + [p for p in ("/usr/bin/python3",) if os.path.exists(p)]
    for py in pythons:
        r = same_as_without([py, "-c", code], sim=False)
        eq(r.rc, 0, f"{py} status")
        eq(r.dumps, [], f"{py}: no dump")


@test
def processes_without_gpu_stay_silent():
    r = run(["sh", "-c", "ls / >/dev/null; echo hi; sh -c 'echo there'"])
    eq((r.out, r.err, r.rc, r.dumps), ("hi\nthere\n", "", 0, []), "shell children under LD_PRELOAD")
    r = run(["sh", "-c", "echo x"], env={"VRAMTRACE_DEPTH": "banana"})
    eq(r.err, "", "a bad option warns only in a process that uses a GPU")


@test
def fork_child_forgets_parent():
    r = run([os.path.join(T, "t_fork")])
    eq(r.rc, 0, "status")
    eq(len(r.dumps), 2, "parent and the allocating child write dumps; the quiet child none")
    by_pid = {d["pid"]: d for d in r.dumps}
    parent = [d for d in r.dumps if d["totals"]["live_bytes"] == 1 * MiB]
    child = [d for d in r.dumps if d["totals"]["live_bytes"] == 4096]
    eq((len(parent), len(child)), (1, 1), f"dumps by live bytes: {[d['totals'] for d in by_pid.values()]}")
    c = child[0]["totals"]
    eq((c["live_count"], c["alloc_count"], c["peak_bytes"]), (1, 1, 4096), "child counts only its own")
    eq(site(child[0], child[0]["live"][0]["stack"])["function"], "child_buffer", "child call site")
    eq(r.err.count("vramtrace: exit in pid"), 2, "two exit summaries")


@test
def threads_keep_exact_totals():
    r = run([os.path.join(T, "t_threads")], env={"SIMGPU_DEVICES": "2"}, report="off")
    eq(r.rc, 0, "status")
    d = r.dump
    t = d["totals"]
    eq((t["live_count"], t["live_bytes"]), (8, 36 * 4096), "live after 8 threads")
    eq((t["alloc_count"], t["free_count"]), (8 * 1001, 8 * 1000), "alloc/free counts")
    devs = {x["ordinal"]: x["live_bytes"] for x in d["devices"]}
    eq(devs, {0: 16 * 4096, 1: 20 * 4096}, "per-device live bytes")
    eq(len({a["thread"] for a in d["live"]}), 8, "eight threads recorded")


# ------------------------------------------------------- options and CLI


@test
def bad_option_warns_once_and_keeps_default():
    a = run([os.path.join(T, "t_driver")], preload=False)
    b = run([os.path.join(T, "t_driver")], report="off",
            env={"VRAMTRACE_DEPTH": "banana", "VRAMTRACE_BOGUS": "1"})
    eq((b.out, b.rc), (a.out, a.rc), "program output and status unchanged")
    eq(b.err.count("VRAMTRACE_DEPTH=banana"), 1, "warns once naming the variable: " + b.err)
    eq(b.err.count("VRAMTRACE_BOGUS"), 1, "unknown option warned")
    ok(len(frames(b.dump, 0)) > 1, "default depth kept")


@test
def depth_limits_frames():
    r = run([os.path.join(T, "t_driver")], report="off", env={"VRAMTRACE_DEPTH": "1"})
    ok(all(len(s["frames"]) == 1 for s in r.dump["stacks"]), "one frame per stack")
    eq(r.dump["stacks"][r.dump["holders"][0]["stack"]]["frames"][0]["function"], "alloc_weights",
       "the one frame is the caller")


@test
def output_paths_modes_and_off():
    with workdir("vt-out-") as work:
        rep = os.path.join(work, "report.%p.txt")
        r = run([os.path.join(T, "t_oom")], report=rep,
                env={"SIMGPU_CAPACITY": "64M", "RANK": "3",
                     "VRAMTRACE_OUT": os.path.join(work, "d.%h.r%r.%p.json")})
        eq(r.err, "", "report went to the file, not stderr")
        files = sorted(os.listdir(work))
        eq(len(files), 2, f"a dump and a report: {files}")
        dump = [f for f in files if f.endswith(".json")][0]
        host = os.uname().nodename
        ok(dump.startswith(f"d.{host}.r3.") and dump.endswith(".json"), f"pattern expanded: {dump}")
        with open(os.path.join(work, dump)) as f:
            d = json.load(f)
        eq(d["rank"], 3, "rank in dump")
        eq(dump, f"d.{host}.r3.{d['pid']}.json", "pid in name")
        for f in files:
            eq(stat.S_IMODE(os.stat(os.path.join(work, f)).st_mode), 0o600, f"{f} mode")
        text = open(os.path.join(work, f"report.{d['pid']}.txt")).read()
        ok("out of memory in pid" in text and "exit in pid" in text, "report file has both reports")
        r = run([os.path.join(T, "t_driver")], env={"VRAMTRACE_OUT": "off"})
        ok("exit in pid" in r.err and "dump:" not in r.err, "off: summary without a dump")


@test
def output_rank_pattern_without_a_rank_variable():
    # %r is RANK's (or the other launchers' global rank); else a local
    # rank's (a launcher on one node that sets only LOCAL_RANK); else 0,
    # and a pattern with %r and without %p is said to make every such
    # process write one file (torch.multiprocessing.spawn's workers).
    warning = ("vramtrace: warning: VRAMTRACE_OUT names the rank (%r) but no rank variable holds a rank (RANK, "
               "OMPI_COMM_WORLD_RANK, SLURM_PROCID, PMI_RANK, LOCAL_RANK...): %r is 0 here, and every such process "
               "of the job writes the same file; add %p\n")
    for env, name, said in (({"RANK": "5", "LOCAL_RANK": "1"}, "d.5.json", False),
                            ({"LOCAL_RANK": "3"}, "d.3.json", False),
                            ({}, "d.0.json", True), ({"RANK": "abc"}, "d.0.json", True)):
        with workdir("vt-rank-") as work:
            r = run([os.path.join(T, "t_driver")], report="off",
                    env={**env, "VRAMTRACE_OUT": os.path.join(work, "d.%r.json")})
            eq((sorted(os.listdir(work)), warning in r.err), ([name], said), f"{env}: the file, the warning")
            with open(os.path.join(work, name)) as f:
                eq(json.load(f)["rank"], int(name.split(".")[1]), "the dump's rank")
    with workdir("vt-rank-") as work:
        r = run([os.path.join(T, "t_driver")], report="off", env={"VRAMTRACE_OUT": os.path.join(work, "d.%r.%p.json")})
        ok(warning not in r.err, "no warning with %p")


@test
def cli_run_help_version_install():
    p = subprocess.run([CLI, "--version"], capture_output=True, text=True)
    eq((p.returncode, p.stdout.startswith("vramtrace ")), (0, True), "--version")
    p = subprocess.run([CLI, "--help"], capture_output=True, text=True)
    ok(p.returncode == 0 and "VRAMTRACE_OUT" in p.stdout and "run" in p.stdout, "--help")
    p = subprocess.run([CLI, "run", "--depth", "x", "--", "true"], capture_output=True, text=True)
    eq(p.returncode, 2, "bad --depth refused")
    with workdir("vt-cli-") as work:
        prefix = os.path.join(work, "prefix")
        subprocess.run(["make", "-s", "-C", ROOT, "install", f"PREFIX={prefix}"], check=True,
                       capture_output=True)
        env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
        env.update(LD_LIBRARY_PATH=SIM, SIMGPU_CAPACITY="64M")
        out = os.path.join(work, "run.json")
        p = subprocess.run([os.path.join(prefix, "bin", "vramtrace"), "run", "--out", out,
                            "--report", "off", "--depth", "8", "--", os.path.join(T, "t_oom")],
                           env=env, capture_output=True, text=True)
        eq(p.returncode, 1, "vramtrace run keeps the command's exit status")
        eq(p.stderr, "", "--report off")
        with open(out) as f:
            d = v1_view(json.load(f))
        eq(d["ooms"][0]["requested_bytes"], 32 * MiB, "installed CLI found the library")
        ok(all(len(s["frames"]) <= 8 for s in d["stacks"]), "--depth applied")
        p = subprocess.run([os.path.join(prefix, "bin", "vramtrace"), "run", "--", "/nonexistent"],
                           env=env, capture_output=True, text=True)
        eq(p.returncode, 127, "missing command")


# ------------------------------------------------------- leak check


LEAK_LINES = [
    "Direct leak of 1048576 byte(s) in 1 object(s) allocated from:",
    "Direct leak of 524288 byte(s) in 8 object(s) allocated from:",
    "Direct leak of 4096 byte(s) in 1 object(s) allocated from:",
]


@test
def leak_check_lsan_report_and_status():
    prog = os.path.join(T, "t_leaks")
    a = run([prog], preload=False)
    r = run([prog], env={"VRAMTRACE_LEAK_CHECK": "1"})
    eq(r.out, a.out, "program output unchanged")
    eq(r.rc, 23, "exit status with leaks")
    err = r.err
    ok(f"=={r.dump['pid']}==ERROR: vramtrace: detected GPU memory leaks" in err, "LSan header:\n" + err)
    pos = [err.index(l) for l in LEAK_LINES]
    eq(pos, sorted(pos), "largest leak first")
    ok(re_frame("load_once", "t_leaks.c", 20, err), "frame lines in LSan form:\n" + err)
    ok(err.rstrip().endswith("SUMMARY: vramtrace: 1576960 byte(s) leaked in 10 allocation(s)."), "summary line")
    eq(err.count("Direct leak of "), 3, "three leaking stacks (steady_step freed all it took)")
    r = run([prog, "clean"], env={"VRAMTRACE_LEAK_CHECK": "1"})
    eq((r.rc, r.err), (0, ""), "no leaks: status 0 and silent")
    r = run([prog], env={"VRAMTRACE_LEAK_CHECK": "1", "VRAMTRACE_EXITCODE": "7", "VRAMTRACE_REPORT": "off"})
    eq(r.rc, 7, "VRAMTRACE_EXITCODE")
    ok("SUMMARY: vramtrace:" in r.err, "the leak report is printed even with the report off")
    r = run([prog], env={"VRAMTRACE_LEAK_CHECK": "0"})
    eq(r.rc, 0, "no leak check: status unchanged")


def re_frame(fn, file, line, text):
    import re
    return re.search(r"^    #\d+ 0x[0-9a-f]+ in %s \S*%s:%d$" % (re.escape(fn), re.escape(file), line), text,
                     re.M) is not None


@test
def leak_check_suppressions():
    prog = os.path.join(T, "t_leaks")
    with workdir("vt-sup-") as work:
        sup = os.path.join(work, "sup.txt")
        with open(sup, "w") as f:
            f.write("# vendored code leaks on purpose\n\nleak:^third_party_init$\nleak:load_*\nleak:never_matches\n")
        r = run([prog], env={"VRAMTRACE_LEAK_CHECK": "1", "VRAMTRACE_SUPPRESSIONS": sup})
        eq(r.rc, 23, "still leaking")
        err = r.err
        eq(err.count("Direct leak of "), 1, "two stacks suppressed")
        ok("Direct leak of 524288 byte(s) in 8 object(s)" in err, "leaky_step reported")
        ok("Suppressions used:\n  count      bytes template\n"
           "      1       4096 ^third_party_init$\n      1    1048576 load_*\n" in err, "suppressions table:\n" + err)
        ok("never_matches" not in err, "unused suppressions not listed")
        ok("SUMMARY: vramtrace: 524288 byte(s) leaked in 8 allocation(s)." in err, "summary")
        with open(sup, "w") as f:
            f.write("leak:t_leaks.c\n")  # a file name: every stack
        r = run([prog], env={"VRAMTRACE_LEAK_CHECK": "1", "VRAMTRACE_SUPPRESSIONS": sup})
        eq(r.rc, 0, "all suppressed: status 0")
        ok("     10    1576960 t_leaks.c" in r.err and "SUMMARY" not in r.err, "table only:\n" + r.err)
        with open(sup, "w") as f:
            f.write("leak:libcudart_sim.so$\n")  # a module, anchored at the end
        r = run([prog], env={"VRAMTRACE_LEAK_CHECK": "1", "VRAMTRACE_SUPPRESSIONS": sup})
        eq(r.rc, 23, "module pattern that matches no frame (the runtime's frames are above the hook)")
        with open(sup, "w") as f:
            f.write("leak:^_start$\n")  # every stack ends in _start
        r = run([prog], env={"VRAMTRACE_LEAK_CHECK": "1", "VRAMTRACE_SUPPRESSIONS": sup})
        eq(r.rc, 0, "anchored function pattern")
        # Lines of any length: a 5,000-character comment and a 6,000-character
        # pattern before the one that matches (a line was cut at 4 KiB and its
        # rest read as a line of its own: the whole file refused).
        with open(sup, "w") as f:
            f.write("# " + "c" * 5000 + "\nleak:" + "x" * 6000 + "\nleak:^_start$\n")
        r = run([prog], env={"VRAMTRACE_LEAK_CHECK": "1", "VRAMTRACE_SUPPRESSIONS": sup})
        eq((r.rc, "warning" in r.err, "SUMMARY" in r.err), (0, False, False), "long lines: read whole\n" + r.err[-800:])
        with open(sup, "w") as f:
            f.write("# " + "c" * 5000 + "\nleak:^_start$\nbad " + "y" * 5000 + "\n")
        r = run([prog], env={"VRAMTRACE_LEAK_CHECK": "1", "VRAMTRACE_SUPPRESSIONS": sup})
        ok(f"{sup}:3: expected leak:PATTERN, got 'bad yyy" in r.err and r.rc == 23, "the bad line's number\n" + r.err[-800:])
        with open(sup, "w") as f:
            f.write("interceptor_via_fun:x\n")
        r = run([prog], env={"VRAMTRACE_LEAK_CHECK": "1", "VRAMTRACE_SUPPRESSIONS": sup})
        ok("expected leak:PATTERN" in r.err and r.rc == 23, "bad line warned, leaks still reported")
        # A UTF-8 byte order mark before the first line is an editor's, not
        # the pattern's (the whole file was refused over an invisible byte).
        with open(sup, "wb") as f:
            f.write(b"\xef\xbb\xbfleak:^_start$\n")
        r = run([prog], env={"VRAMTRACE_LEAK_CHECK": "1", "VRAMTRACE_SUPPRESSIONS": sup})
        eq((r.rc, "warning" in r.err, "SUMMARY" in r.err), (0, False, False), "a byte order mark\n" + r.err[-800:])
        # A NUL byte ended the pattern there: "leak:leaky\0_step" suppressed
        # every stack through a function with "leaky" in its name.
        with open(sup, "wb") as f:
            f.write(b"leak:leaky\0_step\n")
        r = run([prog], env={"VRAMTRACE_LEAK_CHECK": "1", "VRAMTRACE_SUPPRESSIONS": sup})
        eq((r.rc, r.err.count(f"{sup}:1: a NUL byte in the line"), r.err.count("Direct leak of ")), (23, 1, 3),
           "a NUL byte: the file refused, every leak reported\n" + r.err[-800:])
        # Many `*`: each tried every length in turn (6 against a long name
        # ran past a minute at exit); now at most the pattern's length
        # times the text's.
        with open(sup, "w") as f:
            f.write("leak:" + "*t" * 12 + "Z\nleak:^" + "".join("*" + c for c in "third_party_init") + "$\n")
        r = run([prog], env={"VRAMTRACE_LEAK_CHECK": "1", "VRAMTRACE_SUPPRESSIONS": sup})
        eq((r.rc, r.err.count("Direct leak of ")), (23, 2), "many stars: third_party_init suppressed\n" + r.err[-800:])


@test
def leak_check_fork_child_reports_only_its_own():
    r = run([os.path.join(T, "t_fork")], env={"VRAMTRACE_LEAK_CHECK": "1"})
    eq(r.rc, 23, "the parent leaks 1 MiB")
    eq(r.err.count("detected GPU memory leaks"), 2, "parent and the allocating child; the quiet child says nothing")
    ok("Direct leak of 1048576 byte(s) in 1 object(s)" in r.err
       and "Direct leak of 4096 byte(s) in 1 object(s)" in r.err, "each its own")
    ok("exited 0 23" in r.out, "the leaking child's status is 23, the quiet one's 0")


@test
def growth_detection():
    r = run([os.path.join(T, "t_leaks")])
    d = r.dump
    g = d["growing"]
    eq([site(d, x["stack"])["function"] for x in g], ["leaky_step"], "only the staircase grows")
    eq((g[0]["end_bytes"], g[0]["allocations"]), (8 * 65536, 8), "its figures")
    ok(g[0]["bytes_per_second"] > 0, "a slope")
    ok("growing call site (" in r.err and "leaky_step tests/progs/t_leaks.c:26: 0 B -> 512.00 KiB, +512.00 KiB over "
       "8 allocations" in r.err, "in the exit report:\n" + r.err)
    r = run([os.path.join(T, "t_leaks"), "clean"])
    eq(r.dump["growing"], [], "nothing grows when it is all given back")
    r = run([os.path.join(T, "t_threads")], report="off")
    src = open(os.path.join(ROOT, "tests", "progs", "t_threads.c")).read().splitlines()
    loop_line = 1 + next(i for i, l in enumerate(src) if "cudaMalloc(&p," in l)
    keep_line = 1 + next(i for i, l in enumerate(src) if "cudaMalloc(&keep," in l)
    lines = [site(r.dump, g["stack"])["line"] for g in r.dump["growing"]]
    ok(loop_line not in lines, "the steady alloc/free loop does not grow")
    ok(set(lines) <= {keep_line}, "only the kept buffers may (their timing varies)")


@test
def signal_dumps_and_diff():
    with workdir("vt-sig-") as work:
        r = run([os.path.join(T, "t_leaks"), "signal"], env={"VRAMTRACE_OUT": os.path.join(work, "d.%p.json")})
        eq((r.out, r.rc), ("done\n", 0), "the program runs on after the dump signal")
        files = sorted(os.listdir(work))
        pid = json.load(open(os.path.join(work, [f for f in files if f.count(".") == 2][0])))["pid"]
        eq(files, [f"d.{pid}.1.json", f"d.{pid}.2.json", f"d.{pid}.json"], "sequence-numbered dumps")
        one = json.load(open(os.path.join(work, f"d.{pid}.1.json")))
        two = json.load(open(os.path.join(work, f"d.{pid}.2.json")))
        eq((one["reason"], one["totals"]["live_count"]), ("signal", 5), "first on-demand dump")
        eq((two["reason"], two["totals"]["live_count"]), ("signal", 8), "second on-demand dump")
        ok(f"vramtrace: dump 1 of pid {pid} on request: " in r.err, "one line per on-demand dump")
        p = subprocess.run([CLI, "diff", os.path.join(work, f"d.{pid}.1.json"), os.path.join(work, f"d.{pid}.2.json"),
                            "--fail-over", "100K"], capture_output=True, text=True)
        eq(p.returncode, 1, "growth over --fail-over")
        lines = p.stdout.splitlines()
        eq(lines[1], "live: 1.19 MiB -> 1.38 MiB (+192.00 KiB); allocations: 5 -> 8 (+3)", "totals line")
        ok(lines[3].split() == ["+192.00", "KiB", "192.00", "KiB", "->", "384.00", "KiB", "+3", "(3", "->", "6)",
                                "leaky_step", "tests/progs/t_leaks.c:26"], "growth row: " + lines[3])
        eq(len(lines), 4, "unchanged sites are not listed")
        p = subprocess.run([CLI, "diff", os.path.join(work, f"d.{pid}.1.json"), os.path.join(work, f"d.{pid}.2.json"),
                            "--fail-over", "1M"], capture_output=True, text=True)
        eq(p.returncode, 0, "growth under --fail-over")
        p = subprocess.run([CLI, "diff", os.path.join(work, f"d.{pid}.1.json"), "/nonexistent.json"],
                           capture_output=True, text=True)
        eq((p.returncode, len(p.stderr.splitlines())), (3, 1), "bad dump: one line, status 3 (1 is the growth)")
        r = run([os.path.join(T, "t_leaks"), "signal"], env={"VRAMTRACE_SIGNAL": "0"})
        eq(r.rc, -12, "signal disabled: USR2 keeps its default action")
        r = run([os.path.join(T, "t_leaks"), "signal"], env={"VRAMTRACE_SIGNAL": "USR1",
                "VRAMTRACE_OUT": os.path.join(work, "u.%p.%n.json")})
        eq(r.rc, -12, "another signal configured: USR2 is left alone")


# ------------------------------------------------------- OOM triage


def triage(steps, env, report="off"):
    e = {"SIMGPU_CAPACITY": "64M"}
    e.update(env)
    r = run([os.path.join(T, "t_triage")] + steps.split(), env=e, report=report)
    eq(r.rc, 0, f"t_triage {steps}")
    return r, r.dump


def finding_ids(d, i=0):
    return [f["id"] for f in d["ooms"][i]["findings"]]


@test
def finding_request_exceeds_device():
    r, d = triage("keep 8M fail 100M", {})
    eq(finding_ids(d), ["request_exceeds_device"], "only that finding")
    f = d["ooms"][0]["findings"][0]
    ok("100.00 MiB" in f["finding"] and "64.00 MiB" in f["finding"], "with its numbers: " + f["finding"])
    ok("failing_request" in f["next"], "names the call: " + f["next"])
    r, d = triage("keep 8M fail 60M", {})
    ok("request_exceeds_device" not in finding_ids(d), "absent when the request fits the device")


@test
def finding_other_processes_and_outside_tracked():
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        env = {"SIMGPU_CONTEXT": "40M", "SIMNVML_PROCS": f"{sleeper.pid}:40M,self:8M"}
        r, d = triage("keep 8M fail 20M", env, report="stderr")
        ids = finding_ids(d)
        eq(ids[0], "other_processes", "other processes first")
        ok("outside_tracked" not in ids, "NVML accounts for the memory outside: no outside finding")
        procs = d["ooms"][0]["other_processes"]
        eq(procs, [{"pid": sleeper.pid, "name": "sleep", "used_bytes": 40 << 20}], "NVML's view, without self")
        ok(f"pid {sleeper.pid} (sleep) 40.00 MiB" in d["ooms"][0]["findings"][0]["finding"], "evidence")
        ok(f"other processes on this GPU (NVML): pid {sleeper.pid} (sleep) 40.00 MiB" in r.err, "post-mortem")
    finally:
        sleeper.kill()
        sleeper.wait()
    r, d = triage("keep 8M fail 20M", {"SIMGPU_CONTEXT": "40M", "SIMNVML_FAIL": "1"})
    ids = finding_ids(d)
    eq(d["ooms"][0]["other_processes"], None, "no NVML: unknown, silently")
    ok("other_processes" not in ids and "outside_tracked" in ids, f"without NVML it is outside: {ids}")
    f = d["ooms"][0]["findings"][ids.index("outside_tracked")]
    ok("40.00 MiB (62% of the device)" in f["finding"], f["finding"])
    r, d = triage("keep 8M fail 60M", {})
    ids = finding_ids(d)
    ok("outside_tracked" not in ids and "other_processes" not in ids, f"nothing outside: {ids}")


@test
def finding_one_site_dominates():
    r, d = triage("big 40M keep 4M fail 30M", {})
    ids = finding_ids(d)
    ok("one_site_dominates" in ids, f"{ids}")
    f = d["ooms"][0]["findings"][ids.index("one_site_dominates")]
    ok(f["finding"].startswith("big_buffer ") and "holds 91% of the tracked memory (40.00 MiB in 1 allocation)"
       in f["finding"], f["finding"])
    r, d = triage("keep 10M big 10M other 10M fail 40M", {})
    ok("one_site_dominates" not in finding_ids(d), "three equal sites: none dominates")


@test
def finding_growing_site():
    r, d = triage("grow 12 1M keep 2M fail 4M", {"SIMGPU_CAPACITY": "16M"})
    ids = finding_ids(d)
    eq(ids[0], "growing_site", f"the staircase first: {ids}")
    ok(d["ooms"][0]["findings"][0]["finding"].startswith("grow_step "), "names grow_step")
    r, d = triage("temp 8 1M keep 4M keep 4M fail 12M", {"SIMGPU_CAPACITY": "16M"})
    ok("growing_site" not in finding_ids(d), "alloc/free loops do not grow")


@test
def finding_fragmentation():
    r, d = triage("keep 4M fail 20M", {"SIMGPU_MAX_BLOCK": "16M"})
    ids = finding_ids(d)
    ok("fragmentation" in ids, f"{ids}")
    ok("60.00 MiB was free, more than the 20.00 MiB asked for" in
       d["ooms"][0]["findings"][ids.index("fragmentation")]["finding"], "numbers")
    r, d = triage("keep 50M fail 20M", {})
    ok("fragmentation" not in finding_ids(d), "absent when less was free than asked")


@test
def finding_allocator_retry():
    r, d = triage("big 30M cache 20M retry 40M", {})
    eq(len(d["ooms"]), 2, "the first try and the retry")
    ok("allocator_retry" not in finding_ids(d, 0), "the first failure is no retry")
    ids = finding_ids(d, 1)
    ok("allocator_retry" in ids, f"{ids}")
    f = d["ooms"][1]["findings"][ids.index("allocator_retry")]
    ok("freed 1 allocation (20.00 MiB)" in f["finding"], f["finding"])
    r, d = triage("big 30M fail 40M fail 40M", {})
    ok("allocator_retry" not in finding_ids(d, 1), "a repeat with nothing freed in between is no retry")
    # Frees in between, but allocations too: the program went on after the
    # first failure (a training loop that caught it), not a cache's retry.
    r, d = triage("big 30M cache 20M fail 40M temp 3 1M fail 40M", {})
    eq(len(d["ooms"]), 2, "two failures")
    ok("allocator_retry" not in finding_ids(d, 1), "allocations in between: no retry")


@test
def budget_limit():
    r, d = triage("keep 4M keep 4M keep 2M keep 1", {"VRAMTRACE_LIMIT": "10M"})
    eq(r.out, "keep -> 0\nkeep -> 0\nkeep -> 0\nkeep -> 2\n", "exactly at the budget fits; one byte more fails "
       "with the runtime's own code")
    o = d["ooms"][0]
    eq((o["budget"], o["requested_bytes"], o["total_bytes"], o["free_bytes"]), (True, 1, 10 << 20, 0), "budget OOM")
    eq(finding_ids(d)[0], "budget", "the budget finding first")
    r = run([os.path.join(T, "t_driver")], report="off", env={"VRAMTRACE_LIMIT": "4M"})
    eq((r.out, r.rc), ("cuMemAlloc(&p, n) failed: 2\n", 1), "the driver API's own code (2) at the 5th MiB")
    eq(r.dump["totals"]["live_bytes"], 4 << 20, "the refused request never reached the driver")
    r = run([os.path.join(T, "t_driver")], report="off", env={"VRAMTRACE_LIMIT": "12Q"})
    eq((r.rc, r.err.count("VRAMTRACE_LIMIT=12Q")), (0, 1), "a bad limit warns and runs without a budget")
    p = subprocess.run([CLI, "run", "--limit", "10M", "--report", "off", "--out", "off", "--",
                        os.path.join(T, "t_triage"), "keep", "8M", "keep", "4M"],
                       env=dict(os.environ, LD_LIBRARY_PATH=SIM, SIMGPU_CAPACITY="64M"), capture_output=True, text=True)
    eq(p.stdout, "keep -> 0\nkeep -> 2\n", "vramtrace run --limit")


@test
def ranks_from_launchers():
    with workdir("vt-rank-") as work:
        for env, rank, local in ((dict(RANK="2", LOCAL_RANK="1"), 2, 1),
                                 (dict(OMPI_COMM_WORLD_RANK="3", OMPI_COMM_WORLD_LOCAL_RANK="0"), 3, 0),
                                 (dict(SLURM_PROCID="5", SLURM_LOCALID="2"), 5, 2),
                                 (dict(PMI_RANK="7", MPI_LOCALRANKID="3"), 7, 3)):
            env = dict(env, VRAMTRACE_OUT=os.path.join(work, "r%r.json"))
            run([os.path.join(T, "t_triage"), "keep", "1M"], env=env, report="off")
            d = json.load(open(os.path.join(work, f"r{rank}.json")))
            eq((d["rank"], d["local_rank"], d["host"]), (rank, local, os.uname().nodename), f"rank from {env}")
        rc, out, _ = report([R0, R1])
        ok("peaks: all 12.00 MiB\n"
           in out.decode(), "peaks compared across ranks:\n" + out.decode()[:600])


# ------------------------------------------------------- Python frames


# A Python script's head for allocations from functions of any name: mk(NAME,
# FILE)(BYTES) allocates from a function named NAME in FILE (default
# /x/NAME.py), its cuMemAlloc_v2 call at line 3 of that file.
PY_NAMED_ALLOCS = r'''
import ctypes
cu = ctypes.CDLL("libcuda.so.1")
cu.cuInit(0)
def mk(name, file=None):
    ns = {"cu": cu, "ctypes": ctypes}
    exec("def f(n):\n    p = ctypes.c_uint64()\n    cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(n))\n", ns)
    f = ns["f"]
    f.__code__ = f.__code__.replace(co_name=name, co_qualname=name, co_filename=file or "/x/" + name + ".py")
    return f
'''


def pythons():
    """Every CPython 3.10+ on this machine: pyenv's and Debian's."""
    found = []
    root = subprocess.run(["pyenv", "root"], capture_output=True, text=True).stdout.strip() \
        if shutil.which("pyenv") else os.path.expanduser("~/.pyenv")
    for minor in ("3.10", "3.11", "3.12", "3.13"):
        for exe in sorted(glob.glob(os.path.join(root, "versions", minor + ".*", "bin", "python3"))):
            found.append(exe)
    if os.path.exists("/usr/bin/python3.11"):
        found.append("/usr/bin/python3.11")
    return found


def python_frames(d, stack):
    return [[f["file"], f["line"], f["function"]] for f in frames(d, stack) if f.get("python")]


@test
def python_frames_match_the_interpreter():
    script = os.path.join(ROOT, "tests", "py", "frames.py")
    found = pythons()
    ok(len(found) >= 1, "no CPython 3.10+ on this machine")
    print(f"     (Pythons: {', '.join(found)})")
    for py in found:
        out = tempfile.mkdtemp(prefix="vt-py-")
        try:
            exp = os.path.join(out, "expected.out")
            a = run([py, script, exp, "8"], preload=False)
            r = run([py, script, exp, "8"], report="off")
            eq((r.out, r.err, r.rc), (a.out, a.err, a.rc), f"{py}: identical under vramtrace")
            eq(r.out, "allocations 32\n", f"{py}: output (8 in main, 3 in each of 8 threads)")
            with open(exp) as f:
                records = json.load(f)
            d = r.dump
            live = {x["address"]: x for x in d["live"]}
            eq(len(records), 32, "records")
            for rec in records:
                a = live[rec["address"]]
                got = python_frames(d, a["stack"])
                eq(got, rec["frames"], f"{py}: Python frames of the {rec['bytes']}-byte allocation")
                eq([g[:2] for g in got], [t[:2] for t in rec["traceback"]],
                   f"{py}: traceback.extract_stack() at the same call")
                ok(all(g[2].split(".")[-1] == t[2] for g, t in zip(got, rec["traceback"])),
                   f"{py}: names match extract_stack")
                eq(site(d, a["stack"])["function"], "alloc", "call site is the innermost Python frame")
            names = {g[2] for rec in records for g in rec["frames"]}
            for want in ("Model.forward", "Model.Inner.make.<locals>.<lambda>", "résumé_缓存", "generator",
                         "coroutine", "worker"):
                ok(any(n.endswith(want.split(".")[-1]) for n in names), f"{py}: {want} seen")
        finally:
            shutil.rmtree(out, ignore_errors=True)


@test
def python_report_names_script_lines():
    py = pythons()[0]
    out = tempfile.mkdtemp(prefix="vt-py-")
    try:
        r = run([py, os.path.join(ROOT, "tests", "py", "frames.py"), os.path.join(out, "e.out")])
        ok("alloc " + os.path.join(ROOT, "tests", "py", "frames.py") + ":34" in r.err,
           "the exit summary names the Python line:\n" + r.err)
    finally:
        shutil.rmtree(out, ignore_errors=True)


@test
def python_edges_are_safe():
    lib = os.path.join(T, "libt_nativethread.so")
    for py in pythons():
        r = same_as_without([py, os.path.join(ROOT, "tests", "py", "edges.py"), lib])
        eq(r.rc, 0, f"{py} status")
        d = r.dump
        by = {a["bytes"]: a for a in d["live"]}
        for n in (2, 3, 4):
            ok((n << 20) in by, f"{py}: the {n} MiB allocation was recorded")
        eq(python_frames(d, by[2 << 20]["stack"])[0][2], "alloc", f"{py}: atexit handler frames")
        eq(python_frames(d, by[4 << 20]["stack"]), [], f"{py}: a native thread has no Python frames")
        eq(site(d, by[4 << 20]["stack"])["function"], "native_worker", f"{py}: native call site")


def stack_keys(d):
    """Every live allocation and OOM as (bytes, api, frames), frames as
    (module, offset) for native ones and (file, line, function) for Python's:
    what does not move with address-space layout."""
    def key(stack):
        return tuple((f["file"], f["line"], f["function"]) if f.get("python")
                     else (os.path.basename(f.get("module") or "?"), f.get("offset")) for f in frames(d, stack))
    return sorted([(a["bytes"], a["api"], key(a["stack"])) for a in d["live"]] +
                  [(o["requested"], o["api"], key(o["stack"])) for o in d["ooms"]])


@test
def unloaded_code_leaves_no_unwind_rules():
    """Plugin 1 allocates and is unloaded; plugin 2, whose allocating call
    returns to the same offset with another frame size, is loaded in its
    place and allocates. Every stack must walk plug_alloc -> run -> main: a
    walker that kept plugin 1's rules would misread plugin 2's frame.
    (libunwind 1.6's own fast-trace cache does keep them, and names a wrong
    caller here; vramtrace's dlclose door drops its rules.)"""
    p1, p2 = os.path.join(T, "libt_plug1.so"), os.path.join(T, "libt_plug2.so")
    # The kernel puts plugin 2 in plugin 1's hole unless another mapping
    # took it first (a helper thread's malloc arena): no live publisher, and
    # a few tries for the placement the check needs.
    for _ in range(5):
        r = run([os.path.join(T, "t_replug"), p1, p2], report="off", env={"VRAMTRACE_LIVE": "0"})
        eq(r.rc, 0, "status")
        if "plugin 2: 0 (where plugin 1 was)" in r.out: break
    ok("plugin 2: 0 (where plugin 1 was)" in r.out, f"plugin 2 reused plugin 1's addresses: {r.out!r}")
    d = r.dump
    got = sorted((a["bytes"], [f["function"] for f in frames(d, a["stack"])][:3]) for a in d["live"])
    want = [(n, ["plug_alloc", "run", "main"]) for n in (1 << 20, (1 << 20) + 1, 2 << 20, (2 << 20) + 1)]
    eq(got, want, "every stack: plug_alloc, run, main")


@test
def stack_walker_agrees_with_libunwind():
    """vramtrace walks stacks from cached CFI rules (tracker/stack.c); libunwind
    is its reference: every stack of every allocation must be the same."""
    lib = os.path.join(T, "libt_nativethread.so")
    cases = [([os.path.join(T, "t_driver")], {}), ([os.path.join(T, "t_cpp")], {}),
             ([os.path.join(T, "t_runtime")], {}), ([os.path.join(T, "t_oom")], {}),
             ([os.path.join(T, "t_dlclose")], {}), ([os.path.join(T, "t_leaks")], {})]
    for py in pythons():
        cases.append(([py, os.path.join(ROOT, "tests", "py", "edges.py"), lib], {}))
    compared = 0
    for argv, env in cases:
        a = run(argv, report="off", env=dict(env, VRAMTRACE_UNWIND="libunwind"))
        b = run(argv, report="off", env=env)
        eq(b.rc, a.rc, f"{os.path.basename(argv[-1])}: status")
        ka, kb = stack_keys(a.dump), stack_keys(b.dump)
        ok(len(ka) > 0, f"{argv}: allocations to compare")
        eq(kb, ka, f"{' '.join(os.path.basename(x) for x in argv)}: stacks, walker vs libunwind")
        compared += len(ka)
    # Python's interpreter frames, 8 threads, every version here: the check
    # mode takes both at each allocation and counts what differs.
    for py in pythons():
        out = tempfile.mkdtemp(prefix="vt-py-")
        try:
            r = run([py, os.path.join(ROOT, "tests", "py", "frames.py"), os.path.join(out, "e.out"), "8"],
                    report="off", env={"VRAMTRACE_UNWIND": "check"})
            eq(r.rc, 0, f"{py}: status")
            eq([l for l in r.err.splitlines() if "unwind check" in l],
               ["vramtrace: unwind check: 32 stacks, 0 differ from libunwind, 0 handed to libunwind"],
               f"{py}: walker against libunwind at each of its 32 allocations")
        finally:
            shutil.rmtree(out, ignore_errors=True)
        compared += 32
    print(f"     ({compared} stacks compared)")


@test
def python_off_and_unsupported_versions():
    py = pythons()[0]
    out = tempfile.mkdtemp(prefix="vt-py-")
    try:
        r = run([py, os.path.join(ROOT, "tests", "py", "frames.py"), os.path.join(out, "e.out")],
                report="off", env={"VRAMTRACE_PYTHON": "0"})
        ok(all(not f["python"] for s in r.dump["stacks"] for f in s["frames"]), "VRAMTRACE_PYTHON=0")
        old = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.9.*/bin/python3")))
        if old:
            r = run([old[0], os.path.join(ROOT, "tests", "py", "frames.py"), os.path.join(out, "e.out")],
                    report="off")
            eq(r.rc, 0, "3.9 status")
            eq(r.err, "vramtrace: warning: no Python frames: CPython 3.9 is not supported; stacks stay native\n",
               "one warning for an unsupported version")
            eq(r.dump["totals"]["live_count"], 8, "allocations still recorded")
            ok(all(not f["python"] for s in r.dump["stacks"] for f in s["frames"]), "native frames only")
    finally:
        shutil.rmtree(out, ignore_errors=True)


# ------------------------------------------------------- reliability

SAN_PROGRAMS = [["t_driver"], ["t_dlsym"], ["t_runtime"], ["t_runtime_static"], ["t_entry"], ["t_cpp"], ["t_arrays"],
                ["t_fork"], ["t_exec"], ["t_spawn"], ["t_dlclose"], ["t_oom"], ["t_oom", "repeat"],
                ["t_triage", "big", "30M", "cache", "20M", "retry", "40M"], ["t_leaks", "signal"],
                ["t_reset", "reuse", "thread"], ["t_arrays", "ipc-twice"], ["t_tsdexit", "twice"],
                ["t_threadreuse", "40"]]


def gcc_runtime(name):
    p = subprocess.run(["gcc", f"-print-file-name={name}"], capture_output=True, text=True).stdout.strip()
    return p if os.path.isabs(p) and os.path.exists(p) else None


def totals_of(r):
    return sorted((d["totals"]["live_bytes"], d["totals"]["alloc_count"], d["totals"]["free_count"],
                   d["totals"]["oom_count"]) for d in r.dumps)


@test
def asan_ubsan_build_of_the_library():
    asan = gcc_runtime("libasan.so")
    ok(asan, "libasan from gcc")
    env = {"ASAN_OPTIONS": "detect_leaks=0:abort_on_error=0", "UBSAN_OPTIONS": "print_stacktrace=1",
           "SIMGPU_CAPACITY": "64M"}
    for prog in SAN_PROGRAMS:
        argv = [os.path.join(T, prog[0])] + prog[1:]
        a = run(argv, env=env)
        b = run(argv, env=env, lib=os.path.join(BUILD, "asan", "libvramtrace.so"), first=asan)
        ok("AddressSanitizer" not in b.err and "runtime error" not in b.err, f"{prog}: clean:\n{b.err[-2000:]}")
        eq((b.out, b.rc), (a.out, a.rc), f"{prog}: same output and status under the ASan build")
        eq(totals_of(b), totals_of(a), f"{prog}: same figures under the ASan build")
    py = pythons()[-1]
    out = tempfile.mkdtemp(prefix="vt-py-")
    try:
        b = run([py, os.path.join(ROOT, "tests", "py", "frames.py"), os.path.join(out, "e.out"), "4"], env=env,
                lib=os.path.join(BUILD, "asan", "libvramtrace.so"), first=asan)
        ok("AddressSanitizer" not in b.err and "runtime error" not in b.err, "Python frames clean:\n" + b.err[-2000:])
        eq((b.rc, b.out), (0, "allocations 20\n"), "Python under the ASan build")
        # The thread's remembered stack (pystack_id.c): runs of one line,
        # lines in turn, threads and a fork.
        b = run([py, "-W", "ignore::DeprecationWarning", os.path.join(ROOT, "tests", "py", "memo.py"),
                 os.path.join(out, "m.out")], env=env, lib=os.path.join(BUILD, "asan", "libvramtrace.so"), first=asan)
        ok("AddressSanitizer" not in b.err and "runtime error" not in b.err, "memo.py clean:\n" + b.err[-2000:])
        eq((b.rc, b.out), (0, "allocations 365 child status 0\n"), "memo.py under the ASan build")
        # A key destructor of the program's that runs Python after
        # vramtrace's destructors ran (the memo of Python frames), on
        # every version: 3.10 showed the use after free only here.
        for each in pythons():
            b = run([each, os.path.join(ROOT, "tests", "py", "tsdexit.py"), "twice"], env=env,
                    lib=os.path.join(BUILD, "asan", "libvramtrace.so"), first=asan)
            ok("AddressSanitizer" not in b.err and "runtime error" not in b.err, f"{each} tsdexit.py clean:\n" + b.err[-2000:])
            eq((b.rc, b.out), (0, "destructor ran 2 time(s)\n"), f"{each}: tsdexit.py under the ASan build")
    finally:
        shutil.rmtree(out, ignore_errors=True)


@test
def tsan_build_of_the_library():
    tsan = gcc_runtime("libtsan.so")
    ok(tsan, "libtsan from gcc")
    lib = os.path.join(BUILD, "tsan", "libvramtrace.so")
    env = {"TSAN_OPTIONS": "halt_on_error=1:exitcode=66:die_after_fork=0", "SIMGPU_DEVICES": "2"}
    for prog in (["t_threads"], ["t_leaks", "signal"], ["t_fork"], ["t_reset", "reuse", "thread"]):
        b = run([os.path.join(T, prog[0])] + prog[1:], env=env, lib=lib, first=tsan, report="off")
        ok("ThreadSanitizer" not in b.err, f"{prog}: no data race:\n{b.err[-3000:]}")
        ok(b.rc != 66, f"{prog}: TSan did not stop it")
    b = run([os.path.join(T, "t_threads")], env=env, lib=lib, first=tsan, report="off")
    eq((b.dump["totals"]["live_count"], b.dump["totals"]["alloc_count"], b.dump["totals"]["free_count"]),
       (8, 8008, 8000), "exact totals from 8 threads under TSan")


@test
def exec_spawn_dlclose_abort():
    r = run([os.path.join(T, "t_exec")], report="off")
    eq((r.out, r.rc), ("first image\nsecond image\n", 0), "exec: the new image runs")
    eq(len(r.dumps), 2, "the image before exec wrote its OOM dump, the new image its own")
    names = sorted(os.path.basename(d["_path"]) for d in r.dumps)
    pid = r.dumps[0]["pid"]
    eq(names, [f"dump.{pid}.exec1.json", f"dump.{pid}.json"], "the new image gets a new dump name")
    second = [d for d in r.dumps if d["_path"].endswith("exec1.json")][0]
    eq((second["totals"]["live_bytes"], second["totals"]["oom_count"], second["reason"]), (4096, 0, "exit"),
       "the new image's own records only")
    first = [d for d in r.dumps if not d["_path"].endswith("exec1.json")][0]
    eq((first["reason"], first["ooms"][0]["requested_bytes"]), ("oom", 1 << 40), "the first image's OOM dump")
    same_as_without([os.path.join(T, "t_spawn")])
    r = run([os.path.join(T, "t_spawn")], report="off")
    eq(len(r.dumps), 1, "posix_spawn'd and vfork'd echo write nothing")
    a = run([os.path.join(T, "t_dlclose")], preload=False)
    r = run([os.path.join(T, "t_dlclose")], report="off")
    eq((r.out, r.rc), (a.out, a.rc), "dlclose and a second dlopen of the driver")
    eq(r.dump["totals"]["alloc_count"], 2, "both allocations recorded")
    a = run([os.path.join(T, "t_oom"), "abort"], preload=False, env={"SIMGPU_CAPACITY": "64M"})
    r = run([os.path.join(T, "t_oom"), "abort"], report="off", env={"SIMGPU_CAPACITY": "64M"})
    eq((r.out, r.rc), (a.out, a.rc), "abort() after an OOM: same end")
    eq((r.dump["reason"], r.dump["ooms"][0]["requested_bytes"]), ("oom", 32 << 20), "the OOM dump is whole")


BAD_OPTIONS = {"VRAMTRACE_DEPTH": "banana", "VRAMTRACE_LIMIT": "12Q", "VRAMTRACE_EVENTS": "-1",
               "VRAMTRACE_TOP": "0", "VRAMTRACE_PYTHON": "2", "VRAMTRACE_LEAK_CHECK": "",
               "VRAMTRACE_EXITCODE": "300", "VRAMTRACE_SIGNAL": "FOO", "VRAMTRACE_OUT": "",
               "VRAMTRACE_REPORT": "", "VRAMTRACE_UNWIND": "fast", "VRAMTRACE_COLOUR": "1"}


@test
def every_bad_option_warns_once_and_keeps_the_default():
    prog = [os.path.join(T, "t_triage"), "keep", "1M"]
    a = run(prog, preload=False)
    for name, value in BAD_OPTIONS.items():
        r = run(prog, env={name: value})
        eq((r.out, r.rc), (a.out, a.rc), f"{name}={value!r}: the program is unaffected")
        lines = [l for l in r.err.splitlines() if "warning" in l]
        eq(len(lines), 1, f"{name}={value!r}: one warning, got {lines}")
        ok(name in lines[0], f"{name}: the warning names the variable: {lines[0]}")
        ok("vramtrace: exit in pid" in r.err or name == "VRAMTRACE_REPORT", f"{name}: vramtrace still works")
        eq(len(r.dumps), 1, f"{name}: the default dump is still written")


@test
def output_files_are_safe():
    with workdir("vt-safe-") as work:
        victim = os.path.join(work, "victim")
        with open(victim, "w") as f:
            f.write("keep me")
        link = os.path.join(work, "dump.json")
        os.symlink(victim, link)
        r = run([os.path.join(T, "t_triage"), "keep", "1M"], report="off", env={"VRAMTRACE_OUT": link})
        eq(open(victim).read(), "keep me", "the symlink's target is untouched")
        eq(os.readlink(link), victim, "the link is neither followed nor replaced")
        eq(r.err.count("cannot write the dump"), 1, "one warning: " + r.err)
        rlink = os.path.join(work, "report.txt")
        os.symlink(victim, rlink)
        a = run([os.path.join(T, "t_triage"), "keep", "1M"], preload=False)
        r = run([os.path.join(T, "t_triage"), "keep", "1M"], report=rlink)
        eq(open(victim).read(), "keep me", "a report path that is a symlink is not followed")
        eq((r.out, r.rc), (a.out, a.rc), "the program runs on")
        eq(r.err.count("cannot write the report"), 1, "one warning: " + r.err)
        r = run([os.path.join(T, "t_oom")], report="off", env={"VRAMTRACE_OUT": "/nonexistent/dir/d.json",
                                                               "SIMGPU_CAPACITY": "64M"})
        eq(r.rc, 1, "the program's own status")
        eq(r.err.count("cannot write the dump"), 1, "one warning for the OOM and the exit dump together: " + r.err)


@test
def valgrind_memcheck_on_the_cli():
    vg = shutil.which("valgrind")
    ok(vg, "valgrind (make deps installs it)")
    cases = [[R0, "--format", fmt] for fmt in ("text", "json", "folded", "html", "torch")]
    cases += [[R0, R1, "--at", "oom"], ["python.json", "--format", "html"], ["hostile.json"], ["missing.json"]]
    for args in cases:
        p = subprocess.run([vg, "-q", "--error-exitcode=99", "--leak-check=full", "--errors-for-leak-kinds=all",
                            CLI, "report"] + args, cwd=GOLDEN, capture_output=True)
        ok(p.returncode in (0, 1), f"report {args}: valgrind clean:\n{p.stderr.decode()[-2000:]}")
    p = subprocess.run([vg, "-q", "--error-exitcode=99", "--leak-check=full", "--errors-for-leak-kinds=all",
                        CLI, "diff", R0, R1], cwd=GOLDEN, capture_output=True)
    ok(p.returncode == 0, "diff: valgrind clean:\n" + p.stderr.decode()[-2000:])


@test
def gpu_script_runs_on_the_simulated_gpu():
    out = tempfile.mkdtemp(prefix="vt-gpu-")
    try:
        e = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "LD_LIBRARY_PATH")}
        e["OUT"] = out
        p = subprocess.run(["bash", os.path.join(ROOT, "tests", "gpu", "run.sh"), "--sim", "c"], env=e,
                           capture_output=True, text=True, timeout=300)
        eq(p.returncode, 0, "tests/gpu/run.sh --sim:\n" + p.stdout[-2000:] + p.stderr[-1000:])
        ok("gpu checks: 15 passed, 0 failed" in p.stdout, p.stdout[-1000:])
        ok(os.path.exists(os.path.join(out, "gpu-results.txt")), "results file")
    finally:
        shutil.rmtree(out, ignore_errors=True)


# ------------------------------------------------------- reports (CLI)

GOLDEN = os.path.join(ROOT, "tests", "golden")
EXPECTED = os.path.join(GOLDEN, "expected")
UPDATE_GOLDEN = "--update-golden" in sys.argv
R0, R1 = "phases.r0.json", "phases.r1.json"
GOLDEN_CASES = [
    ("text.r0.txt", [R0]),
    ("text.peak.r0.txt", [R0, "--at", "peak"]),
    ("text.multi.oom.txt", [R0, R1, "--at", "oom", "--top", "3"]),
    ("json.r0.json", [R0, "--format", "json"]),
    ("folded.exit.r0.txt", [R0, "--format", "folded"]),
    ("folded.peak.r0.txt", [R0, "--format", "folded", "--at", "peak"]),
    ("folded.oom.multi.txt", [R0, R1, "--format", "folded", "--at", "oom"]),
    ("html.multi.parts.json", [R0, R1, "--format", "html"]),
    ("torch.r0.pickle", [R0, "--format", "torch"]),
    ("hostile.parts.json", ["hostile.json", "--format", "html"]),
    ("hostile.folded.txt", ["hostile.json", "--format", "folded"]),
    ("hostile.text.txt", ["hostile.json"]),
    # Live entries and holders written without jansson (cli/fmt_json.c,
    # put_live and put_holder): byte for byte what jansson wrote, on
    # strings that need escaping, a handle, the largest integers, a stack
    # without a site, Python frames. Both expected files were written by
    # the CLI before that change.
    ("hostile_live.json.json", ["hostile_live.json", "--format", "json"]),
    ("python.json.json", ["python.json", "--format", "json"]),
    ("python.text.txt", ["python.json", "--top", "4"]),
    ("python.folded.txt", ["python.json", "--format", "folded"]),
]


def report(args, cwd=GOLDEN):
    p = subprocess.run([CLI, "report"] + args, cwd=cwd, capture_output=True)
    return p.returncode, p.stdout, p.stderr.decode()


def without_page_assets(page):
    """The page with its script and style (cli/html/, built into
    build/html/) each replaced by one line naming its size: a golden page
    holds what the CLI writes around them, the dump's data and the content
    policy's hashes, not a second copy of the code."""
    for asset in ("page.js", "page.css"):
        with open(os.path.join(BUILD, "html", asset), "rb") as f:
            code = f.read()
        eq(page.count(code), 1, f"the page holds build/html/{asset} once")
        page = page.replace(code, b"/* build/html/%s: %d bytes */" % (asset.encode(), len(code)))
    return page


HTML_SKELETON = "html.skeleton.html"
HTML_DUMP = re.compile(r'<div class="dump( hidden)?" id="dump-(\d+)" data-index="\2">\n'
                       r'(<section class="view" data-view="summary">.*?</section>\n)(.*?)'
                       r'<script type="application/json" id="vt-data-\2">(.*?)</script>\n</div>\n', re.S)
HTML_RANKS = re.compile(r'<section class="view" data-view="ranks" id="ranks">.*?</section>\n', re.S)
RANKS_LINK = '<a href="#view=ranks">ranks</a>'


def html_parts(page):
    """A page (without its assets) as its skeleton, the markup the CLI
    writes the same around every page and dump, and its parts, what it
    writes from the dumps: the ranks section (or None), and per dump
    whether it starts hidden, its summary's lines and its data block. The
    skeleton holds one dump, between {each-dump} and {end-dump}, with
    {index}, {hidden}, {summary} and {data} where a dump's own parts
    stand, and {ranks-link} and {ranks} where the several-dump parts do.
    Every dump's markup around its parts must be the same."""
    page = whole = page.decode("utf-8")
    m = HTML_RANKS.search(page)
    ranks = m.group(0) if m else None
    eq(page.count(RANKS_LINK), 1 if ranks else 0, "the ranks link iff the ranks section")
    nav = '<a href="#view=all">all</a>' + (RANKS_LINK if ranks else "") + '<a href="#view=summary">'
    eq(page.count(nav), 1, "the ranks link after the first")
    page = page.replace(nav, nav.replace(RANKS_LINK, "").replace("</a><a", "</a>{ranks-link}<a"))
    dumps, views, spans = [], set(), []
    for k, m in enumerate(HTML_DUMP.finditer(page)):
        eq(int(m.group(2)), k, "the dumps in order")
        dumps.append({"hidden": bool(m.group(1)), "summary": m.group(3)[:-1].split("\n"), "data": m.group(5)})
        views.add(m.group(4).replace(f'data-dump="{k}"', 'data-dump="{index}"'))
        spans.append(m.span())
    ok(dumps, "the page holds a dump")
    eq(len(views), 1, "every dump's views the same")
    eq([a for a, _ in spans[1:]], [b for _, b in spans[:-1]], "the dumps one after the other")
    head = page[:spans[0][0]]
    if ranks:
        ok(head.endswith(ranks), "the ranks section just before the dumps")
        head = head[:-len(ranks)]
    one = ('{ranks}{each-dump}<div class="dump{hidden}" id="dump-{index}" data-index="{index}">\n{summary}' +
           views.pop() + '<script type="application/json" id="vt-data-{index}">{data}</script>\n</div>\n{end-dump}')
    skeleton, parts = head + one + page[spans[-1][1]:], {"ranks": ranks, "dumps": dumps}
    eq(html_page(skeleton, parts), whole, "the page from its skeleton and parts")
    return skeleton, parts


def html_page(skeleton, parts):
    """The page (without its assets) that html_parts split."""
    head, rest = skeleton.split("{each-dump}")
    one, tail = rest.split("{end-dump}")
    head = head.replace("{ranks-link}", RANKS_LINK if parts["ranks"] else "").replace("{ranks}", parts["ranks"] or "")
    dumps = "".join(one.replace("{hidden}", " hidden" if d["hidden"] else "").replace("{index}", str(k))
                    .replace("{summary}", "\n".join(d["summary"]) + "\n").replace("{data}", d["data"])
                    for k, d in enumerate(parts["dumps"]))
    return head + dumps + tail


def golden_compare(name, out):
    """out against the golden file `name` (written first with --update-golden)."""
    path = os.path.join(EXPECTED, name)
    if UPDATE_GOLDEN:
        with open(path, "wb") as f:
            f.write(out)
    with open(path, "rb") as f:
        want = f.read()
    if out != want:
        raise Failure(f"{name} differs from the golden file (run tests/run_tests.py "
                      f"--update-golden after checking the change)")


@test
def report_golden_files():
    """Each format's output against its golden file. An HTML page is kept
    as its parts (html_parts), one JSON file a page, and its skeleton is
    checked once against html.skeleton.html, the same for every page."""
    os.makedirs(EXPECTED, exist_ok=True)
    golden_cases(lambda args: report(args), golden_compare)


def golden_cases(report_of, compare):
    """Each of GOLDEN_CASES's reports (report_of(args) -> rc, out, err) in
    its golden form, handed to compare(name, bytes): an HTML page as its
    parts (html_parts), and the one skeleton of every page last."""
    skeletons = set()
    for name, args in GOLDEN_CASES:
        rc, out, err = report_of(args)
        eq((rc, err), (0, ""), f"report {args}")
        if "html" in args:
            skeleton, parts = html_parts(without_page_assets(out))
            skeletons.add(skeleton)
            out = (json.dumps(parts, indent=1, ensure_ascii=False) + "\n").encode()
        compare(name, out)
    eq(len(skeletons), 1, "one skeleton for every page")
    compare(HTML_SKELETON, skeletons.pop().encode())


@test
def report_moments_and_ranks():
    rc, out, _ = report([R0, "--format", "folded"])
    eq(out.decode().splitlines(), ["steady_state tests/progs/t_phases.c:20;"
                                   "_start;__libc_start_main;__libc_start_call_main;main;steady_state 4194304"],
       "folded at exit, rooted at the call site")
    rc, out, _ = report([R0, "--format", "folded", "--at", "peak", "--folded-root", "none"])
    eq(out.decode().splitlines(), ["_start;__libc_start_main;__libc_start_call_main;main;warmup_buffer 12582912"],
       "folded at the peak: the freed warm-up buffers")
    rc, out, _ = report([R0, R1, "--format", "folded", "--at", "oom", "--folded-root", "none"])
    lines = sorted(out.decode().splitlines())
    eq([l.rsplit(" ", 1)[1] for l in lines], ["4194304", "1048576", "4194304"],
       "per-rank stacks at the OOM (two steady_state calls merged into one line)")
    eq(lines[0], "rank 0 pid 8447;_start;__libc_start_main;__libc_start_call_main;main;steady_state 4194304",
       "rank prefix is the root frame (without the call site's)")
    rc, out, _ = report([R0, R1, "--at", "oom"])
    text = out.decode()
    ok("first to fail: rank 0" in text, "which rank failed first")
    ok("8.00 MiB in 4 allocations in 2 processes  steady_state tests/progs/t_phases.c:20" in text,
       "holders combined across ranks:\n" + text)
    rc, out, _ = report([R0, "--format", "json"])
    j = json.loads(out)
    p0 = j["processes"][0]
    eq([(h["bytes"], h["count"], h["site"]) for h in p0["holders"]],
       [(2 * MiB, 1, "steady_state tests/progs/t_phases.c:20")] * 2,
       "json holders: two calls of steady_state from two lines of main")
    eq(p0["ooms"][0]["site"], "huge_request tests/progs/t_phases.c:32", "json OOM site")
    eq((p0["ooms"][0]["free_bytes"], p0["ooms"][0]["requested_bytes"]), (12 * MiB, 14 * MiB), "json OOM")
    rc, _, err = report([R0, "--format", "folded", "--at", "nowhere"])
    eq(rc, 2, "bad --at")


@test
def report_torch_snapshot():
    import pickle
    import pickletools
    rc, out, _ = report([R0, "--format", "torch"])
    eq(rc, 0, "status")
    allowed = {"PROTO", "EMPTY_DICT", "EMPTY_LIST", "MARK", "SETITEMS", "APPENDS", "APPEND", "BINUNICODE",
               "BININT", "BININT1", "BININT2", "LONG1", "NEWTRUE", "NEWFALSE", "BINPUT", "BINGET", "LONG_BINPUT",
               "LONG_BINGET", "STOP"}
    ops = {op.name for op, _, _ in pickletools.genops(out)}
    ok(ops <= allowed, f"only plain-data opcodes: {ops - allowed}")
    eq(out[1], 2, "protocol 2")
    snap = pickle.loads(out)
    segs = snap["segments"]
    eq(sorted((s["total_size"], s["blocks"][0]["state"]) for s in segs),
       [(2 * MiB, "active_allocated")] * 2, "one segment per live allocation")
    for s in segs:
        eq(sum(b["size"] for b in s["blocks"]), s["total_size"], "blocks fill their segment")
        eq([f["name"] for f in s["frames"][:2]], ["steady_state (call site)", "steady_state"],
           "segment frames: the call site, then the stack innermost first")
        eq(s["blocks"][0]["frames"][0]["filename"], "tests/progs/t_phases.c", "frame filename")
    trace = snap["device_traces"][0]
    counts = {}
    for e in trace:
        counts[e["action"]] = counts.get(e["action"], 0) + 1
    eq(counts, {"segment_alloc": 5, "alloc": 5, "free_requested": 3, "free_completed": 3, "segment_free": 3,
                "oom": 1}, "trace actions")
    oom = [e for e in trace if e["action"] == "oom"][0]
    eq((oom["size"], oom["device_free"]), (14 * MiB, 12 * MiB), "oom entry")
    ok(all(trace[i]["time_us"] <= trace[i + 1]["time_us"] for i in range(len(trace) - 1)), "time order")


def chromium_dom(html_path, fragment=""):
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe:
        raise Failure("chromium is not installed (make deps installs it)")
    prof = tempfile.mkdtemp(prefix="vt-chromium-")
    try:
        p = subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                            "--no-first-run", "--disable-background-networking", "--disable-component-update",
                            "--disable-sync", f"--user-data-dir={prof}", "--virtual-time-budget=2000",
                            "--dump-dom", "file://" + html_path + fragment], capture_output=True, text=True,
                           timeout=120)
    finally:
        shutil.rmtree(prof, ignore_errors=True)
    eq(p.returncode, 0, "chromium status")
    return p.stdout


@test
def report_html_in_chromium():
    with workdir("vt-html-") as work:
        page = os.path.join(work, "r.html")
        rc, out, _ = report([R0, R1, "--format", "html", "-o", page, "--at", "peak"])
        eq(rc, 0, "status")
        raw = open(page).read()
        ok("http://" not in raw.replace("http://www.w3.org/2000/svg", "") and "https://" not in raw,
           "no network references")
        dom = chromium_dom(page)
        eq(dom.count('class="flame-node'), 6, "flame graph of the rank shown drawn by the page's script (6 frames)")
        eq(dom.count('<canvas data-device="0"'), 1, "one timeline per device of the rank shown")
        eq(dom.count('class="legend-item oom-key"'), 1, "the OOM in the timeline's legend")
        eq(dom.count('class="legend-item peak-key"'), 1, "the peak in the timeline's legend")
        ok(">warmup_buffer tests/progs/t_phases.c:14 (12.00 MiB, 100.0%)</div>" in dom, "flame graph at the peak")
        page = os.path.join(work, "p.html")
        rc, out, _ = report(["python.json", "--format", "html", "-o", page])
        dom = chromium_dom(page, "#selftest")
        ok('<pre id="selftest">sort ok; zoom ok; unzoom ok; hover ok; timeline zoom ok; axis ok; steps: none; search ok; collapse ok; flame device ok; tensors: none; row ok; rank: one dump; errors none</pre>' in dom,
           "clicking a column sorts it both ways; clicking a frame zooms, clicking the root zooms out: " +
           dom[dom.find('id="selftest"') - 10:][:200])
        page = os.path.join(work, "h.html")
        rc, out, _ = report(["hostile.json", "--format", "html", "-o", page])
        raw = open(page).read()
        for bad in ("<script>alert", "<img src=x", "<b>bold", "<i>host"):
            ok(bad not in raw, f"escaped in the page: {bad}")
        dom = chromium_dom(page)
        ok("<img" not in dom and "<b>" not in dom, "nothing injected into the DOM")
        ok("evil&lt;script&gt;alert(1)&lt;/script&gt;" in dom, "hostile name shown as text")


@test
def report_bad_input_is_one_line_and_status_1():
    with workdir("vt-bad-") as work:
        good = open(os.path.join(GOLDEN, R0), "rb").read()
        d = json.loads(good)
        cases = {
            "truncated.json": good[: len(good) // 2],
            "empty.json": b"",
            "garbage.json": bytes(range(256)),
            "notdump.json": b'{"a": 1}',
            "array.json": b"[1, 2]",
            "badtype.json": json.dumps(dict(d, pid="x")).encode(),
            "badstack.json": json.dumps(dict(d, holders=[{"stack": 99, "bytes": 1, "count": 1}])).encode(),
            "badframe.json": json.dumps(dict(d, stacks=[{"frames": [{"function": 3}]}])).encode(),
            "badversion.json": json.dumps(dict(d, version=7)).encode(),
            "negative.json": json.dumps(dict(d, time_ns=-5)).encode(),
        }
        for name, data in cases.items():
            with open(os.path.join(work, name), "wb") as f:
                f.write(data)
        for name in list(cases) + ["missing.json"]:
            for fmt in ("text", "html", "torch"):
                rc, out, err = report([os.path.join(work, name), "--format", fmt])
                eq(rc, 1, f"{name} status")
                eq(len(err.splitlines()), 1, f"{name}: one error line, got {err!r}")
                ok(err.startswith("vramtrace report: ") and name in err, f"{name}: names the file: {err!r}")
                eq(out, b"", f"{name}: nothing on stdout")


def load_test_modules():
    """Tests of one area live in tests/integration/test_AREA.py; each does
    `from run_tests import *` and registers with @test after the ones here.
    They are loaded in name order, each as a module of its own name, so a
    file may import a helper from one whose name sorts before its own."""
    import importlib.util
    sys.modules.setdefault("run_tests", sys.modules[__name__])
    for path in sorted(glob.glob(os.path.join(ROOT, "tests", "integration", "test_*.py"))):
        name = os.path.splitext(os.path.basename(path))[0]
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod   # a later file may import an earlier one's helpers
        spec.loader.exec_module(mod)


def main():
    load_test_modules()
    only = [a for a in sys.argv[1:] if not a.startswith("--")]
    passed = failed = 0
    failures = []
    for t in TESTS:
        if only and t.__name__ not in only:
            continue
        try:
            t()
            passed += 1
            print(f"PASS {t.__name__}")
        except Exception as e:  # a failed check or a crash both fail the test
            failed += 1
            failures.append(t.__name__)
            print(f"FAIL {t.__name__}: {e}")
            if not isinstance(e, Failure):
                traceback.print_exc()
    # The failures again, last: a log's tail then names them.
    print(f"integration: {passed} passed, {failed} failed" + (f" ({', '.join(failures)})" if failures else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
