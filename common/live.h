/* live.h -- the live segment: what a traced process publishes of itself
 * while it runs, for `vramtrace top` and `vramtrace metrics` to read.
 *
 * One file per process, VT_LIVE_PREFIX PID VT_LIVE_SUFFIX in the live
 * directory (vt_live_dir: $XDG_RUNTIME_DIR when it is set to a directory,
 * else /dev/shm), mode 0600, mapped shared. The writer (report/live.c, in
 * the traced process) is the only one that writes it; it holds an flock
 * on it for as long as it lives (the lock goes with the process at exit,
 * a crash or an exec), removes it at exit, and fills it under a sequence
 * lock: `seq` is odd while it writes. A reader copies the whole segment
 * and keeps the copy only when `seq` was even and the same before and
 * after (cli/livefile.c); it never makes the writer wait. A segment
 * whose pid is gone, whose process started at another time, or whose lock
 * nobody holds is stale: its reader removes it.
 *
 * Fields the writer has nothing for stay 0 with their flag bit clear:
 * PyTorch's reserved and allocated bytes (VT_LIVE_DEV_TORCH, from the
 * PyTorch companion), steps (VT_LIVE_STEPS, VT_LIVE_DEV_PER_STEP). */
#ifndef VT_COMMON_LIVE_H
#define VT_COMMON_LIVE_H

#include <stddef.h>
#include <stdint.h>

#define VT_LIVE_MAGIC 0x31564c5254565456ull /* "VTVTRLV1" */
#define VT_LIVE_VERSION 2
#define VT_LIVE_PREFIX "vramtrace-live."
#define VT_LIVE_SUFFIX ".shm"
#define VT_LIVE_DEVICES 64
#define VT_LIVE_SITES 32
#define VT_LIVE_LABEL 160
/* Kinds of memory, in the tracker's order (enum vt_kind, whose names
 * these are: tests/unit/test_live.c checks both). */
#define VT_LIVE_KINDS 16
#define VT_LIVE_KIND_NAMES \
    "device", "pitched", "managed", "async", "vmm", "host", "array", "imported", "host_vmm", "host_async", \
        "host_registered", "graph"

enum {
    VT_LIVE_DEV_FACTS = 1,    /* name, uuid and total_bytes were read */
    VT_LIVE_DEV_TORCH = 2,    /* torch_reserved/torch_allocated are PyTorch's */
    VT_LIVE_DEV_FORECAST = 4, /* forecast_ns holds a forecast */
    VT_LIVE_DEV_PER_STEP = 8, /* the process has steps: growth_per_step, and
                                 the forecast is per step (forecast_steps) */
};
enum { VT_LIVE_STEPS = 1 };

struct vt_live_device {
    int32_t ordinal;
    uint32_t flags;            /* VT_LIVE_DEV_* */
    char name[64];
    char uuid[48];             /* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" */
    uint64_t total_bytes;      /* the device's memory, when known */
    uint64_t capacity_bytes;   /* what the forecast fills: VRAMTRACE_LIMIT, else total */
    uint64_t live_bytes, live_count, peak_bytes;
    uint64_t alloc_count, free_count, failed_count, oom_count;
    int64_t growth_per_min;    /* sustained growth, bytes a minute (report/forecast.c) */
    uint64_t forecast_ns;      /* with VT_LIVE_DEV_FORECAST: full this long from updated_unix_ns */
    uint64_t torch_reserved_bytes, torch_allocated_bytes; /* with VT_LIVE_DEV_TORCH */
    uint64_t kind_live_bytes[VT_LIVE_KINDS], kind_peak_bytes[VT_LIVE_KINDS]; /* by kind */
    int64_t growth_per_step;   /* with VT_LIVE_DEV_PER_STEP: sustained growth, bytes a step */
    uint64_t forecast_steps;   /* with VT_LIVE_DEV_PER_STEP and _FORECAST: full in this many steps */
};

struct vt_live_site {
    uint64_t bytes, count;
    uint32_t stack;            /* the process's stack id */
    uint32_t pad;
    char label[VT_LIVE_LABEL]; /* the call site's vt_site_name */
};

struct vt_live_segment {
    uint64_t magic;
    uint32_t version, size;    /* size: sizeof(struct vt_live_segment) */
    uint64_t seq;              /* the sequence lock: odd while written */
    int32_t pid, rank, local_rank;
    uint32_t flags;            /* VT_LIVE_STEPS */
    uint64_t process_start;    /* field 22 of /proc/PID/stat */
    char boot_id[40];
    char host[64];
    char command[128];         /* argv joined by spaces, cut */
    uint64_t start_unix_ns;    /* the tracker's start */
    uint64_t updated_unix_ns;  /* the last publication */
    uint64_t publications;
    uint64_t steps;            /* steps (vramtrace_step, PyTorch's optimizer), with VT_LIVE_STEPS */
    uint64_t live_bytes, peak_bytes, host_live_bytes, imported_live_bytes;
    uint64_t alloc_count, free_count, failed_count, oom_count, unknown_frees, missed;
    int32_t ndevices, nsites;
    struct vt_live_device devices[VT_LIVE_DEVICES]; /* ndevices of them, used ones */
    struct vt_live_site sites[VT_LIVE_SITES];       /* largest first */
    char forecast[256];        /* the forecast's line, "" for none */
    /* Pinned host memory (and memory of no device) by kind. */
    uint64_t host_kind_live_bytes[VT_LIVE_KINDS], host_kind_peak_bytes[VT_LIVE_KINDS];
};

/* The live directory: $XDG_RUNTIME_DIR when it names a directory in at
 * most VT_LIVE_DIR_MAX bytes, else /dev/shm. Writes at most size bytes
 * (at least VT_LIVE_DIR_MAX + 1); returns out. */
#define VT_LIVE_DIR_MAX 3000
const char *vt_live_dir(char *out, size_t size);


#endif
