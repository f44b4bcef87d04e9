/* t_ctxdestroy.c -- memory a context's destruction gives back without a
 * free (cuCtxDestroy: "memory allocations by cuMemAlloc(),
 * cuMemAllocHost(), cuMemAllocManaged() and cuMemAllocPitch()").
 *
 *   t_ctxdestroy         primary_leak keeps 1 MiB in the primary context
 *                        (cudaMalloc); a context of its own (cuCtxCreate)
 *                        then holds in_context's 2 MiB (cuMemAlloc), 1 MiB
 *                        pitched (256 rows of 4096 bytes), 1 MiB managed,
 *                        8 KiB of pinned host memory and 64 KiB freed before
 *                        it ends; stream_ordered keeps 256 KiB of the
 *                        device's pool, which is no context's; cuCtxDestroy;
 *                        after_destroy takes and frees 2 MiB in the primary
 *                        context. Prints whether it got the destroyed 2 MiB's
 *                        address and the device's used bytes at each stage.
 *   t_ctxdestroy fail    cuCtxDestroy of a handle that is no context: it
 *                        fails, and nothing is released
 *   t_ctxdestroy clean   frees the context's memory first
 * The driver is reached by dlsym of libcuda.so.1, as a library that makes
 * its own contexts does. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

static CUresult (*create)(CUcontext *, unsigned, CUdevice);
static CUresult (*destroy)(CUcontext);
static CUresult (*alloc)(CUdeviceptr *, size_t);
static CUresult (*pitch_alloc)(CUdeviceptr *, size_t *, size_t, size_t, unsigned);
static CUresult (*managed)(CUdeviceptr *, size_t, unsigned);
static CUresult (*host)(void **, size_t);
static CUresult (*mfree)(CUdeviceptr);
static CUresult (*host_free)(void *);
static CUresult (*get_info)(size_t *, size_t *);

static void *primary_leak(size_t n) {
    void *p = NULL;
    if (cudaMalloc(&p, n) != cudaSuccess) return NULL;   /* primary */
    return p;
}

static CUdeviceptr in_context(size_t n) {
    CUdeviceptr p = 0;
    if (alloc(&p, n) != CUDA_SUCCESS) return 0;   /* in the context */
    return p;
}

static void *stream_ordered(size_t n) {
    void *p = NULL;
    if (cudaMallocAsync(&p, n, 0) != cudaSuccess) return NULL;
    return p;
}

static void *after_destroy(size_t n) {
    void *p = NULL;
    if (cudaMalloc(&p, n) != cudaSuccess) return NULL;
    return p;
}

static size_t used(void) {
    size_t f = 0, t = 0;
    get_info(&f, &t);
    return t - f;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h) return 1;
    *(void **)&create = dlsym(h, "cuCtxCreate_v2");
    *(void **)&destroy = dlsym(h, "cuCtxDestroy_v2");
    *(void **)&alloc = dlsym(h, "cuMemAlloc_v2");
    *(void **)&pitch_alloc = dlsym(h, "cuMemAllocPitch_v2");
    *(void **)&managed = dlsym(h, "cuMemAllocManaged");
    *(void **)&host = dlsym(h, "cuMemAllocHost_v2");
    *(void **)&mfree = dlsym(h, "cuMemFree_v2");
    *(void **)&host_free = dlsym(h, "cuMemFreeHost");
    *(void **)&get_info = dlsym(h, "cuMemGetInfo_v2");
    if (!create || !destroy || !alloc || !pitch_alloc || !managed || !host || !mfree || !host_free || !get_info)
        return 1;
    if (!primary_leak(1 << 20)) return 2;
    void *so = stream_ordered(256 << 10);
    if (!so) return 2;
    cudaDeviceSynchronize();
    if (strcmp(mode, "fail") == 0) {
        int not_a_context = 0;
        printf("destroy of no context %d\n", destroy((CUcontext)&not_a_context) == CUDA_ERROR_INVALID_CONTEXT);
        return 0;
    }
    size_t before = used();
    CUcontext ctx;
    if (create(&ctx, 0, 0) != CUDA_SUCCESS) return 3;
    CUdeviceptr d = in_context(2 << 20), p = 0, m = 0, gone = in_context(64 << 10);
    size_t pitch = 0;
    void *hp = NULL;
    if (!d || !gone || pitch_alloc(&p, &pitch, 4096, 256, 4) != CUDA_SUCCESS ||
        managed(&m, 1 << 20, CU_MEM_ATTACH_GLOBAL) != CUDA_SUCCESS || host(&hp, 8192) != CUDA_SUCCESS)
        return 4;
    if (mfree(gone) != CUDA_SUCCESS) return 4;
    printf("context's bytes %zu\n", used() - before);
    if (strcmp(mode, "clean") == 0) {
        mfree(d);
        mfree(p);
        mfree(m);
        host_free(hp);
    }
    if (destroy(ctx) != CUDA_SUCCESS) return 5;
    printf("after the destruction %zu\n", used() - before);
    void *a = after_destroy(2 << 20);
    if (!a) return 6;
    printf("the destroyed address again %d\n", (CUdeviceptr)(uintptr_t)a == d);
    cudaFree(a);
    return 0;
}
