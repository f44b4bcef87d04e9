/* runtime.c -- wrappers for the shared CUDA runtime's allocation functions.
 *
 * Only a program linked with libcudart.so reaches these (the static runtime
 * binds its cuda* calls inside the executable; the driver hooks see those).
 * While a runtime call runs, the driver calls it makes on the same thread
 * are not recorded again: one cudaMalloc is one allocation, named
 * "cudaMalloc". */
#include <cuda_runtime_api.h>

#include "graphs.h"
#include "hook.h"
#include "ipc.h"
#include "pools.h"
#include "resolve.h"
#include "sizes.h"

#define VT_EXPORT __attribute__((visibility("default")))

/* Exported by libcudart.so, declared only in its internal headers. */
cudaError_t cudaMallocAsync_ptsz(void **p, size_t n, cudaStream_t s);
cudaError_t cudaFreeAsync_ptsz(void *p, cudaStream_t s);
cudaError_t cudaMallocFromPoolAsync_ptsz(void **p, size_t n, cudaMemPool_t pool,
                                         cudaStream_t s);

#define REAL_OR_FAIL(sym)                                      \
    __typeof__(&sym) real = VT_REAL_QUIET(sym);                \
    if (!real) return cudaErrorInitializationError

#define IS_OOM(r) ((r) == cudaErrorMemoryAllocation)

/* Call the real runtime function with driver-level recording paused, with
 * the caller's errno (see VT_REAL_CALL). */
#define CALL(...) VT_REAL_CALL(vt_in_runtime++; r = real(__VA_ARGS__); vt_in_runtime--)
#define CALL_FREE(fn, ptr) VT_REAL_CALL(vt_in_runtime++; (void)fn(ptr); vt_in_runtime--)

static uint64_t ptr_of(cudaError_t r, void **p) {
    return r == cudaSuccess && p ? (uint64_t)(uintptr_t)*p : 0;
}

/* The runtime's last error (cudaGetLastError, cudaPeekAtLastError) set
 * as a failed allocation sets it: by the runtime itself, asked for more
 * than any device has, past vramtrace's doors (vt_in_runtime: no record). */
static void rt_set_oom_error(void) {
    __typeof__(&cudaMalloc) real = VT_REAL_QUIET(cudaMalloc);
    __typeof__(&cudaFree) give = VT_REAL_QUIET(cudaFree);
    if (!real) return;
    void *q = NULL;
    vt_in_runtime++;
    if (real(&q, (size_t)-1 / 2) == cudaSuccess && q && give) (void)give(q);
    vt_in_runtime--;
}

/* The budget's refusal, inside a wrapper's VT_ENTER: the runtime's
 * out-of-memory code without the call, its last error set too, for
 * arguments the runtime would take (`valid`: a NULL result pointer gets
 * the runtime's own answer, as on a GPU that small). */
#define RT_BUDGET_OR_OOM(api, kind, device, want, valid)                     \
    if (VT_BUDGET_REFUSE(api, kind, device, want, valid)) {                  \
        rt_set_oom_error();                                                  \
        VT_LEAVE;                                                            \
        return cudaErrorMemoryAllocation;                                    \
    }

#define RT_ALLOC(sym, kind, bytes, ...) RT_ALLOC_IF(sym, kind, bytes, p, __VA_ARGS__)
/* RT_ALLOC of a call whose arguments the runtime takes when `valid`
 * (looked at only under a budget; others get the runtime's own answer). */
#define RT_ALLOC_IF(sym, kind, bytes, valid, ...) \
    RT_ALLOC_THEN(sym, kind, VT_DEVICE_CURRENT, bytes, valid, , __VA_ARGS__)

/* A stream-ordered allocation on stream `st` (`kind` and `device` where
 * it lands, pools.h; `valid` as RT_ALLOC_IF's): an allocation node of the
 * graph captured into when the stream is captured, with no memory until
 * a launch (graphs.h). */
#define RT_ASYNC(sym, st, kind, device, bytes, valid, ...)                   \
    if (!vt_pass()) {                                                        \
        void *key_ = vt_stream_capture_key((void *)(st));                    \
        if (key_) {                                                          \
            REAL_OR_FAIL(sym);                                               \
            VT_ENTER;                                                        \
            int kind_ = vt_node_kind(kind), device_ = (device);              \
            cudaError_t r;                                                   \
            CALL(__VA_ARGS__);                                               \
            vt_hook_node(#sym, kind_, device_, r == cudaSuccess, IS_OOM(r),  \
                         ptr_of(r, (void **)p), bytes, key_);                \
            VT_LEAVE;                                                        \
            return r;                                                        \
        }                                                                    \
    }                                                                        \
    RT_ALLOC_THEN(sym, kind, device, bytes, valid, , __VA_ARGS__)

/* RT_ALLOC_IF on `device` (evaluated once, after the budget's checks could
 * start): a pool's or a stream's device (pools.h); `then` runs after the
 * record. */
#define RT_ALLOC_THEN(sym, kind, device, bytes, valid, then, ...)            \
    REAL_OR_FAIL(sym);                                                       \
    if (vt_pass()) return real(__VA_ARGS__);                                 \
    VT_ENTER;                                                                \
    int kind_ = (kind), device_ = (device);                                  \
    RT_BUDGET_OR_OOM(#sym, kind_, device_, bytes, valid)                     \
    cudaError_t r;                                                           \
    CALL(__VA_ARGS__);                                                       \
    vt_hook_alloc(#sym, kind_, device_, r == cudaSuccess, IS_OOM(r),         \
                  ptr_of(r, (void **)p), bytes);                             \
    then;                                                                    \
    VT_LEAVE;                                                                \
    return r

#define RT_FREE(sym, space, ...)                                             \
    REAL_OR_FAIL(sym);                                                       \
    /* cudaFree(NULL) (a common way to create the context) frees nothing. */ \
    if (p == NULL || vt_pass()) return real(__VA_ARGS__);                    \
    VT_ENTER;                                                                \
    struct vt_free a = vt_tracker_free_begin(space, (uint64_t)(uintptr_t)p); \
    cudaError_t r;                                                           \
    CALL(__VA_ARGS__);                                                       \
    vt_hook_free(&a, r == cudaSuccess);                                      \
    VT_LEAVE;                                                                \
    return r

VT_EXPORT cudaError_t cudaMalloc(void **p, size_t n) {
    RT_ALLOC(cudaMalloc, VT_KIND_DEVICE, n, p, n);
}

/* flags "must be either cudaMemAttachGlobal or cudaMemAttachHost"
 * (cuda_runtime_api.h): any other gets the runtime's own
 * cudaErrorInvalidValue, never the budget's refusal. */
VT_EXPORT cudaError_t cudaMallocManaged(void **p, size_t n, unsigned int flags) {
    RT_ALLOC_IF(cudaMallocManaged, VT_KIND_MANAGED, n,
                p && (flags == cudaMemAttachGlobal || flags == cudaMemAttachHost), p, n, flags);
}

VT_EXPORT cudaError_t cudaMallocAsync(void **p, size_t n, cudaStream_t s) {
    RT_ASYNC(cudaMallocAsync, s, VT_KIND_ASYNC, vt_stream_device(s), n, p, p, n, s);
}

VT_EXPORT cudaError_t cudaMallocAsync_ptsz(void **p, size_t n, cudaStream_t s) {
    cudaStream_t t = s ? s : cudaStreamPerThread; /* stream 0 here: the per-thread one */
    RT_ASYNC(cudaMallocAsync_ptsz, t, VT_KIND_ASYNC, vt_stream_device(t), n, p, p, n, s);
}

/* A NULL pool is the runtime's own cudaErrorInvalidValue (as the
 * driver's, driver.c's POOL_ALLOC), never the budget's refusal. */
VT_EXPORT cudaError_t cudaMallocFromPoolAsync(void **p, size_t n, cudaMemPool_t pool,
                                              cudaStream_t s) {
    int where_;
    RT_ASYNC(cudaMallocFromPoolAsync, s, vt_pool_where(pool, s, &where_), where_, n, p && pool, p, n, pool, s);
}

VT_EXPORT cudaError_t cudaMallocFromPoolAsync_ptsz(void **p, size_t n,
                                                   cudaMemPool_t pool, cudaStream_t s) {
    int where_;
    cudaStream_t t = s ? s : cudaStreamPerThread;
    RT_ASYNC(cudaMallocFromPoolAsync_ptsz, t, vt_pool_where(pool, t, &where_), where_, n, p && pool, p, n, pool,
             s);
}

VT_EXPORT cudaError_t cudaMallocHost(void **p, size_t n) {
    RT_ALLOC(cudaMallocHost, VT_KIND_HOST, n, p, n);
}

VT_EXPORT cudaError_t cudaHostAlloc(void **p, size_t n, unsigned int flags) {
    RT_ALLOC(cudaHostAlloc, VT_KIND_HOST, n, p, n, flags);
}

VT_EXPORT cudaError_t cudaMallocPitch(void **p, size_t *pitch, size_t w, size_t h) {
    REAL_OR_FAIL(cudaMallocPitch);
    if (vt_pass()) return real(p, pitch, w, h);
    VT_ENTER;
    uint64_t asked = vt_size_mul(w, h); /* past 2^64 - 1, that (sizes.h) */
    RT_BUDGET_OR_OOM("cudaMallocPitch", VT_KIND_PITCHED, VT_DEVICE_CURRENT, asked, p && pitch)
    /* What the caller had there, for a refusal after the call. */
    void *had = p ? *p : NULL;
    size_t had_pitch = pitch ? *pitch : 0;
    cudaError_t r;
    CALL(p, pitch, w, h);
    int ok = r == cudaSuccess;
    uint64_t got = ok && pitch ? vt_size_mul(*pitch, h) : asked;
    /* The rows' padding past the budget: given back and refused as the
     * check before the call refuses (driver.c's PITCHED): the last error
     * set, the caller's pointer and pitch as they were, never the address
     * just freed. */
    if (ok && vt_budget_settle("cudaMallocPitch", VT_KIND_PITCHED, got)) {
        __typeof__(&cudaFree) give = VT_REAL_QUIET(cudaFree);
        if (give) CALL_FREE(give, *p);
        *p = had;
        if (pitch) *pitch = had_pitch;
        rt_set_oom_error();
        VT_LEAVE;
        return cudaErrorMemoryAllocation;
    }
    vt_hook_alloc("cudaMallocPitch", VT_KIND_PITCHED, VT_DEVICE_CURRENT, ok,
                  IS_OOM(r), ptr_of(r, p), got);
    VT_LEAVE;
    return r;
}

VT_EXPORT cudaError_t cudaFree(void *p) {
    RT_FREE(cudaFree, VT_SPACE_DEVICE, p);
}

/* A free on a captured stream of a graph allocation's address is a free
 * node: nothing is freed until a launch (graphs.h). */
#define RT_FREE_ASYNC(sym, st)                                                  \
    REAL_OR_FAIL(sym);                                                          \
    if (p == NULL || vt_pass()) return real(p, s);                              \
    void *key_ = vt_stream_capture_key((void *)(st));                           \
    if (key_ && vt_graph_allocation((uint64_t)(uintptr_t)p)) {                  \
        VT_ENTER;                                                               \
        cudaError_t r;                                                          \
        CALL(p, s);                                                             \
        if (r == cudaSuccess) vt_graph_free_node(key_, (uint64_t)(uintptr_t)p); \
        VT_LEAVE;                                                               \
        return r;                                                               \
    }                                                                           \
    VT_ENTER;                                                                   \
    struct vt_free a = vt_tracker_free_begin(VT_SPACE_DEVICE, (uint64_t)(uintptr_t)p); \
    cudaError_t r;                                                              \
    CALL(p, s);                                                                 \
    vt_hook_free(&a, r == cudaSuccess);                                         \
    VT_LEAVE;                                                                   \
    return r

VT_EXPORT cudaError_t cudaFreeAsync(void *p, cudaStream_t s) {
    RT_FREE_ASYNC(cudaFreeAsync, s);
}

VT_EXPORT cudaError_t cudaFreeAsync_ptsz(void *p, cudaStream_t s) {
    RT_FREE_ASYNC(cudaFreeAsync_ptsz, s ? s : cudaStreamPerThread);
}

VT_EXPORT cudaError_t cudaFreeHost(void *p) {
    RT_FREE(cudaFreeHost, VT_SPACE_HOST, p);
}

/* The program's own memory, page-locked (driver.c's cuMemHostRegister). */
VT_EXPORT cudaError_t cudaHostRegister(void *p, size_t n, unsigned int flags) {
    REAL_OR_FAIL(cudaHostRegister);
    if (vt_pass()) return real(p, n, flags);
    VT_ENTER;
    cudaError_t r;
    CALL(p, n, flags);
    vt_hook_alloc("cudaHostRegister", VT_KIND_HOST_REGISTERED, VT_HOST_DEVICE, r == cudaSuccess, IS_OOM(r),
                  r == cudaSuccess ? (uint64_t)(uintptr_t)p : 0, n);
    VT_LEAVE;
    return r;
}

VT_EXPORT cudaError_t cudaHostUnregister(void *p) {
    RT_FREE(cudaHostUnregister, VT_SPACE_HOST, p);
}

/* -------------------------------------------------------------- arrays */

static uint64_t channel_bytes(const struct cudaChannelFormatDesc *c) {
    int bits = (c->x > 0 ? c->x : 0) + (c->y > 0 ? c->y : 0) + (c->z > 0 ? c->z : 0) + (c->w > 0 ? c->w : 0);
    return bits >= 8 ? (uint64_t)bits / 8 : 1;
}

static uint64_t dim(size_t v) { return v ? v : 1; }

/* The bytes of a level of w by h by d elements of desc's channels; past
 * 2^64 - 1, that (sizes.h). */
static uint64_t level_bytes(const struct cudaChannelFormatDesc *desc, size_t w, size_t h, size_t d) {
    return vt_size_mul(vt_size_mul(vt_size_mul(channel_bytes(desc), dim(w)), dim(h)), dim(d));
}

/* An array: the budget checks what the descriptor says; the record is
 * what the driver's memory requirements say (a cudaArray_t is a CUarray),
 * as for the driver's arrays. */
#define RT_ARRAY(sym, mipmapped, want, ...)                                           \
    REAL_OR_FAIL(sym);                                                                \
    if (vt_pass()) return real(__VA_ARGS__);                                          \
    VT_ENTER;                                                                         \
    uint64_t want_ = (want);                                                          \
    RT_BUDGET_OR_OOM(#sym, VT_KIND_ARRAY, VT_DEVICE_CURRENT, want_, p && desc)        \
    cudaError_t r;                                                                    \
    CALL(__VA_ARGS__);                                                                \
    int ok = r == cudaSuccess && p && *p;                                             \
    vt_hook_alloc(#sym, VT_KIND_ARRAY, VT_DEVICE_CURRENT, r == cudaSuccess, IS_OOM(r), \
                  ptr_of(r, (void **)p), ok ? vt_array_size(*p, mipmapped, want_) : want_); \
    VT_LEAVE;                                                                         \
    return r

VT_EXPORT cudaError_t cudaMallocArray(cudaArray_t *p, const struct cudaChannelFormatDesc *desc, size_t w,
                                      size_t h, unsigned int flags) {
    RT_ARRAY(cudaMallocArray, 0, desc ? level_bytes(desc, w, h, 1) : 0, p, desc, w, h, flags);
}

VT_EXPORT cudaError_t cudaMalloc3DArray(cudaArray_t *p, const struct cudaChannelFormatDesc *desc,
                                        struct cudaExtent e, unsigned int flags) {
    RT_ARRAY(cudaMalloc3DArray, 0, desc ? level_bytes(desc, e.width, e.height, e.depth) : 0, p, desc, e, flags);
}

/* The levels summed; from level 64 on each is one element (driver.c's
 * descriptor_bytes). */
static uint64_t mip_bytes(const struct cudaChannelFormatDesc *desc, struct cudaExtent e, unsigned levels) {
    uint64_t b = 0;
    unsigned n = levels ? levels : 1;
    for (unsigned l = 0; desc && l < n && l < 64; l++)
        b = vt_size_add(b, level_bytes(desc, e.width >> l, e.height >> l, e.depth >> l));
    if (desc && n > 64) b = vt_size_add(b, vt_size_mul(n - 64, channel_bytes(desc)));
    return b;
}

VT_EXPORT cudaError_t cudaMallocMipmappedArray(cudaMipmappedArray_t *p, const struct cudaChannelFormatDesc *desc,
                                               struct cudaExtent e, unsigned int levels, unsigned int flags) {
    RT_ARRAY(cudaMallocMipmappedArray, 1, mip_bytes(desc, e, levels), p, desc, e, levels, flags);
}

VT_EXPORT cudaError_t cudaFreeArray(cudaArray_t p) {
    RT_FREE(cudaFreeArray, VT_SPACE_ARRAY, p);
}

VT_EXPORT cudaError_t cudaFreeMipmappedArray(cudaMipmappedArray_t p) {
    RT_FREE(cudaFreeMipmappedArray, VT_SPACE_ARRAY, p);
}

/* --------------------------------------------- memory of other processes */

VT_EXPORT cudaError_t cudaIpcOpenMemHandle(void **p, cudaIpcMemHandle_t h, unsigned int flags) {
    REAL_OR_FAIL(cudaIpcOpenMemHandle);
    if (vt_pass()) return real(p, h, flags);
    VT_ENTER;
    cudaError_t r;
    CALL(p, h, flags);
    uint64_t bytes = 0;
    if (r == cudaSuccess && p) {
        /* cuMemGetAddressRange_v2: CUresult (CUdeviceptr *, size_t *, CUdeviceptr). */
        int (*range)(unsigned long long *, size_t *, unsigned long long) =
            (int (*)(unsigned long long *, size_t *, unsigned long long))vt_driver_fn("cuMemGetAddressRange_v2");
        unsigned long long base;
        size_t size = 0;
        if (range && range(&base, &size, (unsigned long long)(uintptr_t)*p) == 0) bytes = size;
    }
    vt_ipc_opened("cudaIpcOpenMemHandle", r == cudaSuccess, IS_OOM(r), ptr_of(r, p), bytes);
    VT_LEAVE;
    return r;
}

/* One reference fewer, the record out at the last (ipc.h). */
VT_EXPORT cudaError_t cudaIpcCloseMemHandle(void *p) {
    REAL_OR_FAIL(cudaIpcCloseMemHandle);
    if (p == NULL || vt_pass()) return real(p);
    VT_ENTER;
    struct vt_ipc_close c = vt_ipc_close_begin((uint64_t)(uintptr_t)p);
    cudaError_t r;
    CALL(p);
    vt_ipc_close_end(&c, r == cudaSuccess);
    VT_LEAVE;
    return r;
}
