/* pools.c -- where stream-ordered memory lands (pools.h).
 *
 * The pools are an open-addressed table of VT_POOL_SLOTS handles, read
 * without a lock by every allocation from a pool and written under a spin
 * lock when a pool is noted or destroyed. A destroyed pool's slot becomes
 * a tombstone that a later note takes again. A pool that finds no slot
 * (more than VT_POOL_SLOTS pools noted at once) is not noted: its memory
 * counts on the stream's device, and one warning says so. */
#include <cuda.h>
#include <stdint.h>

#include "../common/warn.h"
#include "../tracker/tracker.h"
#include "hook.h"
#include "pools.h"
#include "resolve.h"

#define VT_POOL_SLOTS 4096 /* a power of two */
#define GONE ((uintptr_t)1)

static uintptr_t slot_pool[VT_POOL_SLOTS]; /* 0: never used; GONE: destroyed */
static int slot_device[VT_POOL_SLOTS];
static int lock;
static int any_noted; /* a pool was ever noted: else a failure's look at the pools scans no slot */

static uint32_t first_slot(uintptr_t pool) {
    return (uint32_t)(((uint64_t)pool * 0x9e3779b97f4a7c15ull) >> 52) & (VT_POOL_SLOTS - 1);
}

/* The slot of `pool`, or -1. Without the lock: a slot's device is written
 * before its handle is published. */
static int find(uintptr_t pool) {
    uint32_t i = first_slot(pool);
    for (int n = 0; n < VT_POOL_SLOTS; n++, i = (i + 1) & (VT_POOL_SLOTS - 1)) {
        uintptr_t p = __atomic_load_n(&slot_pool[i], __ATOMIC_ACQUIRE);
        if (p == pool) return (int)i;
        if (p == 0) return -1;
    }
    return -1;
}

void vt_pool_note(void *pool, int device) {
    uintptr_t p = (uintptr_t)pool;
    if (p == 0 || p == GONE) return;
    while (__atomic_exchange_n(&lock, 1, __ATOMIC_ACQUIRE)) {}
    int at = find(p);
    if (at < 0) {
        uint32_t i = first_slot(p);
        for (int n = 0; n < VT_POOL_SLOTS; n++, i = (i + 1) & (VT_POOL_SLOTS - 1)) {
            uintptr_t q = slot_pool[i];
            if (q == 0 || q == GONE) { at = (int)i; break; }
        }
    }
    if (at >= 0) {
        __atomic_store_n(&slot_device[at], device, __ATOMIC_RELAXED);
        __atomic_store_n(&slot_pool[at], p, __ATOMIC_RELEASE);
        __atomic_store_n(&any_noted, 1, __ATOMIC_RELEASE);
    }
    __atomic_store_n(&lock, 0, __ATOMIC_RELEASE);
    if (at < 0) {
        static int said;
        if (!__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
            vt_warn("more than %d memory pools at once: allocations from the others count on their stream's device",
                    VT_POOL_SLOTS);
    }
}

void vt_pool_forget(void *pool) {
    uintptr_t p = (uintptr_t)pool;
    if (p == 0 || p == GONE) return;
    while (__atomic_exchange_n(&lock, 1, __ATOMIC_ACQUIRE)) {}
    int at = find(p);
    if (at >= 0) __atomic_store_n(&slot_pool[at], GONE, __ATOMIC_RELEASE);
    __atomic_store_n(&lock, 0, __ATOMIC_RELEASE);
}

size_t vt_pools_of(int device, void **out, size_t max) {
    size_t n = 0;
    /* A program that made no pool: each failure scanned the 4,096 slots
     * (most of a failed call's 5 us in a loop of failures). */
    if (!__atomic_load_n(&any_noted, __ATOMIC_ACQUIRE)) return 0;
    for (int i = 0; i < VT_POOL_SLOTS && n < max; i++) {
        uintptr_t p = __atomic_load_n(&slot_pool[i], __ATOMIC_ACQUIRE);
        if (p && p != GONE && __atomic_load_n(&slot_device[i], __ATOMIC_RELAXED) == device) out[n++] = (void *)p;
    }
    return n;
}

void vt_pools_reset_child(void) { __atomic_store_n(&lock, 0, __ATOMIC_RELEASE); }

int vt_pool_where(void *pool, void *stream, int *device) {
    int at = pool ? find((uintptr_t)pool) : -1;
    if (at < 0) {
        *device = vt_stream_device(stream);
        return VT_KIND_ASYNC;
    }
    *device = __atomic_load_n(&slot_device[at], __ATOMIC_RELAXED);
    return *device == VT_HOST_DEVICE ? VT_KIND_HOST_ASYNC : VT_KIND_ASYNC;
}

/* How many devices the driver shows, once it has said (0 before). */
static int device_count(void) {
    static int n;
    int k = __atomic_load_n(&n, __ATOMIC_RELAXED);
    if (k) return k;
    static void *kept;
    CUresult (*get)(int *);
    *(void **)&get = vt_driver_fn_kept(&kept, "cuDeviceGetCount");
    if (get && get(&k) == CUDA_SUCCESS && k > 0) __atomic_store_n(&n, k, __ATOMIC_RELAXED);
    return k;
}

/* Whether a capture ever began; how many may be in progress (begun, not
 * ended by a cuStreamEndCapture that succeeded: a capture that fails or is
 * abandoned keeps the count up, which costs a question per allocation,
 * never a node missed). */
static int captures, capturing;

void vt_capture_began(void) {
    __atomic_store_n(&captures, 1, __ATOMIC_RELEASE);
    __atomic_add_fetch(&capturing, 1, __ATOMIC_ACQ_REL);
}

void vt_capture_ended(void) {
    int n = __atomic_load_n(&capturing, __ATOMIC_ACQUIRE);
    while (n > 0 && !__atomic_compare_exchange_n(&capturing, &n, n - 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {}
}

void vt_graph_nodes_added(void) {
    if (!__atomic_load_n(&captures, __ATOMIC_ACQUIRE)) __atomic_store_n(&captures, 1, __ATOMIC_RELEASE);
}

int vt_captures_began(void) { return __atomic_load_n(&captures, __ATOMIC_ACQUIRE); }

void *vt_stream_capture_key(void *stream) {
    if (__builtin_expect(__atomic_load_n(&capturing, __ATOMIC_ACQUIRE) <= 0, 1)) return NULL;
    uintptr_t s = (uintptr_t)stream;
    if (s == 0 || s == (uintptr_t)CU_STREAM_LEGACY) return NULL;
    static void *kept_info, *kept_is;
    CUresult (*info)(CUstream, CUstreamCaptureStatus *, cuuint64_t *, CUgraph *, const CUgraphNode **, size_t *);
    *(void **)&info = vt_driver_fn_kept(&kept_info, "cuStreamGetCaptureInfo_v2");
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    if (info) {
        CUgraph g = NULL;
        if (info((CUstream)stream, &st, NULL, &g, NULL, NULL) != CUDA_SUCCESS || st != CU_STREAM_CAPTURE_STATUS_ACTIVE)
            return NULL;
        return g ? (void *)g : stream;
    }
    CUresult (*is)(CUstream, CUstreamCaptureStatus *);
    *(void **)&is = vt_driver_fn_kept(&kept_is, "cuStreamIsCapturing");
    return is && is((CUstream)stream, &st) == CUDA_SUCCESS && st == CU_STREAM_CAPTURE_STATUS_ACTIVE ? stream : NULL;
}

int vt_stream_device(void *stream) {
    uintptr_t s = (uintptr_t)stream;
    if (s == 0 || s == (uintptr_t)CU_STREAM_LEGACY || s == (uintptr_t)CU_STREAM_PER_THREAD) return VT_DEVICE_CURRENT;
    if (device_count() == 1) return VT_DEVICE_CURRENT;
    static void *kept;
    CUresult (*get)(CUstream, CUdevice *);
    *(void **)&get = vt_driver_fn_kept(&kept, "cuStreamGetDevice");
    CUdevice d;
    if (get && get((CUstream)stream, &d) == CUDA_SUCCESS && d >= 0 && d < VT_MAX_DEVICES) return d;
    return VT_DEVICE_CURRENT;
}
