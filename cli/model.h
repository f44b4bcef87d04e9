/* model.h -- a dump read back from JSON, checked, for the report writers.
 *
 * vm_load parses a dump (version 1 with jansson; version 2's big arrays
 * with model_v2.c, the rest with jansson) and checks every field the writers use
 * (types, ranges, stack indices), so that a writer never meets a surprise:
 * a missing, truncated or corrupt file is one clear error, never a crash.
 * Strings point into the parsed JSON or the tables, which the model owns. */
#ifndef VT_MODEL_H
#define VT_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "../common/callsite.h"
#include "../common/counters.h"
#include "../common/records.h"
#include "model_events.h"
#include "model_mappings.h"
#include "model_steps.h"

struct vm_torch;   /* model_torch.h: PyTorch's own view, NULL when absent */

/* A stack: the node of its innermost frame in the dump's prefix tree of
 * frames (d->nodes), how many frames it has, and its call site. A frame is
 * stored once however many stacks go through it, and a node once however
 * many stacks share it: the frames themselves are read on demand with
 * vm_stack_frame or vm_stack_frames. */
struct vm_stack {
    uint32_t node;           /* VM_NO_NODE for an empty stack */
    uint32_t nframes;
    int site;                /* the call-site frame's index, or -1 */
    int through;             /* the library frame it went through, or -1 */
};

/* A node of the prefix tree: its caller's node (VM_NO_NODE for an
 * outermost frame) and its frame, an index into d->frames. */
struct vm_node {
    uint32_t parent, frame;
};

#define VM_NO_NODE UINT32_MAX

struct vm_holder {
    uint32_t stack;
    VT_HOLDER_FIELDS(VT_RECORD_FIELD) /* count, bytes (common/records.h) */
};

/* A live allocation and an event, each in as few bytes as its fields
 * allow (a dump holds millions): 40 and 32. An allocation's kind and API
 * are indexes into the dump's names (vm_alloc_kind, vm_alloc_api: a dump
 * names a few dozen); its handle, which only virtual-memory allocations
 * have, is kept beside (vm_alloc_handle). At 64 bytes, with two pointers
 * and the handle inline, the live list of a dump of 1,000,000 allocations
 * over one stack was 1.14 times the dump's size. */
struct vm_alloc {
    uint64_t address, bytes, time_ns;
    uint32_t stack;
    int32_t thread;
    uint16_t kind, api;      /* in d->names */
    int16_t device;          /* -1 .. 4095 */
    uint8_t has_handle;
};

/* The handle of the live allocation at d->live[live]. */
struct vm_live_handle {
    size_t live;
    uint64_t handle;
};

/* How many distinct names the live allocations' kinds and APIs may use
 * together; a dump past it is refused as corrupt. */
#define VM_NAMES_MAX 65535

/* How many kinds of memory the events of one dump may name. */
#define VM_EVENT_KINDS 256

struct vm_finding {
    const char *id, *finding, *next;
};

struct vm_proc {
    VT_PROC_FIELDS(VT_RECORD_FIELD) /* pid (common/records.h) */
    const char *name;       /* NULL when unknown */
    uint64_t used_bytes;
    int used_known;
};

struct vm_oom {
    struct vm_finding *findings;
    size_t nfindings;
    struct vm_proc *procs;   /* NULL: NVML did not say */
    size_t nprocs;
    int budget;
    int requested_rounded;   /* requested is PyTorch's error's two-decimal figure */
    VT_OOM_FIELDS(VT_RECORD_FIELD) /* time_ns, requested, free_bytes, total_bytes,
                                      live_bytes, api (common/records.h) */
    int have_info;
    const char *kind;
    int device, thread;
    size_t stack;
    struct vm_holder *holders;
    size_t nholders;
    int have_holders;
    struct vm_holder *device_holders; /* the failing device's alone (other devices held memory too) */
    size_t ndevice_holders;
    int have_device_holders;
    int have_counts;                  /* the failing device's counts at the failure: */
    uint64_t live_count, peak_bytes, peak_time_ns;
    struct vm_torch *torch;
};

/* A request that failed for lack of memory, with how many times it
 * failed and its first and last failures (the dump's "oom_requests";
 * absent in older dumps). */
struct vm_oom_request {
    uint64_t requested;
    const char *api, *kind;
    int device;
    size_t stack;
    uint64_t count, first_number, first_ns, last_number, last_ns;
    int first_thread, last_thread;
};

struct vm_growth {
    size_t stack;
    uint64_t first_bytes, end_bytes, allocations;
    double bytes_per_second;
    /* since_ns, last_ns and bytes_per_allocation, read only together: dumps
     * before them have have_rate 0 (and the three 0). */
    int have_rate;
    uint64_t since_ns, last_ns, bytes_per_allocation;
    /* The unit the rate is said in ("step", "second" or "allocation",
     * static), how many, the rise per unit, and the rise and the time it
     * took that the rate is of: the dump's, else allocations over the
     * whole growth. */
    const char *unit;
    uint64_t units, bytes_per_unit, rise_bytes, span_ns;
    const char *holder;      /* what holds it, as PyTorch's record named it; NULL when absent */
    uint64_t cache_bytes;    /* the least of it in PyTorch's cache (at most end_bytes), 0 when absent */
    uint64_t run_steps;      /* per step over the newest kept of the run's steps: those; else 0 */
    uint64_t history_from_ns; /* the ring had overwritten its older events: the oldest kept's time; else 0 */
};

struct vm_device {
    int ordinal;
    const char *name, *uuid;
    uint64_t total_bytes;
    VT_COUNTERS(VT_COUNTER_FIELD)  /* live_bytes ... oom_count (common/counters.h) */
};

struct vm_totals {
    VT_COUNTERS(VT_COUNTER_FIELD)
    VT_TOTALS_COUNTERS(VT_COUNTER_FIELD) /* host_live_bytes ... missed (common/records.h);
                                            imported_* are 0 in older dumps */
    uint64_t records_lost;   /* dropped for lack of memory; 0 in older dumps */
    uint64_t events_dropped_while_read; /* events a dump's reading of the history could
                                           not hold back; 0 when none, and in older dumps */
    uint64_t oom_survived;   /* failures the same request later got past; 0 in older dumps */
    int last_oom_survived;   /* 1 the last failure got past, 0 not, -1 not said (no failure, older dumps) */
};

struct vm_dump {
    const char *path;
    const char *reason, *host;
    int pid, rank, local_rank;
    int rank_known; /* a launcher's variable gave the rank; 0: none did (rank 0, dump's rank_known false) */
    /* The variable that gave it (the dump's rank_from; NULL: none, or an
     * older dump); rank_local 1 when that is a local rank variable: the
     * rank is the process's within its node (two hosts each have a rank
     * 0), no rank of the job's. */
    const char *rank_from;
    int rank_local;
    int world_size; /* the job's ranks as its dump says them; 0: not said */
    /* The signal that ended the process after its exit dump ("SIGTERM"),
     * NULL when none; its sender's pid (0 unknown) and name (NULL unknown). */
    const char *ended_signal, *ended_from;
    long ended_from_pid;
    int exit_status_known, exit_status; /* the status exit() was given; known 0: not said */
    int dump_number; /* an on-demand dump's number in its process (%n); 0: another dump, or an older one */
    const char **argv;
    size_t argc;
    uint64_t start_unix_ns, time_ns;
    struct vm_device *devices;
    size_t ndevices;
    struct vm_totals totals;
    struct vm_oom *ooms;     /* the failures kept, by number (each one's
                                `number`; in older dumps its place + 1) */
    size_t nooms;
    struct vm_oom_request *oom_requests; /* every failed request, counted;
                                            NULL in older dumps */
    size_t noom_requests;
    uint64_t oom_requests_other; /* failures of requests past the library's table */
    struct vm_holder *holders, *peak_holders;
    size_t nholders, npeak_holders;
    struct vm_holder *released;   /* device memory released by a context
                                     reset without a free, by stack (dumps
                                     since it) */
    size_t nreleased;
    struct vm_holder *released_host; /* the same of pinned host memory
                                        (`released_host`; NULL: none) */
    size_t nreleased_host;
    struct vm_alloc *live;
    size_t nlive;
    const char **names;      /* the live allocations' kinds and APIs, owned
                                (the strings are the dump's) */
    size_t nnames;
    void *name_index;        /* while loading: names by text (model_names.c) */
    struct vm_live_handle *handles; /* by live index, ascending, owned */
    size_t nhandles;
    struct vm_events events;     /* packed (model_events.h); none kept when
                                    loaded with VM_LOAD_COUNT_EVENTS */
    size_t nevents;
    struct {                     /* the events counted as they are read, kept or not */
        uint64_t allocs, frees, ooms, first_oom_ns;
    } event_counts;
    int events_counted_only;     /* VM_LOAD_COUNT_EVENTS: read and checked, not kept */
    uint64_t events_dropped;
    const char *event_kinds[VM_EVENT_KINDS]; /* the events' kinds by index */
    size_t nevent_kinds;
    struct vm_step *steps;       /* step boundaries, oldest first (model_steps.h) */
    size_t nsteps;
    uint64_t steps_total;
    struct vm_mapping *mappings; /* VMM mappings, oldest first (model_mappings.h) */
    size_t nmappings;
    uint64_t mappings_total;
    struct vm_stack *stacks;
    size_t nstacks;
    struct vm_growth *growing;   /* optional in the dump */
    size_t ngrowing;
    struct vm_torch *torch;
    void *json;              /* the parsed document, owned */
    void *v2;                /* a version 2 dump's tables (model_v2.c), owned */
    struct vt_frame *frames; /* the frame table, owned */
    size_t nframes;
    struct vm_node *nodes;   /* the stacks' prefix tree, owned */
    size_t nnodes;
    struct vt_frame *flat;   /* room for the deepest stack's frames: the
                                copy vm_stack_flat hands out, owned */
    const struct vt_frame **scratch; /* the same as pointers, for
                                        vm_stack_frames, owned */
};

static inline const char *vm_alloc_kind(const struct vm_dump *d, const struct vm_alloc *a) {
    return d->names[a->kind];
}
static inline const char *vm_alloc_api(const struct vm_dump *d, const struct vm_alloc *a) {
    return d->names[a->api];
}

/* The handle of a live allocation of d (0 when it has none). */
uint64_t vm_alloc_handle(const struct vm_dump *d, const struct vm_alloc *a);

/* The index in d->names of the name s (a string the dump owns, kept as
 * is), added if new. -1 when out of memory or past VM_NAMES_MAX. While
 * loading; vm_names_done lets the look-up's table go. */
int vm_name_index(struct vm_dump *d, const char *s);
void vm_names_done(struct vm_dump *d);

/* Keep h as the handle of d->live[live]; allocations are read in order, so
 * `live` rises from call to call. 0, or -1 when out of memory. */
int vm_add_handle(struct vm_dump *d, size_t live, uint64_t h);

/* Read and check the dump at path. Returns 0, or -1 with a one-line reason
 * in err. On failure *d holds nothing to free. */
int vm_load(const char *path, struct vm_dump *d, char *err, size_t errsize);

/* The same, with VM_LOAD_COUNT_EVENTS: every event is read and checked as
 * vm_load does (the same errors), but only counted (d->event_counts), not
 * kept: d->events stays NULL. For outputs that need no event itself (an
 * event is 32 bytes in the model: a dump's history of 1,000,000 events,
 * 32 MB). */
#define VM_LOAD_COUNT_EVENTS 2u
int vm_load_with(const char *path, unsigned flags, struct vm_dump *d, char *err, size_t errsize);

/* The same from a buffer (for the fuzzer and tests), with vm_load_with's
 * flags; `name` names it in errors. */
int vm_load_buffer(const char *buf, size_t len, unsigned flags, const char *name, struct vm_dump *d,
                   char *err, size_t errsize);

void vm_free(struct vm_dump *d);

/* The longest name the model keeps, in bytes with its NUL: a function,
 * file or module name past it is cut at load, at a whole UTF-8 character,
 * ending in "...". The outputs' labels hold 1,024 bytes; cutting each copy
 * by snprintf still read the whole name, once per frame of every stack:
 * 10,000 stacks over names of 100,000 characters took 80 to 120 s to
 * print in each format but text. (C++ names of several KiB are common:
 * CUTLASS kernels, Eigen expressions.) */
#define VM_NAME_MAX 1024

/* s cut in place to VM_NAME_MAX - 1 bytes, "..." its last three, when
 * it is at least VM_NAME_MAX bytes long. Returns s. */
char *vm_clamp_name(char *s);

/* A frame's label for people and flame graphs: "function (file.py:line)"
 * for a Python frame, "function", else
 * "module+0xoffset", else "0xaddress". Writes into buf. */
const char *vm_frame_label(const struct vt_frame *f, char *buf, size_t size);

/* The name of a stack's call site (vt_site_label_of its site and through
 * frames), into buf. */
const char *vm_site_label(const struct vm_dump *d, size_t stack, char *buf, size_t size);

/* A kind of memory as the library's own static name ("device", "host",
 * ...) when k is one of them, so that what the model keeps holds no
 * pointer into the parsed document; NULL else. */
const char *vm_known_kind(const char *k);

/* Event e counted into d->event_counts (the loaders, as each is read). */
static inline void vm_count_event(struct vm_dump *d, const struct vm_event *e) {
    if (e->type == 'a') d->event_counts.allocs++;
    else if (e->type == 'f') d->event_counts.frees++;
    else if (d->event_counts.ooms++ == 0) d->event_counts.first_oom_ns = e->time_ns;
}

/* The kind of memory of an event ("device", ...). */
static inline const char *vm_event_kind(const struct vm_dump *d, const struct vm_event *e) {
    return d->event_kinds[e->kind];
}

/* The index of kind k among d's event kinds, added when it is new (k is
 * kept: a static name or one the model owns). -1 when there are already
 * VM_EVENT_KINDS of them. */
int vm_event_kind_index(struct vm_dump *d, const char *k);

/* The call-site frame of a stack, NULL for an empty one. */
const struct vt_frame *vm_site(const struct vm_dump *d, size_t stack);

/* Frame i of a stack (0 is the innermost), found by walking i nodes up
 * the tree; NULL past the stack's end. */
const struct vt_frame *vm_stack_frame(const struct vm_dump *d, size_t stack, size_t i);

/* A stack's frames, innermost first, as d->stacks[stack].nframes pointers
 * into the frame table: an array in d->scratch, valid until the next
 * vm_stack_frames on d; NULL for an empty stack. */
const struct vt_frame *const *vm_stack_frames(const struct vm_dump *d, size_t stack);

/* The frames of a stack as one array of copies (for what prints a stack
 * whole), innermost first: in d->flat, valid until the next call on d;
 * NULL for an empty stack. */
const struct vt_frame *vm_stack_flat(const struct vm_dump *d, size_t stack);

/* A version 1 stack's frames (n, innermost first, copied) added to the
 * frame table and the tree as the nodes of *st. Returns 0, or -1 when
 * memory ran out or the tree would outgrow its 32-bit indices. */
int vm_tree_add(struct vm_dump *d, struct vm_stack *st, const struct vt_frame *frames, size_t n);

/* Once every stack is read: room in d->flat and d->scratch for the
 * deepest stack. Returns 0, or -1 when memory ran out. */
int vm_tree_ready(struct vm_dump *d);

#endif
