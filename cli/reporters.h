/* reporters.h -- the formats `vramtrace report` writes, behind one interface.
 *
 * Each format is one file (fmt_*.c) with one writer; this header lists them
 * and the helpers they share. Writers only read the checked model. */
#ifndef VT_REPORTERS_H
#define VT_REPORTERS_H

#include "../common/display.h"
#include <stdio.h>

#include "model.h"

enum vr_moment { VR_AT_EXIT, VR_AT_PEAK, VR_AT_OOM };

/* The root of each folded line (--folded-root): the call-site label
 * (default) or none, the whole stack alone. */
enum vr_folded_root { VR_ROOT_SITE, VR_ROOT_NONE };

struct vr_opts {
    enum vr_moment at;
    int top;
    enum vr_folded_root folded_root;
    int top_given;   /* --top was given: the JSON's lists are cut to it too */
};

struct vr_input {
    struct vm_dump *dumps;
    size_t n;
    /* Dumps of earlier runs of the job, left out of the report (runs.h):
     * how many, of how many runs, and when the newest run began (its
     * first process's start_unix_ns). */
    const struct vm_dump *earlier;
    size_t nearlier, earlier_runs;
    uint64_t earlier_by_ns;
};

struct vt_reporter {
    const char *name;
    const char *summary;
    /* Write the report. Returns 0, or -1 with a one-line reason in err. */
    int (*write)(FILE *f, const struct vr_input *in, const struct vr_opts *o, char *err,
                 size_t errsize);
    /* Whether it reads the events themselves; the others are given dumps
     * loaded with VM_LOAD_COUNT_EVENTS. */
    int needs_events;
};

extern const struct vt_reporter vt_reporters[]; /* ended by a NULL name */

int vr_text(FILE *, const struct vr_input *, const struct vr_opts *, char *, size_t);
/* PyTorch's breakdown (cli/torch_text.c), each line after indent; nothing
 * when t is NULL. */
struct vm_torch;
void vr_text_torch(FILE *f, const struct vm_dump *d, const struct vm_torch *t, const char *indent);
int vr_json(FILE *, const struct vr_input *, const struct vr_opts *, char *, size_t);
int vr_folded(FILE *, const struct vr_input *, const struct vr_opts *, char *, size_t);
int vr_html(FILE *, const struct vr_input *, const struct vr_opts *, char *, size_t);
int vr_torch(FILE *, const struct vr_input *, const struct vr_opts *, char *, size_t);

const char *vr_moment_name(enum vr_moment at);

/* When a dump was written, after "dump written ": "at exit", "at oom",
 * "on a signal", "by vramtrace_dump" (its `reason`); "at X" for another. */
const char *vr_written(const char *reason, char *buf, size_t size);

/* The holders of one dump at the chosen moment: live at exit (or when the
 * dump was written), at the peak of device bytes, or at the first OOM (of
 * the failing device alone when other devices held memory too and the
 * dump says so, as the post-mortem shows them: see vr_holders_device).
 * NULL with *n = 0 when the dump has none; *missing is set when the dump
 * cannot answer (no OOM for VR_AT_OOM, no peak holders in the dump). */
const struct vm_holder *vr_holders_at(const struct vm_dump *d, enum vr_moment at, size_t *n,
                                      int *missing);

/* The device whose memory alone vr_holders_at gives at `at`, or -1 when
 * it gives every device's. */
int vr_holders_device(const struct vm_dump *d, enum vr_moment at);

/* Call sites combined across dumps, by their call-site label
 * (common/labels.h: the library's grouping), in common/labels.h's one
 * order (vt_rank_order): for one dump's holders table, several ranks or
 * processes at once, and the two sides of a diff. Sums hold at
 * UINT64_MAX. */
struct vr_combined {
    char *where;
    uint64_t bytes, count;
    size_t processes;           /* how many dumps hold memory there */
    const struct vm_dump *first; /* a dump and stack to show the stack from */
    size_t stack;
    uint64_t *bytes_in, *count_in; /* vr_combine_each: per dump of the input; else NULL */
};

/* Whether in->dumps[i] is the newest of its process's dumps among in
 * (the same pid, host and start): its exit dump, else the one written
 * last, else the last given. A process's other dumps (on-demand dumps
 * beside its exit dump) hold nothing its newest does not tell. */
int vr_newest_of_process(const struct vr_input *in, size_t i);

/* A dump's process as the first-to-fail lines name it: "rank R (pid P)",
 * "local rank R on HOST (pid P)" where only a local rank variable gave it
 * one (the host in its display form), or "pid P" for a process no
 * launcher gave a rank. Returns buf. */
const char *vr_who(const struct vm_dump *d, char *buf, size_t size);

/* Which of its process's dumps d is, as the table of several dumps and
 * the page say it: why it was written, an on-demand dump's number, and
 * when (seconds since the process began): "signal 3, 1.234 s", "exit,
 * 5.210 s". Returns buf. */
const char *vr_dump_which(const struct vm_dump *d, char *buf, size_t size);

/* 1 when another of in's dumps is of d's process (the table then says
 * which dump each row is). */
int vr_has_sibling(const struct vr_input *in, size_t i);

/* "begun 2026-12-06 06:52:49.177 UTC", when d's process began, where
 * another of in's dumps is of another process of d's pid on d's host
 * (containers' pid 1, one after another), so that the two are told
 * apart; else "". Returns buf. */
const char *vr_began(const struct vr_input *in, const struct vm_dump *d, char *buf, size_t size);

/* The order the text report lists in's dumps in, a malloc'd array of
 * their indexes: processes in the order given, each process's dumps
 * together, by when they were written (its exit dump last); processes of
 * one pid on one host (three pid-1 containers' one after another) by
 * when each began. NULL when out of memory. */
size_t *vr_dump_order(const struct vr_input *in);

/* How many processes in's dumps are of (vr_newest_of_process's count). */
size_t vr_process_count(const struct vr_input *in);

/* The holders of in's processes at `at`, of each process its newest dump
 * (vr_newest_of_process), by call site; `processes` counts processes. */
struct vr_combined *vr_combine(const struct vr_input *in, enum vr_moment at, size_t *n);
/* The same, with each row's bytes and count in each dump (bytes_in[i],
 * count_in[i] for in->dumps[i]). */
struct vr_combined *vr_combine_each(const struct vr_input *in, enum vr_moment at, size_t *n);
void vr_combined_free(struct vr_combined *c, size_t n);

/* Holders h[0..n) of dump d in common/labels.h's one order (vt_rank_order:
 * more bytes first, equal bytes by call-site label, then by stack), the
 * order every format lists stacks in: a malloc'd copy, its length in
 * *nout. With top > 0, only the stacks of the `top` call sites that the
 * holders table by call site lists first (vr_combine's rows, the text
 * report's), the `top` largest of each, and in *left how many stacks that
 * left out (0 without top).
 * NULL with *nout = 0 when n is 0 or memory ran out. */
struct vm_holder *vr_holders_ranked(const struct vm_dump *d, const struct vm_holder *h, size_t n, size_t top,
                                    size_t *nout, size_t *left);

/* The call sites of a dump's stacks, from a writer that grouped them
 * already: site_of[s] is stack s's group in sites (common/labels.h, of
 * vm_site_label's text made in 1024 bytes); rank, the groups' order by
 * label, is made at the first holders of equal bytes that need it and
 * kept for the next lists (NULL before; vr_sites_free frees it). */
struct vt_labels;
struct vr_sites {
    const uint32_t *site_of;
    const struct vt_labels *sites;
    uint32_t *rank;
};

/* vr_holders_ranked of every holder (top 0), the labels of s's groups
 * made no more: n holders, or NULL as there. */
struct vm_holder *vr_holders_ranked_by_site(const struct vm_dump *d, const struct vm_holder *h, size_t n,
                                            struct vr_sites *s);
void vr_sites_free(struct vr_sites *s);

/* "1.50 GiB" */
const char *vr_bytes(uint64_t v, char *buf, size_t size);

/* ", ended by SIGTERM from pid 4242 (slurmstepd)" (vt_fmt_ended_by, the
 * names in their display form) when a signal ended the dump's process
 * after it, else "". Writes into buf and returns it. */
const char *vr_ended(const struct vm_dump *d, char *buf, size_t size);

/* `one` when n is 1, else `many`: "1 allocation", "2 allocations". */
const char *vr_plural(uint64_t n, const char *one, const char *many);

/* The process's out-of-memory failures, kept or not (its totals; in an
 * older dump that counted fewer, its records). */
uint64_t vr_oom_count(const struct vm_dump *d);

/* The event history's allocations, frees and OOMs, with the frees the
 * driver refused apart. A refused free is in the history as a free and
 * then an allocation of the same memory (docs/dump-format.md), neither of
 * which the totals count; nothing in the events themselves tells that
 * pair from a free and an allocation given the same address again. So
 * when the history is whole (no event dropped) and it holds as many more
 * allocations as frees than the totals count, that many are refused frees,
 * taken out of both; else (older events dropped, or a dump whose counts do
 * not agree so) refused_frees is 0 and the events are counted as they are. */
struct vr_history_counts {
    uint64_t allocs, frees, ooms, refused_frees;
};
struct vr_history_counts vr_history_counts(const struct vm_dump *d);

/* The dump's failed requests (its oom_requests: every failure counted,
 * kept or not) as the reports list them, one line each without its
 * indent or end: the requests of one size, device and call site together,
 * the `top` that failed most ("2.00 GiB by cudaMalloc on device 0 at SITE:
 * 5000 times, from 0.001 s to 0.061 s"), then what is left out of them
 * and of the library's table. Each line, in its display form, goes to
 * line(ctx, text). Returns how many lines, 0 for an older dump that has no
 * oom_requests (or when memory ran out). */
size_t vr_oom_requests(const struct vm_dump *d, int top, void (*line)(void *ctx, const char *text), void *ctx);

/* The display form of the character at *p (common/display.h). */
#define VR_CHAR_MAX VT_CHAR_MAX
size_t vr_display_char(const char *p, char out[VR_CHAR_MAX + 1]);

/* s in its display form (see vr_display_char), in buf; cut at a character
 * boundary when buf is too small. NULL becomes "". Returns buf. */
const char *vr_safe(const char *s, char *buf, size_t size);

/* Write s to f in its display form, however long. */
void vr_put_safe(FILE *f, const char *s);

#endif
