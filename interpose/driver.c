/* driver.c -- wrappers for the CUDA driver's allocation entry points.
 *
 * Each wrapper has the exact prototype of the driver function it stands in
 * for, calls the real one, tells hook.c what happened and returns the real
 * result unchanged. The same wrappers are exported (route 1), handed out by
 * the dlsym override (route 2) and by the cuGetProcAddress hooks (routes 3
 * and 4). */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include "../tracker/released.h"
#include "graphs.h"
#include "hook.h"
#include "ipc.h"
#include "pools.h"
#include "resolve.h"
#include "sizes.h"
#include "vmm.h"

#define VT_EXPORT __attribute__((visibility("default")))

/* Exported by the driver, not declared in cuda.h. */
CUresult cuStreamEndCapture_ptsz(CUstream s, CUgraph *g);
CUresult cuGraphInstantiateWithFlags(CUgraphExec *e, CUgraph g, unsigned long long flags);
CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec *e, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS *params);
CUresult cuGraphLaunch_ptsz(CUgraphExec e, CUstream s);
CUresult cuStreamBeginCapture_v2_ptsz(CUstream s, CUstreamCaptureMode mode);
CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream s, CUgraph g, const CUgraphNode *deps,
                                          const CUgraphEdgeData *edges, size_t n, CUstreamCaptureMode mode);
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytes, CUstream s);
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream s);
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytes,
                                      CUmemoryPool pool, CUstream s);
/* CUDA 13.0's, declared here too for older headers. */
CUresult cuMemGetDefaultMemPool(CUmemoryPool *pool, CUmemLocation *location, CUmemAllocationType type);
CUresult cuMemGetMemPool(CUmemoryPool *pool, CUmemLocation *location, CUmemAllocationType type);
CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev);
CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *params, int n, unsigned int flags, CUdevice dev);
CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *params, unsigned int flags, CUdevice dev);

/* Declare `real` for this wrapper, or fail the way a missing driver would. */
#define REAL_OR_FAIL(sym)                                      \
    __typeof__(&sym) real = VT_REAL_QUIET(sym);                \
    if (!real) return CUDA_ERROR_NOT_INITIALIZED

#define IS_OOM(r) ((r) == CUDA_ERROR_OUT_OF_MEMORY)

/* The budget's refusal, inside a wrapper's VT_ENTER: the driver's
 * out-of-memory code without the call, for arguments the driver would
 * take (`valid`: a NULL result pointer gets the driver's own answer,
 * CUDA_ERROR_INVALID_VALUE, as on a GPU that small). */
#define BUDGET_OR_OOM(api, kind, device, want, valid)                                     \
    if (VT_BUDGET_REFUSE(api, kind, device, want, valid)) {                               \
        VT_LEAVE;                                                                         \
        return CUDA_ERROR_OUT_OF_MEMORY;                                                  \
    }

/* An allocation: passed through when vt_pass says so; else the budget, the
 * real call, the record. `want`: the bytes the budget checks; `addr` and
 * `bytes`: what is recorded when the call succeeded (`bytes` also on
 * failure). `device` may be VT_DEVICE_CURRENT. */
#define ALLOC(api, kind, device, want, valid, call, addr, bytes) \
    ALLOC_THEN(api, kind, device, want, valid, call, addr, bytes, )

/* ALLOC with `then` run after the record (kind_, device_ and ok set). */
#define ALLOC_THEN(api, kind, device, want, valid, call, addr, bytes, then)               \
    if (vt_pass()) return call;                                                           \
    VT_ENTER;                                                                             \
    int kind_ = (kind), device_ = (device);                                               \
    BUDGET_OR_OOM(api, kind_, device_, want, valid)                                       \
    CUresult r;                                                                           \
    VT_REAL_CALL(r = call);                                                               \
    int ok = r == CUDA_SUCCESS;                                                           \
    vt_hook_alloc(api, kind_, device_, ok, IS_OOM(r), ok ? (uint64_t)(addr) : 0, bytes); \
    then;                                                                                 \
    VT_LEAVE;                                                                             \
    return r

/* A free of one argument: the record leaves the table before the real call
 * and the free counts if the driver took it. `nothing`: the argument frees
 * nothing (a null pointer). */
#define ONE_FREE(sym, space, arg, nothing)                                         \
    REAL_OR_FAIL(sym);                                                             \
    if ((nothing) || vt_pass()) return real(arg);                                  \
    VT_ENTER;                                                                      \
    struct vt_free a = vt_tracker_free_begin(space, (uint64_t)(uintptr_t)(arg));   \
    CUresult r;                                                                    \
    VT_REAL_CALL(r = real(arg));                                                   \
    vt_hook_free(&a, r == CUDA_SUCCESS);                                           \
    VT_LEAVE;                                                                      \
    return r

/* ---------------------------------------------------- cuGetProcAddress */

VT_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn,
                                       int version, cuuint64_t flags,
                                       CUdriverProcAddressQueryResult *status) {
    REAL_OR_FAIL(cuGetProcAddress_v2);
    CUresult r = real(symbol, pfn, version, flags, status);
    if (r == CUDA_SUCCESS && pfn) {
        int e = errno;
        *pfn = vt_swap_proc(symbol, *pfn, version, flags);
        errno = e;
    }
    return r;
}

VT_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version,
                                    cuuint64_t flags) {
    REAL_OR_FAIL(cuGetProcAddress);
    CUresult r = real(symbol, pfn, version, flags);
    if (r == CUDA_SUCCESS && pfn) {
        int e = errno;
        *pfn = vt_swap_proc(symbol, *pfn, version, flags);
        errno = e;
    }
    return r;
}

/* -------------------------------------------------------------- device */

VT_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytes) {
    REAL_OR_FAIL(cuMemAlloc_v2);
    ALLOC("cuMemAlloc_v2", VT_KIND_DEVICE, VT_DEVICE_CURRENT, bytes, dptr, real(dptr, bytes), *dptr, bytes);
}

VT_EXPORT CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytes) {
    REAL_OR_FAIL(cuMemAlloc);
    ALLOC("cuMemAlloc", VT_KIND_DEVICE, VT_DEVICE_CURRENT, bytes, dptr, real(dptr, bytes), *dptr, bytes);
}

VT_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
    ONE_FREE(cuMemFree_v2, VT_SPACE_DEVICE, dptr, dptr == 0);
}

VT_EXPORT CUresult cuMemFree(CUdeviceptr_v1 dptr) {
    ONE_FREE(cuMemFree, VT_SPACE_DEVICE, dptr, dptr == 0);
}

/* ------------------------------------------------------------- pitched */

/* The budget checks width * height before the call; the driver's pitch
 * may pad each row, and pitch * height is what counts: a padded
 * allocation that then passes the budget is given back (with the free of
 * the same version) and refused as the check would have refused it, the
 * caller's pointer and pitch as they were (never the address freed). A
 * product past 2^64 - 1 is that (sizes.h). */
#define PITCHED(sym, free_sym, call)                                                              \
    REAL_OR_FAIL(sym);                                                                            \
    if (vt_pass()) return call;                                                                   \
    VT_ENTER;                                                                                     \
    uint64_t asked = vt_size_mul(width, height);                                                  \
    BUDGET_OR_OOM(#sym, VT_KIND_PITCHED, VT_DEVICE_CURRENT, asked,                                \
                  dptr && pitch && (elem == 4 || elem == 8 || elem == 16))                        \
    __typeof__(*dptr) had = dptr ? *dptr : 0;                                                     \
    __typeof__(*pitch) had_pitch = pitch ? *pitch : 0;                                            \
    CUresult r;                                                                                   \
    VT_REAL_CALL(r = call);                                                                       \
    int ok = r == CUDA_SUCCESS;                                                                   \
    uint64_t got = ok ? vt_size_mul(*pitch, height) : asked;                                      \
    if (ok && vt_budget_settle(#sym, VT_KIND_PITCHED, got)) {                                     \
        __typeof__(&free_sym) give = VT_REAL_QUIET(free_sym);                                     \
        if (give) VT_REAL_CALL(give(*dptr));                                                      \
        *dptr = had;                                                                              \
        *pitch = had_pitch;                                                                       \
        VT_LEAVE;                                                                                 \
        return CUDA_ERROR_OUT_OF_MEMORY;                                                          \
    }                                                                                             \
    vt_hook_alloc(#sym, VT_KIND_PITCHED, VT_DEVICE_CURRENT, ok, IS_OOM(r), ok ? (uint64_t)*dptr : 0, got); \
    VT_LEAVE;                                                                                     \
    return r

VT_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch,
                                      size_t width, size_t height,
                                      unsigned int elem) {
    PITCHED(cuMemAllocPitch_v2, cuMemFree_v2, real(dptr, pitch, width, height, elem));
}

VT_EXPORT CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pitch,
                                   unsigned int width, unsigned int height,
                                   unsigned int elem) {
    PITCHED(cuMemAllocPitch, cuMemFree, real(dptr, pitch, width, height, elem));
}

/* ------------------------------------------------------------- managed */

/* "flags must be one of CU_MEM_ATTACH_GLOBAL or CU_MEM_ATTACH_HOST"
 * (cuda.h): any other gets the driver's own INVALID_VALUE, never the
 * budget's refusal. */
VT_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytes,
                                     unsigned int flags) {
    REAL_OR_FAIL(cuMemAllocManaged);
    ALLOC("cuMemAllocManaged", VT_KIND_MANAGED, VT_DEVICE_CURRENT, bytes,
          dptr && (flags == CU_MEM_ATTACH_GLOBAL || flags == CU_MEM_ATTACH_HOST), real(dptr, bytes, flags), *dptr,
          bytes);
}

/* ------------------------------------------------------ stream-ordered */

static int location_is_host(const CUmemLocation *l) {
    return l->type == CU_MEM_LOCATION_TYPE_HOST || l->type == CU_MEM_LOCATION_TYPE_HOST_NUMA ||
           l->type == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT;
}

/* Where a pool's memory lives, as pools.h notes it: a device, or the host;
 * -3 for another kind of location (not noted). */
static int location_device(const CUmemLocation *l) {
    if (location_is_host(l)) return VT_HOST_DEVICE;
    return l->type == CU_MEM_LOCATION_TYPE_DEVICE && l->id >= 0 && l->id < VT_MAX_DEVICES ? l->id : -3;
}

static void note_pool(CUmemoryPool pool, int device) {
    if (device >= VT_HOST_DEVICE) vt_pool_note(pool, device);
}

/* A stream-ordered allocation on a captured stream is an allocation node
 * of the graph captured into (`key`, pools.h): an address, no memory until
 * a launch (graphs.h). Not counted by the budget. */
#define NODE_ALLOC(api, key, kind, device, call, addr, bytes)                \
    VT_ENTER;                                                                \
    CUresult r;                                                              \
    VT_REAL_CALL(r = call);                                                  \
    vt_hook_node(api, kind, device, r == CUDA_SUCCESS, IS_OOM(r),            \
                 r == CUDA_SUCCESS ? (uint64_t)(addr) : 0, bytes, key);      \
    VT_LEAVE;                                                                \
    return r

/* An allocation from a device's current pool lands on the stream's device;
 * one from a given pool, on the pool's device or the host (pools.h). */
#define ASYNC_ALLOC(sym, s, call)                                                    \
    REAL_OR_FAIL(sym);                                                               \
    if (vt_pass()) return call;                                                      \
    void *key_ = vt_stream_capture_key((void *)(s));                                 \
    if (key_) {                                                                      \
        NODE_ALLOC(#sym, key_, VT_KIND_GRAPH, vt_stream_device(s), call, *dptr, bytes); \
    }                                                                                \
    ALLOC(#sym, VT_KIND_ASYNC, vt_stream_device(s), bytes, dptr, call, *dptr, bytes)

#define POOL_ALLOC(sym, pool, s, call)                                               \
    REAL_OR_FAIL(sym);                                                               \
    if (vt_pass()) return call;                                                      \
    int where_, kind_at_ = vt_pool_where(pool, s, &where_);                          \
    void *key_ = vt_stream_capture_key((void *)(s));                                 \
    if (key_) {                                                                      \
        NODE_ALLOC(#sym, key_, vt_node_kind(kind_at_), where_, call, *dptr, bytes);  \
    }                                                                                \
    ALLOC(#sym, kind_at_, where_, bytes, dptr && pool, call, *dptr, bytes)

VT_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytes, CUstream s) {
    ASYNC_ALLOC(cuMemAllocAsync, s, real(dptr, bytes, s));
}

/* In a per-thread variant, stream 0 is the per-thread default stream (which
 * can be captured). */
#define PTDS(s) ((s) ? (s) : CU_STREAM_PER_THREAD)

VT_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytes, CUstream s) {
    ASYNC_ALLOC(cuMemAllocAsync_ptsz, PTDS(s), real(dptr, bytes, s));
}

VT_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytes,
                                           CUmemoryPool pool, CUstream s) {
    POOL_ALLOC(cuMemAllocFromPoolAsync, pool, s, real(dptr, bytes, pool, s));
}

VT_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytes,
                                                CUmemoryPool pool, CUstream s) {
    POOL_ALLOC(cuMemAllocFromPoolAsync_ptsz, pool, PTDS(s), real(dptr, bytes, pool, s));
}

/* A free on a captured stream of a graph allocation's address (this
 * graph's or another's) is a free node: nothing is freed until a launch
 * (graphs.h). Any other free is taken now. */
#define ASYNC_FREE(sym, stream)                                               \
    REAL_OR_FAIL(sym);                                                        \
    if (dptr == 0 || vt_pass()) return real(dptr, s);                         \
    void *key_ = vt_stream_capture_key((void *)(stream));                     \
    if (key_ && vt_graph_allocation(dptr)) {                                  \
        VT_ENTER;                                                             \
        CUresult r;                                                           \
        VT_REAL_CALL(r = real(dptr, s));                                      \
        if (r == CUDA_SUCCESS) vt_graph_free_node(key_, dptr);                \
        VT_LEAVE;                                                             \
        return r;                                                             \
    }                                                                         \
    VT_ENTER;                                                                 \
    struct vt_free a = vt_tracker_free_begin(VT_SPACE_DEVICE, dptr);          \
    CUresult r;                                                               \
    VT_REAL_CALL(r = real(dptr, s));                                          \
    vt_hook_free(&a, r == CUDA_SUCCESS);                                      \
    VT_LEAVE;                                                                 \
    return r

VT_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream s) {
    ASYNC_FREE(cuMemFreeAsync, s);
}

VT_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream s) {
    ASYNC_FREE(cuMemFreeAsync_ptsz, PTDS(s));
}

/* Every pool the driver hands out is noted with its location (pools.h),
 * also inside a runtime call (noting records no allocation), so that what
 * is allocated from it counts on its device, or as host memory. */
#define NOTE_POOL(call, pool, device)                                        \
    CUresult r;                                                              \
    if (vt_busy) return call;                                                \
    VT_ENTER;                                                                \
    VT_REAL_CALL(r = call);                                                  \
    if (r == CUDA_SUCCESS && pool) note_pool(*pool, device);                 \
    VT_LEAVE;                                                                \
    return r

VT_EXPORT CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props) {
    REAL_OR_FAIL(cuMemPoolCreate);
    NOTE_POOL(real(pool, props), pool, props ? location_device(&props->location) : -3);
}

/* A location's default or current pool (CUDA 13.0). */
#define VT_POOL_OF_LOCATION(sym)                                                                    \
    VT_EXPORT CUresult sym(CUmemoryPool *pool, CUmemLocation *location, CUmemAllocationType type) { \
        REAL_OR_FAIL(sym);                                                                          \
        NOTE_POOL(real(pool, location, type), pool, location ? location_device(location) : -3);     \
    }
VT_POOL_OF_LOCATION(cuMemGetDefaultMemPool)
VT_POOL_OF_LOCATION(cuMemGetMemPool)

/* A device's default or current pool (CUDA 11.2). */
VT_EXPORT CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice dev) {
    REAL_OR_FAIL(cuDeviceGetDefaultMemPool);
    NOTE_POOL(real(pool, dev), pool, dev >= 0 && dev < VT_MAX_DEVICES ? (int)dev : -3);
}

VT_EXPORT CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev) {
    REAL_OR_FAIL(cuDeviceGetMemPool);
    NOTE_POOL(real(pool, dev), pool, dev >= 0 && dev < VT_MAX_DEVICES ? (int)dev : -3);
}

VT_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool) {
    REAL_OR_FAIL(cuMemPoolDestroy);
    CUresult r = real(pool);
    if (r == CUDA_SUCCESS) vt_pool_forget(pool);
    return r;
}

/* ---------------------------------------------------- stream capture */

/* A capture begins: while one is in progress a stream-ordered allocation
 * asks whether its stream is captured (pools.h), also inside a runtime
 * call (the runtime's cudaStreamBeginCapture reaches these). Counted
 * before the call, so that no allocation on the stream comes first. */
#define BEGIN_CAPTURE(sym, stream, into, ...)                                \
    REAL_OR_FAIL(sym);                                                       \
    vt_capture_began();                                                      \
    CUresult r = real(__VA_ARGS__);                                          \
    if (r == CUDA_SUCCESS) new_capture((void *)(stream), into);              \
    else vt_capture_ended();                                                 \
    return r

/* A capture began on `stream` (`into`: into a graph of the caller's, whose
 * nodes stay): a list left under the new graph's handle, or under the
 * stream, is dropped. */
static void new_capture(void *stream, int into) {
    vt_graph_capture_begins(stream);
    void *key = into ? NULL : vt_stream_capture_key(stream);
    if (key && key != stream) vt_graph_made(key);
}

VT_EXPORT CUresult cuStreamBeginCapture(CUstream s) { BEGIN_CAPTURE(cuStreamBeginCapture, s, 0, s); }
VT_EXPORT CUresult cuStreamBeginCapture_ptsz(CUstream s) { BEGIN_CAPTURE(cuStreamBeginCapture_ptsz, PTDS(s), 0, s); }

VT_EXPORT CUresult cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode mode) {
    BEGIN_CAPTURE(cuStreamBeginCapture_v2, s, 0, s, mode);
}

VT_EXPORT CUresult cuStreamBeginCapture_v2_ptsz(CUstream s, CUstreamCaptureMode mode) {
    BEGIN_CAPTURE(cuStreamBeginCapture_v2_ptsz, PTDS(s), 0, s, mode);
}

VT_EXPORT CUresult cuStreamBeginCaptureToGraph(CUstream s, CUgraph g, const CUgraphNode *deps,
                                               const CUgraphEdgeData *edges, size_t n, CUstreamCaptureMode mode) {
    BEGIN_CAPTURE(cuStreamBeginCaptureToGraph, s, 1, s, g, deps, edges, n, mode);
}

VT_EXPORT CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream s, CUgraph g, const CUgraphNode *deps,
                                                    const CUgraphEdgeData *edges, size_t n, CUstreamCaptureMode mode) {
    BEGIN_CAPTURE(cuStreamBeginCaptureToGraph_ptsz, PTDS(s), 1, s, g, deps, edges, n, mode);
}

/* The capture's allocation nodes follow its graph to each launch
 * (graphs.h). Nothing to follow before a capture began. */
#define GRAPH_CALL(sym, after, ...)                                          \
    REAL_OR_FAIL(sym);                                                       \
    if (vt_busy || !vt_captures_began()) return real(__VA_ARGS__);           \
    VT_ENTER;                                                                \
    CUresult r;                                                              \
    VT_REAL_CALL(r = real(__VA_ARGS__));                                     \
    if (r == CUDA_SUCCESS) after;                                            \
    VT_LEAVE;                                                                \
    return r

/* The end of a capture: the graph it captured into (asked before the end)
 * gets its nodes, or loses them when the capture ended and failed (an end
 * refused while the capture goes on, from the wrong thread say, keeps
 * them; an invalidated capture names no graph: a list it leaves is dropped
 * when its handle is made again, vt_graph_made). */
#define END_CAPTURE(sym, stream, s, g)                                       \
    REAL_OR_FAIL(sym);                                                       \
    if (vt_busy || !vt_captures_began()) return real(s, g);                  \
    VT_ENTER;                                                                \
    void *key_ = vt_stream_capture_key((void *)(stream));                    \
    CUresult r;                                                              \
    VT_REAL_CALL(r = real(s, g));                                            \
    if (r == CUDA_SUCCESS) vt_capture_ended();                               \
    if (key_ && r == CUDA_SUCCESS && g && *g) vt_graph_capture_ended(key_, (void *)*g, 1); \
    else if (key_ && !vt_stream_capture_key((void *)(stream)))               \
        vt_graph_capture_ended(key_, NULL, 0);                               \
    VT_LEAVE;                                                                \
    return r

VT_EXPORT CUresult cuStreamEndCapture(CUstream s, CUgraph *g) { END_CAPTURE(cuStreamEndCapture, s, s, g); }

VT_EXPORT CUresult cuStreamEndCapture_ptsz(CUstream s, CUgraph *g) {
    END_CAPTURE(cuStreamEndCapture_ptsz, PTDS(s), s, g);
}

VT_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *e, CUgraph g, unsigned long long flags) {
    GRAPH_CALL(cuGraphInstantiateWithFlags, vt_graph_instantiated(g, e ? *e : NULL, flags), e, g, flags);
}

VT_EXPORT CUresult cuGraphInstantiateWithParams(CUgraphExec *e, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS *params) {
    GRAPH_CALL(cuGraphInstantiateWithParams, vt_graph_instantiated(g, e ? *e : NULL, params ? params->flags : 0), e, g,
               params);
}

VT_EXPORT CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec *e, CUgraph g,
                                                     CUDA_GRAPH_INSTANTIATE_PARAMS *params) {
    GRAPH_CALL(cuGraphInstantiateWithParams_ptsz, vt_graph_instantiated(g, e ? *e : NULL, params ? params->flags : 0),
               e, g, params);
}

/* A launch: under VRAMTRACE_LIMIT, refused as a device would refuse it
 * when what its allocation nodes take passes the budget on a device; a
 * launch the driver refuses for want of memory (its graph pool could not
 * reserve what the allocation nodes need) is an out-of-memory failure of
 * its own, asking for what they take on the device where they take most;
 * one that ran makes and frees its nodes' records (graphs.h). */
#define LAUNCH(sym, e, s)                                                    \
    REAL_OR_FAIL(sym);                                                       \
    if (vt_busy || !vt_captures_began()) return real(e, s);                  \
    VT_ENTER;                                                                \
    if (launch_over_budget(#sym, e)) {                                       \
        VT_LEAVE;                                                            \
        return CUDA_ERROR_OUT_OF_MEMORY;                                     \
    }                                                                        \
    CUresult r;                                                              \
    VT_REAL_CALL(r = real(e, s));                                            \
    if (r == CUDA_SUCCESS) vt_graph_launched(e, vt_hook_record);             \
    if (IS_OOM(r)) launch_refused(#sym, e);                                  \
    VT_LEAVE;                                                                \
    return r

static int launch_over_budget(const char *api, CUgraphExec e) {
    uint64_t need[VT_MAX_DEVICES];
    if (__atomic_load_n(&vt_budget_off, __ATOMIC_ACQUIRE) || !vt_graph_launch_needs(e, 1, need)) return 0;
    for (int d = 0; d < VT_MAX_DEVICES; d++)
        if (need[d] && vt_budget_refuse_launch(api, d, need[d])) return 1;
    return 0;
}

static void launch_refused(const char *api, CUgraphExec e) {
    uint64_t need[VT_MAX_DEVICES];
    if (vt_graph_launch_needs(e, 0, need)) vt_hook_launch_refused(api, need);
}

VT_EXPORT CUresult cuGraphLaunch(CUgraphExec e, CUstream s) { LAUNCH(cuGraphLaunch, e, s); }

VT_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec e, CUstream s) { LAUNCH(cuGraphLaunch_ptsz, e, s); }

VT_EXPORT CUresult cuGraphCreate(CUgraph *g, unsigned int flags) {
    GRAPH_CALL(cuGraphCreate, vt_graph_made(g ? (void *)*g : NULL), g, flags);
}

VT_EXPORT CUresult cuGraphExecDestroy(CUgraphExec e) { GRAPH_CALL(cuGraphExecDestroy, vt_graph_dropped(e), e); }

VT_EXPORT CUresult cuGraphDestroy(CUgraph g) { GRAPH_CALL(cuGraphDestroy, vt_graph_dropped(g), g); }

/* ------------------------------------------- graphs built node by node */

/* Where an allocation node's memory resides: its pool properties' location
 * (a device; the host's kinds where a driver allows it). */
static int alloc_node_kind(const CUmemPoolProps *p, int *device) {
    if (p->location.type == CU_MEM_LOCATION_TYPE_DEVICE) {
        *device = p->location.id;
        return VT_KIND_GRAPH;
    }
    *device = VT_HOST_DEVICE;
    return VT_KIND_HOST_ASYNC;
}

/* An allocation node added by hand is noted with the stack of the call
 * that added it, as a captured one is; its graph's launches record it
 * (graphs.h). `p`: its CUDA_MEM_ALLOC_NODE_PARAMS (v1 and v2 alike), not
 * NULL. */
#define ALLOC_NODE(sym, g, p, call)                                          \
    if (vt_pass()) return call;                                              \
    vt_graph_nodes_added();                                                  \
    int where_, kind_at_ = alloc_node_kind(&(p)->poolProps, &where_);        \
    NODE_ALLOC(#sym, (void *)(g), kind_at_, where_, call, (p)->dptr, (p)->bytesize)

/* A free node added by hand: of the graph's own allocation node (freed
 * within each launch) or of another graph's (freed at each of this
 * graph's launches). */
#define FREE_NODE(g, dptr, call)                                             \
    if (vt_pass()) return call;                                              \
    vt_graph_nodes_added();                                                  \
    VT_ENTER;                                                                \
    CUresult r;                                                              \
    VT_REAL_CALL(r = call);                                                  \
    if (r == CUDA_SUCCESS) vt_graph_free_node((void *)(g), dptr);            \
    VT_LEAVE;                                                                \
    return r

VT_EXPORT CUresult cuGraphAddMemAllocNode(CUgraphNode *node, CUgraph g, const CUgraphNode *deps, size_t n,
                                          CUDA_MEM_ALLOC_NODE_PARAMS *p) {
    REAL_OR_FAIL(cuGraphAddMemAllocNode);
    if (!p) return real(node, g, deps, n, p);
    ALLOC_NODE(cuGraphAddMemAllocNode, g, p, real(node, g, deps, n, p));
}

VT_EXPORT CUresult cuGraphAddMemFreeNode(CUgraphNode *node, CUgraph g, const CUgraphNode *deps, size_t n,
                                         CUdeviceptr dptr) {
    REAL_OR_FAIL(cuGraphAddMemFreeNode);
    FREE_NODE(g, dptr, real(node, g, deps, n, dptr));
}

/* cuGraphAddNode: an allocation or free node as above, by its type; a
 * child graph moved into its parent (the only way a graph with memory
 * nodes can be a child) brings its nodes to the parent. */
#define ADD_NODE(sym, g, p, call)                                            \
    REAL_OR_FAIL(sym);                                                       \
    if (p && p->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) {                      \
        ALLOC_NODE(sym, g, &p->alloc, call);                                 \
    }                                                                        \
    if (p && p->type == CU_GRAPH_NODE_TYPE_MEM_FREE) {                       \
        FREE_NODE(g, p->free.dptr, call);                                    \
    }                                                                        \
    if (p && p->type == CU_GRAPH_NODE_TYPE_GRAPH &&                          \
        p->graph.ownership == CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE) {         \
        CUgraph child_ = p->graph.graph;                                     \
        CUresult r_ = call;                                                  \
        if (r_ == CUDA_SUCCESS) vt_graph_moved((void *)child_, (void *)(g)); \
        return r_;                                                           \
    }                                                                        \
    return call

/* CUDA 12.2's, without the edges' data. */
VT_EXPORT CUresult cuGraphAddNode(CUgraphNode *node, CUgraph g, const CUgraphNode *deps, size_t n,
                                  CUgraphNodeParams *p) {
    ADD_NODE(cuGraphAddNode, g, p, real(node, g, deps, n, p));
}

VT_EXPORT CUresult cuGraphAddNode_v2(CUgraphNode *node, CUgraph g, const CUgraphNode *deps,
                                     const CUgraphEdgeData *edges, size_t n, CUgraphNodeParams *p) {
    ADD_NODE(cuGraphAddNode_v2, g, p, real(node, g, deps, edges, n, p));
}

/* ------------------------------------------------------ context reset */

/* Whether pinned host memory at `address` was made on device *arg: the
 * driver asked (CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, "a device ordinal of
 * a device against which the memory was allocated"). */
struct pinned_query {
    int device;
    CUresult (*attribute)(void *, CUpointer_attribute, CUdeviceptr);
};

static int pinned_on(uint64_t address, void *arg) {
    const struct pinned_query *q = arg;
    int device = -1;
    return q->attribute(&device, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, (CUdeviceptr)address) == CUDA_SUCCESS &&
           device == q->device;
}

/* Before a reset of dev's primary context: its records leave the live
 * tables, pinned host memory made on it among them (tracker/released.h;
 * none when the driver cannot be asked). */
static struct vt_release *release_begin_on(CUdevice dev) {
    static void *kept;
    struct pinned_query q = {(int)dev, NULL};
    *(void **)&q.attribute = vt_driver_fn_kept(&kept, "cuPointerGetAttribute");
    return vt_tracker_release_begin((int)dev, q.attribute ? pinned_on : NULL, &q);
}

/* cuDevicePrimaryCtxReset (cudaDeviceReset reaches it): the device's
 * memory is given back, freed or not, and the pinned host memory made in
 * its context; not stream-ordered memory (tracker/released.h). What the program had not freed
 * leaves the live counts as released without a free (tracker/released.h):
 * out of the tables before the call, as a free's record is, so that an
 * address handed out again during or after it is a new allocation. */
#define PRIMARY_RESET(sym, dev)                                              \
    REAL_OR_FAIL(sym);                                                       \
    if (vt_pass() || !vt_tracker_touched()) return real(dev);                \
    VT_ENTER;                                                                \
    struct vt_release *rl = release_begin_on(dev);                           \
    CUresult r;                                                              \
    VT_REAL_CALL(r = real(dev));                                             \
    vt_tracker_release_end(rl, r == CUDA_SUCCESS);                           \
    VT_LEAVE;                                                                \
    return r

/* A context of the program's own on a device: its memory and the primary
 * context's are then told apart by nothing vramtrace records, so a reset
 * of that device's primary context releases nothing in its counts
 * (vt_tracker_own_context). */
#define CTX_CREATE(sym, dev, ...)                                            \
    REAL_OR_FAIL(sym);                                                       \
    CUresult r = real(__VA_ARGS__);                                          \
    if (r == CUDA_SUCCESS) vt_tracker_own_context((int)(dev));               \
    return r

VT_EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev) {
    CTX_CREATE(cuCtxCreate_v2, dev, pctx, flags, dev);
}

VT_EXPORT CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *params, int n, unsigned int flags,
                                  CUdevice dev) {
    CTX_CREATE(cuCtxCreate_v3, dev, pctx, params, n, flags, dev);
}

VT_EXPORT CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *params, unsigned int flags, CUdevice dev) {
    CTX_CREATE(cuCtxCreate_v4, dev, pctx, params, flags, dev);
}

/* cuCtxDestroy "destroys and cleans up all resources associated with the
 * context", the memory of cuMemAlloc, cuMemAllocHost, cuMemAllocManaged
 * and cuMemAllocPitch among them: what the program had not freed leaves
 * the live counts as released without a free, as at a reset. Which
 * records are the context's the driver says, address by address
 * (CU_POINTER_ATTRIBUTE_CONTEXT), before the call; a destruction that
 * fails puts them back. */
struct ctx_query {
    CUcontext ctx;
    CUresult (*attribute)(void *, CUpointer_attribute, CUdeviceptr);
};

static int owned_by_ctx(uint64_t address, void *arg) {
    const struct ctx_query *q = arg;
    CUcontext c = NULL;
    return q->attribute(&c, CU_POINTER_ATTRIBUTE_CONTEXT, (CUdeviceptr)address) == CUDA_SUCCESS && c == q->ctx;
}

VT_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx) {
    REAL_OR_FAIL(cuCtxDestroy_v2);
    if (vt_pass() || !vt_tracker_touched() || !ctx) return real(ctx);
    VT_ENTER;
    static void *kept;
    struct ctx_query q = {ctx, NULL};
    *(void **)&q.attribute = vt_driver_fn_kept(&kept, "cuPointerGetAttribute");
    struct vt_release *rl = vt_tracker_release_context_begin(q.attribute ? owned_by_ctx : NULL, &q);
    CUresult r;
    VT_REAL_CALL(r = real(ctx));
    vt_tracker_release_end(rl, r == CUDA_SUCCESS);
    VT_LEAVE;
    return r;
}

VT_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
    PRIMARY_RESET(cuDevicePrimaryCtxReset_v2, dev);
}

VT_EXPORT CUresult cuDevicePrimaryCtxReset(CUdevice dev) {
    PRIMARY_RESET(cuDevicePrimaryCtxReset, dev);
}

/* "The context is automatically reset once the last reference to it is
 * released" (cuDevicePrimaryCtxRelease): the device's memory is then given
 * back as at cuDevicePrimaryCtxReset. vramtrace counts the references it
 * saw taken, by device (every door hands out these wrappers); a release
 * that may be the last (one reference counted, or none) takes the device's
 * records out before the call, as a reset does, and the driver's state
 * after it says whether the context went: inactive, they stay released;
 * still active, they go back. Two threads releasing a device's last two
 * references at once may both pass as not the last. */
#define VT_PRIMARY_REFS 64
static int primary_refs[VT_PRIMARY_REFS];

VT_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
    REAL_OR_FAIL(cuDevicePrimaryCtxRetain);
    CUresult r = real(pctx, dev);
    if (r == CUDA_SUCCESS && dev >= 0 && dev < VT_PRIMARY_REFS)
        __atomic_add_fetch(&primary_refs[dev], 1, __ATOMIC_RELAXED);
    return r;
}

/* One reference fewer, never below none. */
static void primary_unref(CUdevice dev) {
    if (dev < 0 || dev >= VT_PRIMARY_REFS) return;
    int n = __atomic_load_n(&primary_refs[dev], __ATOMIC_RELAXED);
    while (n > 0 && !__atomic_compare_exchange_n(&primary_refs[dev], &n, n - 1, 0, __ATOMIC_RELAXED,
                                                  __ATOMIC_RELAXED)) {
    }
}

static CUresult primary_release(CUresult (*real)(CUdevice), CUdevice dev) {
    int maybe_last = dev < 0 || dev >= VT_PRIMARY_REFS || __atomic_load_n(&primary_refs[dev], __ATOMIC_RELAXED) <= 1;
    static void *kept;
    CUresult (*state)(CUdevice, unsigned *, int *);
    *(void **)&state = vt_driver_fn_kept(&kept, "cuDevicePrimaryCtxGetState");
    CUresult r;
    if (!maybe_last || !state || vt_pass() || !vt_tracker_touched()) {
        r = real(dev);
        if (r == CUDA_SUCCESS) primary_unref(dev);
        return r;
    }
    VT_ENTER;
    struct vt_release *rl = release_begin_on(dev);
    VT_REAL_CALL(r = real(dev));
    unsigned flags = 0;
    int active = 1;
    int gone = r == CUDA_SUCCESS && state(dev, &flags, &active) == CUDA_SUCCESS && !active;
    vt_tracker_release_end(rl, gone);
    if (r == CUDA_SUCCESS) primary_unref(dev);
    VT_LEAVE;
    return r;
}

VT_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
    REAL_OR_FAIL(cuDevicePrimaryCtxRelease_v2);
    return primary_release(real, dev);
}

VT_EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev) {
    REAL_OR_FAIL(cuDevicePrimaryCtxRelease);
    return primary_release(real, dev);
}

/* ------------------------------------------------- virtual memory (VMM) */

/* Physical memory on the host (a host or host NUMA location) is host
 * memory: counted apart from device bytes, and no budget applies to it. */
/* Whether the driver would take cuMemCreate's arguments as far as the
 * budget's refusal goes: a handle and properties to read, a device that
 * exists, and properties and a size the driver's own granularity takes
 * ("the size of this allocation must be a multiple of the value given via
 * cuMemGetAllocationGranularity with the CU_MEM_ALLOC_GRANULARITY_MINIMUM
 * flag", cuda.h), asked of the driver, which holds no memory for it (else
 * its own INVALID_VALUE or INVALID_DEVICE). Where the driver cannot say,
 * the budget decides. */
static int create_args_ok(const CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop) {
    if (!handle || !prop) return 0;
    static void *kept[2];
    CUresult (*granularity)(size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags);
    *(void **)&granularity = vt_driver_fn_kept(&kept[0], "cuMemGetAllocationGranularity");
    size_t g = 0;
    CUresult r = granularity ? granularity(&g, prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) : CUDA_ERROR_NOT_FOUND;
    if (r == CUDA_ERROR_INVALID_VALUE || r == CUDA_ERROR_INVALID_DEVICE || (r == CUDA_SUCCESS && g && size % g))
        return 0;
    if (prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE) return 1;
    CUresult (*count)(int *);
    *(void **)&count = vt_driver_fn_kept(&kept[1], "cuDeviceGetCount");
    int n = 0;
    return !count || count(&n) != CUDA_SUCCESS || (prop->location.id >= 0 && prop->location.id < n);
}

VT_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                               const CUmemAllocationProp *prop,
                               unsigned long long flags) {
    REAL_OR_FAIL(cuMemCreate);
    int device = VT_DEVICE_CURRENT, kind = VT_KIND_VMM;
    if (prop && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE) device = prop->location.id;
    if (prop && location_is_host(&prop->location)) {
        kind = VT_KIND_HOST_VMM;
        device = VT_HOST_DEVICE;
    }
    ALLOC_THEN("cuMemCreate", kind, device, size, create_args_ok(handle, size, prop), real(handle, size, prop, flags),
               *handle, size,
               if (ok) { vt_vmm_lock(); vt_vmm_created(*handle); vt_vmm_unlock(); });
}

/* A handle's memory ends at the release of its last reference or the unmap
 * of its last mapping, whichever comes last (vmm.h): a release that leaves
 * either is passed through, the record kept. */
VT_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
    REAL_OR_FAIL(cuMemRelease);
    if (vt_pass()) return real(handle);
    vt_vmm_lock();
    enum vt_vmm_release what = vt_vmm_release(handle);
    CUresult r;
    if (what == VT_VMM_KEPT || what == VT_VMM_NONE) {
        r = real(handle);
        if (r != CUDA_SUCCESS) vt_vmm_release_undo(handle, what);
        vt_vmm_unlock();
        return r;
    }
    VT_ENTER;
    struct vt_free a = vt_tracker_free_begin(VT_SPACE_HANDLE, handle);
    VT_REAL_CALL(r = real(handle));
    vt_hook_free(&a, r == CUDA_SUCCESS);
    if (r != CUDA_SUCCESS) vt_vmm_release_undo(handle, what);
    VT_LEAVE;
    vt_vmm_unlock();
    return r;
}

VT_EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr) {
    REAL_OR_FAIL(cuMemRetainAllocationHandle);
    if (vt_pass()) return real(handle, addr);
    vt_vmm_lock();
    CUresult r = real(handle, addr);
    if (r == CUDA_SUCCESS && handle) vt_vmm_retained(*handle);
    vt_vmm_unlock();
    return r;
}

VT_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                            CUmemGenericAllocationHandle handle,
                            unsigned long long flags) {
    REAL_OR_FAIL(cuMemMap);
    if (vt_pass()) return real(ptr, size, offset, handle, flags);
    VT_ENTER;
    CUresult r;
    vt_vmm_lock();
    VT_REAL_CALL(r = real(ptr, size, offset, handle, flags));
    if (r == CUDA_SUCCESS) vt_vmm_mapped(handle, ptr, size, vt_tracker_map(handle, ptr, size));
    vt_vmm_unlock();
    VT_LEAVE;
    return r;
}

/* The unmap of a released handle's last mapping ends its memory: its
 * record is taken out before the driver's call (an address the driver
 * gives again at once cannot meet it), put back if the unmap fails. */
VT_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
    REAL_OR_FAIL(cuMemUnmap);
    if (vt_pass()) return real(ptr, size);
    vt_vmm_lock();
    uint64_t few[8], *ending = few;
    struct vt_free fs[8], *f = fs;
    size_t n = vt_vmm_unmap_ending(ptr, size, few, 8);
    if (n > 8) {   /* a range of many mappings; without room, the first eight end here, the rest stay live */
        uint64_t *more = malloc(n * sizeof *more);
        struct vt_free *fmore = more ? malloc(n * sizeof *fmore) : NULL;
        if (fmore) {
            size_t m = vt_vmm_unmap_ending(ptr, size, more, n);
            ending = more, f = fmore, n = m < n ? m : n;
        } else {
            free(more);
            n = 8;
        }
    }
    VT_ENTER;
    for (size_t i = 0; i < n; i++) f[i] = vt_tracker_free_begin(VT_SPACE_HANDLE, ending[i]);
    CUresult r;
    VT_REAL_CALL(r = real(ptr, size));
    for (size_t i = 0; i < n; i++) vt_hook_free(&f[i], r == CUDA_SUCCESS);
    if (r == CUDA_SUCCESS) vt_vmm_unmapped(ptr, size);
    VT_LEAVE;
    vt_vmm_unlock();
    if (f != fs) free(f);
    if (ending != few) free(ending);
    return r;
}

/* --------------------------------------------------------- pinned host */

VT_EXPORT CUresult cuMemAllocHost_v2(void **pp, size_t bytes) {
    REAL_OR_FAIL(cuMemAllocHost_v2);
    ALLOC("cuMemAllocHost_v2", VT_KIND_HOST, VT_HOST_DEVICE, bytes, pp, real(pp, bytes), (uintptr_t)*pp, bytes);
}

VT_EXPORT CUresult cuMemAllocHost(void **pp, unsigned int bytes) {
    REAL_OR_FAIL(cuMemAllocHost);
    ALLOC("cuMemAllocHost", VT_KIND_HOST, VT_HOST_DEVICE, bytes, pp, real(pp, bytes), (uintptr_t)*pp, bytes);
}

VT_EXPORT CUresult cuMemHostAlloc(void **pp, size_t bytes, unsigned int flags) {
    REAL_OR_FAIL(cuMemHostAlloc);
    ALLOC("cuMemHostAlloc", VT_KIND_HOST, VT_HOST_DEVICE, bytes, pp, real(pp, bytes, flags), (uintptr_t)*pp,
          bytes);
}

VT_EXPORT CUresult cuMemFreeHost(void *p) {
    ONE_FREE(cuMemFreeHost, VT_SPACE_HOST, p, p == NULL);
}

/* The program's own memory, page-locked: counted as pinned host memory from
 * the registration to cuMemHostUnregister of the same base address. Never
 * refused by a budget (the budget is of device memory). */
VT_EXPORT CUresult cuMemHostRegister_v2(void *p, size_t bytes, unsigned int flags) {
    REAL_OR_FAIL(cuMemHostRegister_v2);
    ALLOC("cuMemHostRegister_v2", VT_KIND_HOST_REGISTERED, VT_HOST_DEVICE, bytes, p, real(p, bytes, flags),
          (uintptr_t)p, bytes);
}

VT_EXPORT CUresult cuMemHostRegister(void *p, size_t bytes, unsigned int flags) {
    REAL_OR_FAIL(cuMemHostRegister);
    ALLOC("cuMemHostRegister", VT_KIND_HOST_REGISTERED, VT_HOST_DEVICE, bytes, p, real(p, bytes, flags),
          (uintptr_t)p, bytes);
}

VT_EXPORT CUresult cuMemHostUnregister(void *p) {
    ONE_FREE(cuMemHostUnregister, VT_SPACE_HOST, p, p == NULL);
}

/* ------------------------------------------------------------- arrays */

/* Bytes an array element channel takes, by format; 1 for the block and
 * planar formats, whose size the memory requirements (when the driver has
 * cuArrayGetMemoryRequirements) give instead. */
static size_t format_bytes(CUarray_format f) {
    switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8: case CU_AD_FORMAT_SIGNED_INT8: return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16: case CU_AD_FORMAT_SIGNED_INT16: case CU_AD_FORMAT_HALF: return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32: case CU_AD_FORMAT_SIGNED_INT32: case CU_AD_FORMAT_FLOAT: return 4;
    default: return 1;
    }
}

static uint64_t dim(size_t v) { return v ? v : 1; }

/* An array's channels: "it may be 1, 2, or 4" (cuda.h); 0 or more than 4
 * gets the driver's own INVALID_VALUE, never the budget's refusal (3 is
 * left to the budget: planar video formats may take it). */
static int channels_ok(unsigned ch) { return ch >= 1 && ch <= 4; }

/* What a descriptor says an array takes, levels summed for mipmaps; asks
 * the driver nothing (the budget's figure, before the array exists). Past
 * 2^64 - 1, that (sizes.h). From level 64 on each level is one element:
 * every dimension is 0 (a shift by 64 or more is undefined; on x86 it
 * shifted by the count less 64, and levels past the 64th counted the
 * largest again). */
static uint64_t descriptor_bytes(size_t w, size_t h, size_t d, CUarray_format f, unsigned ch, unsigned levels) {
    uint64_t bytes = 0, element = (uint64_t)(ch ? ch : 1) * format_bytes(f);
    unsigned n = levels ? levels : 1;
    for (unsigned l = 0; l < n && l < 64; l++)
        bytes = vt_size_add(bytes, vt_size_mul(vt_size_mul(vt_size_mul(dim(w >> l), dim(h >> l)), dim(d >> l)),
                                               element));
    if (n > 64) bytes = vt_size_add(bytes, vt_size_mul(n - 64, element));
    return bytes;
}

/* The size of an array the driver made (`array` its handle, never NULL):
 * the driver's memory requirements when it has the call, else what the
 * descriptor says. */
static uint64_t array_bytes(void *array, int mipmapped, size_t w, size_t h, size_t d, CUarray_format f,
                            unsigned ch, unsigned levels) {
    return vt_array_size(array, mipmapped, descriptor_bytes(w, h, d, f, ch, levels));
}

uint64_t vt_array_size(void *array, int mipmapped, uint64_t otherwise) {
    static void *kept[3];
    CUresult (*req)(CUDA_ARRAY_MEMORY_REQUIREMENTS *, CUarray, CUdevice);
    CUresult (*mreq)(CUDA_ARRAY_MEMORY_REQUIREMENTS *, CUmipmappedArray, CUdevice);
    CUresult (*get_dev)(CUdevice *);
    *(void **)&get_dev = vt_driver_fn_kept(&kept[0], "cuCtxGetDevice");
    *(void **)&req = vt_driver_fn_kept(&kept[1], "cuArrayGetMemoryRequirements");
    *(void **)&mreq = vt_driver_fn_kept(&kept[2], "cuMipmappedArrayGetMemoryRequirements");
    CUDA_ARRAY_MEMORY_REQUIREMENTS r;
    CUdevice dev = 0;
    if (array && get_dev) get_dev(&dev);
    if (array && !mipmapped && req && req(&r, (CUarray)array, dev) == CUDA_SUCCESS && r.size) return r.size;
    if (array && mipmapped && mreq && mreq(&r, (CUmipmappedArray)array, dev) == CUDA_SUCCESS && r.size)
        return r.size;
    return otherwise;
}

VT_EXPORT CUresult cuArrayCreate_v2(CUarray *h, const CUDA_ARRAY_DESCRIPTOR *d) {
    REAL_OR_FAIL(cuArrayCreate_v2);
    if (!d) return real(h, d);
    uint64_t want = descriptor_bytes(d->Width, d->Height, 0, d->Format, d->NumChannels, 1);
    ALLOC("cuArrayCreate_v2", VT_KIND_ARRAY, VT_DEVICE_CURRENT, want, h && channels_ok(d->NumChannels), real(h, d),
          (uintptr_t)*h,
          ok ? array_bytes(*h, 0, d->Width, d->Height, 0, d->Format, d->NumChannels, 1) : want);
}

VT_EXPORT CUresult cuArray3DCreate_v2(CUarray *h, const CUDA_ARRAY3D_DESCRIPTOR *d) {
    REAL_OR_FAIL(cuArray3DCreate_v2);
    if (!d) return real(h, d);
    uint64_t want = descriptor_bytes(d->Width, d->Height, d->Depth, d->Format, d->NumChannels, 1);
    ALLOC("cuArray3DCreate_v2", VT_KIND_ARRAY, VT_DEVICE_CURRENT, want, h && channels_ok(d->NumChannels), real(h, d),
          (uintptr_t)*h,
          ok ? array_bytes(*h, 0, d->Width, d->Height, d->Depth, d->Format, d->NumChannels, 1) : want);
}

VT_EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray *h, const CUDA_ARRAY3D_DESCRIPTOR *d,
                                          unsigned int levels) {
    REAL_OR_FAIL(cuMipmappedArrayCreate);
    if (!d) return real(h, d, levels);
    uint64_t want = descriptor_bytes(d->Width, d->Height, d->Depth, d->Format, d->NumChannels, levels);
    ALLOC("cuMipmappedArrayCreate", VT_KIND_ARRAY, VT_DEVICE_CURRENT, want, h && channels_ok(d->NumChannels),
          real(h, d, levels), (uintptr_t)*h,
          ok ? array_bytes(*h, 1, d->Width, d->Height, d->Depth, d->Format, d->NumChannels, levels) : want);
}

VT_EXPORT CUresult cuArrayDestroy(CUarray h) {
    ONE_FREE(cuArrayDestroy, VT_SPACE_ARRAY, h, 0);
}

VT_EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray h) {
    ONE_FREE(cuMipmappedArrayDestroy, VT_SPACE_ARRAY, h, 0);
}

/* --------------------------------------------- memory of other processes */

/* The size of an opened IPC mapping, from the driver. */
static uint64_t mapping_bytes(CUdeviceptr p) {
    static void *kept;
    CUresult (*range)(CUdeviceptr *, size_t *, CUdeviceptr);
    *(void **)&range = vt_driver_fn_kept(&kept, "cuMemGetAddressRange_v2");
    CUdeviceptr base = 0;
    size_t size = 0;
    if (range && range(&base, &size, p) == CUDA_SUCCESS) return size;
    return 0;
}

/* An open of a handle: a new mapping, or one more reference to the one
 * already open (ipc.h). No budget: another process's memory. */
#define IPC_OPEN(sym)                                                                  \
    REAL_OR_FAIL(sym);                                                                 \
    if (vt_pass()) return real(p, h, flags);                                           \
    VT_ENTER;                                                                          \
    CUresult r;                                                                        \
    VT_REAL_CALL(r = real(p, h, flags));                                               \
    int ok = r == CUDA_SUCCESS;                                                        \
    vt_ipc_opened(#sym, ok, IS_OOM(r), ok ? (uint64_t)*p : 0, ok ? mapping_bytes(*p) : 0); \
    VT_LEAVE;                                                                          \
    return r

VT_EXPORT CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *p, CUipcMemHandle h, unsigned int flags) {
    IPC_OPEN(cuIpcOpenMemHandle_v2);
}

VT_EXPORT CUresult cuIpcOpenMemHandle(CUdeviceptr *p, CUipcMemHandle h, unsigned int flags) {
    IPC_OPEN(cuIpcOpenMemHandle);
}

/* A close: one reference fewer, the record out at the last (ipc.h). */
VT_EXPORT CUresult cuIpcCloseMemHandle(CUdeviceptr p) {
    REAL_OR_FAIL(cuIpcCloseMemHandle);
    if (vt_pass()) return real(p);
    VT_ENTER;
    struct vt_ipc_close c = vt_ipc_close_begin((uint64_t)p);
    CUresult r;
    VT_REAL_CALL(r = real(p));
    vt_ipc_close_end(&c, r == CUDA_SUCCESS);
    VT_LEAVE;
    return r;
}
