/* runtime.c -- wrappers for the shared CUDA runtime's allocation functions.
 *
 * Only a program linked with libcudart.so reaches these (the static runtime
 * binds its cuda* calls inside the executable; the driver hooks see those).
 * While a runtime call runs, the driver calls it makes on the same thread
 * are not recorded again: one cudaMalloc is one allocation, named
 * "cudaMalloc". */
#include <cuda_runtime_api.h>

#include "hook.h"
#include "resolve.h"

#define VT_EXPORT __attribute__((visibility("default")))

/* Exported by libcudart.so, declared only in its internal headers. */
cudaError_t cudaMallocAsync_ptsz(void **p, size_t n, cudaStream_t s);
cudaError_t cudaFreeAsync_ptsz(void *p, cudaStream_t s);
cudaError_t cudaMallocFromPoolAsync_ptsz(void **p, size_t n, cudaMemPool_t pool,
                                         cudaStream_t s);

#define REAL_OR_FAIL(sym)                                      \
    __typeof__(&sym) real = VT_REAL(sym);                      \
    if (!real) return cudaErrorInitializationError

#define IS_OOM(r) ((r) == cudaErrorMemoryAllocation)

/* Call the real runtime function with driver-level recording paused. */
#define CALL(...) do { vt_in_runtime++; r = real(__VA_ARGS__); vt_in_runtime--; } while (0)

static uint64_t ptr_of(cudaError_t r, void **p) {
    return r == cudaSuccess && p ? (uint64_t)(uintptr_t)*p : 0;
}

#define RT_ALLOC(sym, kind, bytes, ...)                                      \
    REAL_OR_FAIL(sym);                                                       \
    if (vt_nested()) return real(__VA_ARGS__);                               \
    if (vt_budget_refuse(#sym, kind, VT_DEVICE_CURRENT, bytes))              \
        return cudaErrorMemoryAllocation;                                    \
    cudaError_t r;                                                           \
    CALL(__VA_ARGS__);                                                       \
    vt_hook_alloc(#sym, kind, VT_DEVICE_CURRENT, r == cudaSuccess, IS_OOM(r), \
                  ptr_of(r, (void **)p), bytes);                             \
    return r

#define RT_FREE(sym, space, ...)                                             \
    REAL_OR_FAIL(sym);                                                       \
    if (vt_nested()) return real(__VA_ARGS__);                               \
    struct vt_alloc *a = NULL;                                               \
    if (p != NULL) a = vt_tracker_take(space, (uint64_t)(uintptr_t)p);       \
    cudaError_t r;                                                           \
    CALL(__VA_ARGS__);                                                       \
    vt_hook_free(a, r == cudaSuccess);                                       \
    return r

VT_EXPORT cudaError_t cudaMalloc(void **p, size_t n) {
    RT_ALLOC(cudaMalloc, VT_KIND_DEVICE, n, p, n);
}

VT_EXPORT cudaError_t cudaMallocManaged(void **p, size_t n, unsigned int flags) {
    RT_ALLOC(cudaMallocManaged, VT_KIND_MANAGED, n, p, n, flags);
}

VT_EXPORT cudaError_t cudaMallocAsync(void **p, size_t n, cudaStream_t s) {
    RT_ALLOC(cudaMallocAsync, VT_KIND_ASYNC, n, p, n, s);
}

VT_EXPORT cudaError_t cudaMallocAsync_ptsz(void **p, size_t n, cudaStream_t s) {
    RT_ALLOC(cudaMallocAsync_ptsz, VT_KIND_ASYNC, n, p, n, s);
}

VT_EXPORT cudaError_t cudaMallocFromPoolAsync(void **p, size_t n, cudaMemPool_t pool,
                                              cudaStream_t s) {
    RT_ALLOC(cudaMallocFromPoolAsync, VT_KIND_ASYNC, n, p, n, pool, s);
}

VT_EXPORT cudaError_t cudaMallocFromPoolAsync_ptsz(void **p, size_t n,
                                                   cudaMemPool_t pool, cudaStream_t s) {
    RT_ALLOC(cudaMallocFromPoolAsync_ptsz, VT_KIND_ASYNC, n, p, n, pool, s);
}

VT_EXPORT cudaError_t cudaMallocHost(void **p, size_t n) {
    RT_ALLOC(cudaMallocHost, VT_KIND_HOST, n, p, n);
}

VT_EXPORT cudaError_t cudaHostAlloc(void **p, size_t n, unsigned int flags) {
    RT_ALLOC(cudaHostAlloc, VT_KIND_HOST, n, p, n, flags);
}

VT_EXPORT cudaError_t cudaMallocPitch(void **p, size_t *pitch, size_t w, size_t h) {
    REAL_OR_FAIL(cudaMallocPitch);
    if (vt_nested()) return real(p, pitch, w, h);
    if (vt_budget_refuse("cudaMallocPitch", VT_KIND_PITCHED, VT_DEVICE_CURRENT, (uint64_t)w * h))
        return cudaErrorMemoryAllocation;
    cudaError_t r;
    CALL(p, pitch, w, h);
    int ok = r == cudaSuccess;
    vt_hook_alloc("cudaMallocPitch", VT_KIND_PITCHED, VT_DEVICE_CURRENT, ok,
                  IS_OOM(r), ptr_of(r, p), ok && pitch ? *pitch * h : w * h);
    return r;
}

VT_EXPORT cudaError_t cudaFree(void *p) {
    RT_FREE(cudaFree, VT_SPACE_DEVICE, p);
}

VT_EXPORT cudaError_t cudaFreeAsync(void *p, cudaStream_t s) {
    RT_FREE(cudaFreeAsync, VT_SPACE_DEVICE, p, s);
}

VT_EXPORT cudaError_t cudaFreeAsync_ptsz(void *p, cudaStream_t s) {
    RT_FREE(cudaFreeAsync_ptsz, VT_SPACE_DEVICE, p, s);
}

VT_EXPORT cudaError_t cudaFreeHost(void *p) {
    RT_FREE(cudaFreeHost, VT_SPACE_HOST, p);
}
