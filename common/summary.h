/* summary.h -- what a report says of the memory still held: the totals,
 * the largest holders by call site, the largest live allocations, the
 * growing call sites and a stack's frames; one shape and one printer each
 * for the library and the CLI.
 *
 * The library's post-mortem and exit summary (report/postmortem.c) and its
 * leak report (report/leaks.c) fill these shapes from a snapshot and its
 * analysis, the CLI's text report (cli/fmt_text.c, through
 * cli/summary_view.c) from a dump's model, and both print them with the
 * functions below: a section that both sides print is the same code, so
 * `vramtrace report` of a dump says what the library said when it wrote it.
 *
 * Every text in a shape is in display form already (the CLI's made safe to
 * print); `put`, where a printer takes one, writes a frame's text taken
 * from a binary or a dump (the CLI passes one that makes control
 * characters visible; NULL: as it is). `prefix` begins every line
 * ("vramtrace: " in the library, "" in the CLI). */
#ifndef VT_COMMON_SUMMARY_H
#define VT_COMMON_SUMMARY_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "counters.h"
#include "frame.h"

typedef void (*vt_put_fn)(FILE *, const char *);

/* A stack's frames, innermost first, one line each as LeakSanitizer prints
 * them: "INDENT#N 0xADDRESS in FUNCTION FILE:LINE", "... in FUNCTION
 * (MODULE+0xOFFSET)" without line information; a Python frame, which has
 * no address, "INDENT#N in FUNCTION FILE:LINE"; a borrowed frame followed
 * by VT_BORROWED_NOTE. An empty stack is "INDENT(no stack)". */
void vt_put_frames(FILE *f, const char *indent, const struct vt_frame *frames, size_t n, vt_put_fn put);

/* The counts of the run as the exit summary gives them. `moment` names
 * when the live figures were taken ("exit", "the dump"). */
struct vt_totals_text {
    const char *moment;
    uint64_t live_bytes, live_count, peak_bytes, peak_time_ns;
    uint64_t alloc_count, free_count, failed_count, oom_count;
    uint64_t missed;                       /* hooked calls passed through unrecorded */
    uint64_t host_live_bytes, host_live_count, host_peak_bytes;
    uint64_t imported_live_bytes, imported_live_count;
    uint64_t records_lost;                 /* dropped for lack of memory */
    uint64_t events_dropped_while_read;    /* events a dump's reading of the history
                                              could not hold back: apart, no memory ran short */
    uint64_t oom_survived;                 /* failures the same request later got past */
    uint64_t released_bytes, released_count; /* device memory given back by
                                              a context reset, never freed
                                              (leaks) */
    uint64_t released_host_bytes, released_host_count; /* the same of pinned
                                              host memory, apart */
};

/* "PREFIX  live at MOMENT: ...; peak ...", "PREFIX  allocations N, frees N,
 * failed N (out of memory N)", then, each only when it has something to
 * say, the missed calls, pinned host memory and what a context reset
 * released of it without a free, memory opened from other processes,
 * device memory a context reset released without a free, and the records
 * lost. */
void vt_put_totals(FILE *f, const char *prefix, const struct vt_totals_text *t);

/* One device of the devices table: texts in display form, the name cut
 * to its 28-character column ("?" when unknown, as the uuid), total_bytes
 * 0 when unknown. */
struct vt_device_row {
    int ordinal;
    char name[29], uuid[256];
    uint64_t total_bytes;
    VT_COUNTERS(VT_COUNTER_FIELD)  /* live_bytes ... oom_count (common/counters.h) */
};

/* Copy each counter of common/counters.h from *src (the tracker's device,
 * or the model's) to *dst (a row). */
#define VT_COPY_COUNTER(name) vt_dst_->name = vt_src_->name;
#define VT_COPY_COUNTERS(dst, src)                                   \
    do {                                                             \
        __typeof__(dst) vt_dst_ = (dst);                             \
        __typeof__(src) vt_src_ = (src);                             \
        VT_COUNTERS(VT_COPY_COUNTER)                                 \
    } while (0)

/* The devices used: candidates 0..n, row(ctx, i, r) filling candidate i
 * and returning 0 for one that was not used (skipped). */
struct vt_devices_text {
    size_t n;
    int (*row)(const void *ctx, size_t i, struct vt_device_row *r);
    const void *ctx;
};

/* "PREFIXdevices:", a heading line and one line per device used (total,
 * live, peak and when, allocations, frees, failures, OOMs, uuid);
 * "PREFIX  (none used)" when none was. */
void vt_put_devices(FILE *f, const char *prefix, const struct vt_devices_text *d);

/* One row of a holders table: a call site's live bytes and allocations,
 * its label, and (where the table shows stacks) the frames of its largest
 * stack. */
struct vt_holder_row {
    uint64_t bytes, count;
    char site[2048];
    const struct vt_frame *frames;
    size_t nframes;
};

/* A holders table: n rows (call sites), largest first, row(ctx, i, r)
 * filling row i; percentages of `total`. `moment` is NULL for the holders
 * of the report's own moment, else the moment shown ("peak", "oom"). With
 * `stacks`, each row is followed by its frames. */
struct vt_holders_text {
    const char *title;         /* NULL: "largest holders" */
    const char *none;          /* why there are no rows; NULL: "no device memory is live" */
    const char *moment;
    size_t n;
    uint64_t total;
    int stacks;
    void (*row)(const void *ctx, size_t i, struct vt_holder_row *r);
    const void *ctx;
};

/* "PREFIXlargest holders[ at MOMENT] by call site (N call sites):" (TITLE
 * for "largest holders" where one is given) and the
 * first `top` rows, "PREFIX  BYTES PCT% COUNT allocs  SITE", then, when
 * rows were left out, "PREFIX  (N more call sites, BYTES, PCT% together,
 * not shown: --top TOP)"; when there
 * are none, the one line "PREFIXlargest holders[ at MOMENT] by call site:
 * none (no device memory is live)" ("was live then" at a MOMENT). Both
 * sides print the table at their moments whatever it holds: this function
 * alone decides what an empty one says. The rows come in vt_rank_order
 * (common/labels.h). */
void vt_put_holders(FILE *f, const char *prefix, const struct vt_holders_text *h, size_t top, vt_put_fn put);

/* One live allocation of the largest-first list. */
struct vt_live_row {
    uint64_t bytes, address, time_ns;
    int device;
    char kind[64], api[256], site[2048];
};

/* The largest live allocations of device memory: candidates 0..n, largest
 * first, row(ctx, i, r) filling candidate i and returning 0 for one that
 * is not device memory this process owns (skipped); `live` is how many
 * allocations of device memory are live. `moment` is NULL for the list of
 * the report's own moment, else when the list is of ("when this report
 * was written, not at the failure"). */
struct vt_live_text {
    const char *moment;
    size_t n;
    uint64_t live;
    int (*row)(const void *ctx, size_t i, struct vt_live_row *r);
    const void *ctx;
};

/* "PREFIXlargest live allocations[ MOMENT] (N live):" and up to `top`
 * rows, nothing when no candidate is a row. */
void vt_put_live(FILE *f, const char *prefix, const struct vt_live_text *l, size_t top);

/* One growing call site: its label, its live bytes at the first window's
 * floor and at the end, and the rate (vt_fmt_growth's text). */
struct vt_growth_row {
    char site[2048];
    uint64_t first_bytes, end_bytes;
    char rate[400];
    uint64_t cache_bytes;   /* the least of end_bytes in PyTorch's cache (report/growth.h), 0: not known */
};

struct vt_growing_text {
    size_t n;
    void (*row)(const void *ctx, size_t i, struct vt_growth_row *r);
    const void *ctx;
};

/* Whether a growing site's memory is mostly PyTorch's cache: at least
 * half its rise and half its bytes at the end hold no tensor (the cache
 * kept segments a larger batch or sequence made; not a leak). */
int vt_growth_mostly_cache(uint64_t first_bytes, uint64_t end_bytes, uint64_t cache_bytes);

/* "PREFIXgrowing call site(s) (live bytes rose through the run; a leak
 * suspect / leak suspects):" and up to `top` vt_put_growth lines, then
 * the sites whose memory is mostly PyTorch's cache (vt_growth_mostly_cache)
 * under a title of their own, each with what of it holds no tensor;
 * nothing when n is 0. */
void vt_put_growing(FILE *f, const char *prefix, const struct vt_growing_text *g, size_t top);

/* Whether a kind name ("device", "host", ...) is device memory this
 * process owns: not host memory, not memory opened from another process
 * ("imported"). The rule of the holders and the live tables. */
int vt_kind_name_owned_device(const char *kind);

#endif
