/* t_entry.c -- route 4: driver functions obtained through the runtime's
 * cudaGetDriverEntryPoint*, as PyTorch's expandable segments do (VMM). */
#define CUDA_ENABLE_DEPRECATED 1
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *entry(const char *name) {
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult st;
    cudaError_t r = cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &st);
    if (r != cudaSuccess || !fn) { printf("entry %s: %d\n", name, (int)r); exit(1); }
    return fn;
}

static CUmemGenericAllocationHandle make_segment(CUresult (*create)(CUmemGenericAllocationHandle *,
        size_t, const CUmemAllocationProp *, unsigned long long), size_t n) {
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    CUmemGenericAllocationHandle h = 0;
    printf("cuMemCreate(%zu) -> %d\n", n, (int)create(&h, n, &prop, 0));
    return h;
}

int main(void) {
    if (cudaSetDevice(0) != cudaSuccess) return 1;
    CUresult (*create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                       unsigned long long) = entry("cuMemCreate");
    CUresult (*release)(CUmemGenericAllocationHandle) = entry("cuMemRelease");
    CUresult (*reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long) =
        entry("cuMemAddressReserve");
    CUresult (*map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
                    unsigned long long) = entry("cuMemMap");
    CUresult (*alloc)(CUdeviceptr *, size_t) = entry("cuMemAlloc");

    CUdeviceptr va = 0;
    printf("reserve -> %d\n", (int)reserve(&va, 8 << 20, 0, 0, 0));
    CUmemGenericAllocationHandle h1 = make_segment(create, 2 << 20);
    CUmemGenericAllocationHandle h2 = make_segment(create, 4 << 20);
    printf("map -> %d\n", (int)map(va, 2 << 20, 0, h1, 0));
    printf("release -> %d\n", (int)release(h2));
    printf("release unknown -> %d\n", (int)release(0x7777777));
    CUdeviceptr p = 0;
    printf("cuMemAlloc via entry point -> %d\n", (int)alloc(&p, 4096));
    printf("va %llx handle %llx\n", (unsigned long long)va, (unsigned long long)h1);
    return 0;
}
