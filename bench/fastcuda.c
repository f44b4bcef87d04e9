/* fastcuda.c -- a driver stand-in for benchmarks: allocation is an atomic
 * add, free does nothing, so what a benchmark measures is vramtrace. Never
 * installed; bench/ puts its folder on LD_LIBRARY_PATH. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <stdio.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

/* Each thread hands out addresses from its own range: the stand-in adds no
 * shared cache line of its own to a threaded benchmark. */
static unsigned long long next_range = 0x700000000000ull;
static __thread unsigned long long next_addr;

EXPORT CUresult cuInit(unsigned int f) { (void)f; return CUDA_SUCCESS; }
EXPORT CUresult cuCtxGetDevice(CUdevice *d) { *d = 0; return CUDA_SUCCESS; }
EXPORT CUresult cuDeviceGetName(char *n, int len, CUdevice d) { (void)d; snprintf(n, (size_t)len, "bench"); return CUDA_SUCCESS; }
EXPORT CUresult cuDeviceGetUuid_v2(CUuuid *u, CUdevice d) { (void)d; for (int i = 0; i < 16; i++) u->bytes[i] = (char)i; return CUDA_SUCCESS; }
EXPORT CUresult cuDeviceTotalMem_v2(size_t *b, CUdevice d) { (void)d; *b = (size_t)1 << 40; return CUDA_SUCCESS; }
EXPORT CUresult cuMemGetInfo_v2(size_t *f, size_t *t) { *f = *t = (size_t)1 << 40; return CUDA_SUCCESS; }

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) {
    if (next_addr == 0) next_addr = __atomic_fetch_add(&next_range, 1ull << 36, __ATOMIC_RELAXED);
    *p = next_addr;
    next_addr += (n + 255) & ~(size_t)255;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr p) { (void)p; return CUDA_SUCCESS; }

/* The runtime stand-in (fastcudart.c) finds these as the real runtime
 * does; only the two it asks for are handed out. */
EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                    CUdriverProcAddressQueryResult *status) {
    (void)version; (void)flags;
    if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
    if (strcmp(symbol, "cuMemAlloc") == 0) *pfn = (void *)cuMemAlloc_v2;
    else if (strcmp(symbol, "cuMemFree") == 0) *pfn = (void *)cuMemFree_v2;
    else return CUDA_ERROR_NOT_FOUND;
    return CUDA_SUCCESS;
}
