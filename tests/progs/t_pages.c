/* t_pages.c -- pages of one size mapped from one call site, as PyTorch's
 * expandable segments map a tensor's memory 20 MiB at a time: each
 * argument a step, its result printed as "STEP -> CODE" (the exit
 * summary's count of failures got past; tests/integration/test_host.py).
 * Run on a GPU of 50 MiB.
 *
 *   hold   cuMemAlloc of 40 MiB, kept
 *   free   cuMemFree of what hold took
 *   page   cuMemCreate of one 20 MiB page on device 0, kept
 *   other  cuMemAlloc of 1 MiB, another request
 *   pinned cuMemAllocHost of 4 KiB, kept (host memory: a DataLoader's
 *          pinned buffer) */
#include <cuda.h>
#include <stdio.h>
#include <string.h>

#define MiB ((size_t)1 << 20)

__attribute__((noinline)) static CUresult page(void) {
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    CUmemGenericAllocationHandle h = 0;
    return cuMemCreate(&h, 20 * MiB, &prop, 0);
}

int main(int argc, char **argv) {
    CUdevice d;
    CUcontext c;
    CUdeviceptr held = 0, p;
    cuInit(0);
    cuDeviceGet(&d, 0);
    cuDevicePrimaryCtxRetain(&c, d);
    cuCtxSetCurrent(c);
    for (int i = 1; i < argc; i++) {
        CUresult r = CUDA_ERROR_INVALID_VALUE;
        if (strcmp(argv[i], "hold") == 0) r = cuMemAlloc(&held, 40 * MiB);
        else if (strcmp(argv[i], "free") == 0) r = cuMemFree(held);
        else if (strcmp(argv[i], "page") == 0) r = page();
        else if (strcmp(argv[i], "other") == 0) r = cuMemAlloc(&p, MiB);
        else if (strcmp(argv[i], "pinned") == 0) {
            void *h;
            r = cuMemAllocHost(&h, 4096);
        }
        printf("%s -> %d\n", argv[i], (int)r);
    }
    return 0;
}
