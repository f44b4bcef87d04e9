/* tracker.h -- what is live, where it came from, and what happened.
 *
 * The tracker owns every record vramtrace keeps about a process: the table
 * of live allocations, interned stacks, per-device live and peak bytes, the
 * bounded history of events and the out-of-memory failures. It never calls
 * CUDA and never formats output: interpose/ feeds it, report/ reads a
 * snapshot of it. All functions are thread-safe. Allocations and frees are
 * logged per thread and applied when something reads (see tracker/log.h). */
#ifndef VT_TRACKER_H
#define VT_TRACKER_H

#include <stddef.h>
#include <stdint.h>

#include "../common/counters.h"
#include "../common/records.h"

#define VT_MAX_DEVICES 64
#define VT_MAX_FRAMES 256   /* native and Python frames kept per stack */
#define VT_HOST_DEVICE (-1)

/* What kind of memory an allocation is. Host (pinned) memory is counted
 * apart from device bytes. */
enum vt_kind {
    VT_KIND_DEVICE,   /* cuMemAlloc, cudaMalloc */
    VT_KIND_PITCHED,  /* cuMemAllocPitch */
    VT_KIND_MANAGED,  /* cuMemAllocManaged */
    VT_KIND_ASYNC,    /* stream-ordered: cuMemAllocAsync, ...FromPoolAsync */
    VT_KIND_VMM,      /* physical handle from cuMemCreate */
    VT_KIND_HOST,     /* pinned host memory */
    VT_KIND_ARRAY,    /* CUDA arrays, mipmapped arrays (by handle) */
    VT_KIND_IMPORTED, /* another process's memory opened through IPC: not
                         owned, counted apart */
    VT_KIND_HOST_VMM, /* physical host memory from cuMemCreate with a host
                         location (by handle): host memory */
    VT_KIND_HOST_ASYNC, /* stream-ordered, from a pool made on the host:
                           host memory */
    VT_KIND_HOST_REGISTERED, /* the program's own host memory, page-locked by
                                cuMemHostRegister / cudaHostRegister */
    VT_KIND_GRAPH,    /* a CUDA graph's allocation node: stream-ordered memory
                         asked for while its stream was captured */
    VT_KIND_COUNT
};

/* The name space an allocation's key lives in: device addresses (unique
 * across devices under unified addressing), host addresses, VMM handles. */
enum vt_space { VT_SPACE_DEVICE, VT_SPACE_HOST, VT_SPACE_HANDLE, VT_SPACE_ARRAY, VT_SPACE_IMPORTED };

/* Whether memory of this kind is host memory (pinned, or from cuMemCreate
 * or a memory pool on the host): counted in the host totals, on device -1.
 * Whether memory of this kind is this process's own device memory (what
 * live, peak, holders and budgets count): not pinned host memory, not
 * memory imported from another process. */
static inline int vt_kind_is_host(int kind) {
    return kind == VT_KIND_HOST || kind == VT_KIND_HOST_VMM || kind == VT_KIND_HOST_ASYNC ||
           kind == VT_KIND_HOST_REGISTERED;
}
static inline int vt_kind_owned_device(int kind) { return !vt_kind_is_host(kind) && kind != VT_KIND_IMPORTED; }

enum vt_event_type { VT_EV_ALLOC, VT_EV_FREE, VT_EV_OOM };

const char *vt_kind_name(int kind);

/* The name space an allocation of this kind is known in (enum vt_space).
 * Inline: every allocation asks it. */
static inline int vt_kind_space(int kind) {
    switch (kind) {
    case VT_KIND_HOST: case VT_KIND_HOST_REGISTERED: return VT_SPACE_HOST;
    case VT_KIND_VMM: case VT_KIND_HOST_VMM: return VT_SPACE_HANDLE;
    case VT_KIND_ARRAY: return VT_SPACE_ARRAY;
    case VT_KIND_IMPORTED: return VT_SPACE_IMPORTED;
    default: return VT_SPACE_DEVICE;
    }
}

/* One live allocation. `api` points at a string with static lifetime. */
struct vt_alloc {
    uint64_t address;   /* device/host address, or the VMM handle */
    uint64_t mapped;    /* VMM: the address last mapped to the handle, or 0 */
    VT_ALLOC_FIELDS(VT_RECORD_FIELD) /* bytes, time_ns, api (common/records.h) */
    uint32_t stack;
    int32_t thread;
    int16_t device;
    uint8_t kind;
    uint32_t refs;      /* imported (IPC) memory: the opens beyond the first
                           not yet closed (vt_tracker_ref), 0 otherwise */
};

struct vt_event {
    VT_EVENT_FIELDS(VT_RECORD_FIELD) /* time_ns, address, bytes (common/records.h) */
    uint32_t stack;
    int16_t device;
    uint8_t type;
    uint8_t kind;
};

/* One live allocation as a snapshot keeps it, in 40 bytes (a million of
 * them make 40 MB): the fields of vt_alloc, but its API an index into the
 * snapshot's `apis` (VT_LIVE_NO_API: none) and the address a VMM handle
 * is mapped at 1 + an index into the snapshot's `mapped` (0: none). Read
 * those two through vt_live_api and vt_live_mapped. */
struct vt_live {
    uint64_t address;   /* device/host address, or the VMM handle */
    uint64_t bytes;
    uint64_t time_ns;
    uint32_t stack;
    int32_t thread;
    int16_t device;
    uint8_t kind;
    uint8_t api;
    uint32_t mapped;
};
#define VT_LIVE_NO_API 255

/* Bytes and allocations one call site (stack) holds. */
/* What one stack holds: its bytes and allocations. 16 bytes: a snapshot
 * keeps a table of them now and one at the peak, an entry a stack at most
 * (at 24 bytes the two were 48 of the 87 MB a dump added at 1,000,000
 * live over 1,000,000 stacks). A count fits 32 bits: 2^32 live
 * allocations would take the tracker 300 GB of its own records. */
struct vt_holder {
    uint32_t stack, count;
    uint64_t bytes;
};

/* Another process on the same GPU, as NVML saw it at an OOM. */
struct vt_proc {
    VT_PROC_FIELDS(VT_RECORD_FIELD) /* pid (common/records.h) */
    uint64_t used_bytes;     /* UINT64_MAX when NVML could not say */
    char name[48];           /* from /proc; "" when not readable */
};

#define VT_MAX_PROCS 32

/* qsort order for holders: largest first, then more allocations, then the
 * lower stack id. */
int vt_holder_order(const void *a, const void *b);

struct vt_oom {
    const struct vt_proc *procs;     /* other processes (first 64 OOMs),
                                        owned by the tracker; NULL when NVML
                                        was not available */
    uint32_t nprocs;
    const struct vt_holder *holders; /* live device memory by stack at the
                                        failure, largest first (first 64
                                        OOMs only; owned by the tracker);
                                        of a pinned host memory failure,
                                        the host's memory (vt_kind_is_host;
                                        with imported memory, which a
                                        site's counts keep with it) */
    uint32_t nholders;
    const struct vt_holder *device_holders; /* the same of the failing
                                        device's memory alone, when other
                                        devices held memory too (else
                                        NULL; device memory only) */
    uint32_t ndevice_holders;
    VT_OOM_FIELDS(VT_RECORD_FIELD) /* time_ns, requested, free_bytes, total_bytes,
                                      live_bytes, taken_bytes, taken_count, api
                                      (common/records.h) */
    uint64_t taken_since_ns; /* when the first of the handles taken was
                                made (in the history in ticks): they are
                                this thread's live VMM records of this
                                stack and device, unmapped, made from then
                                to the failure */
    uint32_t stack;
    int32_t thread;
    int16_t device;
    uint8_t kind;
    uint8_t have_info;     /* free/total were read */
    uint8_t budget;        /* refused by VRAMTRACE_LIMIT, not by the device */
    uint8_t requested_rounded; /* requested is PyTorch's error's two-decimal
                                  figure of its refusal, not the bytes asked */
    uint8_t have_counts;   /* the device's counts at the failure below were kept */
    uint64_t live_count;   /* the failing device's live allocations then */
    uint64_t peak_bytes, peak_time_ns; /* and its peak so far (in the history,
                                          peak_time_ns in ticks) */
    uint64_t ticks;        /* in a snapshot: its time stamp in ticks, the same in
                              every snapshot (time_ns is converted at the rate
                              measured over the run so far, which moves) */
    uint64_t alloc_count, free_count; /* the process's allocations and frees
                              counted then (totals, every kind): a snapshot
                              whose totals count the same holds the live
                              list of the failure */
};

/* A request that failed for lack of memory, counted however often it
 * failed: its bytes, API, kind, device and stack, each distinct one an
 * entry (the first VT_OOM_REQUESTS of them, in the order they first
 * failed), with its count and its first and last failures (their numbers,
 * times and threads; times in ticks in the tracker, in ns in a snapshot).
 * The records of the failures themselves are kept only in part
 * (VT_MAX_OOMS); these counts are whole. */
#define VT_OOM_REQUESTS 256
struct vt_oom_request {
    uint64_t requested;
    const char *api;
    uint32_t stack;
    int16_t device;
    uint8_t kind;
    uint64_t count;
    uint64_t first_number, last_number;
    uint64_t first_ns, last_ns;
    int32_t first_thread, last_thread;
};

struct vt_device {
    int used;              /* something was recorded on it */
    int have_facts;
    char name[128];
    char uuid[48];         /* "GPU-xxxxxxxx-xxxx-..." */
    uint64_t total_bytes;
    VT_COUNTERS(VT_COUNTER_FIELD)  /* live_bytes ... oom_count (common/counters.h) */
};

struct vt_totals {
    VT_COUNTERS(VT_COUNTER_FIELD)  /* the same of every device: device memory only */
    VT_TOTALS_COUNTERS(VT_COUNTER_FIELD) /* host_live_bytes ... missed (common/records.h) */
};

struct vt_stack {
    uint32_t id;
    uint32_t depth;
    const uintptr_t *frames;   /* return addresses, innermost first */
};

/* A step boundary (tracker/steps.h, counted by vramtrace_step): its
 * number (1 and up), its time, the event ring's write count then (the
 * index, in the whole history of events, of the first event after it) and
 * each device's live device bytes then (devices 0 .. ndevices-1). */
struct vt_step {
    uint64_t step;
    uint64_t time_ns;
    uint64_t event;
    int ndevices;
    uint64_t live_bytes[VT_MAX_DEVICES];
};

/* A mapping of a VMM handle (tracker/mappings.h): the handle, where it
 * was mapped and how many bytes, the handle's device, its time and the
 * event ring's write count then (the index, in the whole history of
 * events, of the first event after it), and the same two of its unmap
 * (`unmapped` 0: still mapped, and those two 0). */
struct vt_mapping {
    uint64_t handle, address, bytes;
    uint64_t time_ns, event;
    uint64_t unmap_ns, unmap_event;
    int16_t device;
    uint8_t unmapped;
};

/* A consistent copy of the tracker's state, taken under its lock and then
 * read without it: the counts (totals, devices, holders) are those of the
 * live list, to the allocation. Stacks are shared, not copied: they are never freed
 * while the process runs. Free with vt_snapshot_free. */
struct vt_snapshot {
    struct vt_totals totals;
    struct vt_device devices[VT_MAX_DEVICES];
    int ndevices;              /* highest used ordinal + 1 */
    struct vt_live *live;      /* in no particular order (vt_snapshot_sort_live);
                                  with `spill`, the first run only, and NULL
                                  once sorted: read through vt_live_read */
    size_t nlive;              /* all of them, in memory or spilled */
    uint64_t live_lost;        /* live allocations not in the list: memory
                                  was short (and the spill file too):
                                  totals count them, the list does not */
    struct vt_live_spill *spill; /* past VRAMTRACE_SPILL's bytes, the list on
                                    a temporary file (tracker/live_spill.c);
                                    NULL: all in `live` */
    const char *apis[VT_LIVE_NO_API]; /* the live allocations' API names */
    unsigned napis;
    uint64_t *mapped;          /* the VMM handles' mapped addresses */
    size_t nmapped;
    struct vt_oom *ooms;       /* the failures kept (tracker/history.h), by
                                  number: the first ones, then the newest */
    size_t nooms;
    struct vt_oom_request *oom_requests; /* every failed request, counted */
    size_t noom_requests;
    uint64_t oom_requests_other; /* failures of requests past the table's
                                    VT_OOM_REQUESTS, counted only */
    /* The events, oldest first: read them with vt_event_at. Either the
     * tracker's ring, lent in place until vt_snapshot_free (ring: its
     * nevents events from index events_dropped on, times in ticks), or a
     * copy (events, times in nanoseconds); the other is NULL. */
    struct vt_event *events;
    const struct vt_event *ring;
    size_t ring_cap;
    double tick_scale;         /* ticks to nanoseconds (the ring's times) */
    uint64_t give_back_ns;     /* vt_snapshot_free waits this long at most for
                                  the lock to give the ring back (0: as long
                                  as it takes) */
    size_t nevents;
    uint64_t events_dropped;   /* older events the ring overwrote */
    uint64_t events_dropped_while_read; /* events not kept, over the run,
                                  because more came while an earlier
                                  snapshot read the ring than it holds back
                                  (tracker/history.h): not for lack of
                                  memory, not in records_lost */
    struct vt_step *steps;     /* the newest step boundaries, oldest first */
    size_t nsteps;
    uint64_t steps_total;      /* step boundaries ever counted */
    struct vt_mapping *mappings; /* the newest VMM mappings, oldest first */
    size_t nmappings;
    uint64_t mappings_total;   /* mappings ever made */
    const struct vt_stack **stacks;
    size_t nstacks;
    struct vt_holder *holders;      /* device memory by stack (as live has
                                       it), largest first */
    size_t nholders;
    struct vt_holder *all_holders;  /* every kind of memory by stack (device,
                                       pinned host, imported), the same */
    size_t nall_holders;
    int all_is_device;              /* 1: no site held memory of other
                                       kinds; all_holders is NULL, read
                                       holders (vt_holders_of) */
    struct vt_holder *peak_holders; /* device memory by stack at the peak of
                                       totals.live_bytes, largest first:
                                       with peak_same, only the stacks
                                       that held other than they hold now */
    size_t npeak_holders;
    uint64_t *peak_same;            /* NULL, or a bit per stack (by id):
                                       its entry of `holders` is its peak
                                       entry too (vt_peak_holder_next) */
    struct vt_holder *released;     /* what context resets released without
                                       a free of device memory, by stack,
                                       largest first (tracker/released.h);
                                       NULL: none */
    size_t nreleased;
    struct vt_holder *released_host; /* the same of pinned host memory,
                                        kept apart as the host_ totals */
    size_t nreleased_host;
    uint64_t start_unix_ns;    /* wall-clock time of the tracker's start */
    uint64_t now_ns;           /* when the snapshot was taken */
};

/* The peak table of snapshot s in vt_holder_order, an entry at a time:
 * peak_holders merged with the entries of holders that peak_same marks.
 * Start with a zeroed cursor; 0 at the end. */
struct vt_peak_cursor {
    size_t i, j;
};
int vt_peak_holder_next(const struct vt_snapshot *s, struct vt_peak_cursor *c, struct vt_holder *out);

/* Set up the tracker with the native stack depth and event ring size.
 * Called once from the library constructor; safe to call again. */
void vt_tracker_init(int depth, size_t event_capacity);

/* Nanoseconds since the tracker started (monotonic clock). */
uint64_t vt_now_ns(void);

/* Record a new live allocation made by the calling thread, with its stack
 * as captured by vt_stack_capture (frames innermost first). */
void vt_tracker_alloc(uint64_t address, uint64_t bytes, int kind, int device,
                      const char *api, const uintptr_t *frames, int depth);

/* The same in two steps: the id of a stack (interned), then the
 * allocation at that stack. An id stays valid while vt_tracker_generation
 * is unchanged (a forked child starts its own). */
uint32_t vt_tracker_stack_id(const uintptr_t *frames, int depth);

/* The id of the calling thread's stack as `capture` takes it (up to `max`
 * frames): vt_stack_capture_since, or anything with its contract, and
 * `serial` its vt_stack_serial. This and vt_tracker_stack_id share the one
 * per-thread memo of "the same stack as last time": the last stack's
 * frames, id and the serial of the capture it came from. `capture` is
 * handed that serial, and when it answers VT_STACK_SAME (the stack has not
 * changed since) the memo's id is returned with no frame copied or
 * compared. */
typedef int vt_capture_since_fn(uintptr_t *out, int max, uint64_t since);
uint32_t vt_tracker_stack_id_captured(int max, vt_capture_since_fn *capture, uint64_t (*serial)(void));
void vt_tracker_alloc_at(uint64_t address, uint64_t bytes, int kind, int device,
                         const char *api, uint32_t stack);

/* What every hooked call asks the tracker, answered inline from a cache
 * line that is written all but never: a line of its own (the global lock,
 * which the applier takes at every step, was defined next to it and
 * shared its line). */
struct vt_tracker_flags {
    uint64_t generation;  /* of stack ids: a forked child starts anew */
    uint64_t facts;       /* bit d: device d's facts are known */
    int touched;          /* something GPU-related was recorded */
    unsigned alloc_rare;  /* VT_ALLOC_*: what sends an allocation off its
                             usual path (one test of the word, as
                             `touched` alone was tested before) */
} __attribute__((aligned(64)));
/* No allocation recorded yet (`touched` to be set). */
#define VT_ALLOC_FIRST 1u
/* Memory of name space s (enum vt_space) may have been released without
 * vramtrace seeing it (vt_tracker_unseen_release): a record of the
 * address an allocation of that space gets may be left in another
 * thread's table. */
#define VT_ALLOC_STALE(s) (2u << (s))
extern struct vt_tracker_flags vt_tracker_flags __attribute__((visibility("hidden")));

static inline uint64_t vt_tracker_generation(void) {
    return __atomic_load_n(&vt_tracker_flags.generation, __ATOMIC_ACQUIRE);
}

/* A free, in two steps around the real call: vt_tracker_free_begin takes
 * the record out of the live table and its time stamp before the driver
 * can hand the address out again, and vt_tracker_free_end counts the free
 * if the driver took it (ok), else puts the record back. A free of an
 * address never seen is counted as such. */
struct vt_rec;
struct vt_slot;
struct vt_free {
    uint64_t address;
    uint64_t ts;
    int space;
    struct vt_rec *rec; /* the record taken out of the live table, or NULL */
    struct vt_slot *slot; /* whose table it was in */
};
struct vt_free vt_tracker_free_begin(int space, uint64_t address);
void vt_tracker_free_end(const struct vt_free *f, int ok);

/* Count a hooked call passed through unrecorded (totals.missed); it may
 * have been a free (vt_tracker_unseen_release). Async-signal-safe: two
 * atomic operations, no lock. */
void vt_tracker_missed(void);

/* Memory of the name spaces `spaces` (a bit 1 << s for each enum
 * vt_space s; VT_SPACES_ALL) may have gone back to the driver without
 * vramtrace seeing it (a reset that released nothing in the counts, a
 * context's destruction that kept its arrays, a call passed through
 * unrecorded): from now on every allocation in those spaces looks for an
 * old record of its address in every thread's table, not in its own only,
 * and counts what it finds as released without a free. Async-signal-safe:
 * one atomic or. */
#define VT_SPACES_ALL ((1u << (VT_SPACE_IMPORTED + 1)) - 1)
void vt_tracker_unseen_release(unsigned spaces);

/* Whether an allocation is live at `address` in name space `space`; its
 * record (stack, device, ...) to *out when out is not NULL. Takes each
 * thread's table lock in turn: for rare calls (a CUDA graph's launch). */
int vt_tracker_find(int space, uint64_t address, struct vt_alloc *out);

/* References to one live record: memory the driver hands out again while
 * it is still in use, as cuIpcOpenMemHandle returns the mapping already
 * open for a handle opened again ("the reference count on the handle is
 * incremented by 1 and the existing device pointer is returned").
 * vt_tracker_ref adds one to the live record of (space, address): 1, or
 * 0 when there is none. vt_tracker_unref takes one away when it has more
 * than its first: 1 (the record stays live), or 0 when it has only its
 * first or there is none (then it is freed as any other). Each takes the
 * threads' table locks in turn until it finds the record: for rare calls.
 * The caller keeps its calls and the allocation or free of the same
 * address from running at once. */
int vt_tracker_ref(int space, uint64_t address);
int vt_tracker_unref(int space, uint64_t address);


/* A VMM handle was mapped at [address, address + bytes): remembered in
 * its live record (the address last mapped, for the report) and in the
 * history of mappings (tracker/mappings.h). Returns the mapping's id for
 * vt_tracker_unmap, or 0 when the handle has no record (made before
 * vramtrace was on, or imported): nothing is remembered then. */
uint64_t vt_tracker_map(uint64_t handle, uint64_t address, uint64_t bytes);

/* The mapping vt_tracker_map gave `id` (0: none) was unmapped: its end in
 * the history, when the history still holds it. */
void vt_tracker_unmap(uint64_t id);

/* A failed allocation. Out-of-memory failures also become OOM records;
 * `o` carries the request and the device state at that moment (its
 * live_bytes, stack and time are filled in here; its procs array is
 * copied). */
/* Set on a thread by each out-of-memory record it makes (vt_tracker_failed)
 * and cleared by its next successful allocation (the hooks) or by
 * PyTorch's record of the failure (report/torch.c): 1 while this thread's
 * last OOM is the one a framework's error raised now is about. */
extern __thread int vt_thread_oom_open __attribute__((tls_model("initial-exec"), visibility("hidden")));

/* The number of this thread's last out-of-memory failure (1 for the
 * process's first; 0: none), set before the listener is told: another
 * thread's failure may be recorded after it and before the listener's
 * snapshot. */
extern __thread uint64_t vt_thread_oom_seq __attribute__((tls_model("initial-exec"), visibility("hidden")));

/* This thread's open failure closed (its next successful allocation). */
void vt_oom_close_mine(void);

/* PyTorch's record of a failure it raised on another thread than the
 * failed call's (a backward's failure raised again on the thread that ran
 * backward()) claims the device's failure that is still open: 1 when one
 * was (it is then closed), 0 when none is. */
int vt_oom_claim(int device);

void vt_tracker_failed(int is_oom, struct vt_oom *o, const uintptr_t *frames,
                       int depth);

/* The tracker's clock now, in ticks: a failure's time stamp read when the
 * failing call returned, handed to vt_tracker_failed in o->time_ns (0:
 * the moment vt_tracker_failed records it). What vramtrace asks in
 * between (the device's free memory, NVML's other processes, whose first
 * call loads and starts NVML: 200 ms with a slow one) is no part of the
 * program's time before the failure: it moved the post-mortem's "when"
 * and hid a growth measured in time. */
uint64_t vt_tracker_ticks(void);

/* The one listener told of each out-of-memory record, by vt_tracker_failed
 * on the failing thread after it has released the tracker's locks (so the
 * listener may take a snapshot). NULL (the default): nobody is told. Set
 * once at start, before any hook records. */
void vt_tracker_on_failure(void (*listener)(void));


/* Live bytes on a device now (for the budget check). */
uint64_t vt_tracker_device_live(int device);

/* Device facts (read once by interpose/ when the device is first used). */
static inline int vt_tracker_needs_facts(int device) {
    if (device < 0 || device >= VT_MAX_DEVICES) return 0;
    return !((__atomic_load_n(&vt_tracker_flags.facts, __ATOMIC_ACQUIRE) >> device) & 1);
}
void vt_tracker_set_facts(int device, const char *name, const char *uuid,
                          uint64_t total_bytes);
/* What device `device` holds outside this process's tracked allocations
 * (its CUDA context, other processes, untracked APIs), measured now: at
 * the device's first allocation and at each failure of its memory. What
 * the forecast cannot fill; a view's `outside` (0: not measured). Kept
 * apart from struct vt_device, whose size the hot path's per-device
 * accounts index by (8 bytes more cost 5 instructions a pair). */
void vt_tracker_set_outside(int device, uint64_t bytes);

/* Whether anything GPU-related was ever recorded in this process. */
static inline int vt_tracker_touched(void) {
    return __atomic_load_n(&vt_tracker_flags.touched, __ATOMIC_RELAXED);
}

struct vt_snapshot *vt_tracker_snapshot(void);

/* A copy of the list of every stack interned so far (the stacks
 * themselves are shared: never freed while the process runs), its length
 * in *n; NULL when the tracker's lock was not free within within_ns (0:
 * waits as long as it takes) or memory ran out. */
const struct vt_stack **vt_tracker_stacks(size_t *n, uint64_t within_ns);

/* The API that made live allocation a of snapshot s (NULL: unknown), and
 * the address its VMM handle is mapped at (0: none or not mapped). */
static inline const char *vt_live_api(const struct vt_snapshot *s, const struct vt_live *a) {
    return a->api < s->napis ? s->apis[a->api] : NULL;
}
static inline uint64_t vt_live_mapped(const struct vt_snapshot *s, const struct vt_live *a) {
    return a->mapped ? s->mapped[a->mapped - 1] : 0;
}

/* Event i (0 .. s->nevents - 1, oldest first) of snapshot s, its time in
 * nanoseconds. */
static inline struct vt_event vt_event_at(const struct vt_snapshot *s, size_t i) {
    if (!s->ring) return s->events[i];
    size_t k = (size_t)((s->events_dropped + i) % s->ring_cap);
    struct vt_event e = s->ring[k];
    e.time_ns = (uint64_t)((double)e.time_ns * s->tick_scale);
    return e;
}

/* Where a point in the whole history of events (a write count of the
 * ring: the index of the first event after it) falls in s->events: that
 * event's index, s->nevents when there is none yet, -1 when the ring
 * overwrote it. */
static inline int64_t vt_event_index(const struct vt_snapshot *s, uint64_t written) {
    if (written < s->events_dropped) return -1;
    uint64_t i = written - s->events_dropped;
    return i >= s->nevents ? (int64_t)s->nevents : (int64_t)i;
}

/* Where step boundary x of snapshot s falls in s->events (vt_event_index). */
static inline int64_t vt_step_event(const struct vt_snapshot *s, const struct vt_step *x) {
    return vt_event_index(s, x->event);
}

/* The counts as a live view shows them (report/live.c, a few times a
 * second): totals, every device, and the VT_VIEW_SITES stacks holding the
 * most device memory now, largest first, with their stacks (never freed
 * while the process runs). Many stacks reach one call site (a line of
 * Python through many native paths), so the view keeps thousands of
 * stacks for the publisher to add up by call site: with the 32 largest
 * stacks alone a site of many smaller ones was missing. vt_tracker_view
 * applies the logs and fills v under the global lock, unless nothing was
 * applied since v->stamp (then it returns 0 and v is as it was). */
#define VT_VIEW_SITES 4096
/* Live and peak bytes of each kind of memory (enum vt_kind) in one place:
 * a device, or the host (pinned host memory, and memory of no device). */
struct vt_kind_counts {
    uint64_t live_bytes[VT_KIND_COUNT];
    uint64_t peak_bytes[VT_KIND_COUNT];
};
#define VT_VIEW_STEPS 128
#define VT_KINDS_HOST 0 /* kinds[VT_KINDS_HOST]; device d is kinds[d + 1] */
struct vt_view {
    uint64_t stamp;            /* changes whenever an op or failure is applied */
    uint64_t now_ns;
    struct vt_totals totals;
    struct vt_device devices[VT_MAX_DEVICES];
    int ndevices;
    struct vt_holder sites[VT_VIEW_SITES];
    const struct vt_stack *stacks[VT_VIEW_SITES];
    uint64_t site_devices[VT_VIEW_SITES]; /* a bit per device the site's memory is on (devices 0 to 63) */
    uint32_t nsites;
    struct vt_kind_counts kinds[VT_MAX_DEVICES + 1]; /* the host, then ndevices devices */
    uint64_t steps_total;      /* step boundaries ever counted (tracker/steps.h) */
    struct vt_step steps[VT_VIEW_STEPS]; /* the newest of them, oldest first */
    uint32_t nsteps;
    uint64_t outside[VT_MAX_DEVICES]; /* vt_tracker_set_outside's, by device (0: not measured) */
};
int vt_tracker_view(struct vt_view *v);

/* The same, for the exit path, which must not wait forever: NULL when the
 * locks it needs are not all free within `ns` nanoseconds (a thread holds
 * one and does not let go: the exit came from a signal handler that
 * interrupted a hooked call on this very thread). */
struct vt_snapshot *vt_tracker_snapshot_within(uint64_t ns);

/* `until` = now + ns on CLOCK_REALTIME, for pthread_mutex_timedlock. */
struct timespec;
void vt_deadline(struct timespec *until, uint64_t ns);
void vt_snapshot_free(struct vt_snapshot *s);

/* Sort s->live in place, with no memory beside it: the largest first,
 * then the older, then by address (then every other field, so that the
 * order is one whatever order the records came in). A spilled list is
 * sorted as runs, each in the memory its first run had, which is then let
 * go; vt_live_read merges them. */
void vt_snapshot_sort_live(struct vt_snapshot *s);

/* The one order of live allocations: largest first, then the older, then
 * by address, and the remaining fields after, so that no two different
 * records compare equal (the order does not depend on the order they were
 * copied in). Whether x comes before y. */
static inline int vt_live_before(const struct vt_live *x, const struct vt_live *y) {
    if (x->bytes != y->bytes) return x->bytes > y->bytes;
    if (x->time_ns != y->time_ns) return x->time_ns < y->time_ns;
    if (x->address != y->address) return x->address < y->address;
    if (x->kind != y->kind) return x->kind < y->kind;
    if (x->mapped != y->mapped) return x->mapped < y->mapped;
    if (x->stack != y->stack) return x->stack < y->stack;
    if (x->thread != y->thread) return x->thread < y->thread;
    if (x->device != y->device) return x->device < y->device;
    return x->api < y->api;
}

/* n records sorted in that order, in place. */
void vt_live_sort(struct vt_live *v, size_t n);

/* Reading a snapshot's live list, wherever it lies (in memory, or spilled
 * to a file as sorted runs): with in_order, in the one order once
 * vt_snapshot_sort_live sorted it; without, in whatever order is cheapest
 * (for sums). vt_live_next gives the next record (valid until the next
 * call) or NULL at the end; a list that could not be read whole ends early
 * (warned once). NULL when memory ran out (counted lost): read nothing. */
struct vt_live_reader;
struct vt_live_reader *vt_live_read(const struct vt_snapshot *s, int in_order);
const struct vt_live *vt_live_next(struct vt_live_reader *r);
void vt_live_read_end(struct vt_live_reader *r);

/* A snapshot keeps at most `bytes` of live allocations in memory; past
 * that it writes them to an unlinked temporary file in `dir` (NULL or
 * empty: /tmp) and sorts them as runs of `bytes` (VRAMTRACE_SPILL's MiB,
 * TMPDIR; 16 MiB and /tmp until called). Called at start, before any
 * snapshot. */
void vt_tracker_spill(size_t bytes, const char *dir);

/* Lock for fork: taken before fork, released in the parent; the child
 * starts afresh with vt_tracker_reset_child. */
void vt_tracker_lock_all(void);
void vt_tracker_unlock_all(void);
void vt_tracker_reset_child(void);

#endif
