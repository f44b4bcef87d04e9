/* fastcudart.c -- a runtime stand-in for benchmarks: cudaMalloc and cudaFree
 * reach the stand-in driver (fastcuda.c) the way the real runtime does,
 * through pointers from cuGetProcAddress_v2 of a dlopen'd libcuda.so.1, so
 * what the runtime row measures is vramtrace's runtime-over-driver path.
 * Never installed; bench/ puts its folder on LD_LIBRARY_PATH. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <pthread.h>

#define EXPORT __attribute__((visibility("default")))

typedef CUresult (*gpa_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
static CUresult (*mem_alloc)(CUdeviceptr *, size_t);
static CUresult (*mem_free)(CUdeviceptr);
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void load(void) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    gpa_fn gpa = h ? (gpa_fn)dlsym(h, "cuGetProcAddress_v2") : NULL;
    if (!gpa) return;
    gpa("cuMemAlloc", (void **)&mem_alloc, 3020, 0, NULL);
    gpa("cuMemFree", (void **)&mem_free, 3020, 0, NULL);
}

EXPORT cudaError_t cudaMalloc(void **p, size_t n) {
    pthread_once(&once, load);
    if (!mem_alloc) return cudaErrorInitializationError;
    return mem_alloc((CUdeviceptr *)p, n) == CUDA_SUCCESS ? cudaSuccess : cudaErrorMemoryAllocation;
}

EXPORT cudaError_t cudaFree(void *p) {
    pthread_once(&once, load);
    if (!mem_free) return cudaErrorInitializationError;
    return mem_free((CUdeviceptr)p) == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}
