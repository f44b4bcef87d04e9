/* hook.c -- recording the outcome of a hooked call. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include "../common/oomtext.h"
#include "../report/live.h"
#include "../report/owntime.h"
#include "../report/output.h"
#include "../tracker/options.h"
#include "../tracker/pystack.h"
#include "../tracker/pystack_id.h"
#include "../tracker/stack.h"
#include "graphs.h"
#include "hook.h"
#include "nvml.h"
#include "ondemand.h"
#include "pools.h"
#include "resolve.h"

__thread int vt_in_runtime __attribute__((tls_model("initial-exec")));
__thread int vt_busy __attribute__((tls_model("initial-exec")));
__thread int vt_in_real __attribute__((tls_model("initial-exec")));

static pthread_once_t python_once = PTHREAD_ONCE_INIT;
/* Set once init_python has run: the hooks test it and skip pthread_once. */
static enum { PYTHON_UNKNOWN, PYTHON_OFF, PYTHON_ON } python_state;

/* Python's symbols, wherever the interpreter lives (the executable, a
 * libpython loaded globally). */
static void *python_symbol(const char *name) { return vt_global_symbol(name); }

/* Looked for at the first allocation, not at start: an embedding program
 * may load libpython later. */
static void init_python(void) {
    vt_pystack_init(python_symbol, vt_opt.python);
    __atomic_store_n(&python_state, vt_pystack_version() ? PYTHON_ON : PYTHON_OFF, __ATOMIC_RELEASE);
}

/* The device of the calling thread's current context, or 0. Inlined, as
 * stack_id is: every allocation asks both. */
static inline __attribute__((always_inline)) int current_device(void) {
    static void *kept;
    CUresult (*get)(CUdevice *);
    *(void **)&get = vt_driver_fn_kept(&kept, "cuCtxGetDevice");
    CUdevice d = 0;
    if (get && get(&d) == CUDA_SUCCESS && d >= 0 && d < VT_MAX_DEVICES) return d;
    return 0;
}

/* Each device's UUID as NVML names it, written once by read_facts under
 * facts_lock (two threads may use a new device at once) and read under it. */
static char uuids[VT_MAX_DEVICES][48];
static pthread_mutex_t facts_lock = PTHREAD_MUTEX_INITIALIZER;

/* VRAMTRACE_LIMIT: the bytes each device has promised to allocations that
 * passed the budget and are not in the counts yet, and this thread's
 * promise (vt_budget_refuse_slow makes it, vt_hook_alloc keeps it). A
 * check and the record that ends a promise hold budget_lock, so that two
 * threads that check at once cannot both take the last bytes, and a check
 * never counts an allocation twice (promised and recorded). */
static pthread_mutex_t budget_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t promised[VT_MAX_DEVICES];
static __thread struct { int device; uint64_t bytes; } my_promise __attribute__((tls_model("initial-exec")));

void vt_hook_reset_child(void) {
    pthread_mutex_init(&facts_lock, NULL);
    /* No other thread is left to keep a promise. */
    pthread_mutex_init(&budget_lock, NULL);
    memset(promised, 0, sizeof promised);
    my_promise.bytes = 0;
}

/* Read a device's name, UUID and size once, when it is first used: 1 for
 * the call that read them, 0 for the others (threads whose first calls
 * raced past vt_tracker_needs_facts). */
static int read_facts(int device) {
    pthread_mutex_lock(&facts_lock);
    if (!vt_tracker_needs_facts(device)) {
        pthread_mutex_unlock(&facts_lock);
        return 0;
    }
    static CUresult (*get_name)(char *, int, CUdevice);
    static CUresult (*get_uuid)(CUuuid *, CUdevice);
    static CUresult (*get_total)(size_t *, CUdevice);
    if (!get_name) *(void **)&get_name = vt_driver_fn("cuDeviceGetName");
    if (!get_uuid) *(void **)&get_uuid = vt_driver_fn("cuDeviceGetUuid_v2");
    if (!get_uuid) *(void **)&get_uuid = vt_driver_fn("cuDeviceGetUuid");
    if (!get_total) *(void **)&get_total = vt_driver_fn("cuDeviceTotalMem_v2");
    char name[128] = "";
    char uuid[48] = "";
    size_t total = 0;
    if (get_name && get_name(name, sizeof name, device) != CUDA_SUCCESS) name[0] = '\0';
    CUuuid u;
    if (get_uuid && get_uuid(&u, device) == CUDA_SUCCESS) {
        const unsigned char *b = (const unsigned char *)u.bytes;
        snprintf(uuid, sizeof uuid,
                 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9],
                 b[10], b[11], b[12], b[13], b[14], b[15]);
    }
    if (get_total && get_total(&total, device) != CUDA_SUCCESS) total = 0;
    snprintf(uuids[device], sizeof uuids[device], "%s", uuid);
    vt_tracker_set_facts(device, name, uuid, total);
    pthread_mutex_unlock(&facts_lock);
    return 1;
}

/* Whether Python frames are taken (looked for at the first call). */
static int python_on(void) {
    int st = __atomic_load_n(&python_state, __ATOMIC_ACQUIRE);
    if (__builtin_expect(st == PYTHON_UNKNOWN, 0)) {
        pthread_once(&python_once, init_python);
        st = __atomic_load_n(&python_state, __ATOMIC_ACQUIRE);
    }
    return st == PYTHON_ON;
}

/* This thread's stack, native frames with Python's spliced in. */
static int capture(uintptr_t *frames) {
    if (!python_on()) return vt_stack_capture(frames, vt_opt.depth);
    uintptr_t native[VT_STACK_MAX];
    int depth = vt_stack_capture(native, vt_opt.depth);
    return vt_pystack_merge(native, depth, frames, VT_MAX_FRAMES);
}

/* The id of this thread's stack. Native stacks go through the tracker's
 * memo of the last stack, which the walker tells when the stack has not
 * changed; with Python frames the merged stack can change while the native
 * one does not, so pystack_id.c keeps the Python frames beside it. */
static inline __attribute__((always_inline)) uint32_t stack_id(void) {
    if (python_on()) return vt_pystack_id(vt_opt.depth);
    return vt_tracker_stack_id_captured(vt_opt.depth, vt_stack_capture_since, vt_stack_serial);
}

/* A failure record for a request, the rest of it zero. */
static struct vt_oom failure(const char *api, int kind, int device, uint64_t bytes) {
    struct vt_oom o;
    memset(&o, 0, sizeof o);
    o.requested = bytes;
    o.api = api;
    o.device = (int16_t)device;
    o.kind = (uint8_t)kind;
    return o;
}

/* Record an out-of-memory failure (from the device, or from the budget
 * when `budget` is set). The tracker then tells its failure listener (the
 * post-mortem, registered by init.c) inside this call. */
/* Device `device`'s free and total bytes (cuMemGetInfo, which answers for
 * the current context's device). For another device (a pool or a stream
 * of another device, cuMemCreate at another location), inside its primary
 * context when that is active; 0 (not known) when it is not: asking would
 * make one. */
static int device_mem_info(int device, size_t *f, size_t *t) {
    static void *k_info, *k_state, *k_retain, *k_push, *k_pop, *k_release;
    CUresult (*info)(size_t *, size_t *);
    *(void **)&info = vt_driver_fn_kept(&k_info, "cuMemGetInfo_v2");
    if (!info) return 0;
    if (device < 0 || device == current_device()) return info(f, t) == CUDA_SUCCESS;
    CUresult (*state)(CUdevice, unsigned *, int *);
    CUresult (*retain)(CUcontext *, CUdevice);
    CUresult (*push)(CUcontext);
    CUresult (*pop)(CUcontext *);
    CUresult (*release)(CUdevice);
    *(void **)&state = vt_driver_fn_kept(&k_state, "cuDevicePrimaryCtxGetState");
    *(void **)&retain = vt_driver_fn_kept(&k_retain, "cuDevicePrimaryCtxRetain");
    *(void **)&push = vt_driver_fn_kept(&k_push, "cuCtxPushCurrent_v2");
    *(void **)&pop = vt_driver_fn_kept(&k_pop, "cuCtxPopCurrent_v2");
    *(void **)&release = vt_driver_fn_kept(&k_release, "cuDevicePrimaryCtxRelease_v2");
    unsigned flags;
    int active = 0;
    CUcontext c, popped;
    if (!state || !retain || !push || !pop || !release || state(device, &flags, &active) != CUDA_SUCCESS ||
        !active || retain(&c, device) != CUDA_SUCCESS)
        return 0;
    int ok = 0;
    if (push(c) == CUDA_SUCCESS) {
        ok = info(f, t) == CUDA_SUCCESS;
        pop(&popped);
    }
    release(device);
    return ok;
}

/* What the CUDA graphs' memory pool of device `device` holds: reserved
 * from the device, and in use by graph allocations a launch made
 * (cuDeviceGetGraphMemAttribute; 0 when the driver cannot say). */
static void graph_memory(int device, struct vt_oom *o) {
    static void *kept;
    CUresult (*get)(CUdevice, CUgraphMem_attribute, void *);
    *(void **)&get = vt_driver_fn_kept(&kept, "cuDeviceGetGraphMemAttribute");
    cuuint64_t reserved = 0, used = 0;
    if (!get || device < 0 || get(device, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &reserved) != CUDA_SUCCESS ||
        get(device, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &used) != CUDA_SUCCESS)
        return;
    o->graph_reserved = reserved;
    o->graph_used = used;
}

/* What device `device`'s stream-ordered memory pools hold: reserved from
 * the device, and in use by allocations (its current and default pools and
 * every pool vramtrace saw handed out for it, each once; 0 where the
 * driver cannot say). What a pool keeps of freed blocks (its release
 * threshold; PyTorch's cudaMallocAsync backend keeps all) is then not
 * called memory held outside the tracked allocations. */
#define VT_POOLS_ASKED 64
static void pool_memory(int device, struct vt_oom *o) {
    static void *k_get, *k_cur, *k_def;
    CUresult (*get)(CUmemoryPool, CUmemPool_attribute, void *);
    CUresult (*cur)(CUmemoryPool *, CUdevice);
    CUresult (*def)(CUmemoryPool *, CUdevice);
    *(void **)&get = vt_driver_fn_kept(&k_get, "cuMemPoolGetAttribute");
    *(void **)&cur = vt_driver_fn_kept(&k_cur, "cuDeviceGetMemPool");
    *(void **)&def = vt_driver_fn_kept(&k_def, "cuDeviceGetDefaultMemPool");
    if (!get || device < 0) return;
    void *pools[VT_POOLS_ASKED];
    size_t n = 0;
    CUmemoryPool p;
    if (cur && cur(&p, device) == CUDA_SUCCESS && p) pools[n++] = p;
    if (def && def(&p, device) == CUDA_SUCCESS && p) pools[n++] = p;
    n += vt_pools_of(device, pools + n, VT_POOLS_ASKED - n);
    for (size_t i = 0; i < n; i++) {
        int seen = 0;
        for (size_t j = 0; j < i && !seen; j++) seen = pools[j] == pools[i];
        cuuint64_t reserved = 0, in_use = 0;
        if (seen || get((CUmemoryPool)pools[i], CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved) != CUDA_SUCCESS ||
            get((CUmemoryPool)pools[i], CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &in_use) != CUDA_SUCCESS)
            continue;
        o->pool_reserved += reserved;
        o->pool_used += in_use;
    }
}

/* What device `device` holds outside the tracked allocations, measured
 * once the first allocation of `made` bytes on it succeeded and before it
 * is recorded (its CUDA context and other processes, which the forecast
 * cannot fill): the device's used bytes less the tracked live and the
 * new allocation's. */
static void measure_outside(int device, uint64_t made) {
    size_t f = 0, t = 0;
    if (!device_mem_info(device, &f, &t) || t < f) return;
    uint64_t used = t - f, live = vt_tracker_device_live(device) + made;
    vt_tracker_set_outside(device, used > live ? used - live : 0);
}

static void record_oom(const char *api, int kind, int device, uint64_t bytes, int budget, uint64_t used,
                       uint64_t raised_allocated, int rounded) {
    uint64_t own_from = vt_now_ns(), at = vt_tracker_ticks();
    uintptr_t frames[VT_MAX_FRAMES];
    int depth = capture(frames);
    struct vt_oom o = failure(api, kind, device, bytes);
    o.time_ns = at; /* its time: before what is asked below (tracker.h) */
    o.budget = (uint8_t)budget;
    o.raised_allocated = raised_allocated;
    o.requested_rounded = (uint8_t)rounded;
    if (budget) {
        /* What the budget saw when it refused (`used`: the live bytes and
         * what other threads' calls in flight were promised, under its
         * lock; read again here, frees since would show more free than
         * the refusal had). */
        o.total_bytes = vt_opt.limit;
        o.free_bytes = used < vt_opt.limit ? vt_opt.limit - used : 0;
        o.have_info = 1;
    } else if (!vt_kind_is_host(kind)) {
        size_t f = 0, t = 0;
        if (device_mem_info(device, &f, &t)) {
            o.free_bytes = f;
            o.total_bytes = t;
            o.have_info = 1;
        }
        graph_memory(device, &o);
        pool_memory(device, &o);
        if (o.have_info)
            vt_tracker_set_outside(device, vt_oom_outside(o.total_bytes, o.free_bytes, vt_tracker_device_live(device),
                                                          o.graph_reserved, o.graph_used, o.pool_reserved,
                                                          o.pool_used));
    }
    struct vt_proc procs[VT_MAX_PROCS];
    if (device >= 0 && device < VT_MAX_DEVICES && !vt_kind_is_host(kind)) {
        char uuid[sizeof uuids[0]];
        pthread_mutex_lock(&facts_lock);
        memcpy(uuid, uuids[device], sizeof uuid);
        pthread_mutex_unlock(&facts_lock);
        int n = vt_nvml_processes(uuid, procs, VT_MAX_PROCS);
        if (n >= 0) {
            o.procs = procs;
            o.nprocs = (uint32_t)n;
        }
    }
    vt_tracker_failed(1, &o, frames, depth);
    /* All of it vramtrace's own time, not the program's work (growth
     * measured in time: report/owntime.h). */
    vt_own_time_add(own_from, vt_now_ns());
}

/* At the first GPU allocation: the options' warnings (they may go to a
 * pipe nobody reads), then the dump signal. */
static void first_touch(void) {
    struct vt_sigpipe held;
    vt_sigpipe_hold(&held);
    vt_options_flush_warnings();
    vt_exit_status_watch();
    vt_ondemand_start();
    vt_live_start();
    vt_sigpipe_release(&held);
}

int vt_budget_settle(const char *api, int kind, uint64_t bytes) {
    if (__builtin_expect(my_promise.bytes == 0 || bytes <= my_promise.bytes, 1)) return 0;
    int device = my_promise.device;
    pthread_mutex_lock(&budget_lock);
    uint64_t more = bytes - my_promise.bytes;
    uint64_t used = vt_tracker_device_live(device) + promised[device];
    int fits = used <= vt_opt.limit && more <= vt_opt.limit - used;
    if (fits) {
        promised[device] += more;
        my_promise.bytes = bytes;
    } else {
        used -= my_promise.bytes; /* what the others use: the refusal is of all `bytes` */
        promised[device] -= my_promise.bytes;
        my_promise.bytes = 0;
    }
    pthread_mutex_unlock(&budget_lock);
    if (fits) return 0;
    record_oom(api, kind, device, bytes, 1, used, 0, 0);
    return 1;
}

/* This thread's promise ended, the allocation recorded first where
 * `record` (the arguments of vt_tracker_alloc_at). */
static void keep_promise(uint64_t address, uint64_t bytes, int kind, int device, const char *api, uint32_t id,
                         int record) {
    pthread_mutex_lock(&budget_lock);
    if (record) vt_tracker_alloc_at(address, bytes, kind, device, api, id);
    promised[my_promise.device] -= my_promise.bytes;
    my_promise.bytes = 0;
    pthread_mutex_unlock(&budget_lock);
}

void vt_hook_alloc(const char *api, int kind, int device, int ok, int oom,
                   uint64_t address, uint64_t bytes) {
    int promise = __builtin_expect(my_promise.bytes != 0, 0);
    if (ok && address == 0) { /* a zero-byte request: nothing held */
        if (promise) keep_promise(0, 0, 0, 0, NULL, 0, 0);
        return;
    }
    vt_init();
    int first = !vt_tracker_touched();
    if (vt_kind_is_host(kind)) {
        device = VT_HOST_DEVICE;
    } else if (device == VT_DEVICE_CURRENT) {
        device = current_device();
    }
    /* Measured once, by the call that read the facts (256 threads' first
     * calls each measured it, each applying every thread's log). */
    if (device >= 0 && (ok || oom) && vt_tracker_needs_facts(device) && read_facts(device) && ok)
        measure_outside(device, bytes);
    if (ok) {
        if (__builtin_expect(vt_thread_oom_open, 0)) vt_oom_close_mine();
        uint32_t id = stack_id(); /* before the budget's lock, where there is one */
        if (promise) keep_promise(address, bytes, kind, device, api, id, 1);
        else vt_tracker_alloc_at(address, bytes, kind, device, api, id);
        if (first) first_touch();
        return;
    }
    if (promise) keep_promise(0, 0, 0, 0, NULL, 0, 0);
    if (oom) {
        record_oom(api, kind, device, bytes, 0, 0, 0, 0);
    } else {
        struct vt_oom o = failure(api, kind, device, bytes);
        vt_tracker_failed(0, &o, NULL, 0);
    }
    if (first && oom) first_touch();
}

void vt_hook_node(const char *api, int kind, int device, int ok, int oom, uint64_t address, uint64_t bytes,
                  void *key) {
    if (!ok) {
        vt_hook_alloc(api, kind, device, 0, oom, 0, bytes);
        return;
    }
    if (address == 0) return;
    vt_init();
    if (vt_kind_is_host(kind)) device = VT_HOST_DEVICE;
    else if (device == VT_DEVICE_CURRENT) device = current_device();
    struct vt_alloc a = {.address = address, .bytes = bytes, .api = api, .stack = stack_id(),
                         .device = (int16_t)device, .kind = (uint8_t)kind};
    vt_graph_node_add(key, &a);
}

void vt_hook_record(const struct vt_alloc *a) {
    int first = !vt_tracker_touched();
    if (a->device >= 0 && vt_tracker_needs_facts(a->device)) read_facts(a->device);
    vt_tracker_alloc_at(a->address, a->bytes, a->kind, a->device, a->api, a->stack);
    if (first) first_touch();
}

void vt_hook_launch_refused(const char *api, const uint64_t need[VT_MAX_DEVICES]) {
    int device = -1, most = -1;
    for (int d = 0; d < VT_MAX_DEVICES; d++) {
        if (!need[d]) continue;
        if (most < 0 || need[d] > need[most]) most = d;
        size_t f = 0, t = 0;
        if (device < 0 && device_mem_info(d, &f, &t) && need[d] > f) device = d;
    }
    if (device < 0) device = most;
    if (device >= 0) vt_hook_alloc(api, VT_KIND_GRAPH, device, 0, 1, 0, need[device]);
}

int vt_budget_refuse_launch(const char *api, int device, uint64_t bytes) {
    vt_init();
    if (vt_opt.limit == 0 || device < 0 || device >= VT_MAX_DEVICES) return 0;
    pthread_mutex_lock(&budget_lock);
    uint64_t used = vt_tracker_device_live(device) + promised[device];
    int fits = used <= vt_opt.limit && bytes <= vt_opt.limit - used;
    pthread_mutex_unlock(&budget_lock);
    if (fits) return 0;
    int first = !vt_tracker_touched();
    if (vt_tracker_needs_facts(device)) read_facts(device);
    record_oom(api, VT_KIND_GRAPH, device, bytes, 1, used, 0, 0);
    if (first) first_touch();
    return 1;
}

void vt_hook_torch_oom(int device, uint64_t request, uint64_t raised_allocated, int rounded) {
    if (device < 0 || device >= VT_MAX_DEVICES) return;
    vt_busy++;
    /* It may be the process's first touch of a GPU (a memory fraction of 0
     * refuses the first tensor): set up as an allocation would be. */
    vt_init();
    int first = !vt_tracker_touched();
    if (vt_tracker_needs_facts(device)) read_facts(device);
    vt_output_defer_oom(); /* its post-mortem waits for the record that made it */
    record_oom("PyTorch", VT_KIND_DEVICE, device, request, 0, 0, raised_allocated, rounded);
    if (first) first_touch();
    vt_busy--;
}

/* Set once options are read and no budget was asked for. */
__attribute__((visibility("hidden"))) int vt_budget_off;

int vt_budget_refuse_slow(const char *api, int kind, int device, uint64_t bytes) {
    vt_init();
    if (vt_opt.limit == 0 || !vt_kind_owned_device(kind)) return 0;
    if (device == VT_DEVICE_CURRENT) device = current_device();
    if (device < 0 || device >= VT_MAX_DEVICES) return 0;
    pthread_mutex_lock(&budget_lock);
    uint64_t used = vt_tracker_device_live(device) + promised[device];
    int fits = used <= vt_opt.limit && bytes <= vt_opt.limit - used;
    if (fits && bytes) {
        promised[device] += bytes;
        my_promise.device = device;
        my_promise.bytes = bytes;
    }
    pthread_mutex_unlock(&budget_lock);
    if (fits) return 0;
    int first = !vt_tracker_touched();
    if (device >= 0 && vt_tracker_needs_facts(device)) read_facts(device);
    record_oom(api, kind, device, bytes, 1, used, 0, 0);
    if (first) first_touch();
    return 1;
}
