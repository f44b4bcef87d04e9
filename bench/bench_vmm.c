/* bench_vmm.c -- many VMM handles live, for bench/bench_torch_export.py.
 *
 *   bench_vmm N CHURN
 *       CHURN handles made, mapped, unmapped and released at one address
 *       (their events), then N handles of the minimum granularity made and
 *       mapped side by side in one reserved range, all kept: the shape of
 *       PyTorch's expandable segments on a large device. Prints
 *       "granularity G handles N".
 *
 * Runs on the simulated GPU (tests/simgpu/run), which implements the
 * virtual memory calls; bench/fastcuda.c does not. */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>

static void check(CUresult r, const char *what, long i) {
    if (r == CUDA_SUCCESS) return;
    fprintf(stderr, "bench_vmm: %s failed (%d) at %ld\n", what, (int)r, i);
    exit(1);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: bench_vmm N CHURN\n");
        return 2;
    }
    long n = atol(argv[1]), churn = atol(argv[2]);
    CUdevice dev;
    CUcontext ctx;
    check(cuInit(0), "cuInit", 0);
    check(cuDeviceGet(&dev, 0), "cuDeviceGet", 0);
    check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain", 0);
    check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent", 0);
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    size_t g;
    check(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), "granularity", 0);
    CUdeviceptr base;
    check(cuMemAddressReserve(&base, g * (size_t)(n > 0 ? n : 1), 0, 0, 0), "cuMemAddressReserve", 0);
    for (long i = 0; i < churn; i++) {
        CUmemGenericAllocationHandle h;
        check(cuMemCreate(&h, g, &prop, 0), "cuMemCreate", i);
        check(cuMemMap(base, g, 0, h, 0), "cuMemMap", i);
        check(cuMemUnmap(base, g), "cuMemUnmap", i);
        check(cuMemRelease(h), "cuMemRelease", i);
    }
    for (long i = 0; i < n; i++) {
        CUmemGenericAllocationHandle h;
        check(cuMemCreate(&h, g, &prop, 0), "cuMemCreate", i);
        check(cuMemMap(base + g * (size_t)i, g, 0, h, 0), "cuMemMap", i);
    }
    printf("granularity %zu handles %ld\n", g, n);
    return 0;
}
