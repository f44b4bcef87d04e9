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
#include "model_steps.h"

struct vm_torch;   /* model_torch.h: PyTorch's own view, NULL when absent */

/* A stack: its frames, innermost first, each a pointer into the dump's
 * one frame table (a frame is stored once however many stacks go
 * through it). */
struct vm_stack {
    size_t nframes;
    const struct vt_frame *const *frames;
    int site;                /* the call-site frame, or -1 */
    int through;             /* the library frame it went through, or -1 */
};

struct vm_holder {
    size_t stack;
    VT_HOLDER_FIELDS(VT_RECORD_FIELD) /* bytes, count (common/records.h) */
};

/* A live allocation and an event, each in as few bytes as its fields
 * allow (a dump holds millions): 64 and 40. */
struct vm_alloc {
    uint64_t address, handle;
    VT_ALLOC_FIELDS(VT_RECORD_FIELD) /* bytes, time_ns, api (common/records.h) */
    const char *kind;
    size_t stack;
    int thread;
    int16_t device;          /* -1 .. 4095 */
    char has_handle;
};

struct vm_event {
    VT_EVENT_FIELDS(VT_RECORD_FIELD) /* time_ns, address, bytes (common/records.h) */
    const char *kind;
    uint32_t stack;
    int16_t device;          /* -1 .. 4095 */
    char type;               /* 'a' alloc, 'f' free, 'o' oom */
};

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
    VT_OOM_FIELDS(VT_RECORD_FIELD) /* time_ns, requested, free_bytes, total_bytes,
                                      live_bytes, api (common/records.h) */
    int have_info;
    const char *kind;
    int device, thread;
    size_t stack;
    struct vm_holder *holders;
    size_t nholders;
    int have_holders;
    struct vm_torch *torch;
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
};

struct vm_dump {
    const char *path;
    const char *reason, *host;
    int pid, rank, local_rank;
    const char **argv;
    size_t argc;
    uint64_t start_unix_ns, time_ns;
    struct vm_device *devices;
    size_t ndevices;
    struct vm_totals totals;
    struct vm_oom *ooms;
    size_t nooms;
    struct vm_holder *holders, *peak_holders;
    size_t nholders, npeak_holders;
    struct vm_alloc *live;
    size_t nlive;
    struct vm_event *events;
    size_t nevents;
    uint64_t events_dropped;
    struct vm_step *steps;       /* step boundaries, oldest first (model_steps.h) */
    size_t nsteps;
    uint64_t steps_total;
    struct vm_stack *stacks;
    size_t nstacks;
    struct vm_growth *growing;   /* optional in the dump */
    size_t ngrowing;
    struct vm_torch *torch;
    void *json;              /* the parsed document, owned */
    void *v2;                /* a version 2 dump's tables (model_v2.c), owned */
    struct vt_frame *flat;   /* room for the deepest stack's frames: the
                                copy vm_stack_flat hands out, owned */
};

/* Read and check the dump at path. Returns 0, or -1 with a one-line reason
 * in err. On failure *d holds nothing to free. */
int vm_load(const char *path, struct vm_dump *d, char *err, size_t errsize);

/* The same from a buffer (for the fuzzer and tests); `name` names it in
 * errors. */
int vm_load_buffer(const char *buf, size_t len, const char *name, struct vm_dump *d,
                   char *err, size_t errsize);

void vm_free(struct vm_dump *d);

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

/* The call-site frame of a stack, NULL for an empty one. */
const struct vt_frame *vm_site(const struct vm_dump *d, size_t stack);

/* The frames of a stack as one array (for what prints a stack whole),
 * innermost first: a copy in d->flat, valid until the next call on d;
 * NULL for an empty stack. */
const struct vt_frame *vm_stack_flat(const struct vm_dump *d, size_t stack);

/* n frame pointers (a stack's frames) copied into one array; *buf, of
 * *cap frames, grows as needed. NULL when memory ran out. */
struct vt_frame *vm_frames_flat(const struct vt_frame *const *frames, size_t n, struct vt_frame **buf,
                                size_t *cap);

#endif
