"""A request whose size is a product or a sum of its arguments (a pitched
allocation's width times its height, an array's dimensions, a mipmapped
array's levels) that passes 2^64 - 1: the driver refuses it, and vramtrace
records it as 2^64 - 1 bytes, as it does (size_t)-1, more than the device
holds (tests/progs/t_sizewrap.c). It recorded the remainder the arithmetic
wrapped around to: cudaMallocPitch of 1 MiB by 2^44 + 1 rows was "request:
1.00 MiB" with 924 MiB free, and its finding was fragmentation."""
from run_tests import *

SIZEWRAP = os.path.join(T, "t_sizewrap")
TOO_BIG = 2**64 - 1
DEVICE = "device 0 (vramtrace simulated GPU, GPU-00010203-0405-0607-0809-0a0b0c0d0e0f)"

# The program's name for each case, and the API the record names.
CASES = (("cudaMallocPitch", "cudaMallocPitch", "pitched"),
         ("cudaMallocPitch-2^66", "cudaMallocPitch", "pitched"),
         ("cuMemAllocPitch", "cuMemAllocPitch_v2", "pitched"),
         ("cudaMallocArray", "cudaMallocArray", "array"),
         ("cudaMalloc3DArray", "cudaMalloc3DArray", "array"),
         ("cudaMallocMipmappedArray", "cudaMallocMipmappedArray", "array"),
         ("cuArrayCreate", "cuArrayCreate_v2", "array"),
         ("cuArray3DCreate", "cuArray3DCreate_v2", "array"),
         ("cuMipmappedArrayCreate", "cuMipmappedArrayCreate", "array"))


def lines_of(err, *starts):
    return [line for line in err.splitlines() if line.startswith(starts)]


@test
def sizes_past_2_64_are_the_largest_request_not_the_remainder():
    env = {"SIMGPU_CAPACITY": "1G", "SIMGPU_CONTEXT": "100M"}
    for case, api, kind in CASES:
        r = run([SIZEWRAP, case], env=env)
        eq((r.rc, r.out), (0, f"{case} -> 2\n"), f"{case}: status and the driver's answer")
        eq(lines_of(r.err, "vramtrace:   request:", "vramtrace:   1.", "vramtrace:   2."), [
            f"vramtrace:   request: 16384.00 PiB (18446744073709551615 bytes) by {api} on {DEVICE}",
            "vramtrace:   1. the request alone (16384.00 PiB) is larger than the device (1.00 GiB)"],
            f"{case}: the post-mortem's request and finding")
        o = r.dump["ooms"][0]
        eq((len(r.dump["ooms"]), o["requested_bytes"], o["api"], o["kind"], o["budget"]),
           (1, TOO_BIG, api, kind, False), f"{case}: the dump's failure")
        eq([f["id"] for f in o["findings"]], ["request_exceeds_device"], f"{case}: the dump's findings")


@test
def sizes_past_2_64_are_refused_by_the_budget():
    """Under VRAMTRACE_LIMIT the budget is asked of the same size: it
    refuses it (it let the remainder, 1 MiB, through to the driver)."""
    env = {"SIMGPU_CAPACITY": "1G", "SIMGPU_CONTEXT": "100M", "VRAMTRACE_LIMIT": "512M"}
    for case, api in (("cudaMallocPitch", "cudaMallocPitch"), ("cuArrayCreate", "cuArrayCreate_v2")):
        r = run([SIZEWRAP, case], env=env)
        eq((r.rc, r.out), (0, f"{case} -> 2\n"), f"{case}: status and the answer")
        eq(lines_of(r.err, "vramtrace:   request:", "vramtrace:   1.", "vramtrace:   2."), [
            f"vramtrace:   request: 16384.00 PiB (18446744073709551615 bytes) by {api} (refused by VRAMTRACE_LIMIT) "
            f"on {DEVICE}",
            "vramtrace:   1. VRAMTRACE_LIMIT refused it: 16384.00 PiB asked with 0 B live would pass the 512.00 MiB "
            "budget",
            "vramtrace:   2. the request alone (16384.00 PiB) is larger than the budget (VRAMTRACE_LIMIT: 512.00 MiB)"],
            f"{case}: the post-mortem's request and findings")
        o = r.dump["ooms"][0]
        eq((o["requested_bytes"], o["budget"], [f["id"] for f in o["findings"]]),
           (TOO_BIG, True, ["budget", "request_exceeds_device"]), f"{case}: the dump's failure")


@test
def sizes_of_mipmapped_levels_past_the_64th():
    """A mipmapped array of 2^20 by 2^20 floats in 70 levels: 4 * (4^21 -
    1) / 3 bytes in its first 21 levels, then 49 of one float. Levels
    from the 64th on counted the largest levels again (a shift of 64 or
    more, undefined, shifted by the count less 64 on x86): 11726692374016
    bytes."""
    want = 4 * (4**21 - 1) // 3 + 4 * 49
    for case, api in (("cuMipmappedArrayCreate-70", "cuMipmappedArrayCreate"),
                      ("cudaMallocMipmappedArray-70", "cudaMallocMipmappedArray")):
        r = run([SIZEWRAP, case], env={"SIMGPU_CAPACITY": "1G"})
        eq((r.rc, r.out), (0, f"{case} -> 2\n"), f"{case}: status and the driver's answer")
        eq(lines_of(r.err, "vramtrace:   request:"),
           [f"vramtrace:   request: 5.33 TiB ({want} bytes) by {api} on {DEVICE}"], f"{case}: the post-mortem's request")
        eq(r.dump["ooms"][0]["requested_bytes"], want, f"{case}: the dump's request")
