"""The simulated GPU's own promises: what PyTorch's CUDA build relies on
in the stand-in driver, runtime and NVML (tests/simgpu)."""
import os
import subprocess
import sys

from run_tests import *

SIMGPU_WANT = [
    'vramtrace simulated GPU 9.0 sms 132/132 total 67108864 bus 0000:01:00.0',
    'live 100000 freed 100000 used 0',
    'copy same',
    'interior: type 2 device 0',
    'stack: type 0 device -2',
    'pinned: type 1',
    'bad direction -> 21',
    'pool after free: reserved 10485760 used 0 device 10485760',
    'pool reuse: reserved 10485760 used 4194304 device 10485760',
    'pool trimmed: reserved 0 high 10485760 device 0',
    'threshold 0: held 1048576 until the synchronization, then 0',
    'cudaFree of pool memory: used 0; again -> 1; device 0 after a synchronization',
    'vmm: reserve 0 create 0 map 0 aligned 1 used 2097152',
    'vmm: byte 7 retain 0 same 1 range 0 at +2097152 size 2097152',
    'vmm: unmapped range 500',
    'vmm: unmap 0 release 0 (used 2097152) release 0 free 0 used 0',
    'unrecorded elapsed -> 400',
    'elapsed -> 0, not negative 1',
    'no timing -> 400',
    'last error 400, then 0',
    'query 0 synchronize 0',
    'cudaErrorMemoryAllocation: out of memory',
    'cudaErrorNotSupported: operation not supported',
    'unrecognized error code: unrecognized error code',
    'missing entry point -> 0 status 1 fn (nil), last error 0',
    'cuMemCreate -> 0 status 0 found 1',
]


@test
def simgpu_what_pytorch_relies_on():
    """t_simgpu through the stand-in runtime, on a 64 MiB device: 100,000
    live allocations (the driver's old table held 65,536), real copies and
    sets, pointer attributes, pools that keep freed memory until a trim or
    a synchronization past their threshold, VMM mappings, events, the last
    error, documented error strings, entry points of missing names."""
    env = {"SIMGPU_CAPACITY": "64M"}
    r = run([os.path.join(T, "t_simgpu")], preload=False, env=env)
    eq(r.rc, 0, "status")
    eq(r.out.splitlines(), SIMGPU_WANT, "every promise")
    b = same_as_without([os.path.join(T, "t_simgpu")], env=env)
    eq(b.dump["totals"]["unknown_frees"], 1, "under vramtrace, the one free of memory already freed is unknown")


@test
def simgpu_address_space_is_never_what_runs_out():
    """t_simgrow on a 1 GiB device: a buffer grown by 1 MiB a step, each
    larger copy made before the smaller one is freed, asks for 128 GiB in
    512 sizes, all different, twice the device's 64 GiB of address space;
    freed ranges are joined and reused, so it grows until the two copies
    pass the capacity (512 MiB live + 513 MiB asked > 1 GiB), never over
    a live copy, and then the whole device fits in one allocation."""
    r = run([os.path.join(T, "t_simgrow")], preload=False, env={"SIMGPU_CAPACITY": "1G"})
    eq(r.rc, 0, "status")
    eq(r.out.splitlines(), [
        "grew to 536870912 bytes in 512 steps (137707388928 bytes asked for in all), 0 overlaps",
        "537919488 bytes -> 2 with 536870912 of 1073741824 bytes free",
        "whole device: 1073741824 bytes -> 0",
        "one byte more: 1073741825 bytes -> 2"], "grown to the capacity")
    same_as_without([os.path.join(T, "t_simgrow")], env={"SIMGPU_CAPACITY": "1G"})


@test
def simgpu_sizes_no_device_holds_and_a_destroyed_pools_memory():
    """t_simlimits on a 1 GiB device. Sizes whose product or rounding
    passes 2^64 (pitched 2^33 x 2^33, SIZE_MAX wide; a 3D array of 2^66
    bytes; stream-ordered SIZE_MAX, rounded up) are out of memory, through
    the runtime and the driver; they were allocations of the wrapped-around
    remainder (0 bytes, or SIZE_MAX live) that succeeded. A pool destroyed
    with 200 MiB out gives its memory back at that allocation's free, as
    cuMemPoolDestroy's documentation says; it was held for ever, and the
    next 1000 MiB failed. Under vramtrace the output and status are the
    same and nothing is live."""
    env = {"SIMGPU_CAPACITY": "1G"}
    r = run([os.path.join(T, "t_simlimits")], preload=False, env=env)
    eq(r.rc, 0, "status")
    eq(r.out.splitlines(), [
        "cudaMallocPitch 2^33 x 2^33 -> 2",
        "cudaMallocPitch SIZE_MAX x 2 -> 2",
        "cuMemAllocPitch 2^40 x 2^30 -> 2",
        "cudaMallocAsync SIZE_MAX -> 2",
        "cuMemAllocAsync SIZE_MAX - 100 -> 2",
        "cudaMalloc3DArray 2^22 x 2^22 x 2^22 -> 2",
        "cuArrayCreate 2^40 x 2^30 x 16 bytes -> 2",
        "cuMipmappedArrayCreate 2^32 x 2^32 x 4 bytes -> 2",
        "cuMemAddressReserve 2^63 -> 2",
        "cudaMallocFromPoolAsync SIZE_MAX from a host pool -> 2",
        "pitched 1000 x 1000 -> 0 pitch 1024; used 1024000 bytes",
        "after the refusals: used 0 bytes",
        "cudaMemPoolDestroy: pool reserves 300 MiB: used 300 MiB",
        "cudaMemPoolDestroy with 200 MiB out -> 0; used 200 MiB",
        "its last allocation freed -> 0; used 0 MiB",
        "1000 MiB -> 0",
        "cuMemPoolDestroy: pool reserves 300 MiB: used 300 MiB",
        "cuMemPoolDestroy with 200 MiB out -> 0; used 200 MiB",
        "its last allocation freed -> 0; used 0 MiB",
        "1000 MiB -> 0"], "every answer and the device's used bytes")
    b = same_as_without([os.path.join(T, "t_simlimits")], env=env)
    t = b.dump["totals"]
    eq((t["live_bytes"], t["live_count"], t["alloc_count"], t["free_count"]), (0, 0, 7, 7),
       "under vramtrace: the pitched allocation, the pools' four and two of 1000 MiB, all freed")


@test
def simgpu_runtime_sonames_and_versions():
    """libcudart.so.13 carries the real runtime's version node on every
    name (PyTorch binds cudaMalloc@libcudart.so.13; an unversioned library
    of that soname makes the loader abort); libcudart_sim.so stays
    unversioned for the C test programs."""
    def dyn(lib):
        p = subprocess.run(["readelf", "-W", "--dyn-syms", os.path.join(SIM, lib)], capture_output=True, text=True)
        eq(p.returncode, 0, f"readelf {lib}")
        return [line.split()[-1] for line in p.stdout.splitlines()
                if " FUNC " in line and " GLOBAL " in line and " UND " not in line]
    v13 = dyn("libcudart.so.13")
    ok("cudaMalloc@@libcudart.so.13" in v13 and "__cudaRegisterFatBinary@@libcudart.so.13" in v13, f"{v13[:5]}")
    eq([s for s in v13 if not s.endswith("@@libcudart.so.13")], [], "every runtime name versioned")
    eq([s for s in v13 if not s.startswith(("cuda", "__cuda"))], [], "nothing but runtime names exported")
    sim = dyn("libcudart_sim.so")
    ok("cudaMalloc" in sim and not [s for s in sim if "@" in s], "libcudart_sim.so unversioned")
    p = subprocess.run(["readelf", "-d", os.path.join(SIM, "libcudart.so.13")], capture_output=True, text=True)
    ok("Library soname: [libcudart.so.13]" in p.stdout, "soname")


@test
def simgpu_nvml_for_pytorch():
    """NVML answers without SIMNVML_PROCS, finds the device by the PCI bus id
    PyTorch prints from cudaGetDeviceProperties (domain 0, bus d + 1), fills
    the original call's 16-byte process records, reports no NVLink fabric
    (PyTorch warns when the query fails on compute capability 9.0), and
    fails init only when SIMNVML_FAIL asks."""
    code = r'''
import ctypes, sys
nv = ctypes.CDLL(sys.argv[1])
print(nv.nvmlInit_v2())
dev = ctypes.c_void_p()
print(nv.nvmlDeviceGetHandleByPciBusId_v2(b"00000000:02:00.0", ctypes.byref(dev)))
idx = ctypes.c_uint(9)
print(nv.nvmlDeviceGetIndex(dev, ctypes.byref(idx)), idx.value)
print(nv.nvmlDeviceGetHandleByPciBusId_v2(b"00000000:03:00.0", ctypes.byref(dev)))
class P1(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_uint), ("used", ctypes.c_ulonglong)]
procs = (P1 * 1)()
n = ctypes.c_uint(1)
print(nv.nvmlDeviceGetComputeRunningProcesses(dev, ctypes.byref(n), procs), n.value)
n = ctypes.c_uint(8)
procs = (P1 * 8)()
print(nv.nvmlDeviceGetComputeRunningProcesses(dev, ctypes.byref(n), procs), n.value, procs[0].pid, procs[1].used)
uuid = ctypes.create_string_buffer(96)
print(nv.nvmlDeviceGetUUID(dev, uuid, 96), uuid.value.decode())
h2 = ctypes.c_void_p()
print(nv.nvmlDeviceGetHandleByUUID(uuid.value, ctypes.byref(h2)), h2.value == dev.value)
class M(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]
m = M()
print(nv.nvmlDeviceGetMemoryInfo(dev, ctypes.byref(m)), m.total, m.free, m.used)
class F(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint), ("uuid", ctypes.c_ubyte * 16), ("status", ctypes.c_int),
                ("clique", ctypes.c_uint), ("state", ctypes.c_ubyte), ("health", ctypes.c_uint),
                ("summary", ctypes.c_ubyte)]
f = F(version=0x3000028, state=9)
print(nv.nvmlDeviceGetGpuFabricInfoV(dev, ctypes.byref(f)), f.version == 0x3000028, f.state, f.status)
f = F(version=0x3000024)
print(nv.nvmlDeviceGetGpuFabricInfoV(dev, ctypes.byref(f)))
'''
    lib = os.path.join(SIM, "libnvidia-ml.so.1")
    env = {"SIMGPU_DEVICES": "2", "SIMGPU_CAPACITY": "1G"}
    r = run([sys.executable, "-c", code, lib], preload=False, env=env)
    eq(r.out.splitlines(), ["0", "0", "0 1", "6", "0 0", "0 0 0 0", "0 GPU-10111213-1415-1617-1819-1a1b1c1d1e1f",
                            "0 True", f"0 {1 << 30} {1 << 30} 0", "0 True 0 0", "25"], "no processes")
    env["SIMNVML_PROCS"] = "123:40M,456:8M"
    r = run([sys.executable, "-c", code, lib], preload=False, env=env)
    eq(r.out.splitlines()[4:6], ["7 2", f"0 2 123 {8 << 20}"], "two processes, v1 records")
    eq(r.out.splitlines()[8], f"0 {1 << 30} {(1 << 30) - (48 << 20)} {48 << 20}", "memory NVML sees used")
    env["SIMNVML_FAIL"] = "1"
    r = run([sys.executable, "-c", code, lib], preload=False, env=env)
    eq(r.out.splitlines()[0], "9", "NVML_ERROR_DRIVER_NOT_LOADED")


GPA_COVERAGE = r'''
import ctypes, re, subprocess, sys
lib = sys.argv[1]
out = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, text=True).stdout
names = sorted({l.split()[-1] for l in out.splitlines() if l.split()[-2] in ("T", "W") and l.split()[-1].startswith("cu")})
cu = ctypes.CDLL(lib)
cu.cuInit(0)
gpa = cu.cuGetProcAddress_v2
gpa.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, ctypes.c_uint64,
                ctypes.POINTER(ctypes.c_int)]
missing = []
for n in names:
    base = re.sub(r"(_v\d+)?(_ptsz|_ptds)?$", "", n)
    found = False
    for flags in (0, 2):   # CU_GET_PROC_ADDRESS_DEFAULT, ..._PER_THREAD_DEFAULT_STREAM
        p, st = ctypes.c_void_p(), ctypes.c_int()
        found |= gpa(base.encode(), ctypes.byref(p), 13000, flags, ctypes.byref(st)) == 0 and bool(p.value)
    if not found:
        missing.append(n)
print(len(names) > 100, missing)
'''


@test
def simgpu_every_driver_entry_point_is_reachable_through_cugetprocaddress():
    """docs/simgpu.md: every entry point of the stand-in driver is also
    reachable through cuGetProcAddress, as the real driver's are
    (cuGetExportTable was not: the real runtime reported "requires a
    newer driver" for what is a private table the simulation does not
    have)."""
    p = subprocess.run([sys.executable, "-c", GPA_COVERAGE, os.path.join(SIM, "libcuda.so.1")], capture_output=True,
                       text=True, timeout=60)
    eq((p.returncode, p.stdout), (0, "True []\n"), p.stderr[-2000:])
