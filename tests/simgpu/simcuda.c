/* simcuda.c -- a stand-in libcuda.so.1 for tests: a simulated GPU.
 *
 * It implements the small part of the CUDA driver API that vramtrace hooks
 * and that the stand-in runtime needs, with a configurable capacity and the
 * driver's own error codes: an allocation that does not fit fails with
 * CUDA_ERROR_OUT_OF_MEMORY, a free of an unknown pointer fails with
 * CUDA_ERROR_INVALID_VALUE. Device addresses are fake (never dereference
 * them); pinned host memory is real.
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
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIM_EXPORT __attribute__((visibility("default")))
#define SIM_MAX_DEVICES 8
#define SIM_MAX_ALLOCS 65536
#define SIM_ALIGN 512

/* The _ptsz entry points are exported by the real driver but not declared
 * in cuda.h. */
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytes, CUstream s);
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream s);
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytes,
                                      CUmemoryPool pool, CUstream s);

enum sim_kind { SIM_DEVICE, SIM_HOST, SIM_HANDLE, SIM_ARRAY, SIM_IMPORTED, SIM_HOST_HANDLE, SIM_HOST_POOL };

struct sim_alloc {
    uint64_t addr;   /* device address, host address or handle */
    size_t bytes;    /* what counts against the device */
    int device;
    int kind;
    int used;
};

struct sim_device {
    uint64_t next;   /* bump pointer for fake addresses */
    size_t used;
    int ctx_tag;     /* address of this is the CUcontext */
};

static pthread_mutex_t sim_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sim_alloc sim_allocs[SIM_MAX_ALLOCS];
static struct sim_device sim_dev[SIM_MAX_DEVICES];
static int sim_ndev = 1;
static size_t sim_capacity = (size_t)16 << 30;
static size_t sim_context;
static size_t sim_max_block;
static int sim_initialized;
static uint64_t sim_next_handle = 0x1000;
static uint64_t sim_next_low = 0x10000000; /* v1 API: 32-bit addresses */
static __thread int sim_current = -1;

/* Call counters, by exported name. */
#define SIM_MAX_COUNTERS 128
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

static void sim_setup(void) {
    if (sim_initialized) return;
    const char *n = getenv("SIMGPU_DEVICES");
    if (n && atoi(n) >= 1 && atoi(n) <= SIM_MAX_DEVICES) sim_ndev = atoi(n);
    sim_capacity = sim_parse_size(getenv("SIMGPU_CAPACITY"), sim_capacity);
    sim_context = sim_parse_size(getenv("SIMGPU_CONTEXT"), 0);
    sim_max_block = sim_parse_size(getenv("SIMGPU_MAX_BLOCK"), 0);
    for (int d = 0; d < SIM_MAX_DEVICES; d++) {
        sim_dev[d].next = 0x700000000000ull + ((uint64_t)d << 36);
        sim_dev[d].used = sim_context;
    }
    sim_initialized = 1;
}

static int sim_device_now(void) { return sim_current < 0 ? 0 : sim_current; }

/* Reserve bytes on a device and hand out an id for them. Returns
 * CUDA_ERROR_OUT_OF_MEMORY when the device is full. */
static CUresult sim_take(int device, size_t bytes, int kind, int low,
                         uint64_t *out) {
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&sim_lock);
    sim_setup();
    int on_host = kind == SIM_HOST || kind == SIM_HOST_HANDLE || kind == SIM_HOST_POOL;
    size_t counted = on_host || kind == SIM_IMPORTED ? 0 : bytes;
    if (counted > sim_capacity - sim_dev[device].used || (sim_max_block && counted > sim_max_block)) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    int slot = -1;
    for (int i = 0; i < SIM_MAX_ALLOCS; i++)
        if (!sim_allocs[i].used) { slot = i; break; }
    if (slot < 0) { r = CUDA_ERROR_OUT_OF_MEMORY; goto out; }
    uint64_t addr;
    if (kind == SIM_HANDLE || kind == SIM_ARRAY || kind == SIM_HOST_HANDLE) {
        addr = sim_next_handle++;
    } else if (kind == SIM_IMPORTED) {
        addr = 0x7f0000000000ull + (sim_next_handle++ << 24);
    } else if (kind == SIM_HOST) {
        addr = *out;
    } else if (low) {
        addr = sim_next_low;
        sim_next_low += (bytes + SIM_ALIGN - 1) / SIM_ALIGN * SIM_ALIGN;
    } else {
        addr = sim_dev[device].next;
        sim_dev[device].next += (bytes + SIM_ALIGN - 1) / SIM_ALIGN * SIM_ALIGN
                                + SIM_ALIGN;
    }
    sim_allocs[slot] = (struct sim_alloc){addr, kind == SIM_IMPORTED || on_host ? bytes : counted, device, kind, 1};
    sim_dev[device].used += counted;
    *out = addr;
out:
    pthread_mutex_unlock(&sim_lock);
    return r;
}

/* Give back what sim_take handed out; unknown ids are the caller's error. */
static CUresult sim_give(uint64_t addr, int kind) {
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_lock);
    for (int i = 0; i < SIM_MAX_ALLOCS; i++) {
        struct sim_alloc *a = &sim_allocs[i];
        if (a->used && a->addr == addr && a->kind == kind) {
            if (kind == SIM_DEVICE || kind == SIM_HANDLE || kind == SIM_ARRAY) sim_dev[a->device].used -= a->bytes;
            a->used = 0;
            r = CUDA_SUCCESS;
            break;
        }
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

SIM_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice d) {
    cuInit(0);
    if (!ctx || d < 0 || d >= sim_ndev) return CUDA_ERROR_INVALID_DEVICE;
    *ctx = (CUcontext)&sim_dev[d].ctx_tag;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) {
    return d < 0 || d >= sim_ndev ? CUDA_ERROR_INVALID_DEVICE : CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxSetCurrent(CUcontext ctx) {
    if (ctx == NULL) { sim_current = -1; return CUDA_SUCCESS; }
    for (int d = 0; d < sim_ndev; d++)
        if (ctx == (CUcontext)&sim_dev[d].ctx_tag) { sim_current = d; return CUDA_SUCCESS; }
    return CUDA_ERROR_INVALID_CONTEXT;
}

SIM_EXPORT CUresult cuCtxGetDevice(CUdevice *d) {
    if (!d) return CUDA_ERROR_INVALID_VALUE;
    *d = sim_device_now();
    return CUDA_SUCCESS;
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

SIM_EXPORT CUresult cuGetErrorName(CUresult e, const char **s) {
    if (!s) return CUDA_ERROR_INVALID_VALUE;
    switch (e) {
    case CUDA_SUCCESS: *s = "CUDA_SUCCESS"; break;
    case CUDA_ERROR_INVALID_VALUE: *s = "CUDA_ERROR_INVALID_VALUE"; break;
    case CUDA_ERROR_OUT_OF_MEMORY: *s = "CUDA_ERROR_OUT_OF_MEMORY"; break;
    default: *s = "CUDA_ERROR_UNKNOWN"; break;
    }
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuGetErrorString(CUresult e, const char **s) {
    return cuGetErrorName(e, s);
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

static CUresult sim_free_device(const char *api, CUdeviceptr p) {
    sim_count(api);
    if (p == 0) return CUDA_SUCCESS;
    CUresult r = sim_give(p, SIM_DEVICE);
    return r == CUDA_SUCCESS ? r : sim_give(p, SIM_HOST_POOL);
}

/* Memory pools: the location each was made for. */
#define SIM_MAX_POOLS 16
static struct sim_pool { CUmemLocation location; int used; } sim_pools[SIM_MAX_POOLS];
/* A location's default pool: one per device, one for the host; it is also
 * the location's current pool. */
static struct sim_pool sim_default_pools[SIM_MAX_DEVICES + 1];

static int sim_location_is_host(const CUmemLocation *l) {
    return l->type == CU_MEM_LOCATION_TYPE_HOST || l->type == CU_MEM_LOCATION_TYPE_HOST_NUMA ||
           l->type == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT;
}

SIM_EXPORT CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props) {
    sim_count("cuMemPoolCreate");
    if (!pool || !props) return CUDA_ERROR_INVALID_VALUE;
    if (!sim_location_is_host(&props->location) &&
        (props->location.type != CU_MEM_LOCATION_TYPE_DEVICE || props->location.id < 0 ||
         props->location.id >= sim_ndev))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&sim_lock);
    for (int i = 0; i < SIM_MAX_POOLS; i++)
        if (!sim_pools[i].used) {
            sim_pools[i] = (struct sim_pool){props->location, 1};
            *pool = (CUmemoryPool)&sim_pools[i];
            r = CUDA_SUCCESS;
            break;
        }
    pthread_mutex_unlock(&sim_lock);
    return r;
}

SIM_EXPORT CUresult cuMemGetDefaultMemPool(CUmemoryPool *pool, CUmemLocation *location, CUmemAllocationType type) {
    sim_count("cuMemGetDefaultMemPool");
    if (!pool || !location || type != CU_MEM_ALLOCATION_TYPE_PINNED) return CUDA_ERROR_INVALID_VALUE;
    int k;
    if (sim_location_is_host(location)) k = SIM_MAX_DEVICES;
    else if (location->type == CU_MEM_LOCATION_TYPE_DEVICE && location->id >= 0 && location->id < sim_ndev)
        k = location->id;
    else return CUDA_ERROR_INVALID_VALUE;
    sim_default_pools[k] = (struct sim_pool){*location, 1};
    *pool = (CUmemoryPool)&sim_default_pools[k];
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemGetMemPool(CUmemoryPool *pool, CUmemLocation *location, CUmemAllocationType type) {
    return cuMemGetDefaultMemPool(pool, location, type);
}

SIM_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool) {
    sim_count("cuMemPoolDestroy");
    struct sim_pool *p = (struct sim_pool *)pool;
    if (p < sim_pools || p >= sim_pools + SIM_MAX_POOLS || !p->used) return CUDA_ERROR_INVALID_VALUE;
    p->used = 0;
    return CUDA_SUCCESS;
}

/* An allocation from a pool: host memory for a pool on the host, else the
 * pool's device's. */
static CUresult sim_alloc_pool(const char *api, CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool) {
    struct sim_pool *p = (struct sim_pool *)pool;
    int known = (p >= sim_pools && p < sim_pools + SIM_MAX_POOLS) ||
                (p >= sim_default_pools && p < sim_default_pools + SIM_MAX_DEVICES + 1);
    if (!known || !p->used) return sim_alloc_device(api, dptr, bytes);
    sim_count(api);
    if (!dptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
    int host = sim_location_is_host(&p->location);
    uint64_t a;
    CUresult r = sim_take(host ? 0 : p->location.id, bytes, host ? SIM_HOST_POOL : SIM_DEVICE, 0, &a);
    if (r == CUDA_SUCCESS) *dptr = a;
    return r;
}

SIM_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytes) {
    return sim_alloc_device("cuMemAlloc_v2", dptr, bytes);
}

SIM_EXPORT CUresult cuMemFree_v2(CUdeviceptr p) {
    return sim_free_device("cuMemFree_v2", p);
}

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

static size_t sim_pitch(size_t width) {
    return (width + SIM_ALIGN - 1) / SIM_ALIGN * SIM_ALIGN;
}

SIM_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch,
                                       size_t width, size_t height,
                                       unsigned int elem) {
    sim_count("cuMemAllocPitch_v2");
    if (!dptr || !pitch || width == 0 || height == 0 ||
        (elem != 4 && elem != 8 && elem != 16))
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t a;
    size_t p = sim_pitch(width);
    CUresult r = sim_take(sim_device_now(), p * height, SIM_DEVICE, 0, &a);
    if (r == CUDA_SUCCESS) { *dptr = a; *pitch = p; }
    return r;
}

SIM_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytes,
                                      unsigned int flags) {
    (void)flags;
    return sim_alloc_device("cuMemAllocManaged", dptr, bytes);
}

SIM_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytes, CUstream s) {
    (void)s;
    return sim_alloc_device("cuMemAllocAsync", dptr, bytes);
}

SIM_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytes, CUstream s) {
    (void)s;
    return sim_alloc_device("cuMemAllocAsync_ptsz", dptr, bytes);
}

SIM_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytes,
                                            CUmemoryPool pool, CUstream s) {
    (void)s;
    return sim_alloc_pool("cuMemAllocFromPoolAsync", dptr, bytes, pool);
}

SIM_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytes,
                                                 CUmemoryPool pool, CUstream s) {
    (void)s;
    return sim_alloc_pool("cuMemAllocFromPoolAsync_ptsz", dptr, bytes, pool);
}

SIM_EXPORT CUresult cuMemFreeAsync(CUdeviceptr p, CUstream s) {
    (void)s;
    return sim_free_device("cuMemFreeAsync", p);
}

SIM_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr p, CUstream s) {
    (void)s;
    return sim_free_device("cuMemFreeAsync_ptsz", p);
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

/* ------------------------------------------------------- arrays, IPC */

static size_t sim_format_bytes(CUarray_format f) {
    switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8: case CU_AD_FORMAT_SIGNED_INT8: return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16: case CU_AD_FORMAT_SIGNED_INT16: case CU_AD_FORMAT_HALF: return 2;
    default: return 4;
    }
}

static size_t dim(size_t v) { return v ? v : 1; }

SIM_EXPORT CUresult cuArrayCreate_v2(CUarray *h, const CUDA_ARRAY_DESCRIPTOR *d) {
    sim_count("cuArrayCreate_v2");
    if (!h || !d || d->Width == 0 || d->NumChannels == 0) return CUDA_ERROR_INVALID_VALUE;
    uint64_t a;
    CUresult r = sim_take(sim_device_now(), d->Width * dim(d->Height) * d->NumChannels * sim_format_bytes(d->Format),
                          SIM_ARRAY, 0, &a);
    if (r == CUDA_SUCCESS) *h = (CUarray)(uintptr_t)a;
    return r;
}

SIM_EXPORT CUresult cuArray3DCreate_v2(CUarray *h, const CUDA_ARRAY3D_DESCRIPTOR *d) {
    sim_count("cuArray3DCreate_v2");
    if (!h || !d || d->Width == 0 || d->NumChannels == 0) return CUDA_ERROR_INVALID_VALUE;
    uint64_t a;
    CUresult r = sim_take(sim_device_now(),
                          d->Width * dim(d->Height) * dim(d->Depth) * d->NumChannels * sim_format_bytes(d->Format),
                          SIM_ARRAY, 0, &a);
    if (r == CUDA_SUCCESS) *h = (CUarray)(uintptr_t)a;
    return r;
}

SIM_EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray *h, const CUDA_ARRAY3D_DESCRIPTOR *d,
                                           unsigned int levels) {
    sim_count("cuMipmappedArrayCreate");
    if (!h || !d || d->Width == 0 || levels == 0) return CUDA_ERROR_INVALID_VALUE;
    size_t bytes = 0;
    for (unsigned l = 0; l < levels; l++)
        bytes += dim(d->Width >> l) * dim(d->Height >> l) * dim(d->Depth >> l) * d->NumChannels *
                 sim_format_bytes(d->Format);
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
    for (int i = 0; i < SIM_MAX_ALLOCS; i++)
        if (sim_allocs[i].used && sim_allocs[i].kind == SIM_ARRAY && sim_allocs[i].addr == h) {
            memset(req, 0, sizeof *req);
            req->size = sim_allocs[i].bytes;
            req->alignment = SIM_ALIGN;
            r = CUDA_SUCCESS;
            break;
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

/* An IPC handle of the simulation carries the size of the memory it names;
 * opening it maps "another process's" memory, which this device's capacity
 * does not pay for. */
SIM_EXPORT CUresult cuIpcGetMemHandle(CUipcMemHandle *h, CUdeviceptr p) {
    if (!h || !p) return CUDA_ERROR_INVALID_VALUE;
    memset(h, 0, sizeof *h);
    size_t bytes = 0;
    pthread_mutex_lock(&sim_lock);
    for (int i = 0; i < SIM_MAX_ALLOCS; i++)
        if (sim_allocs[i].used && sim_allocs[i].addr == p) bytes = sim_allocs[i].bytes;
    pthread_mutex_unlock(&sim_lock);
    memcpy(h->reserved, &bytes, sizeof bytes);
    return bytes ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SIM_EXPORT CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *p, CUipcMemHandle h, unsigned int flags) {
    (void)flags;
    sim_count("cuIpcOpenMemHandle_v2");
    size_t bytes;
    memcpy(&bytes, h.reserved, sizeof bytes);
    if (!p || bytes == 0) return CUDA_ERROR_INVALID_HANDLE;
    uint64_t a;
    CUresult r = sim_take(sim_device_now(), bytes, SIM_IMPORTED, 0, &a);
    if (r == CUDA_SUCCESS) *p = a;
    return r;
}

SIM_EXPORT CUresult cuIpcCloseMemHandle(CUdeviceptr p) {
    sim_count("cuIpcCloseMemHandle");
    return sim_give(p, SIM_IMPORTED);
}

SIM_EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr *base, size_t *size, CUdeviceptr p) {
    CUresult r = CUDA_ERROR_NOT_FOUND;
    pthread_mutex_lock(&sim_lock);
    for (int i = 0; i < SIM_MAX_ALLOCS; i++) {
        struct sim_alloc *a = &sim_allocs[i];
        if (a->used && (a->kind == SIM_DEVICE || a->kind == SIM_IMPORTED) && p >= a->addr &&
            p < a->addr + (a->bytes ? a->bytes : 1)) {
            if (base) *base = a->addr;
            if (size) *size = a->bytes;
            r = CUDA_SUCCESS;
            break;
        }
    }
    pthread_mutex_unlock(&sim_lock);
    return r;
}

/* ---------------------------------------------------- virtual memory (VMM) */

SIM_EXPORT CUresult cuMemGetAllocationGranularity(size_t *g,
        const CUmemAllocationProp *prop, CUmemAllocationGranularity_flags f) {
    (void)prop; (void)f;
    if (!g) return CUDA_ERROR_INVALID_VALUE;
    *g = (size_t)2 << 20;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t size,
                                const CUmemAllocationProp *prop,
                                unsigned long long flags) {
    (void)flags;
    sim_count("cuMemCreate");
    if (!h || !prop || size == 0 || size % ((size_t)2 << 20) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    int host = sim_location_is_host(&prop->location);
    int d = host ? 0 : prop->location.id;
    if (d < 0 || d >= sim_ndev) return CUDA_ERROR_INVALID_DEVICE;
    uint64_t a;
    CUresult r = sim_take(d, size, host ? SIM_HOST_HANDLE : SIM_HANDLE, 0, &a);
    if (r == CUDA_SUCCESS) *h = a;
    return r;
}

SIM_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle h) {
    sim_count("cuMemRelease");
    CUresult r = sim_give(h, SIM_HANDLE);
    return r == CUDA_SUCCESS ? r : sim_give(h, SIM_HOST_HANDLE);
}

SIM_EXPORT CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size,
                                        size_t align, CUdeviceptr addr,
                                        unsigned long long flags) {
    (void)align; (void)addr; (void)flags;
    if (!ptr || size == 0) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_lock);
    sim_setup();
    *ptr = sim_dev[0].next + ((uint64_t)1 << 35);
    sim_dev[0].next += size;
    pthread_mutex_unlock(&sim_lock);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
    (void)ptr; (void)size;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                             CUmemGenericAllocationHandle h,
                             unsigned long long flags) {
    (void)size; (void)offset; (void)flags;
    sim_count("cuMemMap");
    return ptr == 0 || h == 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
    (void)size;
    return ptr == 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size,
                                   const CUmemAccessDesc *desc, size_t count) {
    (void)ptr; (void)size; (void)desc; (void)count;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------ cuGetProcAddress */

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
    P(cuDevicePrimaryCtxRetain, 7000, 0, cuDevicePrimaryCtxRetain),
    P(cuDevicePrimaryCtxRelease, 11000, 0, cuDevicePrimaryCtxRelease_v2),
    P(cuCtxSetCurrent, 4000, 0, cuCtxSetCurrent),
    P(cuCtxGetDevice, 2000, 0, cuCtxGetDevice),
    P(cuMemGetInfo, 3020, 0, cuMemGetInfo_v2),
    P(cuGetErrorName, 6000, 0, cuGetErrorName),
    P(cuGetErrorString, 6000, 0, cuGetErrorString),
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
    P(cuMemPoolCreate, 11020, 0, cuMemPoolCreate),
    P(cuMemPoolDestroy, 11020, 0, cuMemPoolDestroy),
    P(cuMemGetDefaultMemPool, 13000, 0, cuMemGetDefaultMemPool),
    P(cuMemGetMemPool, 13000, 0, cuMemGetMemPool),
    P(cuMemAllocHost, 2000, 0, cuMemAllocHost),
    P(cuMemAllocHost, 3020, 0, cuMemAllocHost_v2),
    P(cuMemHostAlloc, 2020, 0, cuMemHostAlloc),
    P(cuMemFreeHost, 2000, 0, cuMemFreeHost),
    P(cuMemGetAllocationGranularity, 10020, 0, cuMemGetAllocationGranularity),
    P(cuMemCreate, 10020, 0, cuMemCreate),
    P(cuMemRelease, 10020, 0, cuMemRelease),
    P(cuMemAddressReserve, 10020, 0, cuMemAddressReserve),
    P(cuMemAddressFree, 10020, 0, cuMemAddressFree),
    P(cuMemMap, 10020, 0, cuMemMap),
    P(cuMemUnmap, 10020, 0, cuMemUnmap),
    P(cuMemSetAccess, 10020, 0, cuMemSetAccess),
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
    P(cuMemGetAddressRange, 3020, 0, cuMemGetAddressRange_v2),
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
