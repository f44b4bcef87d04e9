/* oomtext.h -- an out-of-memory failure as the post-mortem tells it, one
 * shape and one printer for the library and the CLI.
 *
 * The library's post-mortem (report/postmortem.c) fills a vt_oom_text from
 * its snapshot and analysis, the CLI's text report (cli/fmt_text.c) from a
 * dump's model, and both print it with vt_put_oom: the lines that say what
 * was asked, where from, and what the device held are the same code. */
#ifndef VT_COMMON_OOMTEXT_H
#define VT_COMMON_OOMTEXT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* What the "tracked on device" line says: nothing (host memory, or a
 * device not in the record), the live bytes, or those with the device's
 * live allocations and peak as they were at the failure (known where the
 * record was taken right after it: the library's post-mortem, a dump
 * written at its latest failure). */
enum { VT_TRACKED_NONE, VT_TRACKED_BYTES, VT_TRACKED_COUNTS };

/* Every text is in display form already (the CLI's made safe to print). */
struct vt_oom_text {
    uint64_t requested;
    int requested_rounded;     /* requested is PyTorch's error's two-decimal figure */
    const char *api;
    const char *host;          /* vt_host_memory_label of the kind; NULL: device memory */
    int device;
    int budget;                /* refused by VRAMTRACE_LIMIT */
    const char *device_name;   /* NULL or "" when unknown */
    const char *device_uuid;   /* the same */
    const char *site;          /* the failing call's label */
    int have_info;             /* free_bytes and total_bytes were read */
    uint64_t free_bytes, total_bytes;
    uint64_t live_bytes;       /* tracked live on that device at the failure */
    uint64_t raised_allocated; /* a refusal of PyTorch's learnt as its error reached
                                  Python: what it had allocated when it refused (its
                                  error's figure); the others' figures are of the
                                  later moment (0: all are of the failure) */
    uint64_t graph_reserved, graph_used; /* the CUDA graphs' memory pool on that
                                            device: reserved, in use (0, 0: none) */
    uint64_t pool_reserved, pool_used;   /* its stream-ordered memory pools: the
                                            same */
    uint64_t taken_bytes, taken_count; /* the handles the request made
                                          before the call that failed, its
                                          own (counted in live_bytes) */
    int tracked;               /* what is said of it: VT_TRACKED_* */
    uint64_t device_live_count, device_peak_bytes, device_peak_time_ns; /* VT_TRACKED_COUNTS */
    const char *procs;         /* other processes, vt_fmt_proc's joined; NULL: NVML did not say */
    size_t nprocs;
    /* When: since the start, the start's wall-clock time (0: unknown), and
     * the program's step then (vt_step_at; 0: no steps, or not known). */
    uint64_t time_ns, start_unix_ns, step;
};

/* The step a moment falls in, from step boundaries (n records of `size`
 * bytes from `steps`, oldest first, each holding its number and its time
 * as uint64_t at the offsets given; n kept of `total` ever counted): one
 * past the last boundary at or before it; 1 before the first when none
 * was dropped; 0 when the program marked no step, or the boundary before
 * it was dropped. The library's records and the CLI's alike. */
uint64_t vt_step_at(uint64_t time_ns, const void *steps, size_t n, size_t size, size_t step_off, size_t time_off,
                    uint64_t total);

/* What the device holds (total - free) beyond this process's tracked live
 * bytes and the spare memory its CUDA graphs' pool and its stream-ordered
 * pools keep reserved (their allocations in use are tracked): the CUDA
 * context, other processes, untracked APIs. 0 when nothing. */
uint64_t vt_oom_outside(uint64_t total, uint64_t free_bytes, uint64_t live, uint64_t graph_reserved,
                        uint64_t graph_used, uint64_t pool_reserved, uint64_t pool_used);

/* What a failed request for host memory asked for, by kind name
 * ("host", "host_vmm", "host_async"), said after the request; NULL for
 * any other kind (device memory). */
const char *vt_host_memory_label(const char *kind);

/* Where a failed request was for, as the post-mortem's request line says
 * it after the API, with its leading space: " (pinned host memory)" for a
 * kind of host memory (vt_host_memory_label), " on device 0" for any
 * other; written to buf (64 bytes are enough) and returned. Every line
 * that names a failure's device says it so, never "device -1". */
const char *vt_oom_where(const char *kind, int device, char *buf, size_t size);

/* The failure's lines, each beginning with `prefix`: the request, the
 * failing call, what the request took before that call (its own
 * handles, where it made any), when (since the start, the wall clock, the step), the
 * device's (or budget's) free bytes, what is held
 * outside the tracked allocations, what was tracked on the device, and
 * the other processes on it. */
void vt_put_oom(FILE *f, const char *prefix, const struct vt_oom_text *o);

#endif
