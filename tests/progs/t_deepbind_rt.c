/* t_deepbind_rt.c -- a plugin linked with the CUDA runtime that t_deepbind
 * loads with and without RTLD_DEEPBIND: the runtime, loaded with it, finds
 * the driver with its own dlopen and dlsym, and hands out the driver's
 * functions it found so (cudaGetDriverEntryPointByVersion). 5 MiB and
 * 4 MiB stay, 1 MiB is freed. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdio.h>

int rt_plugin(void) {
    void *a, *b, *fn = NULL;
    CUdeviceptr c;
    int r1 = cudaMalloc(&a, 5 << 20); /* kept */
    int r2 = cudaMalloc(&b, 1 << 20);
    int r3 = cudaFree(b);
    int r4 = cudaGetDriverEntryPointByVersion("cuMemAlloc", &fn, 12000, cudaEnableDefault, NULL);
    int r5 = fn ? (int)((CUresult(*)(CUdeviceptr *, size_t))fn)(&c, 4 << 20) : -1; /* kept */
    printf("rt_plugin: %d %d %d %d %d\n", r1, r2, r3, r4, r5);
    return r1 || r2 || r3 || r4 || r5;
}
