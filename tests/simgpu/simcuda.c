/* simcuda.c -- a stand-in libcuda.so.1 for tests: a simulated GPU.
 *
 * It implements the part of the CUDA driver API that vramtrace hooks, that
 * the stand-in runtime needs and that PyTorch's caching allocator asks for
 * (expandable segments, memory pools), with a configurable capacity and the
 * driver's own error codes: an allocation that does not fit fails with
 * CUDA_ERROR_OUT_OF_MEMORY, a free of an unknown pointer fails with
 * CUDA_ERROR_INVALID_VALUE.
 *
 * Device memory is host memory: each device owns a large reserved range of
 * the address space (mapped without swap reservation, so untouched pages
 * cost nothing), device addresses lie in it, and copies and sets really copy
 * and set. Kernels are not run: their results are whatever memory held.
 * Every call is synchronous, so streams and events are always complete.
 *
 * Environment:
 *   SIMGPU_DEVICES   number of devices (default 1, at most 8)
 *   SIMGPU_CAPACITY  bytes per device, suffixes K M G accepted (default 16G)
 *   SIMGPU_CONTEXT   bytes the "context" holds on each device (default 0)
 *   SIMGPU_MAX_BLOCK largest single allocation that can succeed, as if free
 *                    memory were fragmented (default: no limit)
 *   SIMGPU_RAISE     SIG:NAME: the first call of entry point NAME raises
 *                    signal number SIG on the calling thread before it does
 *                    anything else (a signal that arrives while the program
 *                    is inside that call, at a known point)
 *   SIMGPU_BLOCK     NAME: the first call of entry point NAME writes
 *                    "simgpu: NAME waits for a signal" to stderr and waits
 *                    until a signal handler has run, then goes on
 *
 * Host memory: pinned host allocations, cuMemCreate with a host location
 * (HOST, HOST_NUMA, HOST_NUMA_CURRENT) and allocations from a pool on the
 * host (from cuMemPoolCreate, or the host's default pool from
 * cuMemGetDefaultMemPool / cuMemGetMemPool) do not count against a device.
 * cuArrayGetMemoryRequirements and cuMipmappedArrayGetMemoryRequirements
 * answer the size the array was made with; asked about a NULL handle, they
 * fail with CUDA_ERROR_INVALID_HANDLE and count the call under
 * "cuArrayGetMemoryRequirements(NULL)" (or the mipmapped name).
 *
 * It is never installed: tests and the demo put its folder on
 * LD_LIBRARY_PATH. simgpu_calls(name) tells a test how often an exported
 * entry point ran, so a test can check which exact variant was reached. */
#define _GNU_SOURCE
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include <pthread.h>
#include <search.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <uthash.h>

#define SIM_EXPORT __attribute__((visibility("default")))
#define SIM_MAX_DEVICES 8
#define SIM_ALIGN 512
#define SIM_GRANULE ((size_t)2 << 20)
#define SIM_SPAN_MIN ((uint64_t)64 << 30)
#define SIM_SPAN_MAX ((uint64_t)4 << 40)
#define SIM_BASE 0x700000000000ull

/* Entry points the real driver exports but cuda.h declares only under other
 * names, or not at all. */
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytes, CUstream s);
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream s);
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytes,
                                      CUmemoryPool pool, CUstream s);
CUresult cuEventElapsedTime_v2(float *ms, CUevent start, CUevent end);
CUresult cuCtxCreate_v4(CUcontext *ctx, CUctxCreateParams *params,
                        unsigned int flags, CUdevice dev);

enum sim_kind { SIM_DEVICE, SIM_HOST, SIM_HANDLE, SIM_ARRAY, SIM_IMPORTED,
                SIM_POOLED, SIM_RESERVED, SIM_MAPPED, SIM_HOST_HANDLE, SIM_REGISTERED, SIM_GRAPH_VA };

struct sim_key { uint64_t addr; int kind; int pad; };

struct sim_pool;

/* One live object: an allocation, a handle, a reservation. bytes is what
 * counts against the device; span is the address range it occupies. */
struct sim_alloc {
    struct sim_key key;
    size_t bytes;
    size_t span;
    int device;
    struct sim_pool *pool;
    CUmemAllocationProp prop;   /* SIM_HANDLE: as created */
    int own_ctx;                /* made while a context of cuCtxCreate was
                                   current: a primary reset leaves it */
    struct sim_ctx *ctx;        /* that context (NULL: the primary); its
                                   destruction takes the memory it owns */
    uint64_t handle;            /* SIM_MAPPED: the handle mapped there;
                                   SIM_IMPORTED: the memory its IPC handle
                                   names (what cuIpcGetMemHandle was given) */
    unsigned refs, maps;        /* SIM_HANDLE, SIM_HOST_HANDLE: cuMemCreate's
                                   and cuMemRetainAllocationHandle's references
                                   not yet released, and its mappings; its
                                   memory goes back when both are 0.
                                   SIM_IMPORTED: its opens not yet closed */
    struct sim_ctx *opened_in;  /* SIM_IMPORTED: the context current at the
                                   open (NULL: none was) */
    UT_hash_handle hh;
};

/* Freed address ranges of one exact span and alignment, ready for reuse. */
struct sim_hole { struct sim_hole *next; uint64_t addr; };
struct sim_holes {
    struct { uint64_t span, align; int device, pad; } key;
    struct sim_hole *first;
    UT_hash_handle hh;
};

/* A stream-ordered memory pool: reserved bytes count against the device,
 * used bytes are those handed out; freed memory stays reserved until a
 * synchronization finds more than the release threshold cached, or until
 * cuMemPoolTrimTo. */
struct sim_pool {
    int device;
    int host;       /* made on the host: its bytes count against no device */
    int reuse[3];
    uint64_t threshold, reserved, used, reserved_high, used_high;
    int destroyed;  /* cuMemPoolDestroy'ed with allocations out: gone at
                       their last free */
};

struct sim_ctx { int magic; int device; };
#define SIM_CTX_MAGIC 0x5ec7

struct sim_device {
    uint64_t base, next, end; /* this device's address space */
    size_t used;
    /* The graphs' memory pool (graph.c's model, below): bytes in use by
     * graph allocations that a launch made and nothing freed yet, bytes
     * reserved from the device (used counts them), and their highs. */
    uint64_t graph_used, graph_reserved, graph_used_high, graph_reserved_high;
    int retained;
    struct sim_ctx primary;
    struct sim_pool default_pool;
    struct sim_pool *current_pool;
    unsigned primary_flags;
};

struct sim_graph;
struct sim_stream { int device; int priority; unsigned flags; struct sim_graph *capturing; };
static CUresult sim_graph_free(struct sim_stream *st, CUdeviceptr ptr, int *done);
struct sim_graph;
struct sim_event { unsigned flags; int recorded; struct timespec when; struct sim_graph *capture; };

static pthread_mutex_t sim_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sim_alloc *sim_table;     /* by (address, kind) */
static struct sim_holes *sim_free_va;   /* by (span, align, device) */
static void *sim_ranges;                /* tsearch tree of device-visible ranges */
static struct sim_device sim_dev[SIM_MAX_DEVICES];
static int sim_ndev = 1;
static size_t sim_capacity = (size_t)16 << 30;
static size_t sim_context;
static size_t sim_max_block;
static uint64_t sim_span; /* address space of one device */
static int sim_initialized;
static uint64_t sim_next_handle = 0x1000;
/* SIMGPU_REUSE_HANDLES=1: cuMemCreate hands out again the value of the
 * device handle whose memory ended last (0: none waiting), as a driver
 * whose handles are values of its own may; unset, every handle is new. */
static int sim_reuse_handles;
static uint64_t sim_free_handle;
static uint64_t sim_next_low = 0x10000000; /* v1 API: 32-bit addresses */
static __thread struct sim_ctx *sim_current;
static __thread struct sim_ctx *sim_stack[16];
static __thread int sim_depth;

/* Call counters, by exported name. */
#define SIM_MAX_COUNTERS 256
static struct { const char *name; int count; } sim_counters[SIM_MAX_COUNTERS];

static void sim_count(const char *name) {
    static int raised;
    const char *r = getenv("SIMGPU_RAISE");
    const char *colon = r ? strchr(r, ':') : NULL;
    if (colon && strcmp(colon + 1, name) == 0 && !__atomic_exchange_n(&raised, 1, __ATOMIC_ACQ_REL))
        raise(atoi(r));
    static int blocked;
    const char *b = getenv("SIMGPU_BLOCK");
    if (b && strcmp(b, name) == 0 && !__atomic_exchange_n(&blocked, 1, __ATOMIC_ACQ_REL)) {
        fprintf(stderr, "simgpu: %s waits for a signal\n", name);
        sigset_t none;
        sigemptyset(&none);
        sigsuspend(&none);
    }
    pthread_mutex_lock(&sim_lock);
    for (int i = 0; i < SIM_MAX_COUNTERS; i++) {
        if (sim_counters[i].name == NULL) sim_counters[i].name = name;
        if (strcmp(sim_counters[i].name, name) == 0) {
            sim_counters[i].count++;
            break;
        }
    }
    pthread_mutex_unlock(&sim_lock);
}

SIM_EXPORT int simgpu_calls(const char *name) {
    int n = 0;
    pthread_mutex_lock(&sim_lock);
    for (int i = 0; i < SIM_MAX_COUNTERS && sim_counters[i].name; i++)
        if (strcmp(sim_counters[i].name, name) == 0) n = sim_counters[i].count;
    pthread_mutex_unlock(&sim_lock);
    return n;
}

/* The host memory registered now: its bytes, and the count of ranges in
 * *count. For tests that compare vramtrace's figures with the driver's. */
SIM_EXPORT uint64_t simgpu_host_registered(uint64_t *count) {
    uint64_t bytes = 0, n = 0;
    pthread_mutex_lock(&sim_lock);
    for (struct sim_alloc *a = sim_table; a; a = a->hh.next)
        if (a->key.kind == SIM_REGISTERED) { bytes += a->span; n++; }
    pthread_mutex_unlock(&sim_lock);
    if (count) *count = n;
    return bytes;
}

static size_t sim_parse_size(const char *s, size_t def) {
    if (s == NULL || *s == '\0') return def;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    switch (*end) {
    case 'K': case 'k': v <<= 10; break;
    case 'M': case 'm': v <<= 20; break;
    case 'G': case 'g': v <<= 30; break;
    default: break;
    }
    return (size_t)v;
}

/* Sizes are multiplied and rounded in 64 bits that a program's arguments
 * can overflow (cudaMallocPitch of 2^33 x 2^33 bytes is 2^66): a result
 * past 2^64 is SIM_TOO_BIG, more than any device or address space holds,
 * so that the checks refuse it as the driver would (out of memory) instead
 * of taking the wrapped-around remainder. */
#define SIM_TOO_BIG UINT64_MAX

static uint64_t sim_add(uint64_t a, uint64_t b) {
    uint64_t r;
    return __builtin_add_overflow(a, b, &r) ? SIM_TOO_BIG : r;
}

static uint64_t sim_mul(uint64_t a, uint64_t b) {
    uint64_t r;
    return __builtin_mul_overflow(a, b, &r) ? SIM_TOO_BIG : r;
}

/* bytes rounded up to a multiple of to; SIM_TOO_BIG past 2^64. */
static uint64_t sim_round(uint64_t bytes, uint64_t to) {
    uint64_t up = sim_add(bytes, to - 1);
    return up == SIM_TOO_BIG ? up : up / to * to;
}

static void sim_pool_init(struct sim_pool *p, int device) {
    memset(p, 0, sizeof *p);
    p->device = device;
    p->reuse[0] = p->reuse[1] = p->reuse[2] = 1;
}

/* Reads the settings and reserves each device's address space. Called with
 * sim_lock held. */
static void sim_setup(void) {
    if (sim_initialized) return;
    const char *n = getenv("SIMGPU_DEVICES");
    if (n && atoi(n) >= 1 && atoi(n) <= SIM_MAX_DEVICES) sim_ndev = atoi(n);
    sim_capacity = sim_parse_size(getenv("SIMGPU_CAPACITY"), sim_capacity);
    sim_context = sim_parse_size(getenv("SIMGPU_CONTEXT"), 0);
    sim_max_block = sim_parse_size(getenv("SIMGPU_MAX_BLOCK"), 0);
    const char *reuse = getenv("SIMGPU_REUSE_HANDLES");
    sim_reuse_handles = reuse && strcmp(reuse, "1") == 0;
    /* Sixteen times the capacity leaves room for freed ranges of sizes that
     * are never asked for again, and fits eight devices in the address
     * space ThreadSanitizer leaves a program. */
    sim_span = (uint64_t)sim_capacity * 16;
    sim_span = sim_span < SIM_SPAN_MIN ? SIM_SPAN_MIN : sim_span > SIM_SPAN_MAX ? SIM_SPAN_MAX : sim_span;
    sim_span = sim_round(sim_span, SIM_GRANULE);
    for (int d = 0; d < SIM_MAX_DEVICES; d++) {
        struct sim_device *v = &sim_dev[d];
        v->used = sim_context;
        v->primary = (struct sim_ctx){SIM_CTX_MAGIC, d};
        sim_pool_init(&v->default_pool, d);
        v->current_pool = &v->default_pool;
        if (d >= sim_ndev) continue;
        int prot = PROT_READ | PROT_WRITE;
        int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
        void *want = (void *)(uintptr_t)(SIM_BASE + (uint64_t)d * sim_span);
        void *p = mmap(want, sim_span, prot, flags, -1, 0);
        if (p == MAP_FAILED) p = mmap(NULL, sim_span, prot, flags, -1, 0);
        if (p == MAP_FAILED) { v->base = v->next = v->end = 0; continue; }
        v->base = (uint64_t)(uintptr_t)p;
        v->next = v->base + SIM_ALIGN; /* address 0 of a device is never handed out */
        v->end = v->base + sim_span;
    }
    sim_initialized = 1;
}

static int sim_device_now(void) { return sim_current ? sim_current->device : 0; }

/* ------------------------------------------------------ address ranges */

struct sim_range { uint64_t base; uint64_t size; struct sim_alloc *a; };

static int sim_range_cmp(const void *x, const void *y) {
    const struct sim_range *a = x, *b = y;
    if (a->base + a->size <= b->base) return -1;
    if (b->base + b->size <= a->base) return 1;
    return 0;
}

/* The range that holds addr, or NULL. sim_lock held. */
static struct sim_range *sim_range_at(uint64_t addr) {
    struct sim_range probe = {addr, 1, NULL};
    void *hit = tfind(&probe, &sim_ranges, sim_range_cmp);
    return hit ? *(struct sim_range **)hit : NULL;
}

static struct sim_alloc *sim_range_find(uint64_t addr) {
    struct sim_range *r = sim_range_at(addr);
    return r ? r->a : NULL;
}

static void sim_range_add(struct sim_alloc *a, uint64_t base, uint64_t size) {
    struct sim_range *r = malloc(sizeof *r);
    if (!r) return;
    *r = (struct sim_range){base, size ? size : 1, a};
    void *hit = tsearch(r, &sim_ranges, sim_range_cmp);
    if (!hit || *(struct sim_range **)hit != r) free(r);
}

static void sim_range_del(uint64_t base) {
    struct sim_range probe = {base, 1, NULL};
    void *hit = tfind(&probe, &sim_ranges, sim_range_cmp);
    if (!hit) return;
    struct sim_range *r = *(struct sim_range **)hit;
    tdelete(&probe, &sim_ranges, sim_range_cmp);
    free(r);
}

/* Puts a freed range on the list of its span and alignment, first in
 * line for the next request of that exact span. sim_lock held. */
static void sim_hole_put(int d, uint64_t addr, uint64_t span, uint64_t align) {
    struct sim_holes probe, *h;
    memset(&probe, 0, sizeof probe);
    probe.key.span = span; probe.key.align = align; probe.key.device = d;
    HASH_FIND(hh, sim_free_va, &probe.key, sizeof probe.key, h);
    if (!h) {
        h = calloc(1, sizeof *h);
        if (!h) return;
        h->key = probe.key;
        HASH_ADD(hh, sim_free_va, key, sizeof h->key, h);
    }
    struct sim_hole *x = malloc(sizeof *x);
    if (!x) return;
    *x = (struct sim_hole){h->first, addr};
    h->first = x;
}

struct sim_free_range { uint64_t addr, span, align; };

static int sim_free_range_cmp(const void *x, const void *y) {
    const struct sim_free_range *a = x, *b = y;
    return a->addr < b->addr ? -1 : a->addr > b->addr;
}

/* Once the untouched end of device d's address space is too short, a
 * request is served from the freed ranges: every freed range of the device
 * is taken off its list, neighbours are joined (the last one into the
 * untouched end when it borders it), and the smallest joined range that
 * holds span bytes at the alignment is split, the rest going back on the
 * lists. A program whose requests grow every step (a buffer concatenated
 * onto) thus runs out of memory when the device's capacity is spent, not
 * because its address space is: that space is 16 times the capacity, room
 * enough for the gaps live allocations leave between them.
 * Returns 0 when no freed range holds the request. sim_lock held. */
static uint64_t sim_va_reclaim(int d, uint64_t span, uint64_t align) {
    size_t n = 0, cap = 0;
    struct sim_free_range *r = NULL;
    struct sim_holes *h, *tmp;
    HASH_ITER(hh, sim_free_va, h, tmp) {
        if (h->key.device != d) continue;
        while (h->first) {
            struct sim_hole *x = h->first;
            if (n == cap) {
                size_t c = cap ? cap * 2 : 64;
                struct sim_free_range *m = realloc(r, c * sizeof *m);
                if (!m) break;
                r = m, cap = c;
            }
            r[n++] = (struct sim_free_range){x->addr, h->key.span, h->key.align};
            h->first = x->next;
            free(x);
        }
        if (!h->first) { HASH_DEL(sim_free_va, h); free(h); }
    }
    if (n == 0) { free(r); return 0; }
    qsort(r, n, sizeof *r, sim_free_range_cmp);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m && r[m - 1].addr + r[m - 1].span == r[i].addr) {
            r[m - 1].span += r[i].span;
            /* A joined range is aligned as every range is, and no more. */
            r[m - 1].align = SIM_ALIGN;
        } else {
            r[m++] = r[i];
        }
    }
    struct sim_device *v = &sim_dev[d];
    if (r[m - 1].addr + r[m - 1].span == v->next) v->next = r[--m].addr;
    size_t best = m;
    uint64_t at = 0;
    for (size_t i = 0; i < m; i++) {
        uint64_t a = (r[i].addr + align - 1) / align * align;
        if (a + span > r[i].addr + r[i].span) continue;
        if (best == m || r[i].span < r[best].span) best = i, at = a;
    }
    for (size_t i = 0; i < m; i++) {
        if (i != best) { sim_hole_put(d, r[i].addr, r[i].span, r[i].align); continue; }
        if (at > r[i].addr) sim_hole_put(d, r[i].addr, at - r[i].addr, SIM_ALIGN);
        uint64_t end = r[i].addr + r[i].span;
        if (at + span < end) sim_hole_put(d, at + span, end - (at + span), SIM_ALIGN);
    }
    free(r);
    return best == m ? 0 : at;
}

/* Takes span bytes of device d's address space, aligned to align: a freed
 * range of the same span when there is one (the most recently freed, as a
 * driver hands back the address just freed for the same size), else the
 * untouched end of the space, else a piece of the freed ranges joined
 * (sim_va_reclaim). Returns 0 when none holds it. sim_lock held. */
static uint64_t sim_va_take(int d, uint64_t span, uint64_t align) {
    struct sim_holes probe, *h;
    memset(&probe, 0, sizeof probe);
    probe.key.span = span; probe.key.align = align; probe.key.device = d;
    HASH_FIND(hh, sim_free_va, &probe.key, sizeof probe.key, h);
    if (h && h->first) {
        struct sim_hole *x = h->first;
        h->first = x->next;
        uint64_t a = x->addr;
        free(x);
        return a;
    }
    struct sim_device *v = &sim_dev[d];
    if (v->base == 0) return 0;
    /* More than the whole space (a size that overflowed, SIM_TOO_BIG): no
     * range holds it, and the sums below stay within 64 bits. */
    if (span > v->end - v->base || align > v->end - v->base) return 0;
    uint64_t a = (v->next + align - 1) / align * align;
    if (a + span <= v->end) {
        v->next = a + span;
        return a;
    }
    a = sim_va_reclaim(d, span, align);
    if (a) return a;
    /* The reclaim may have given the untouched end back its freed tail. */
    a = (v->next + align - 1) / align * align;
    if (a + span > v->end) return 0;
    v->next = a + span;
    return a;
}

/* Gives a range back for reuse; the host pages behind a large one are
 * returned to the system (their content is gone, as after a real free). */
static void sim_va_give(int d, uint64_t addr, uint64_t span, uint64_t align) {
    uint64_t page = 4096, lo = (addr + page - 1) / page * page, hi = (addr + span) / page * page;
    if (span >= ((uint64_t)64 << 10) && hi > lo) madvise((void *)(uintptr_t)lo, hi - lo, MADV_DONTNEED);
    sim_hole_put(d, addr, span, align);
}

static struct sim_alloc *sim_lookup(uint64_t addr, int kind) {
    struct sim_key k = {addr, kind, 0};
    struct sim_alloc *a;
    HASH_FIND(hh, sim_table, &k, sizeof k, a);
    return a;
}

/* A cuMemCreate handle, made on a device or on the host. sim_lock held. */
static struct sim_alloc *sim_handle(uint64_t h) {
    struct sim_alloc *a = sim_lookup(h, SIM_HANDLE);
    return a ? a : sim_lookup(h, SIM_HOST_HANDLE);
}

static struct sim_alloc *sim_record(uint64_t addr, int kind, size_t bytes, size_t span, int device) {
    struct sim_alloc *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    a->key = (struct sim_key){addr, kind, 0};
    a->bytes = bytes;
    a->span = span;
    a->device = device;
    a->own_ctx = sim_current && sim_current != &sim_dev[sim_current->device].primary;
    a->ctx = a->own_ctx ? sim_current : NULL;
    HASH_ADD(hh, sim_table, key, sizeof a->key, a);
    return a;
}

static int sim_fits(int device, size_t counted) {
    return counted <= sim_capacity - sim_dev[device].used &&
           !(sim_max_block && counted > sim_max_block);
}

/* Reserve bytes on a device and hand out an id for them. Returns
 * CUDA_ERROR_OUT_OF_MEMORY when the device is full. */
static CUresult sim_take(int device, size_t bytes, int kind, int low,
                         uint64_t *out) {
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&sim_lock);
    sim_setup();
    int uncounted = kind == SIM_HOST || kind == SIM_IMPORTED || kind == SIM_HOST_HANDLE;
    size_t counted = uncounted ? 0 : bytes;
    if (!sim_fits(device, counted)) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    uint64_t addr, span = 0;
    if (kind == SIM_HANDLE && sim_free_handle) {
        addr = sim_free_handle;
        sim_free_handle = 0;
    } else if (kind == SIM_HANDLE || kind == SIM_ARRAY || kind == SIM_HOST_HANDLE) {
        addr = sim_next_handle++;
    } else if (kind == SIM_HOST) {
        addr = *out;
        span = bytes;
    } else if (low) {
        addr = sim_next_low;
        sim_next_low += sim_round(bytes, SIM_ALIGN);
    } else {
        /* A gap after each allocation keeps neighbours apart. */
        span = sim_add(sim_round(bytes, SIM_ALIGN), SIM_ALIGN);
        addr = sim_va_take(device, span, SIM_ALIGN);
        if (addr == 0) { r = CUDA_ERROR_OUT_OF_MEMORY; goto out; }
    }
    struct sim_alloc *a = sim_record(addr, kind, kind == SIM_IMPORTED || kind == SIM_HOST_HANDLE ? bytes : counted,
                                     span, device);
    if (!a) { r = CUDA_ERROR_OUT_OF_MEMORY; goto out; }
    if (kind == SIM_DEVICE || kind == SIM_IMPORTED || kind == SIM_HOST)
        sim_range_add(a, addr, low ? 0 : bytes);
    sim_dev[device].used += counted;
    *out = addr;
out:
    pthread_mutex_unlock(&sim_lock);
    return r;
}

/* Forget a recorded object and give back its range. sim_lock held. */
static void sim_drop(struct sim_alloc *a) {
    int kind = a->key.kind;
    if (kind == SIM_DEVICE || kind == SIM_IMPORTED || kind == SIM_HOST || kind == SIM_POOLED ||
        kind == SIM_REGISTERED)
        sim_range_del(a->key.addr);
    if ((kind == SIM_DEVICE || kind == SIM_IMPORTED || kind == SIM_POOLED) && a->span)
        sim_va_give(a->device, a->key.addr, a->span, SIM_ALIGN);
    HASH_DEL(sim_table, a);
    free(a);
}

/* Give back a's memory and forget it. sim_lock held. */
static void sim_give_locked(struct sim_alloc *a) {
    int kind = a->key.kind;
    if (kind != SIM_IMPORTED && kind != SIM_HOST_HANDLE) sim_dev[a->device].used -= a->bytes;
    if (kind == SIM_HANDLE && sim_reuse_handles) sim_free_handle = a->key.addr;
    sim_drop(a);
}

/* Give back what sim_take handed out; unknown ids are the caller's error. */
static CUresult sim_give(uint64_t addr, int kind) {
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_lock);
    struct sim_alloc *a = sim_lookup(addr, kind);
    if (a) {
        sim_give_locked(a);
        r = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&sim_lock);
    return r;
}

/* ---------------------------------------------------------------- basics */

SIM_EXPORT CUresult cuInit(unsigned int flags) {
    (void)flags;
    pthread_mutex_lock(&sim_lock);
    sim_setup();
    pthread_mutex_unlock(&sim_lock);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDriverGetVersion(int *v) {
    if (!v) return CUDA_ERROR_INVALID_VALUE;
    *v = 13000;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGetCount(int *n) {
    if (!n) return CUDA_ERROR_INVALID_VALUE;
    cuInit(0);
    *n = sim_ndev;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGet(CUdevice *d, int ordinal) {
    cuInit(0);
    if (!d || ordinal < 0 || ordinal >= sim_ndev) return CUDA_ERROR_INVALID_DEVICE;
    *d = ordinal;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice d) {
    if (!name || len <= 0 || d < 0 || d >= sim_ndev) return CUDA_ERROR_INVALID_VALUE;
    snprintf(name, (size_t)len, "vramtrace simulated GPU");
    return CUDA_SUCCESS;
}

static CUresult sim_uuid(CUuuid *u, CUdevice d) {
    if (!u || d < 0 || d >= sim_ndev) return CUDA_ERROR_INVALID_VALUE;
    for (int i = 0; i < 16; i++) u->bytes[i] = (char)(0x10 * d + i);
    return CUDA_SUCCESS;
}
SIM_EXPORT CUresult cuDeviceGetUuid(CUuuid *u, CUdevice d) { return sim_uuid(u, d); }
SIM_EXPORT CUresult cuDeviceGetUuid_v2(CUuuid *u, CUdevice d) { return sim_uuid(u, d); }

SIM_EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice d) {
    cuInit(0);
    if (!bytes || d < 0 || d >= sim_ndev) return CUDA_ERROR_INVALID_VALUE;
    *bytes = sim_capacity;
    return CUDA_SUCCESS;
}

/* Attributes of an H200-like device (compute capability 9.0, 132 SMs);
 * any attribute not listed reads 0. */
static int sim_attribute(CUdevice_attribute a, int d) {
    switch (a) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: return 64;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: return 2147483647;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: return 49152;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY: return 65536;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: return 32;
    case CU_DEVICE_ATTRIBUTE_MAX_PITCH: return 2147483647;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: return 65536;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: return 1980000;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT: return 512;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT: return 32;
    case CU_DEVICE_ATTRIBUTE_GPU_OVERLAP: return 1;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: return 132;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: return 1;
    case CU_DEVICE_ATTRIBUTE_SURFACE_ALIGNMENT: return 512;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS: return 1;
    case CU_DEVICE_ATTRIBUTE_ECC_ENABLED: return 1;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: return d + 1;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: return 3;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: return 1;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: return 2619000;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: return 6144;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: return 52428800;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: return 2048;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: return 9;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: return 0;
    case CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: return 233472;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR: return 65536;
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY: return 1;
    case CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD_GROUP_ID: return d;
    case CU_DEVICE_ATTRIBUTE_SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO: return 2;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS: return 1;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM: return 1;
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: return 1;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: return 232448;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR: return 32;
    case CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE: return 32505856;
    case CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE: return 134213632;
    case CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK: return 1024;
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES: return CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    case CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH: return 1;
    case CU_DEVICE_ATTRIBUTE_DEFERRED_MAPPING_CUDA_ARRAY_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED: return 0;
    default: return 0;
    }
}

SIM_EXPORT CUresult cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d) {
    cuInit(0);
    if (!v) return CUDA_ERROR_INVALID_VALUE;
    if (d < 0 || d >= sim_ndev) return CUDA_ERROR_INVALID_DEVICE;
    if ((int)a <= 0 || a >= CU_DEVICE_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
    *v = sim_attribute(a, d);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGetPCIBusId(char *id, int len, CUdevice d) {
    cuInit(0);
    if (!id || len <= 0) return CUDA_ERROR_INVALID_VALUE;
    if (d < 0 || d >= sim_ndev) return CUDA_ERROR_INVALID_DEVICE;
    snprintf(id, (size_t)len, "0000:%02x:00.0", d + 1);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceCanAccessPeer(int *can, CUdevice d, CUdevice peer) {
    cuInit(0);
    if (!can) return CUDA_ERROR_INVALID_VALUE;
    if (d < 0 || d >= sim_ndev || peer < 0 || peer >= sim_ndev) return CUDA_ERROR_INVALID_DEVICE;
    *can = d != peer;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------- contexts */

static struct sim_ctx *sim_ctx_of(CUcontext c) {
    struct sim_ctx *x = (struct sim_ctx *)c;
    return x && x->magic == SIM_CTX_MAGIC ? x : NULL;
}

SIM_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice d) {
    cuInit(0);
    if (!ctx || d < 0 || d >= sim_ndev) return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&sim_lock);
    sim_dev[d].retained++;
    pthread_mutex_unlock(&sim_lock);
    *ctx = (CUcontext)&sim_dev[d].primary;
    return CUDA_SUCCESS;
}

static void sim_reset_locked(CUdevice d);

/* "The context is automatically reset once the last reference to it is
 * released"; "releasing a primary context that has not been previously
 * retained will fail with CUDA_ERROR_INVALID_CONTEXT". */
SIM_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) {
    sim_count("cuDevicePrimaryCtxRelease_v2");
    if (d < 0 || d >= sim_ndev) return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&sim_lock);
    CUresult r = CUDA_ERROR_INVALID_CONTEXT;
    if (sim_dev[d].retained > 0) {
        r = CUDA_SUCCESS;
        if (--sim_dev[d].retained == 0) sim_reset_locked(d);
    }
    pthread_mutex_unlock(&sim_lock);
    return r;
}

SIM_EXPORT CUresult cuDevicePrimaryCtxGetState(CUdevice d, unsigned int *flags, int *active) {
    cuInit(0);
    if (!flags || !active) return CUDA_ERROR_INVALID_VALUE;
    if (d < 0 || d >= sim_ndev) return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&sim_lock);
    *flags = sim_dev[d].primary_flags;
    *active = sim_dev[d].retained > 0;
    pthread_mutex_unlock(&sim_lock);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice d, unsigned int flags) {
    if (d < 0 || d >= sim_ndev) return CUDA_ERROR_INVALID_DEVICE;
    sim_dev[d].primary_flags = flags;
    return CUDA_SUCCESS;
}

static void sim_pool_trim(struct sim_pool *p, uint64_t keep);

/* "Destroy all allocations and reset all state on the primary context":
 * what the device's memory held (cuMemAlloc, pitched, managed, arrays,
 * IPC mappings) and the pinned host memory made in the context ("memory
 * allocations by cudaMalloc, cudaMallocHost, cudaMallocManaged and
 * cudaMallocPitch", cudaDeviceReset's documentation says) is given back,
 * freed or not, and the pools' cache; pool allocations ("will not destroy
 * memory allocations by cudaMallocAsync() and cudaMallocFromPoolAsync()"),
 * cuMemCreate's handles, registered host memory and what was made in a
 * context of cuCtxCreate stay. */
static CUresult sim_primary_reset(const char *api, CUdevice d) {
    sim_count(api);
    if (d < 0 || d >= sim_ndev) return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&sim_lock);
    sim_reset_locked(d);
    pthread_mutex_unlock(&sim_lock);
    return CUDA_SUCCESS;
}

/* The reset itself, under sim_lock. */
static void sim_reset_locked(CUdevice d) {
    sim_setup();
    struct sim_alloc *a, *next;
    HASH_ITER(hh, sim_table, a, next) {
        int k = a->key.kind;
        if (a->device != d || a->own_ctx ||
            !(k == SIM_DEVICE || k == SIM_ARRAY || k == SIM_HOST || k == SIM_IMPORTED))
            continue;
        if (k != SIM_IMPORTED) sim_dev[d].used -= a->bytes;
        void *host = k == SIM_HOST ? (void *)(uintptr_t)a->key.addr : NULL;
        sim_drop(a);
        free(host);   /* unmapped, as the driver's is */
    }
    sim_pool_trim(&sim_dev[d].default_pool, 0);
    if (sim_dev[d].current_pool != &sim_dev[d].default_pool) sim_pool_trim(sim_dev[d].current_pool, 0);
}

/* Each export calls the model itself: a call from one export to another
 * would reach a preloaded library's export of the same name. */
SIM_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice d) {
    return sim_primary_reset("cuDevicePrimaryCtxReset_v2", d);
}

SIM_EXPORT CUresult cuDevicePrimaryCtxReset(CUdevice d) {
    return sim_primary_reset("cuDevicePrimaryCtxReset", d);
}

SIM_EXPORT CUresult cuCtxSetCurrent(CUcontext ctx) {
    if (ctx == NULL) { sim_current = NULL; return CUDA_SUCCESS; }
    struct sim_ctx *c = sim_ctx_of(ctx);
    if (!c) return CUDA_ERROR_INVALID_CONTEXT;
    sim_current = c;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxGetCurrent(CUcontext *ctx) {
    if (!ctx) return CUDA_ERROR_INVALID_VALUE;
    *ctx = (CUcontext)sim_current;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
    struct sim_ctx *c = sim_ctx_of(ctx);
    if (!c) return CUDA_ERROR_INVALID_CONTEXT;
    if (sim_depth >= (int)(sizeof sim_stack / sizeof sim_stack[0])) return CUDA_ERROR_OUT_OF_MEMORY;
    sim_stack[sim_depth++] = sim_current;
    sim_current = c;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxPopCurrent_v2(CUcontext *ctx) {
    if (!sim_current) return CUDA_ERROR_INVALID_CONTEXT;
    if (ctx) *ctx = (CUcontext)sim_current;
    sim_current = sim_depth > 0 ? sim_stack[--sim_depth] : NULL;
    return CUDA_SUCCESS;
}

/* A context made by cuCtxCreate: its own handle on a device, made current. */
static CUresult sim_ctx_create(CUcontext *ctx, CUdevice d) {
    cuInit(0);
    if (!ctx) return CUDA_ERROR_INVALID_VALUE;
    if (d < 0 || d >= sim_ndev) return CUDA_ERROR_INVALID_DEVICE;
    struct sim_ctx *c = malloc(sizeof *c);
    if (!c) return CUDA_ERROR_OUT_OF_MEMORY;
    *c = (struct sim_ctx){SIM_CTX_MAGIC, d};
    *ctx = (CUcontext)c;
    return cuCtxPushCurrent_v2(*ctx);
}

SIM_EXPORT CUresult cuCtxCreate_v2(CUcontext *ctx, unsigned int flags, CUdevice d) {
    (void)flags;
    return sim_ctx_create(ctx, d);
}

SIM_EXPORT CUresult cuCtxCreate_v4(CUcontext *ctx, CUctxCreateParams *params,
                                   unsigned int flags, CUdevice d) {
    (void)params; (void)flags;
    return sim_ctx_create(ctx, d);
}

/* "Destroys and cleans up all resources associated with the context ...
 * memory allocations by cuMemAlloc(), cuMemAllocHost(), cuMemAllocManaged()
 * and cuMemAllocPitch()" and its CUarrays; not cuMemCreate's, nor
 * stream-ordered ones (no context's). A destroyed context current to the
 * calling thread is popped. */
SIM_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx) {
    sim_count("cuCtxDestroy_v2");
    struct sim_ctx *c = sim_ctx_of(ctx);
    if (!c) return CUDA_ERROR_INVALID_CONTEXT;
    if (c == &sim_dev[c->device].primary) return CUDA_ERROR_INVALID_CONTEXT;
    pthread_mutex_lock(&sim_lock);
    struct sim_alloc *a, *next;
    HASH_ITER(hh, sim_table, a, next) {
        int k = a->key.kind;
        if (a->ctx != c || !(k == SIM_DEVICE || k == SIM_HOST || k == SIM_ARRAY)) continue;
        void *host = k == SIM_HOST ? (void *)(uintptr_t)a->key.addr : NULL;
        sim_dev[a->device].used -= a->bytes;
        sim_drop(a);
        free(host);
    }
    pthread_mutex_unlock(&sim_lock);
    if (sim_current == c) sim_current = sim_depth > 0 ? sim_stack[--sim_depth] : NULL;
    c->magic = 0;
    free(c);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxGetDevice(CUdevice *d) {
    if (!d) return CUDA_ERROR_INVALID_VALUE;
    *d = sim_device_now();
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxGetStreamPriorityRange(int *least, int *greatest) {
    if (least) *least = 0;
    if (greatest) *greatest = -5;
    return CUDA_SUCCESS;
}

static void sim_trim_pools(int d);

SIM_EXPORT CUresult cuCtxSynchronize(void) {
    pthread_mutex_lock(&sim_lock);
    sim_trim_pools(sim_device_now());
    pthread_mutex_unlock(&sim_lock);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxEnablePeerAccess(CUcontext peer, unsigned int flags) {
    (void)flags;
    return sim_ctx_of(peer) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

SIM_EXPORT CUresult cuMemGetInfo_v2(size_t *free_b, size_t *total) {
    sim_count("cuMemGetInfo_v2");
    pthread_mutex_lock(&sim_lock);
    sim_setup();
    int d = sim_device_now();
    if (free_b) *free_b = sim_capacity - sim_dev[d].used;
    if (total) *total = sim_capacity;
    pthread_mutex_unlock(&sim_lock);
    return CUDA_SUCCESS;
}

/* The driver's documented names and descriptions of the codes it returns. */
static const struct { CUresult code; const char *name, *text; } sim_errors[] = {
#define E(c, s) {c, #c, s}
    E(CUDA_SUCCESS, "no error"),
    E(CUDA_ERROR_INVALID_VALUE, "invalid argument"),
    E(CUDA_ERROR_OUT_OF_MEMORY, "out of memory"),
    E(CUDA_ERROR_NOT_INITIALIZED, "initialization error"),
    E(CUDA_ERROR_DEINITIALIZED, "driver shutting down"),
    E(CUDA_ERROR_NO_DEVICE, "no CUDA-capable device is detected"),
    E(CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal"),
    E(CUDA_ERROR_INVALID_CONTEXT, "invalid device context"),
    E(CUDA_ERROR_INVALID_HANDLE, "invalid resource handle"),
    E(CUDA_ERROR_NOT_FOUND, "named symbol not found"),
    E(CUDA_ERROR_NOT_READY, "device not ready"),
    E(CUDA_ERROR_ALREADY_MAPPED, "resource already mapped"),
    E(CUDA_ERROR_NOT_MAPPED, "resource not mapped"),
    E(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, "peer access is already enabled"),
    E(CUDA_ERROR_NOT_PERMITTED, "operation not permitted"),
    E(CUDA_ERROR_NOT_SUPPORTED, "operation not supported"),
    E(CUDA_ERROR_UNKNOWN, "unknown error"),
#undef E
};

SIM_EXPORT CUresult cuGetErrorName(CUresult e, const char **s) {
    if (!s) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < sizeof sim_errors / sizeof sim_errors[0]; i++)
        if (sim_errors[i].code == e) { *s = sim_errors[i].name; return CUDA_SUCCESS; }
    *s = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

SIM_EXPORT CUresult cuGetErrorString(CUresult e, const char **s) {
    if (!s) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < sizeof sim_errors / sizeof sim_errors[0]; i++)
        if (sim_errors[i].code == e) { *s = sim_errors[i].text; return CUDA_SUCCESS; }
    *s = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

/* ----------------------------------------------------------- allocation */

static CUresult sim_alloc_device(const char *api, CUdeviceptr *dptr, size_t bytes) {
    sim_count(api);
    if (!dptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
    uint64_t a;
    CUresult r = sim_take(sim_device_now(), bytes, SIM_DEVICE, 0, &a);
    if (r == CUDA_SUCCESS) *dptr = a;
    return r;
}

static CUresult sim_pool_release(CUdeviceptr ptr);

/* cuMemFree frees what cuMemAlloc made, and also what a pool handed out
 * (after a synchronization, on a real device). */
static CUresult sim_free_device(const char *api, CUdeviceptr p) {
    sim_count(api);
    if (p == 0) return CUDA_SUCCESS;
    CUresult r = sim_give(p, SIM_DEVICE);
    return r == CUDA_SUCCESS ? r : sim_pool_release(p);
}

SIM_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytes) {
    return sim_alloc_device("cuMemAlloc_v2", dptr, bytes);
}

SIM_EXPORT CUresult cuMemFree_v2(CUdeviceptr p) {
    int done = 0;
    CUresult g = sim_graph_free(NULL, p, &done);
    if (done) { sim_count("cuMemFree_v2"); return g; }
    return sim_free_device("cuMemFree_v2", p);
}

/* The v1 API's 32-bit addresses are not backed by memory. */
SIM_EXPORT CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytes) {
    sim_count("cuMemAlloc");
    if (!dptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
    uint64_t a;
    CUresult r = sim_take(sim_device_now(), bytes, SIM_DEVICE, 1, &a);
    if (r == CUDA_SUCCESS) *dptr = (CUdeviceptr_v1)a;
    return r;
}

SIM_EXPORT CUresult cuMemFree(CUdeviceptr_v1 p) {
    return sim_free_device("cuMemFree", p);
}

static uint64_t sim_pitch(size_t width) { return sim_round(width, SIM_ALIGN); }

SIM_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch,
                                       size_t width, size_t height,
                                       unsigned int elem) {
    sim_count("cuMemAllocPitch_v2");
    if (!dptr || !pitch || width == 0 || height == 0 ||
        (elem != 4 && elem != 8 && elem != 16))
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t a;
    uint64_t p = sim_pitch(width);
    CUresult r = sim_take(sim_device_now(), sim_mul(p, height), SIM_DEVICE, 0, &a);
    if (r == CUDA_SUCCESS) { *dptr = a; *pitch = p; }
    return r;
}

/* "flags must be one of CU_MEM_ATTACH_GLOBAL or CU_MEM_ATTACH_HOST"
 * (cuda.h): any other is the driver's INVALID_VALUE. */
SIM_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytes,
                                      unsigned int flags) {
    if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST) {
        sim_count("cuMemAllocManaged");
        return CUDA_ERROR_INVALID_VALUE;
    }
    return sim_alloc_device("cuMemAllocManaged", dptr, bytes);
}

static CUresult sim_host_alloc(const char *api, void **pp, size_t bytes) {
    sim_count(api);
    if (!pp || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
    void *p = NULL;
    if (posix_memalign(&p, 4096, bytes) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
    uint64_t a = (uint64_t)(uintptr_t)p;
    CUresult r = sim_take(sim_device_now(), bytes, SIM_HOST, 0, &a);
    if (r != CUDA_SUCCESS) { free(p); return r; }
    *pp = p;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemAllocHost_v2(void **pp, size_t bytes) {
    return sim_host_alloc("cuMemAllocHost_v2", pp, bytes);
}

SIM_EXPORT CUresult cuMemAllocHost(void **pp, unsigned int bytes) {
    return sim_host_alloc("cuMemAllocHost", pp, bytes);
}

SIM_EXPORT CUresult cuMemHostAlloc(void **pp, size_t bytes, unsigned int flags) {
    (void)flags;
    return sim_host_alloc("cuMemHostAlloc", pp, bytes);
}

SIM_EXPORT CUresult cuMemFreeHost(void *p) {
    sim_count("cuMemFreeHost");
    CUresult r = sim_give((uint64_t)(uintptr_t)p, SIM_HOST);
    if (r == CUDA_SUCCESS) free(p);
    return r;
}

/* Registered host memory is the program's own, already usable by the
 * simulated device. As cuda.h says: a range that overlaps one already
 * registered (or pinned host memory) is refused with
 * CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED; cuMemHostUnregister takes only
 * a base address that cuMemHostRegister was given, else
 * CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED. */
static CUresult sim_host_register(const char *api, void *p, size_t bytes, unsigned int flags) {
    sim_count(api);
    const unsigned known = CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
                           CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY;
    if (!p || bytes == 0 || (flags & ~known)) return CUDA_ERROR_INVALID_VALUE;
    uint64_t a = (uint64_t)(uintptr_t)p;
    if (bytes > UINT64_MAX - a) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&sim_lock);
    sim_setup();
    struct sim_range probe = {a, bytes, NULL};
    if (tfind(&probe, &sim_ranges, sim_range_cmp)) {
        r = CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    } else {
        struct sim_alloc *x = sim_record(a, SIM_REGISTERED, 0, bytes, sim_device_now());
        if (x) sim_range_add(x, a, bytes);
        else r = CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_unlock(&sim_lock);
    return r;
}

SIM_EXPORT CUresult cuMemHostRegister_v2(void *p, size_t bytes, unsigned int flags) {
    return sim_host_register("cuMemHostRegister_v2", p, bytes, flags);
}

SIM_EXPORT CUresult cuMemHostRegister(void *p, size_t bytes, unsigned int flags) {
    return sim_host_register("cuMemHostRegister", p, bytes, flags);
}

SIM_EXPORT CUresult cuMemHostUnregister(void *p) {
    sim_count("cuMemHostUnregister");
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = sim_give((uint64_t)(uintptr_t)p, SIM_REGISTERED);
    return r == CUDA_SUCCESS ? r : CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
}

/* ------------------------------------------------- stream-ordered pools */

/* Hands back what pool p caches beyond keep bytes to its device. sim_lock
 * held. */
static void sim_pool_trim(struct sim_pool *p, uint64_t keep) {
    uint64_t floor = p->used > keep ? p->used : keep;
    if (p->reserved <= floor) return;
    if (!p->host) sim_dev[p->device].used -= p->reserved - floor;
    p->reserved = floor;
}

/* At a synchronization, each pool of device d keeps at most its release
 * threshold of unused memory. sim_lock held. */
static void sim_trim_pools(int d) {
    struct sim_pool *p = &sim_dev[d].default_pool;
    sim_pool_trim(p, p->threshold);
    if (sim_dev[d].current_pool != p)
        sim_pool_trim(sim_dev[d].current_pool, sim_dev[d].current_pool->threshold);
}

static struct sim_stream *sim_stream_of(CUstream s);
static CUresult sim_graph_alloc(struct sim_stream *st, CUdeviceptr *dptr, size_t bytes, struct sim_pool *p);

/* From pool p, or (p NULL) from the current pool of stream s's device (the
 * current context's for the default streams); on a stream being captured,
 * an allocation node of its graph. */
static CUresult sim_pool_alloc(const char *api, CUdeviceptr *dptr, size_t bytes,
                               struct sim_pool *p, CUstream s) {
    sim_count(api);
    if (!dptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
    struct sim_stream *st = sim_stream_of(s);
    if (st && st->capturing) return sim_graph_alloc(st, dptr, bytes, p);
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&sim_lock);
    sim_setup();
    if (!p) p = sim_dev[st ? st->device : sim_device_now()].current_pool;
    uint64_t size = sim_round(bytes, SIM_ALIGN), cached = p->reserved - p->used;
    uint64_t need = size > cached ? size - cached : 0;
    if ((!p->host && !sim_fits(p->device, need)) || (sim_max_block && bytes > sim_max_block)) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    uint64_t span = sim_add(size, SIM_ALIGN);
    uint64_t addr = sim_va_take(p->device, span, SIM_ALIGN);
    struct sim_alloc *a = addr ? sim_record(addr, SIM_POOLED, size, span, p->device) : NULL;
    if (!a) { r = CUDA_ERROR_OUT_OF_MEMORY; goto out; }
    a->pool = p;
    sim_range_add(a, addr, bytes);
    if (!p->host) sim_dev[p->device].used += need;
    p->reserved += need;
    p->used += size;
    if (p->reserved > p->reserved_high) p->reserved_high = p->reserved;
    if (p->used > p->used_high) p->used_high = p->used;
    *dptr = addr;
out:
    pthread_mutex_unlock(&sim_lock);
    return r;
}

/* Returns a pool allocation to its pool, which keeps the memory reserved;
 * the last of a destroyed pool's allocations releases the pool ("the
 * resources associated with the pool will be released automatically once
 * there are no more outstanding allocations", cuMemPoolDestroy). */
static CUresult sim_pool_release(CUdeviceptr ptr) {
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_lock);
    struct sim_alloc *a = sim_lookup(ptr, SIM_POOLED);
    if (a) {
        struct sim_pool *p = a->pool;
        p->used -= a->bytes;
        sim_drop(a);
        if (p->destroyed && p->used == 0) {
            sim_pool_trim(p, 0);
            free(p);
        }
        r = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&sim_lock);
    return r;
}

/* cuMemFreeAsync frees pool memory, and also memory of cuMemAlloc, and a
 * graph's allocation (a free node while its stream is captured). */
static CUresult sim_pool_free(const char *api, CUdeviceptr ptr, CUstream s) {
    sim_count(api);
    if (ptr == 0) return CUDA_ERROR_INVALID_VALUE;
    int done = 0;
    CUresult g = sim_graph_free(sim_stream_of(s), ptr, &done);
    if (done) return g;
    CUresult r = sim_pool_release(ptr);
    return r == CUDA_SUCCESS ? r : sim_give(ptr, SIM_DEVICE);
}

SIM_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytes, CUstream s) {
    return sim_pool_alloc("cuMemAllocAsync", dptr, bytes, NULL, s);
}

SIM_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytes, CUstream s) {
    return sim_pool_alloc("cuMemAllocAsync_ptsz", dptr, bytes, NULL, s);
}

SIM_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytes,
                                            CUmemoryPool pool, CUstream s) {
    if (!pool) return CUDA_ERROR_INVALID_VALUE;
    return sim_pool_alloc("cuMemAllocFromPoolAsync", dptr, bytes, (struct sim_pool *)pool, s);
}

SIM_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytes,
                                                 CUmemoryPool pool, CUstream s) {
    if (!pool) return CUDA_ERROR_INVALID_VALUE;
    return sim_pool_alloc("cuMemAllocFromPoolAsync_ptsz", dptr, bytes, (struct sim_pool *)pool, s);
}

SIM_EXPORT CUresult cuMemFreeAsync(CUdeviceptr p, CUstream s) {
    return sim_pool_free("cuMemFreeAsync", p, s);
}

SIM_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr p, CUstream s) {
    return sim_pool_free("cuMemFreeAsync_ptsz", p, s);
}

SIM_EXPORT CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice d) {
    cuInit(0);
    if (!pool) return CUDA_ERROR_INVALID_VALUE;
    if (d < 0 || d >= sim_ndev) return CUDA_ERROR_INVALID_DEVICE;
    *pool = (CUmemoryPool)&sim_dev[d].default_pool;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice d) {
    cuInit(0);
    if (!pool) return CUDA_ERROR_INVALID_VALUE;
    if (d < 0 || d >= sim_ndev) return CUDA_ERROR_INVALID_DEVICE;
    *pool = (CUmemoryPool)sim_dev[d].current_pool;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceSetMemPool(CUdevice d, CUmemoryPool pool) {
    if (!pool) return CUDA_ERROR_INVALID_VALUE;
    if (d < 0 || d >= sim_ndev) return CUDA_ERROR_INVALID_DEVICE;
    sim_dev[d].current_pool = (struct sim_pool *)pool;
    return CUDA_SUCCESS;
}

static int sim_location_is_host(const CUmemLocation *l) {
    return l->type == CU_MEM_LOCATION_TYPE_HOST || l->type == CU_MEM_LOCATION_TYPE_HOST_NUMA ||
           l->type == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT;
}

/* The host's default pool (and current pool): its address space is device
 * 0's, its bytes count against no device. */
static struct sim_pool sim_host_pool = {0, 1, {1, 1, 1}, 0, 0, 0, 0, 0, 0};

SIM_EXPORT CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props) {
    cuInit(0);
    sim_count("cuMemPoolCreate");
    if (!pool || !props) return CUDA_ERROR_INVALID_VALUE;
    int host = sim_location_is_host(&props->location);
    if (!host && props->location.type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
    if (!host && (props->location.id < 0 || props->location.id >= sim_ndev)) return CUDA_ERROR_INVALID_DEVICE;
    struct sim_pool *p = malloc(sizeof *p);
    if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
    sim_pool_init(p, host ? 0 : props->location.id);
    p->host = host;
    *pool = (CUmemoryPool)p;
    return CUDA_SUCCESS;
}

/* CUDA 13: a location's default pool, and its current pool. */
SIM_EXPORT CUresult cuMemGetDefaultMemPool(CUmemoryPool *pool, CUmemLocation *location, CUmemAllocationType type) {
    cuInit(0);
    sim_count("cuMemGetDefaultMemPool");
    if (!pool || !location || type != CU_MEM_ALLOCATION_TYPE_PINNED) return CUDA_ERROR_INVALID_VALUE;
    if (sim_location_is_host(location)) {
        *pool = (CUmemoryPool)&sim_host_pool;
        return CUDA_SUCCESS;
    }
    if (location->type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
    return cuDeviceGetDefaultMemPool(pool, location->id);
}

SIM_EXPORT CUresult cuMemGetMemPool(CUmemoryPool *pool, CUmemLocation *location, CUmemAllocationType type) {
    cuInit(0);
    if (!pool || !location || type != CU_MEM_ALLOCATION_TYPE_PINNED) return CUDA_ERROR_INVALID_VALUE;
    if (sim_location_is_host(location)) {
        *pool = (CUmemoryPool)&sim_host_pool;
        return CUDA_SUCCESS;
    }
    if (location->type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
    return cuDeviceGetMemPool(pool, location->id);
}

SIM_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool) {
    struct sim_pool *p = (struct sim_pool *)pool;
    sim_count("cuMemPoolDestroy");
    if (!p || p == &sim_host_pool || p == &sim_dev[p->device].default_pool) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_lock);
    sim_pool_trim(p, 0);
    if (sim_dev[p->device].current_pool == p) sim_dev[p->device].current_pool = &sim_dev[p->device].default_pool;
    /* A pool with live allocations is kept for their frees, the last of
     * which releases it (sim_pool_release). */
    if (p->used == 0) free(p);
    else p->destroyed = 1;
    pthread_mutex_unlock(&sim_lock);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t keep) {
    if (!pool) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_lock);
    sim_pool_trim((struct sim_pool *)pool, keep);
    pthread_mutex_unlock(&sim_lock);
    return CUDA_SUCCESS;
}

/* One attribute of a pool, read (set 0) or written (set 1) through value. */
static CUresult pool_int(int *field, void *value, int set) {
    if (set) *field = *(int *)value;
    else *(int *)value = *field;
    return CUDA_SUCCESS;
}

static CUresult pool_u64(uint64_t *field, void *value, int set) {
    if (set) *field = *(cuuint64_t *)value;
    else *(cuuint64_t *)value = *field;
    return CUDA_SUCCESS;
}

/* A high-water mark: written only as 0, which resets it to `now`. */
static CUresult pool_high(uint64_t *high, uint64_t now, void *value, int set) {
    if (!set) return pool_u64(high, value, 0);
    if (*(cuuint64_t *)value != 0) return CUDA_ERROR_INVALID_VALUE;
    *high = now;
    return CUDA_SUCCESS;
}

/* cuMemPoolGetAttribute and cuMemPoolSetAttribute: the current amounts are
 * read only. */
static CUresult pool_attribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value, int set) {
    struct sim_pool *p = (struct sim_pool *)pool;
    if (!p || !value) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_lock);
    switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES: r = pool_int(&p->reuse[0], value, set); break;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC: r = pool_int(&p->reuse[1], value, set); break;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES: r = pool_int(&p->reuse[2], value, set); break;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: r = pool_u64(&p->threshold, value, set); break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: if (!set) r = pool_u64(&p->reserved, value, 0); break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: r = pool_high(&p->reserved_high, p->reserved, value, set); break;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: if (!set) r = pool_u64(&p->used, value, 0); break;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH: r = pool_high(&p->used_high, p->used, value, set); break;
    default: break;
    }
    pthread_mutex_unlock(&sim_lock);
    return r;
}

SIM_EXPORT CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value) {
    return pool_attribute(pool, attr, value, 1);
}

SIM_EXPORT CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value) {
    return pool_attribute(pool, attr, value, 0);
}

SIM_EXPORT CUresult cuMemPoolSetAccess(CUmemoryPool pool, const CUmemAccessDesc *map, size_t count) {
    (void)map; (void)count;
    return pool ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* ------------------------------------------------------- arrays, IPC */

static size_t sim_format_bytes(CUarray_format f) {
    switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8: case CU_AD_FORMAT_SIGNED_INT8: return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16: case CU_AD_FORMAT_SIGNED_INT16: case CU_AD_FORMAT_HALF: return 2;
    default: return 4;
    }
}

static size_t dim(size_t v) { return v ? v : 1; }

/* An array's channels "may be 1, 2, or 4" (cuda.h): none, or more than
 * 4, is INVALID_VALUE. */
static int sim_channels_bad(unsigned ch) { return ch == 0 || ch > 4; }

SIM_EXPORT CUresult cuArrayCreate_v2(CUarray *h, const CUDA_ARRAY_DESCRIPTOR *d) {
    sim_count("cuArrayCreate_v2");
    if (!h || !d || d->Width == 0 || sim_channels_bad(d->NumChannels)) return CUDA_ERROR_INVALID_VALUE;
    uint64_t a;
    CUresult r = sim_take(sim_device_now(),
                          sim_mul(sim_mul(d->Width, dim(d->Height)), d->NumChannels * sim_format_bytes(d->Format)),
                          SIM_ARRAY, 0, &a);
    if (r == CUDA_SUCCESS) *h = (CUarray)(uintptr_t)a;
    return r;
}

SIM_EXPORT CUresult cuArray3DCreate_v2(CUarray *h, const CUDA_ARRAY3D_DESCRIPTOR *d) {
    sim_count("cuArray3DCreate_v2");
    if (!h || !d || d->Width == 0 || sim_channels_bad(d->NumChannels)) return CUDA_ERROR_INVALID_VALUE;
    uint64_t a;
    CUresult r = sim_take(sim_device_now(),
                          sim_mul(sim_mul(sim_mul(d->Width, dim(d->Height)), dim(d->Depth)),
                                  d->NumChannels * sim_format_bytes(d->Format)),
                          SIM_ARRAY, 0, &a);
    if (r == CUDA_SUCCESS) *h = (CUarray)(uintptr_t)a;
    return r;
}

SIM_EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray *h, const CUDA_ARRAY3D_DESCRIPTOR *d,
                                           unsigned int levels) {
    sim_count("cuMipmappedArrayCreate");
    if (!h || !d || d->Width == 0 || sim_channels_bad(d->NumChannels) || levels == 0) return CUDA_ERROR_INVALID_VALUE;
    uint64_t bytes = 0;
    for (unsigned l = 0; l < levels; l++) {
        size_t w = l < 64 ? d->Width >> l : 0, h = l < 64 ? d->Height >> l : 0, z = l < 64 ? d->Depth >> l : 0;
        bytes = sim_add(bytes, sim_mul(sim_mul(sim_mul(dim(w), dim(h)), dim(z)),
                                       d->NumChannels * sim_format_bytes(d->Format)));
    }
    uint64_t a;
    CUresult r = sim_take(sim_device_now(), bytes, SIM_ARRAY, 0, &a);
    if (r == CUDA_SUCCESS) *h = (CUmipmappedArray)(uintptr_t)a;
    return r;
}

/* The size an array was made with; a NULL handle is refused and counted. */
static CUresult sim_requirements(const char *null_name, CUDA_ARRAY_MEMORY_REQUIREMENTS *req, uint64_t h) {
    if (h == 0) {
        sim_count(null_name);
        return CUDA_ERROR_INVALID_HANDLE;
    }
    if (!req) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&sim_lock);
    struct sim_alloc *a = sim_lookup(h, SIM_ARRAY);
    if (a) {
        memset(req, 0, sizeof *req);
        req->size = a->bytes;
        req->alignment = SIM_ALIGN;
        r = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&sim_lock);
    return r;
}

SIM_EXPORT CUresult cuArrayGetMemoryRequirements(CUDA_ARRAY_MEMORY_REQUIREMENTS *req, CUarray a, CUdevice d) {
    (void)d;
    return sim_requirements("cuArrayGetMemoryRequirements(NULL)", req, (uint64_t)(uintptr_t)a);
}

SIM_EXPORT CUresult cuMipmappedArrayGetMemoryRequirements(CUDA_ARRAY_MEMORY_REQUIREMENTS *req,
                                                          CUmipmappedArray m, CUdevice d) {
    (void)d;
    return sim_requirements("cuMipmappedArrayGetMemoryRequirements(NULL)", req, (uint64_t)(uintptr_t)m);
}

SIM_EXPORT CUresult cuArrayDestroy(CUarray h) {
    sim_count("cuArrayDestroy");
    return sim_give((uint64_t)(uintptr_t)h, SIM_ARRAY);
}

SIM_EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray h) {
    sim_count("cuMipmappedArrayDestroy");
    return sim_give((uint64_t)(uintptr_t)h, SIM_ARRAY);
}

/* An IPC handle of the simulation carries the size of the memory it names
 * and that memory's address; opening it maps "another process's" memory,
 * which this device's capacity does not pay for. "If the memory handle has
 * already been opened by the current context, the reference count on the
 * handle is incremented by 1 and the existing device pointer is returned"
 * (cuIpcOpenMemHandle); cuIpcCloseMemHandle "decrements the reference
 * count of the memory returned by cuIpcOpenMemHandle by 1. When the
 * reference count reaches 0, this API unmaps the memory." The opens and
 * closes of a mapping are serialized by sim_ipc_lock, taken before
 * sim_lock. */
static pthread_mutex_t sim_ipc_lock = PTHREAD_MUTEX_INITIALIZER;

SIM_EXPORT CUresult cuIpcGetMemHandle(CUipcMemHandle *h, CUdeviceptr p) {
    if (!h || !p) return CUDA_ERROR_INVALID_VALUE;
    memset(h, 0, sizeof *h);
    size_t bytes = 0;
    uint64_t names = p;
    pthread_mutex_lock(&sim_lock);
    struct sim_alloc *a = sim_lookup(p, SIM_DEVICE);
    if (!a && (a = sim_lookup(p, SIM_IMPORTED))) names = a->handle;
    if (a) bytes = a->bytes;
    pthread_mutex_unlock(&sim_lock);
    memcpy(h->reserved, &bytes, sizeof bytes);
    memcpy(h->reserved + sizeof bytes, &names, sizeof names);
    return bytes ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SIM_EXPORT CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *p, CUipcMemHandle h, unsigned int flags) {
    (void)flags;
    sim_count("cuIpcOpenMemHandle_v2");
    size_t bytes;
    uint64_t names;
    memcpy(&bytes, h.reserved, sizeof bytes);
    memcpy(&names, h.reserved + sizeof bytes, sizeof names);
    if (!p || bytes == 0) return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&sim_ipc_lock);
    struct sim_ctx *ctx = sim_current;
    CUresult r = CUDA_ERROR_NOT_FOUND;
    pthread_mutex_lock(&sim_lock);
    struct sim_alloc *a, *next;
    HASH_ITER(hh, sim_table, a, next) {
        if (a->key.kind == SIM_IMPORTED && a->handle == names && a->opened_in == ctx) {
            a->refs++;
            *p = a->key.addr;
            r = CUDA_SUCCESS;
            break;
        }
    }
    pthread_mutex_unlock(&sim_lock);
    if (r != CUDA_SUCCESS) {
        uint64_t addr;
        r = sim_take(sim_device_now(), bytes, SIM_IMPORTED, 0, &addr);
        if (r == CUDA_SUCCESS) {
            pthread_mutex_lock(&sim_lock);
            a = sim_lookup(addr, SIM_IMPORTED);
            a->handle = names;
            a->opened_in = ctx;
            a->refs = 1;
            pthread_mutex_unlock(&sim_lock);
            *p = addr;
        }
    }
    pthread_mutex_unlock(&sim_ipc_lock);
    return r;
}

SIM_EXPORT CUresult cuIpcCloseMemHandle(CUdeviceptr p) {
    sim_count("cuIpcCloseMemHandle");
    pthread_mutex_lock(&sim_ipc_lock);
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_lock);
    struct sim_alloc *a = sim_lookup(p, SIM_IMPORTED);
    if (a && a->refs > 1) {
        a->refs--;
        r = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&sim_lock);
    if (a && r != CUDA_SUCCESS) r = sim_give(p, SIM_IMPORTED);
    pthread_mutex_unlock(&sim_ipc_lock);
    return r;
}

SIM_EXPORT CUresult cuIpcGetEventHandle(CUipcEventHandle *h, CUevent e) {
    (void)h; (void)e;
    return CUDA_ERROR_NOT_SUPPORTED;
}

SIM_EXPORT CUresult cuIpcOpenEventHandle(CUevent *e, CUipcEventHandle h) {
    (void)e; (void)h;
    return CUDA_ERROR_NOT_SUPPORTED;
}

SIM_EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr *base, size_t *size, CUdeviceptr p) {
    CUresult r = CUDA_ERROR_NOT_FOUND;
    pthread_mutex_lock(&sim_lock);
    struct sim_range *x = sim_range_at(p);
    if (x && x->a->key.kind != SIM_HOST && x->a->key.kind != SIM_REGISTERED) {
        if (base) *base = x->base;
        if (size) *size = x->size;
        r = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&sim_lock);
    return r;
}

/* What the driver knows about an address: device memory of some device,
 * pinned host memory, or nothing (CUDA_ERROR_INVALID_VALUE). */
SIM_EXPORT CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attr, CUdeviceptr p) {
    if (!data) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_lock);
    struct sim_range *x = sim_range_at(p), copy;
    if (x) copy = *x;
    int kind = x ? x->a->key.kind : 0, device = x ? x->a->device : 0;
    struct sim_ctx *ctx = x && x->a->key.kind != SIM_POOLED ? x->a->ctx : NULL;
    pthread_mutex_unlock(&sim_lock);
    if (!x) return CUDA_ERROR_INVALID_VALUE;
    int host = kind == SIM_HOST || kind == SIM_REGISTERED;
    switch (attr) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
        *(CUcontext *)data = ctx ? (CUcontext)ctx : (CUcontext)&sim_dev[device].primary;
        break;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE: *(unsigned *)data = host ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE; break;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER: *(CUdeviceptr *)data = p; break;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER: *(void **)data = host ? (void *)(uintptr_t)p : NULL; break;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED: *(int *)data = 0; break;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *(int *)data = device; break;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: *(CUdeviceptr *)data = copy.base; break;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *(size_t *)data = copy.size; break;
    case CU_POINTER_ATTRIBUTE_MAPPED: *(int *)data = 1; break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

/* ---------------------------------------------------- virtual memory (VMM) */

/* Properties without a type (CU_MEM_ALLOCATION_TYPE_INVALID) are refused
 * by the granularity's question and by cuMemCreate alike. */
SIM_EXPORT CUresult cuMemGetAllocationGranularity(size_t *g,
        const CUmemAllocationProp *prop, CUmemAllocationGranularity_flags f) {
    (void)f;
    if (!g || !prop || prop->type == CU_MEM_ALLOCATION_TYPE_INVALID) return CUDA_ERROR_INVALID_VALUE;
    *g = SIM_GRANULE;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t size,
                                const CUmemAllocationProp *prop,
                                unsigned long long flags) {
    (void)flags;
    sim_count("cuMemCreate");
    if (!h || !prop || prop->type == CU_MEM_ALLOCATION_TYPE_INVALID || size == 0 || size % SIM_GRANULE != 0)
        return CUDA_ERROR_INVALID_VALUE;
    int host = sim_location_is_host(&prop->location);
    int d = host ? 0 : prop->location.id;
    if (d < 0 || d >= sim_ndev) return CUDA_ERROR_INVALID_DEVICE;
    int kind = host ? SIM_HOST_HANDLE : SIM_HANDLE;
    uint64_t a;
    CUresult r = sim_take(d, size, kind, 0, &a);
    if (r == CUDA_SUCCESS) {
        pthread_mutex_lock(&sim_lock);
        struct sim_alloc *x = sim_lookup(a, kind);
        if (x) x->prop = *prop, x->refs = 1;
        pthread_mutex_unlock(&sim_lock);
        *h = a;
    }
    return r;
}

/* "The memory allocation will be freed when all outstanding mappings to
 * the memory are unmapped and when all outstanding references to the
 * handle (including its shareable counterparts) are also released"
 * (cuda.h): a handle released while mapped keeps its memory until its last
 * mapping goes. A handle with no reference left is no longer the caller's:
 * releasing or mapping it again is refused. */
SIM_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle h) {
    sim_count("cuMemRelease");
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_lock);
    struct sim_alloc *a = sim_handle(h);
    if (a && a->refs > 0) {
        if (--a->refs == 0 && a->maps == 0) sim_give_locked(a);
        r = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&sim_lock);
    return r;
}

SIM_EXPORT CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop,
                                                           CUmemGenericAllocationHandle h) {
    if (!prop) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_lock);
    struct sim_alloc *a = sim_handle(h);
    if (a && a->refs) { *prop = a->prop; r = CUDA_SUCCESS; }
    pthread_mutex_unlock(&sim_lock);
    return r;
}

SIM_EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *h, void *addr) {
    if (!h) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_lock);
    struct sim_alloc *a = sim_range_find((uint64_t)(uintptr_t)addr);
    struct sim_alloc *handle = a && a->key.kind == SIM_MAPPED ? sim_handle(a->handle) : NULL;
    if (handle) { *h = a->handle; handle->refs++; r = CUDA_SUCCESS; }
    pthread_mutex_unlock(&sim_lock);
    return r;
}

/* Shareable handles (file descriptors, fabric handles) are not modelled. */
SIM_EXPORT CUresult cuMemExportToShareableHandle(void *out, CUmemGenericAllocationHandle h,
                                                 CUmemAllocationHandleType type, unsigned long long flags) {
    (void)out; (void)h; (void)type; (void)flags;
    return CUDA_ERROR_NOT_SUPPORTED;
}

SIM_EXPORT CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *h, void *in,
                                                   CUmemAllocationHandleType type) {
    (void)h; (void)in; (void)type;
    return CUDA_ERROR_NOT_SUPPORTED;
}

/* A reservation takes address space of the current device, aligned to the
 * granularity (or to align when larger), and holds no memory. */
SIM_EXPORT CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size,
                                        size_t align, CUdeviceptr addr,
                                        unsigned long long flags) {
    (void)addr; (void)flags;
    if (!ptr || size == 0 || size % SIM_GRANULE != 0) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&sim_lock);
    sim_setup();
    int d = sim_device_now();
    uint64_t al = align > SIM_GRANULE ? align : SIM_GRANULE;
    uint64_t a = sim_va_take(d, size, al);
    if (a == 0 || !sim_record(a, SIM_RESERVED, 0, size, d)) r = CUDA_ERROR_OUT_OF_MEMORY;
    else *ptr = a;
    pthread_mutex_unlock(&sim_lock);
    return r;
}

SIM_EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_lock);
    struct sim_alloc *a = sim_lookup(ptr, SIM_RESERVED);
    if (a && a->span == size) {
        sim_va_give(a->device, a->key.addr, a->span, SIM_GRANULE);
        HASH_DEL(sim_table, a);
        free(a);
        r = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&sim_lock);
    return r;
}

/* Mapping a handle at an address makes that range device memory. Two
 * mappings of one handle do not share their bytes. */
SIM_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                             CUmemGenericAllocationHandle h,
                             unsigned long long flags) {
    (void)offset; (void)flags;
    sim_count("cuMemMap");
    if (ptr == 0 || h == 0 || size == 0) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&sim_lock);
    struct sim_alloc *handle = sim_handle(h);
    if (!handle || !handle->refs) { r = CUDA_ERROR_INVALID_VALUE; goto out; }
    if (sim_range_find(ptr) || sim_range_find(ptr + size - 1)) { r = CUDA_ERROR_ALREADY_MAPPED; goto out; }
    struct sim_alloc *m = sim_record(ptr, SIM_MAPPED, 0, size, handle->device);
    if (!m) { r = CUDA_ERROR_OUT_OF_MEMORY; goto out; }
    m->handle = h;
    handle->maps++;
    sim_range_add(m, ptr, size);
out:
    pthread_mutex_unlock(&sim_lock);
    return r;
}

SIM_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
    if (ptr == 0) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&sim_lock);
    uint64_t at = ptr, end = ptr + size;
    while (at < end) {
        struct sim_alloc *m = sim_lookup(at, SIM_MAPPED);
        if (!m) { r = at == ptr ? CUDA_ERROR_INVALID_VALUE : r; break; }
        uint64_t next = at + m->span;
        sim_range_del(at);
        madvise((void *)(uintptr_t)at, m->span, MADV_DONTNEED);
        struct sim_alloc *handle = sim_handle(m->handle);
        if (handle && --handle->maps == 0 && handle->refs == 0) sim_give_locked(handle);
        HASH_DEL(sim_table, m);
        free(m);
        at = next;
    }
    pthread_mutex_unlock(&sim_lock);
    return r;
}

SIM_EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size,
                                   const CUmemAccessDesc *desc, size_t count) {
    (void)ptr; (void)size; (void)desc; (void)count;
    return CUDA_SUCCESS;
}

/* -------------------------------------------- streams, events, copies */

/* Each thread's per-thread default stream (which can be captured, unlike
 * the legacy one), on the current context's device; and the streams that
 * joined another's capture by waiting for an event recorded in it (each
 * leaves it when the capture ends). */
static __thread struct sim_stream sim_ptds = {0, 0, 0, NULL};
static struct sim_stream *sim_joined[64];
static struct sim_stream *sim_stream_of(CUstream s) {
    uintptr_t v = (uintptr_t)s;
    if (v == (uintptr_t)CU_STREAM_PER_THREAD) {
        sim_ptds.device = sim_device_now();
        return &sim_ptds;
    }
    return v == 0 || v == (uintptr_t)CU_STREAM_LEGACY ? NULL : (struct sim_stream *)s;
}

SIM_EXPORT CUresult cuStreamCreate(CUstream *s, unsigned int flags) {
    if (!s) return CUDA_ERROR_INVALID_VALUE;
    struct sim_stream *x = malloc(sizeof *x);
    if (!x) return CUDA_ERROR_OUT_OF_MEMORY;
    *x = (struct sim_stream){sim_device_now(), 0, flags, NULL};
    *s = (CUstream)x;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuStreamCreateWithPriority(CUstream *s, unsigned int flags, int priority) {
    CUresult r = cuStreamCreate(s, flags);
    if (r == CUDA_SUCCESS)
        ((struct sim_stream *)*s)->priority = priority > 0 ? 0 : priority < -5 ? -5 : priority;
    return r;
}

/* CUDA 12.8: the device a stream belongs to (the current context's for the
 * default streams). */
SIM_EXPORT CUresult cuStreamGetDevice(CUstream s, CUdevice *device) {
    sim_count("cuStreamGetDevice");
    if (!device) return CUDA_ERROR_INVALID_VALUE;
    struct sim_stream *x = sim_stream_of(s);
    *device = x ? x->device : sim_device_now();
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuStreamDestroy_v2(CUstream s) {
    struct sim_stream *x = sim_stream_of(s);
    if (!x || x == &sim_ptds) return CUDA_ERROR_INVALID_HANDLE;
    free(x);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuStreamGetPriority(CUstream s, int *priority) {
    if (!priority) return CUDA_ERROR_INVALID_VALUE;
    struct sim_stream *x = sim_stream_of(s);
    *priority = x ? x->priority : 0;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuStreamGetFlags(CUstream s, unsigned int *flags) {
    if (!flags) return CUDA_ERROR_INVALID_VALUE;
    struct sim_stream *x = sim_stream_of(s);
    *flags = x ? x->flags : 0;
    return CUDA_SUCCESS;
}

static int sim_stream_device(CUstream s) {
    struct sim_stream *x = sim_stream_of(s);
    return x ? x->device : sim_device_now();
}

static void sim_invalidate(struct sim_graph *g);
SIM_EXPORT CUresult cuStreamSynchronize(CUstream s) {
    struct sim_stream *cs = sim_stream_of(s);
    if (cs && cs->capturing) { sim_invalidate(cs->capturing); return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; }
    pthread_mutex_lock(&sim_lock);
    sim_trim_pools(sim_stream_device(s));
    pthread_mutex_unlock(&sim_lock);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuStreamQuery(CUstream s) { (void)s; return CUDA_SUCCESS; }

SIM_EXPORT CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned int flags) {
    (void)flags;
    if (!e) return CUDA_ERROR_INVALID_HANDLE;
    struct sim_event *x = (struct sim_event *)e;
    struct sim_stream *st = sim_stream_of(s);
    if (x->capture && st && !st->capturing) { /* cross-stream capture: st joins */
        pthread_mutex_lock(&sim_lock);
        st->capturing = x->capture;
        for (int i = 0; i < 64; i++) if (!sim_joined[i]) { sim_joined[i] = st; break; }
        pthread_mutex_unlock(&sim_lock);
    }
    return CUDA_SUCCESS;
}

static CUstreamCaptureStatus sim_capture_status(const struct sim_stream *st);

SIM_EXPORT CUresult cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus *status) {
    sim_count("cuStreamIsCapturing");
    if (!status) return CUDA_ERROR_INVALID_VALUE;
    struct sim_stream *st = sim_stream_of(s);
    pthread_mutex_lock(&sim_lock);
    *status = sim_capture_status(st);
    pthread_mutex_unlock(&sim_lock);
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------- graphs */

/* CUDA graphs, as far as their memory goes (the programming guide's graph
 * memory nodes): a stream being captured (cuStreamBeginCapture on a stream
 * of cuStreamCreate) records an allocation node for each cuMemAllocAsync or
 * cuMemAllocFromPoolAsync, whose address is reserved for good and holds no
 * memory yet, and a free node for each cuMemFreeAsync of such an address.
 * A launch gives every allocation node memory from its device's graph
 * pool, which reserves more from the device when it must (and the launch
 * fails with CUDA_ERROR_OUT_OF_MEMORY when the device cannot give it);
 * what the graph frees goes back to the pool when the launch ends, what it
 * does not stays in use until cuMemFreeAsync or cuMemFree outside a
 * capture, and a graph whose allocation is still in use cannot be launched
 * again. The pool keeps what it reserved until cuDeviceGraphMemTrim.
 * A free node may also free another graph's allocation (one its launch
 * left in use): that is done when its own graph is launched, which fails
 * if the memory is not in use then. A graph can also be built node by
 * node (cuGraphCreate, cuGraphAddMemAllocNode, cuGraphAddMemFreeNode,
 * cuGraphAddNode): an allocation node's device is its pool properties'
 * location (a device; host locations are not supported), and its address
 * is handed out at once, as in a capture; a child graph moved into its
 * parent (cuGraphAddNode, CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE) brings its
 * memory nodes with it. Kernels and other nodes are not
 * modelled (cuGraphAddNode of another type adds a node that does
 * nothing); dependencies are not checked. */
#define SIM_GRAPH_MAGIC 0x6a9f
#define SIM_EXEC_MAGIC 0x6e8c
/* only_free: a free node of another graph's allocation (bytes, device:
 * that allocation's) */
struct sim_node { uint64_t addr, bytes; int device, freed, only_free; };
/* invalid: the capture was invalidated (cuStreamSynchronize of a captured
 * stream): its end fails; made: by cuGraphCreate (a capture into it,
 * cuStreamBeginCaptureToGraph, leaves it to its maker) */
struct sim_graph { int magic; int device; size_t n, cap; struct sim_node *nodes; int invalid, made; };
/* auto_free: instantiated with CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH
 * (a launch frees first what the last one left in use) */
struct sim_exec { int magic; int device; size_t n; struct sim_node *nodes; int auto_free; };

static void sim_invalidate(struct sim_graph *g) { g->invalid = 1; }

/* Graphs destroyed (by cuGraphDestroy, or at the end of an invalidated
 * capture) are kept for the next graph made, newest first: the handle of
 * a destroyed graph is handed out again, as a driver may. */
static struct sim_graph *sim_graphs_gone[16];
static int sim_ngraphs_gone;

static struct sim_graph *sim_graph_new(void) {
    pthread_mutex_lock(&sim_lock);
    struct sim_graph *g = sim_ngraphs_gone ? sim_graphs_gone[--sim_ngraphs_gone] : NULL;
    pthread_mutex_unlock(&sim_lock);
    if (g) memset(g, 0, sizeof *g);
    return g ? g : calloc(1, sizeof *g);
}

static void sim_graph_gone(struct sim_graph *g) {
    g->magic = 0;
    free(g->nodes);
    g->nodes = NULL;
    pthread_mutex_lock(&sim_lock);
    if (sim_ngraphs_gone < 16) sim_graphs_gone[sim_ngraphs_gone++] = g;
    else free(g);
    pthread_mutex_unlock(&sim_lock);
}

/* A stream's capture status: an invalidated capture is one until its end
 * (which fails and destroys its graph). sim_lock held. */
static CUstreamCaptureStatus sim_capture_status(const struct sim_stream *st) {
    if (!st || !st->capturing) return CU_STREAM_CAPTURE_STATUS_NONE;
    return st->capturing->invalid ? CU_STREAM_CAPTURE_STATUS_INVALIDATED : CU_STREAM_CAPTURE_STATUS_ACTIVE;
}

/* Room in graph g's node list for one more; 0 when out of memory. */
static int sim_node_room(struct sim_graph *g) {
    if (g->n < g->cap) return 1;
    size_t cap = g->cap ? 2 * g->cap : 8;
    struct sim_node *m = realloc(g->nodes, cap * sizeof *m);
    if (!m) return 0;
    g->nodes = m;
    g->cap = cap;
    return 1;
}

/* An allocation node of `bytes` on device d added to graph g: its address
 * in *dptr. sim_lock held. */
static CUresult sim_node_alloc(struct sim_graph *g, int d, size_t bytes, CUdeviceptr *dptr) {
    if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
    uint64_t size = sim_round(bytes, SIM_ALIGN), span = sim_add(size, SIM_ALIGN);
    if (!sim_node_room(g)) return CUDA_ERROR_OUT_OF_MEMORY;
    uint64_t addr = sim_va_take(d, span, SIM_ALIGN);
    struct sim_alloc *a = addr ? sim_record(addr, SIM_GRAPH_VA, size, span, d) : NULL;
    if (!a) return CUDA_ERROR_OUT_OF_MEMORY;
    a->handle = 0; /* 1 while a launch's memory is in use there */
    sim_range_add(a, addr, bytes);
    g->nodes[g->n++] = (struct sim_node){addr, size, d, 0, 0};
    *dptr = addr;
    return CUDA_SUCCESS;
}

/* A free node of ptr added to graph g: one of g's allocation nodes (freed
 * within each launch), or another graph's allocation (freed when g is
 * launched); not an allocation twice in one graph. sim_lock held. */
static CUresult sim_node_free(struct sim_graph *g, CUdeviceptr ptr) {
    struct sim_alloc *a = sim_lookup(ptr, SIM_GRAPH_VA);
    if (!a) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < g->n; i++) {
        if (g->nodes[i].addr != ptr) continue;
        if (g->nodes[i].freed || g->nodes[i].only_free) return CUDA_ERROR_INVALID_VALUE;
        g->nodes[i].freed = 1;
        return CUDA_SUCCESS;
    }
    if (!sim_node_room(g)) return CUDA_ERROR_OUT_OF_MEMORY;
    g->nodes[g->n++] = (struct sim_node){ptr, a->bytes, a->device, 0, 1};
    return CUDA_SUCCESS;
}

/* An allocation node of the graph stream st is capturing. */
static CUresult sim_graph_alloc(struct sim_stream *st, CUdeviceptr *dptr, size_t bytes, struct sim_pool *p) {
    if (p && p->host) return CUDA_ERROR_NOT_SUPPORTED;
    pthread_mutex_lock(&sim_lock);
    sim_setup();
    CUresult r = sim_node_alloc(st->capturing, p ? p->device : st->device, bytes, dptr);
    pthread_mutex_unlock(&sim_lock);
    return r;
}

/* A free of a graph's address: a free node while st is captured, else the
 * end of a launch's memory left in use. *done says whether ptr was a
 * graph's address at all. */
static CUresult sim_graph_free(struct sim_stream *st, CUdeviceptr ptr, int *done) {
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_lock);
    struct sim_alloc *a = sim_lookup(ptr, SIM_GRAPH_VA);
    *done = a != NULL;
    if (a && st && st->capturing) {
        r = sim_node_free(st->capturing, ptr);
    } else if (a && a->handle == 1) {
        a->handle = 0;
        sim_dev[a->device].graph_used -= a->bytes;
        r = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&sim_lock);
    return r;
}

static CUresult sim_begin_capture(const char *api, CUstream s) {
    sim_count(api);
    struct sim_stream *st = sim_stream_of(s);
    if (!st) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    CUresult r = CUDA_SUCCESS;
    struct sim_graph *g = sim_graph_new();
    pthread_mutex_lock(&sim_lock);
    if (st->capturing) r = CUDA_ERROR_ILLEGAL_STATE;
    else if (!g) r = CUDA_ERROR_OUT_OF_MEMORY;
    else {
        g->magic = SIM_GRAPH_MAGIC;
        g->device = st->device;
        st->capturing = g;
    }
    pthread_mutex_unlock(&sim_lock);
    if (r != CUDA_SUCCESS && g) sim_graph_gone(g);
    return r;
}

SIM_EXPORT CUresult cuStreamBeginCapture(CUstream s) { return sim_begin_capture("cuStreamBeginCapture", s); }
SIM_EXPORT CUresult cuStreamBeginCapture_ptsz(CUstream s) { return sim_begin_capture("cuStreamBeginCapture_ptsz", s); }

SIM_EXPORT CUresult cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode mode) {
    (void)mode;
    return sim_begin_capture("cuStreamBeginCapture_v2", s);
}

SIM_EXPORT CUresult cuStreamBeginCapture_v2_ptsz(CUstream s, CUstreamCaptureMode mode) {
    (void)mode;
    return sim_begin_capture("cuStreamBeginCapture_v2_ptsz", s);
}

SIM_EXPORT CUresult cuStreamEndCapture(CUstream s, CUgraph *graph) {
    sim_count("cuStreamEndCapture");
    struct sim_stream *st = sim_stream_of(s);
    if (!graph) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_lock);
    struct sim_graph *g = st ? st->capturing : NULL;
    if (st) st->capturing = NULL;
    for (int i = 0; g && i < 64; i++)
        if (sim_joined[i] && sim_joined[i]->capturing == g) { sim_joined[i]->capturing = NULL; sim_joined[i] = NULL; }
    pthread_mutex_unlock(&sim_lock);
    if (!g) return CUDA_ERROR_ILLEGAL_STATE;
    if (g->invalid && g->made) { /* the caller's graph stays the caller's */
        g->invalid = 0;
        *graph = NULL;
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    }
    if (g->invalid) { /* its graph destroyed: the handle may be handed out again */
        *graph = NULL;
        sim_graph_gone(g);
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    }
    *graph = (CUgraph)g;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *exec, CUgraph graph, unsigned long long flags) {
    sim_count("cuGraphInstantiateWithFlags");
    struct sim_graph *g = (struct sim_graph *)graph;
    if (!exec || !g || g->magic != SIM_GRAPH_MAGIC) return CUDA_ERROR_INVALID_VALUE;
    struct sim_exec *e = calloc(1, sizeof *e);
    struct sim_node *nodes = g->n ? malloc(g->n * sizeof *nodes) : NULL;
    if (!e || (g->n && !nodes)) { free(e); free(nodes); return CUDA_ERROR_OUT_OF_MEMORY; }
    if (g->n) memcpy(nodes, g->nodes, g->n * sizeof *nodes);
    *e = (struct sim_exec){SIM_EXEC_MAGIC, g->device, g->n, nodes,
                           (flags & CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH) != 0};
    *exec = (CUgraphExec)e;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuGraphLaunch(CUgraphExec exec, CUstream s) {
    (void)s;
    sim_count("cuGraphLaunch");
    struct sim_exec *e = (struct sim_exec *)exec;
    if (!e || e->magic != SIM_EXEC_MAGIC) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&sim_lock);
    /* Every allocation node's memory must be free again (its launch
     * before freed it), every other graph's allocation this one frees in
     * use; then each device's pool must have room, or reserve it. */
    uint64_t need[SIM_MAX_DEVICES] = {0}, more[SIM_MAX_DEVICES] = {0}, first[SIM_MAX_DEVICES] = {0};
    for (size_t i = 0; i < e->n; i++) {
        struct sim_alloc *a = sim_lookup(e->nodes[i].addr, SIM_GRAPH_VA);
        int auto_freed = a && e->auto_free && !e->nodes[i].only_free && a->handle == 1;
        if (!a || (a->handle != (e->nodes[i].only_free ? 1 : 0) && !auto_freed)) { r = CUDA_ERROR_INVALID_VALUE; goto out; }
        if (auto_freed) first[e->nodes[i].device] += e->nodes[i].bytes;
        if (!e->nodes[i].only_free) need[e->nodes[i].device] += e->nodes[i].bytes;
    }
    for (int d = 0; d < sim_ndev; d++) {
        struct sim_device *v = &sim_dev[d];
        uint64_t spare = v->graph_reserved - (v->graph_used - first[d]);
        if (need[d] > spare) more[d] = need[d] - spare;
        if (more[d] && !sim_fits(d, more[d])) { r = CUDA_ERROR_OUT_OF_MEMORY; goto out; }
    }
    for (size_t i = 0; i < e->n; i++) /* what auto-free frees first */
        if (e->auto_free && !e->nodes[i].only_free) sim_lookup(e->nodes[i].addr, SIM_GRAPH_VA)->handle = 0;
    for (int d = 0; d < sim_ndev; d++) {
        struct sim_device *v = &sim_dev[d];
        v->graph_used -= first[d];
        v->used += more[d];
        v->graph_reserved += more[d];
        v->graph_used += need[d];
        if (v->graph_used > v->graph_used_high) v->graph_used_high = v->graph_used;
        if (v->graph_reserved > v->graph_reserved_high) v->graph_reserved_high = v->graph_reserved;
    }
    for (size_t i = 0; i < e->n; i++) {
        struct sim_node *x = &e->nodes[i];
        if (x->freed || x->only_free) sim_dev[x->device].graph_used -= x->bytes;
        if (x->only_free) sim_lookup(x->addr, SIM_GRAPH_VA)->handle = 0;
        else if (!x->freed) sim_lookup(x->addr, SIM_GRAPH_VA)->handle = 1;
    }
out:
    pthread_mutex_unlock(&sim_lock);
    return r;
}

SIM_EXPORT CUresult cuGraphExecDestroy(CUgraphExec exec) {
    struct sim_exec *e = (struct sim_exec *)exec;
    if (!e || e->magic != SIM_EXEC_MAGIC) return CUDA_ERROR_INVALID_VALUE;
    e->magic = 0;
    free(e->nodes);
    free(e);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuGraphDestroy(CUgraph graph) {
    struct sim_graph *g = (struct sim_graph *)graph;
    if (!g || g->magic != SIM_GRAPH_MAGIC) return CUDA_ERROR_INVALID_VALUE;
    sim_graph_gone(g);
    return CUDA_SUCCESS;
}

/* ------------------------------------------------ graphs built by hand */

static struct sim_graph *sim_graph_of(CUgraph graph) {
    struct sim_graph *g = (struct sim_graph *)graph;
    return g && g->magic == SIM_GRAPH_MAGIC ? g : NULL;
}

/* A node's handle: never read back (dependencies are not checked). */
static CUgraphNode sim_node_handle(void) {
    static uintptr_t next;
    return (CUgraphNode)(0x7e0000000000ull + 16 * __atomic_add_fetch(&next, 1, __ATOMIC_RELAXED));
}

SIM_EXPORT CUresult cuGraphCreate(CUgraph *graph, unsigned int flags) {
    sim_count("cuGraphCreate");
    if (!graph || flags) return CUDA_ERROR_INVALID_VALUE;
    struct sim_graph *g = sim_graph_new();
    if (!g) return CUDA_ERROR_OUT_OF_MEMORY;
    g->magic = SIM_GRAPH_MAGIC;
    g->device = sim_device_now();
    g->made = 1;
    *graph = (CUgraph)g;
    return CUDA_SUCCESS;
}

/* A capture into a graph of the caller's: its nodes are added to it. */
static CUresult sim_begin_capture_to(const char *api, CUstream s, CUgraph graph) {
    sim_count(api);
    struct sim_stream *st = sim_stream_of(s);
    struct sim_graph *g = sim_graph_of(graph);
    if (!st) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    if (!g) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&sim_lock);
    if (st->capturing) r = CUDA_ERROR_ILLEGAL_STATE;
    else st->capturing = g;
    pthread_mutex_unlock(&sim_lock);
    return r;
}

SIM_EXPORT CUresult cuStreamBeginCaptureToGraph(CUstream s, CUgraph graph, const CUgraphNode *deps,
                                                const CUgraphEdgeData *edges, size_t n, CUstreamCaptureMode mode) {
    (void)deps; (void)edges; (void)n; (void)mode;
    return sim_begin_capture_to("cuStreamBeginCaptureToGraph", s, graph);
}

SIM_EXPORT CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream s, CUgraph graph, const CUgraphNode *deps,
                                                     const CUgraphEdgeData *edges, size_t n,
                                                     CUstreamCaptureMode mode) {
    (void)deps; (void)edges; (void)n; (void)mode;
    return sim_begin_capture_to("cuStreamBeginCaptureToGraph_ptsz", s, graph);
}

static CUresult sim_add_alloc_node(CUgraphNode *node, CUgraph graph, CUdeviceptr *dptr, const CUmemPoolProps *props,
                                   size_t bytes) {
    struct sim_graph *g = sim_graph_of(graph);
    if (!node || !g) return CUDA_ERROR_INVALID_VALUE;
    if (props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED || props->handleTypes != CU_MEM_HANDLE_TYPE_NONE)
        return CUDA_ERROR_INVALID_VALUE;
    if (props->location.type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_NOT_SUPPORTED;
    if (props->location.id < 0 || props->location.id >= sim_ndev) return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&sim_lock);
    sim_setup();
    CUresult r = sim_node_alloc(g, props->location.id, bytes, dptr);
    pthread_mutex_unlock(&sim_lock);
    if (r == CUDA_SUCCESS) *node = sim_node_handle();
    return r;
}

static CUresult sim_add_free_node(CUgraphNode *node, CUgraph graph, CUdeviceptr dptr) {
    struct sim_graph *g = sim_graph_of(graph);
    if (!node || !g) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_lock);
    CUresult r = sim_node_free(g, dptr);
    pthread_mutex_unlock(&sim_lock);
    if (r == CUDA_SUCCESS) *node = sim_node_handle();
    return r;
}

SIM_EXPORT CUresult cuGraphAddMemAllocNode(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps, size_t ndeps,
                                           CUDA_MEM_ALLOC_NODE_PARAMS *params) {
    (void)deps; (void)ndeps;
    sim_count("cuGraphAddMemAllocNode");
    if (!params) return CUDA_ERROR_INVALID_VALUE;
    return sim_add_alloc_node(node, graph, &params->dptr, &params->poolProps, params->bytesize);
}

SIM_EXPORT CUresult cuGraphAddMemFreeNode(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps, size_t ndeps,
                                          CUdeviceptr dptr) {
    (void)deps; (void)ndeps;
    sim_count("cuGraphAddMemFreeNode");
    return sim_add_free_node(node, graph, dptr);
}

/* cuGraphAddNode, both versions: an allocation or free node as above, any
 * other type a node that does nothing. */
static CUresult sim_add_node(CUgraphNode *node, CUgraph graph, CUgraphNodeParams *params) {
    if (!params || !node || !sim_graph_of(graph)) return CUDA_ERROR_INVALID_VALUE;
    switch (params->type) {
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC:
        return sim_add_alloc_node(node, graph, &params->alloc.dptr, &params->alloc.poolProps, params->alloc.bytesize);
    case CU_GRAPH_NODE_TYPE_MEM_FREE:
        return sim_add_free_node(node, graph, params->free.dptr);
    case CU_GRAPH_NODE_TYPE_GRAPH: {
        /* A child graph moved into its parent: its nodes are the parent's,
         * its handle no longer usable on its own. (A clone of a graph with
         * memory nodes is refused, as cuda.h says.) */
        struct sim_graph *g = sim_graph_of(graph), *c = sim_graph_of(params->graph.graph);
        if (!c || c == g) return CUDA_ERROR_INVALID_VALUE;
        if (params->graph.ownership != CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE) {
            if (c->n) return CUDA_ERROR_NOT_SUPPORTED;
            *node = sim_node_handle();
            return CUDA_SUCCESS;
        }
        pthread_mutex_lock(&sim_lock);
        CUresult r = CUDA_SUCCESS;
        if (g->n + c->n > g->cap) {
            size_t cap = g->n + c->n;
            struct sim_node *m = realloc(g->nodes, cap * sizeof *m);
            if (!m) r = CUDA_ERROR_OUT_OF_MEMORY;
            else {
                g->nodes = m;
                g->cap = cap;
            }
        }
        if (r == CUDA_SUCCESS) {
            if (c->n) memcpy(g->nodes + g->n, c->nodes, c->n * sizeof *c->nodes);
            g->n += c->n;
            free(c->nodes);
            c->nodes = NULL;
            c->n = c->cap = 0;
            c->magic = 0; /* kept, so that a stale handle reads as none */
        }
        pthread_mutex_unlock(&sim_lock);
        if (r == CUDA_SUCCESS) *node = sim_node_handle();
        return r;
    }
    default:
        *node = sim_node_handle();
        return CUDA_SUCCESS;
    }
}

/* CUDA 12.2's, without the edges' data. */
SIM_EXPORT CUresult cuGraphAddNode(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps, size_t ndeps,
                                   CUgraphNodeParams *params) {
    (void)deps; (void)ndeps;
    sim_count("cuGraphAddNode");
    return sim_add_node(node, graph, params);
}

SIM_EXPORT CUresult cuGraphAddNode_v2(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps,
                                      const CUgraphEdgeData *edges, size_t ndeps, CUgraphNodeParams *params) {
    (void)deps; (void)edges; (void)ndeps;
    sim_count("cuGraphAddNode_v2");
    return sim_add_node(node, graph, params);
}

SIM_EXPORT CUresult cuDeviceGetGraphMemAttribute(CUdevice d, CUgraphMem_attribute attr, void *value) {
    sim_count("cuDeviceGetGraphMemAttribute");
    if (!value) return CUDA_ERROR_INVALID_VALUE;
    if (d < 0 || d >= sim_ndev) return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&sim_lock);
    struct sim_device *v = &sim_dev[d];
    CUresult r = CUDA_SUCCESS;
    switch (attr) {
    case CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT: *(cuuint64_t *)value = v->graph_used; break;
    case CU_GRAPH_MEM_ATTR_USED_MEM_HIGH: *(cuuint64_t *)value = v->graph_used_high; break;
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT: *(cuuint64_t *)value = v->graph_reserved; break;
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH: *(cuuint64_t *)value = v->graph_reserved_high; break;
    default: r = CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_unlock(&sim_lock);
    return r;
}

/* Gives back to the device what the graph pool holds beyond what is in use. */
SIM_EXPORT CUresult cuDeviceGraphMemTrim(CUdevice d) {
    sim_count("cuDeviceGraphMemTrim");
    if (d < 0 || d >= sim_ndev) return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&sim_lock);
    struct sim_device *v = &sim_dev[d];
    v->used -= v->graph_reserved - v->graph_used;
    v->graph_reserved = v->graph_used;
    pthread_mutex_unlock(&sim_lock);
    return CUDA_SUCCESS;
}

/* CUDA 11.3's: the same without the edges' data. */
SIM_EXPORT CUresult cuStreamGetCaptureInfo_v2(CUstream s, CUstreamCaptureStatus *status, cuuint64_t *id,
                                              CUgraph *graph, const CUgraphNode **deps, size_t *ndeps) {
    return cuStreamGetCaptureInfo_v3(s, status, id, graph, deps, NULL, ndeps);
}

SIM_EXPORT CUresult cuStreamGetCaptureInfo_v3(CUstream s, CUstreamCaptureStatus *status, cuuint64_t *id,
                                              CUgraph *graph, const CUgraphNode **deps,
                                              const CUgraphEdgeData **edges, size_t *ndeps) {
    (void)id; (void)deps; (void)edges;
    if (!status) return CUDA_ERROR_INVALID_VALUE;
    struct sim_stream *st = sim_stream_of(s);
    pthread_mutex_lock(&sim_lock);
    *status = sim_capture_status(st);
    if (graph && *status == CU_STREAM_CAPTURE_STATUS_ACTIVE) *graph = (CUgraph)st->capturing;
    pthread_mutex_unlock(&sim_lock);
    if (ndeps) *ndeps = 0;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuStreamWriteValue32(CUstream s, CUdeviceptr addr, cuuint32_t value, unsigned int flags) {
    (void)s; (void)flags;
    if (!addr || addr % 4) return CUDA_ERROR_INVALID_VALUE;
    *(volatile cuuint32_t *)(uintptr_t)addr = value;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuEventCreate(CUevent *e, unsigned int flags) {
    if (!e) return CUDA_ERROR_INVALID_VALUE;
    struct sim_event *x = calloc(1, sizeof *x);
    if (!x) return CUDA_ERROR_OUT_OF_MEMORY;
    x->flags = flags;
    *e = (CUevent)x;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuEventDestroy_v2(CUevent e) {
    if (!e) return CUDA_ERROR_INVALID_HANDLE;
    free(e);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuEventRecordWithFlags(CUevent e, CUstream s, unsigned int flags) {
    (void)flags;
    struct sim_event *x = (struct sim_event *)e;
    if (!x) return CUDA_ERROR_INVALID_HANDLE;
    struct sim_stream *rs = sim_stream_of(s);
    x->capture = rs ? rs->capturing : NULL;
    clock_gettime(CLOCK_MONOTONIC, &x->when);
    x->recorded = 1;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuEventRecord(CUevent e, CUstream s) { return cuEventRecordWithFlags(e, s, 0); }

SIM_EXPORT CUresult cuEventQuery(CUevent e) { return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE; }

SIM_EXPORT CUresult cuEventSynchronize(CUevent e) {
    if (!e) return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&sim_lock);
    sim_trim_pools(sim_device_now());
    pthread_mutex_unlock(&sim_lock);
    return CUDA_SUCCESS;
}

/* Milliseconds between two recorded events; events made without timing, or
 * not recorded yet, are refused as the driver refuses them. */
SIM_EXPORT CUresult cuEventElapsedTime_v2(float *ms, CUevent start, CUevent end) {
    struct sim_event *a = (struct sim_event *)start, *b = (struct sim_event *)end;
    if (!ms) return CUDA_ERROR_INVALID_VALUE;
    if (!a || !b || (a->flags & CU_EVENT_DISABLE_TIMING) || (b->flags & CU_EVENT_DISABLE_TIMING))
        return CUDA_ERROR_INVALID_HANDLE;
    if (!a->recorded || !b->recorded) return CUDA_ERROR_INVALID_HANDLE;
    *ms = (float)((b->when.tv_sec - a->when.tv_sec) * 1e3 + (b->when.tv_nsec - a->when.tv_nsec) / 1e6);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuEventElapsedTime(float *ms, CUevent start, CUevent end) {
    return cuEventElapsedTime_v2(ms, start, end);
}

/* Copies and sets run at once, on the host memory behind both sides. */
SIM_EXPORT CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n) {
    if (n == 0) return CUDA_SUCCESS;
    if (!dst || !src) return CUDA_ERROR_INVALID_VALUE;
    memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
    (void)s;
    return cuMemcpy(dst, src, n);
}

SIM_EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) {
    return cuMemcpy(dst, (CUdeviceptr)(uintptr_t)src, n);
}

SIM_EXPORT CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) {
    return cuMemcpy((CUdeviceptr)(uintptr_t)dst, src, n);
}

SIM_EXPORT CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) {
    return cuMemcpy(dst, src, n);
}

SIM_EXPORT CUresult cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src,
                                      CUcontext sctx, size_t n, CUstream s) {
    (void)dctx; (void)sctx; (void)s;
    return cuMemcpy(dst, src, n);
}

static CUresult sim_copy2d(const CUDA_MEMCPY2D *c) {
    if (!c) return CUDA_ERROR_INVALID_VALUE;
    if (c->srcMemoryType == CU_MEMORYTYPE_ARRAY || c->dstMemoryType == CU_MEMORYTYPE_ARRAY)
        return CUDA_ERROR_NOT_SUPPORTED;
    const char *s = c->srcMemoryType == CU_MEMORYTYPE_HOST ? (const char *)c->srcHost
                                                           : (const char *)(uintptr_t)c->srcDevice;
    char *d = c->dstMemoryType == CU_MEMORYTYPE_HOST ? (char *)c->dstHost : (char *)(uintptr_t)c->dstDevice;
    if (c->srcMemoryType == CU_MEMORYTYPE_UNIFIED) s = (const char *)(uintptr_t)c->srcDevice;
    if (c->dstMemoryType == CU_MEMORYTYPE_UNIFIED) d = (char *)(uintptr_t)c->dstDevice;
    if ((!s || !d) && c->WidthInBytes && c->Height) return CUDA_ERROR_INVALID_VALUE;
    for (size_t y = 0; y < c->Height; y++)
        memmove(d + (c->dstY + y) * c->dstPitch + c->dstXInBytes,
                s + (c->srcY + y) * c->srcPitch + c->srcXInBytes, c->WidthInBytes);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D *c) { return sim_copy2d(c); }

SIM_EXPORT CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *c, CUstream s) {
    (void)s;
    return sim_copy2d(c);
}

SIM_EXPORT CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char v, size_t n) {
    if (n == 0) return CUDA_SUCCESS;
    if (!dst) return CUDA_ERROR_INVALID_VALUE;
    memset((void *)(uintptr_t)dst, v, n);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, CUstream s) {
    (void)s;
    return cuMemsetD8_v2(dst, v, n);
}

SIM_EXPORT CUresult cuMemsetD32_v2(CUdeviceptr dst, unsigned int v, size_t n) {
    if (n == 0) return CUDA_SUCCESS;
    if (!dst || dst % 4) return CUDA_ERROR_INVALID_VALUE;
    unsigned int *p = (unsigned int *)(uintptr_t)dst;
    for (size_t i = 0; i < n; i++) p[i] = v;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned int v, size_t n, CUstream s) {
    (void)s;
    return cuMemsetD32_v2(dst, v, n);
}

/* ------------------------------------------------------ cuGetProcAddress */

SIM_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn,
                                        int version, cuuint64_t flags,
                                        CUdriverProcAddressQueryResult *status);
SIM_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn,
                                     int version, cuuint64_t flags);

/* The driver's look-up table: base name, the first CUDA version that gets
 * this variant, whether it is the per-thread-default-stream variant. */
static const struct {
    const char *base;
    int version;
    int ptsz;
    void *fn;
} sim_procs[] = {
#define P(base, ver, ptsz, fn) {#base, ver, ptsz, (void *)fn}
    P(cuInit, 2000, 0, cuInit),
    P(cuDriverGetVersion, 2020, 0, cuDriverGetVersion),
    P(cuDeviceGetCount, 2000, 0, cuDeviceGetCount),
    P(cuDeviceGet, 2000, 0, cuDeviceGet),
    P(cuDeviceGetName, 2000, 0, cuDeviceGetName),
    P(cuDeviceGetUuid, 9020, 0, cuDeviceGetUuid),
    P(cuDeviceGetUuid, 11040, 0, cuDeviceGetUuid_v2),
    P(cuDeviceTotalMem, 3020, 0, cuDeviceTotalMem_v2),
    P(cuDeviceGetAttribute, 2000, 0, cuDeviceGetAttribute),
    P(cuDeviceGetPCIBusId, 4010, 0, cuDeviceGetPCIBusId),
    P(cuDeviceCanAccessPeer, 4000, 0, cuDeviceCanAccessPeer),
    P(cuDevicePrimaryCtxRetain, 7000, 0, cuDevicePrimaryCtxRetain),
    P(cuDevicePrimaryCtxRelease, 11000, 0, cuDevicePrimaryCtxRelease_v2),
    P(cuDevicePrimaryCtxGetState, 7000, 0, cuDevicePrimaryCtxGetState),
    P(cuDevicePrimaryCtxSetFlags, 11000, 0, cuDevicePrimaryCtxSetFlags_v2),
    P(cuDevicePrimaryCtxReset, 7000, 0, cuDevicePrimaryCtxReset),
    P(cuDevicePrimaryCtxReset, 11000, 0, cuDevicePrimaryCtxReset_v2),
    P(cuCtxCreate, 3020, 0, cuCtxCreate_v2),
    P(cuCtxCreate, 12050, 0, cuCtxCreate_v4),
    P(cuCtxDestroy, 4000, 0, cuCtxDestroy_v2),
    P(cuCtxSetCurrent, 4000, 0, cuCtxSetCurrent),
    P(cuCtxGetCurrent, 4000, 0, cuCtxGetCurrent),
    P(cuCtxPushCurrent, 4000, 0, cuCtxPushCurrent_v2),
    P(cuCtxPopCurrent, 4000, 0, cuCtxPopCurrent_v2),
    P(cuCtxGetDevice, 2000, 0, cuCtxGetDevice),
    P(cuCtxSynchronize, 2000, 0, cuCtxSynchronize),
    P(cuCtxGetStreamPriorityRange, 5050, 0, cuCtxGetStreamPriorityRange),
    P(cuCtxEnablePeerAccess, 4000, 0, cuCtxEnablePeerAccess),
    P(cuMemGetInfo, 3020, 0, cuMemGetInfo_v2),
    P(cuGetErrorName, 6000, 0, cuGetErrorName),
    P(cuGetErrorString, 6000, 0, cuGetErrorString),
    P(cuGetExportTable, 3000, 0, cuGetExportTable),
    P(cuMemAlloc, 2000, 0, cuMemAlloc),
    P(cuMemAlloc, 3020, 0, cuMemAlloc_v2),
    P(cuMemFree, 2000, 0, cuMemFree),
    P(cuMemFree, 3020, 0, cuMemFree_v2),
    P(cuMemAllocPitch, 3020, 0, cuMemAllocPitch_v2),
    P(cuMemAllocManaged, 6000, 0, cuMemAllocManaged),
    P(cuMemAllocAsync, 11020, 0, cuMemAllocAsync),
    P(cuMemAllocAsync, 11020, 1, cuMemAllocAsync_ptsz),
    P(cuMemAllocFromPoolAsync, 11020, 0, cuMemAllocFromPoolAsync),
    P(cuMemAllocFromPoolAsync, 11020, 1, cuMemAllocFromPoolAsync_ptsz),
    P(cuMemFreeAsync, 11020, 0, cuMemFreeAsync),
    P(cuMemFreeAsync, 11020, 1, cuMemFreeAsync_ptsz),
    P(cuDeviceGetDefaultMemPool, 11020, 0, cuDeviceGetDefaultMemPool),
    P(cuDeviceGetMemPool, 11020, 0, cuDeviceGetMemPool),
    P(cuDeviceSetMemPool, 11020, 0, cuDeviceSetMemPool),
    P(cuMemPoolCreate, 11020, 0, cuMemPoolCreate),
    P(cuMemPoolDestroy, 11020, 0, cuMemPoolDestroy),
    P(cuMemGetDefaultMemPool, 13000, 0, cuMemGetDefaultMemPool),
    P(cuMemGetMemPool, 13000, 0, cuMemGetMemPool),
    P(cuMemPoolTrimTo, 11020, 0, cuMemPoolTrimTo),
    P(cuMemPoolSetAttribute, 11020, 0, cuMemPoolSetAttribute),
    P(cuMemPoolGetAttribute, 11020, 0, cuMemPoolGetAttribute),
    P(cuMemPoolSetAccess, 11020, 0, cuMemPoolSetAccess),
    P(cuMemAllocHost, 2000, 0, cuMemAllocHost),
    P(cuMemAllocHost, 3020, 0, cuMemAllocHost_v2),
    P(cuMemHostAlloc, 2020, 0, cuMemHostAlloc),
    P(cuMemFreeHost, 2000, 0, cuMemFreeHost),
    P(cuMemHostRegister, 4000, 0, cuMemHostRegister),
    P(cuMemHostRegister, 6050, 0, cuMemHostRegister_v2),
    P(cuMemHostUnregister, 4000, 0, cuMemHostUnregister),
    P(cuMemGetAllocationGranularity, 10020, 0, cuMemGetAllocationGranularity),
    P(cuMemCreate, 10020, 0, cuMemCreate),
    P(cuMemRelease, 10020, 0, cuMemRelease),
    P(cuMemAddressReserve, 10020, 0, cuMemAddressReserve),
    P(cuMemAddressFree, 10020, 0, cuMemAddressFree),
    P(cuMemMap, 10020, 0, cuMemMap),
    P(cuMemUnmap, 10020, 0, cuMemUnmap),
    P(cuMemSetAccess, 10020, 0, cuMemSetAccess),
    P(cuMemGetAllocationPropertiesFromHandle, 10020, 0, cuMemGetAllocationPropertiesFromHandle),
    P(cuMemRetainAllocationHandle, 11000, 0, cuMemRetainAllocationHandle),
    P(cuMemExportToShareableHandle, 10020, 0, cuMemExportToShareableHandle),
    P(cuMemImportFromShareableHandle, 10020, 0, cuMemImportFromShareableHandle),
    P(cuArrayCreate, 3020, 0, cuArrayCreate_v2),
    P(cuArray3DCreate, 3020, 0, cuArray3DCreate_v2),
    P(cuMipmappedArrayCreate, 5000, 0, cuMipmappedArrayCreate),
    P(cuArrayDestroy, 2000, 0, cuArrayDestroy),
    P(cuMipmappedArrayDestroy, 5000, 0, cuMipmappedArrayDestroy),
    P(cuArrayGetMemoryRequirements, 11060, 0, cuArrayGetMemoryRequirements),
    P(cuMipmappedArrayGetMemoryRequirements, 11060, 0, cuMipmappedArrayGetMemoryRequirements),
    P(cuIpcGetMemHandle, 4010, 0, cuIpcGetMemHandle),
    P(cuIpcOpenMemHandle, 11000, 0, cuIpcOpenMemHandle_v2),
    P(cuIpcCloseMemHandle, 4010, 0, cuIpcCloseMemHandle),
    P(cuIpcGetEventHandle, 4010, 0, cuIpcGetEventHandle),
    P(cuIpcOpenEventHandle, 4010, 0, cuIpcOpenEventHandle),
    P(cuMemGetAddressRange, 3020, 0, cuMemGetAddressRange_v2),
    P(cuPointerGetAttribute, 4000, 0, cuPointerGetAttribute),
    P(cuStreamCreate, 2000, 0, cuStreamCreate),
    P(cuStreamGetDevice, 12080, 0, cuStreamGetDevice),
    P(cuStreamCreateWithPriority, 5050, 0, cuStreamCreateWithPriority),
    P(cuStreamDestroy, 4000, 0, cuStreamDestroy_v2),
    P(cuStreamGetPriority, 5050, 0, cuStreamGetPriority),
    P(cuStreamGetFlags, 5050, 0, cuStreamGetFlags),
    P(cuStreamSynchronize, 2000, 0, cuStreamSynchronize),
    P(cuStreamQuery, 2000, 0, cuStreamQuery),
    P(cuStreamWaitEvent, 3020, 0, cuStreamWaitEvent),
    P(cuStreamIsCapturing, 10000, 0, cuStreamIsCapturing),
    P(cuStreamBeginCapture, 10000, 0, cuStreamBeginCapture),
    P(cuStreamBeginCapture, 10000, 1, cuStreamBeginCapture_ptsz),
    P(cuStreamBeginCapture, 10010, 0, cuStreamBeginCapture_v2),
    P(cuStreamBeginCapture, 10010, 1, cuStreamBeginCapture_v2_ptsz),
    P(cuStreamEndCapture, 10000, 0, cuStreamEndCapture),
    P(cuStreamBeginCaptureToGraph, 12030, 0, cuStreamBeginCaptureToGraph),
    P(cuStreamBeginCaptureToGraph, 12030, 1, cuStreamBeginCaptureToGraph_ptsz),
    P(cuGraphInstantiateWithFlags, 11040, 0, cuGraphInstantiateWithFlags),
    P(cuGraphInstantiate, 12000, 0, cuGraphInstantiateWithFlags),
    P(cuGraphLaunch, 10000, 0, cuGraphLaunch),
    P(cuGraphExecDestroy, 10000, 0, cuGraphExecDestroy),
    P(cuGraphDestroy, 10000, 0, cuGraphDestroy),
    P(cuGraphCreate, 10000, 0, cuGraphCreate),
    P(cuGraphAddMemAllocNode, 11040, 0, cuGraphAddMemAllocNode),
    P(cuGraphAddMemFreeNode, 11040, 0, cuGraphAddMemFreeNode),
    P(cuGraphAddNode, 12020, 0, cuGraphAddNode),
    P(cuGraphAddNode, 12030, 0, cuGraphAddNode_v2),
    P(cuDeviceGetGraphMemAttribute, 11040, 0, cuDeviceGetGraphMemAttribute),
    P(cuDeviceGraphMemTrim, 11040, 0, cuDeviceGraphMemTrim),
    P(cuStreamGetCaptureInfo, 11030, 0, cuStreamGetCaptureInfo_v2),
    P(cuStreamGetCaptureInfo, 12030, 0, cuStreamGetCaptureInfo_v3),
    P(cuStreamWriteValue32, 12000, 0, cuStreamWriteValue32),
    P(cuEventCreate, 2000, 0, cuEventCreate),
    P(cuEventDestroy, 4000, 0, cuEventDestroy_v2),
    P(cuEventRecord, 2000, 0, cuEventRecord),
    P(cuEventRecordWithFlags, 11010, 0, cuEventRecordWithFlags),
    P(cuEventQuery, 2000, 0, cuEventQuery),
    P(cuEventSynchronize, 2000, 0, cuEventSynchronize),
    P(cuEventElapsedTime, 2000, 0, cuEventElapsedTime),
    P(cuEventElapsedTime, 12080, 0, cuEventElapsedTime_v2),
    P(cuMemcpy, 4000, 0, cuMemcpy),
    P(cuMemcpyAsync, 4000, 0, cuMemcpyAsync),
    P(cuMemcpyHtoD, 3020, 0, cuMemcpyHtoD_v2),
    P(cuMemcpyDtoH, 3020, 0, cuMemcpyDtoH_v2),
    P(cuMemcpyDtoD, 3020, 0, cuMemcpyDtoD_v2),
    P(cuMemcpyPeerAsync, 4000, 0, cuMemcpyPeerAsync),
    P(cuMemcpy2D, 3020, 0, cuMemcpy2D_v2),
    P(cuMemcpy2DAsync, 3020, 0, cuMemcpy2DAsync_v2),
    P(cuMemsetD8, 3020, 0, cuMemsetD8_v2),
    P(cuMemsetD8Async, 3020, 0, cuMemsetD8Async),
    P(cuMemsetD32, 3020, 0, cuMemsetD32_v2),
    P(cuMemsetD32Async, 3020, 0, cuMemsetD32Async),
    P(cuGetProcAddress, 11030, 0, cuGetProcAddress),
    P(cuGetProcAddress, 12000, 0, cuGetProcAddress_v2),
#undef P
};

SIM_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn,
                                        int version, cuuint64_t flags,
                                        CUdriverProcAddressQueryResult *status) {
    sim_count("cuGetProcAddress_v2");
    if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
    int want_ptsz = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
    int best = -1, found = 0;
    for (size_t i = 0; i < sizeof sim_procs / sizeof sim_procs[0]; i++) {
        if (strcmp(sim_procs[i].base, symbol) != 0) continue;
        found = 1;
        if (sim_procs[i].version > version) continue;
        if (sim_procs[i].ptsz && !want_ptsz) continue;
        if (best < 0 || sim_procs[i].version > sim_procs[best].version ||
            (sim_procs[i].ptsz && sim_procs[i].version == sim_procs[best].version))
            best = (int)i;
    }
    *pfn = NULL;
    if (best < 0) {
        if (status) *status = found ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                                    : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        return CUDA_ERROR_NOT_FOUND;
    }
    *pfn = sim_procs[best].fn;
    if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn,
                                     int version, cuuint64_t flags) {
    sim_count("cuGetProcAddress");
    return cuGetProcAddress_v2(symbol, pfn, version, flags, NULL);
}

/* cuGetExportTable hands out NVIDIA's private tables; the simulation has
 * none. */
SIM_EXPORT CUresult cuGetExportTable(const void **table, const CUuuid *id) {
    (void)id;
    if (table) *table = NULL;
    return CUDA_ERROR_NOT_SUPPORTED;
}
