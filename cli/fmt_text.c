/* fmt_text.c -- the text report: the post-mortem, richer than the one the
 * library prints, read from one or more dumps. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../common/format.h"
#include "../common/oomtext.h"
#include "fleet.h"
#include "runs.h"
#include "forecast_text.h"
#include "summary_view.h"
#include "reporters.h"

#define B(v, buf) vr_bytes((v), (buf), sizeof(buf))
/* A string from the dump, in its display form (no control characters). */
#define S(s, buf) vr_safe((s), (buf), sizeof(buf))

static double secs(uint64_t ns) { return (double)ns / 1e9; }

/* The call site of a stack in its display form. */
static const char *site_text(const struct vm_dump *d, size_t stack, char *buf, size_t size) {
    char where[1024];
    return vr_safe(vm_site_label(d, stack, where, sizeof where), buf, size);
}

/* One line that says how the run went, from the event history
 * (vr_history_counts: a free the driver refused counted apart). */
static void timeline(FILE *f, const struct vm_dump *d) {
    char a[32], b[32], refused[64] = "";
    /* A run whose history kept no event at all (VRAMTRACE_EVENTS=0): its
     * counts of the history would read "0 allocations" beside the totals'
     * own. */
    if (d->nevents == 0 && (d->events_dropped || d->totals.alloc_count || d->totals.free_count || d->totals.failed_count)) {
        fprintf(f, "timeline: no event history kept (VRAMTRACE_EVENTS=0)");
        if (d->events_dropped)
            fprintf(f, ", %" PRIu64 " %s dropped", d->events_dropped, vr_plural(d->events_dropped, "event", "events"));
        fprintf(f, "; over %.3f s device bytes peaked at %s at %.3f s and were %s at the end\n", secs(d->time_ns),
                B(d->totals.peak_bytes, a), secs(d->totals.peak_time_ns), B(d->totals.live_bytes, b));
        return;
    }
    struct vr_history_counts c = vr_history_counts(d);
    if (c.refused_frees)
        snprintf(refused, sizeof refused, ", %" PRIu64 " %s", c.refused_frees,
                 vr_plural(c.refused_frees, "free the driver refused", "frees the driver refused"));
    fprintf(f, "timeline: %zu %s over %.3f s (%" PRIu64 " %s, %" PRIu64 " %s%s, %" PRIu64 " %s%s)", d->nevents,
            vr_plural(d->nevents, "event", "events"), secs(d->time_ns), c.allocs,
            vr_plural(c.allocs, "allocation", "allocations"), c.frees, vr_plural(c.frees, "free", "frees"), refused,
            c.ooms, vr_plural(c.ooms, "OOM", "OOMs"), d->events_dropped ? ", older events dropped" : "");
    fprintf(f, "; device bytes peaked at %s at %.3f s and were %s at the end", B(d->totals.peak_bytes, a),
            secs(d->totals.peak_time_ns), B(d->totals.live_bytes, b));
    if (c.ooms) fprintf(f, "; first OOM at %.3f s", secs(d->event_counts.first_oom_ns));
    fputc('\n', f);
}

static const struct vm_device *device_of(const struct vm_dump *d, int ordinal) {
    for (size_t i = 0; i < d->ndevices; i++)
        if (d->devices[i].ordinal == ordinal) return &d->devices[i];
    return NULL;
}

/* A line for each request, device and call site that failed, with how
 * many times and when (vr_oom_requests), under its heading; nothing for an
 * older dump. */
struct request_lines {
    FILE *f;
    size_t n;
};

static void request_line(void *ctx, const char *text) {
    struct request_lines *r = ctx;
    if (r->n++ == 0) fputs("out-of-memory failures by request:\n", r->f);
    fprintf(r->f, "  %s\n", text);
}

static void requests(FILE *f, const struct vm_dump *d, int top) {
    struct request_lines r = {f, 0};
    vr_oom_requests(d, top, request_line, &r);
}

/* Each failure's lines as the library's post-mortem prints them
 * (vt_put_oom), from the dump's texts made safe to print; then its stack
 * and findings. */
static void ooms(FILE *f, const struct vm_dump *d, int top) {
    char api[256], name[256], uuid[256], site[2048], procs[4096];
    for (size_t i = 0; i < d->nooms && i < (size_t)top; i++) {
        const struct vm_oom *o = &d->ooms[i];
        const struct vm_device *v = device_of(d, o->device);
        size_t k = 0;
        procs[0] = '\0';
        for (size_t p = 0; p < o->nprocs && k < sizeof procs; p++) {
            char one[384];
            const char *pn = o->procs[p].name ? S(o->procs[p].name, name) : NULL;
            int w = snprintf(procs + k, sizeof procs - k, "%s",
                             vt_fmt_proc(p == 0, o->procs[p].pid, pn, o->procs[p].used_known, o->procs[p].used_bytes,
                                         one, sizeof one));
            if (w < 0) break;
            k += (size_t)w;
        }
        vt_utf8_whole(procs, sizeof procs);
        /* The device's counts at this failure: kept with it, or, in an
         * older dump, the dump's own when it was written at the failure
         * (the latest failure of an "oom" dump). */
        int at_it = v && i + 1 == d->nooms && strcmp(d->reason, "oom") == 0;
        int tracked = o->device < 0 ? VT_TRACKED_NONE : at_it || o->have_counts ? VT_TRACKED_COUNTS : VT_TRACKED_BYTES;
        struct vt_oom_text t = {
            .requested = o->requested, .requested_rounded = o->requested_rounded, .api = S(o->api, api), .host = vt_host_memory_label(o->kind),
            .device = o->device, .budget = o->budget, .device_name = v && v->name ? S(v->name, name) : NULL,
            .device_uuid = v && v->uuid ? S(v->uuid, uuid) : NULL, .site = site_text(d, o->stack, site, sizeof site),
            .have_info = o->have_info, .free_bytes = o->free_bytes, .total_bytes = o->total_bytes,
            .live_bytes = o->live_bytes, .raised_allocated = o->raised_allocated,
            .graph_reserved = o->graph_reserved, .graph_used = o->graph_used,
            .pool_reserved = o->pool_reserved, .pool_used = o->pool_used,
            .taken_bytes = o->taken_bytes, .taken_count = o->taken_count,
            .tracked = tracked, .device_live_count = o->have_counts ? o->live_count : at_it ? v->live_count : 0,
            .device_peak_bytes = o->have_counts ? o->peak_bytes : at_it ? v->peak_bytes : 0,
            .device_peak_time_ns = o->have_counts ? o->peak_time_ns : at_it ? v->peak_time_ns : 0,
            .procs = o->procs ? procs : NULL, .nprocs = o->nprocs,
            .time_ns = o->time_ns, .start_unix_ns = d->start_unix_ns,
            .step = vt_step_at(o->time_ns, d->steps, d->nsteps, sizeof *d->steps, offsetof(struct vm_step, step),
                               offsetof(struct vm_step, time_ns), d->steps_total),
        };
        fprintf(f, "out of memory #%" PRIu64 " at %.3f s:\n", o->number, secs(o->time_ns));
        vt_put_oom(f, "  ", &t);
        fputs("  requested from:\n", f);
        vr_put_stack(f, d, o->stack, "    ");
        if (o->nfindings) fputs("  " VT_FINDINGS_HEADING "\n", f);
        for (size_t k = 0; k < o->nfindings; k++)
            vt_put_finding(f, "  ", (int)k + 1, o->findings[k].finding, o->findings[k].next, vr_put_safe);
        vr_text_torch(f, d, o->torch, "  ");
    }
    size_t shown = d->nooms < (size_t)top ? d->nooms : (size_t)top;
    uint64_t all = vr_oom_count(d);
    if (all > shown) {
        fprintf(f, "(%" PRIu64 " more out-of-memory %s)\n", all - shown, vr_plural(all - shown, "failure", "failures"));
        requests(f, d, top);
    }
}

/* d is one of several dumps of its process (sibling): its section says
 * which, an on-demand dump's number and when it was written. */
static void one(FILE *f, const struct vr_input *in, const struct vm_dump *d, const struct vr_opts *o, int sibling) {
    char host[256], cmd[4096], reason[256];
    char when[300], ended[600], which[64] = "", began[64], begun[72] = "";
    if (sibling && d->dump_number) snprintf(which, sizeof which, ", number %d, at %.3f s", d->dump_number, secs(d->time_ns));
    else if (sibling) snprintf(which, sizeof which, ", at %.3f s", secs(d->time_ns));
    /* One of several processes of its pid on its host: which, as the table says it. */
    if (sibling && vr_began(in, d, began, sizeof began)[0]) snprintf(begun, sizeof begun, ", %s", began);
    fprintf(f, "== pid %d, ", d->pid);
    /* A process no launcher gave a rank reads rank 0 in the dump: not said as one. */
    if (d->rank_local) fprintf(f, "local rank %d (no rank of the job's)", d->rank);
    else if (d->rank_known) fprintf(f, "rank %d (local %d)", d->rank, d->local_rank);
    else fputs("no rank", f);
    fprintf(f, ", host %s: %s (dump written %s%s%s%s)\n", d->host ? S(d->host, host) : "?",
            d->argc ? S(d->argv[0], cmd) : "?", vr_written(S(d->reason, reason), when, sizeof when), which, begun,
            vr_ended(d, ended, sizeof ended));
    vr_put_devices(f, d);
    fputs("totals:\n", f);
    vr_put_totals(f, d);
    timeline(f, d);
    ooms(f, d, o->top);
    vr_text_forecast(f, d);
    vr_text_torch(f, d, d->torch, "");
    vr_put_holders(f, d, o);
    vr_put_released(f, d, o->top);
    vr_put_growing(f, d, o->top);
    vr_put_live(f, d, o->top);
}

/* Dumps of one process (the same pid, host and start): ordered so that
 * those of one process lie together. */
static const struct vr_input *same_input;
static int by_process(const void *a, const void *b) {
    const struct vm_dump *x = &same_input->dumps[*(const size_t *)a], *y = &same_input->dumps[*(const size_t *)b];
    if (x->pid != y->pid) return x->pid < y->pid ? -1 : 1;
    if (x->start_unix_ns != y->start_unix_ns) return x->start_unix_ns < y->start_unix_ns ? -1 : 1;
    return strcmp(x->host ? x->host : "", y->host ? y->host : "");
}

/* A line for each process that several of the dumps are of (named dumps,
 * or an exit dump beside them): the table lists each, the holders
 * combined take its newest (vr_newest_of_process). */
static void same_process(FILE *f, const struct vr_input *in) {
    size_t *order = malloc(in->n * sizeof *order);
    char host[256];
    if (!order) return;
    for (size_t i = 0; i < in->n; i++) order[i] = i;
    same_input = in;
    qsort(order, in->n, sizeof *order, by_process);
    for (size_t i = 0, j; i < in->n; i = j) {
        for (j = i + 1; j < in->n && by_process(&order[i], &order[j]) == 0; j++) continue;
        if (j - i < 2) continue;
        const struct vm_dump *d = &in->dumps[order[i]];
        /* Processes of one pid on one host (containers' pid 1) told apart
         * by when each began. */
        char began[64], begun[72] = "";
        if (vr_began(in, d, began, sizeof began)[0]) snprintf(begun, sizeof begun, ", %s", began);
        fprintf(f, "note: %zu of these dumps are of one process (pid %d on %s%s): the holders combined take its "
                   "newest alone\n", j - i, d->pid, d->host ? S(d->host, host) : "?", begun);
    }
    free(order);
}

/* A dump's process as the peaks line names it: by rank where ranks tell
 * the two apart, else by pid (and its rank where it has one; a local
 * rank with its host). */
static void put_who(FILE *f, const struct vm_dump *d, const struct vm_dump *other) {
    char host[256];
    if (d->rank_local)
        fprintf(f, "local rank %d on %s, pid %d", d->rank, d->host ? S(d->host, host) : "?", d->pid);
    else if (!d->rank_known) fprintf(f, "pid %d", d->pid);
    else if (other->rank_known && !other->rank_local && other->rank != d->rank) fprintf(f, "rank %d", d->rank);
    else fprintf(f, "rank %d, pid %d", d->rank, d->pid);
}

/* "peaks: highest ... lowest ...", of each process its newest dump (its
 * earlier dumps' peaks are on the way to it: 3 dumps of one process read
 * as that process against itself); nothing for one process. */
static void peaks_line(FILE *f, const struct vr_input *in) {
    char a[32], b[32];
    size_t lo = SIZE_MAX, hi = SIZE_MAX;
    for (size_t i = 0; i < in->n; i++) {
        if (!vr_newest_of_process(in, i)) continue;
        uint64_t p = in->dumps[i].totals.peak_bytes;
        if (lo == SIZE_MAX || p < in->dumps[lo].totals.peak_bytes) lo = i;
        if (hi == SIZE_MAX || p > in->dumps[hi].totals.peak_bytes) hi = i;
    }
    if (vr_process_count(in) < 2) return;
    const struct vm_dump *h = &in->dumps[hi], *l = &in->dumps[lo];
    /* Every process at one peak: said once, not as highest and lowest. */
    if (h->totals.peak_bytes == l->totals.peak_bytes) {
        fprintf(f, "peaks: all %s\n", B(h->totals.peak_bytes, a));
        return;
    }
    fprintf(f, "peaks: highest %s (", B(h->totals.peak_bytes, a));
    put_who(f, h, l);
    fprintf(f, "), lowest %s (", B(l->totals.peak_bytes, b));
    put_who(f, l, h);
    fputc(')', f);
    if (l->totals.peak_bytes)
        fprintf(f, "; the highest is %.2fx the lowest", (double)h->totals.peak_bytes / (double)l->totals.peak_bytes);
    fputc('\n', f);
}

int vr_text(FILE *f, const struct vr_input *in, const struct vr_opts *o, char *err, size_t errsize) {
    (void)err; (void)errsize;
    char a[32], b[32], host[256], cmd[4096], api[256];
    vr_earlier_text(f, in, 8);
    size_t *order = in->n > 1 ? vr_dump_order(in) : NULL; /* NULL: as given */
    if (in->n > 1) {
        size_t procs = vr_process_count(in);
        if (procs == in->n) fprintf(f, "%zu processes:\n", in->n);
        else fprintf(f, "%zu dumps of %zu process%s:\n", in->n, procs, procs == 1 ? "" : "es");
        /* Several dumps of one process: a column says which dump each row is
         * (rows of one process read alike but for their figures). */
        int which = procs != in->n;
        /* Rows of one process together (vr_dump_order); where processes of
         * one pid on one host are given, its dump column says which by
         * when it began, as its note does, and is as wide as its widest. */
        int width = 20;
        char dump[160], began[64];
        for (size_t i = 0; which && i < in->n; i++) {
            char one[96];
            int w = snprintf(dump, sizeof dump, "%s%s%s", vr_dump_which(&in->dumps[i], one, sizeof one),
                             vr_began(in, &in->dumps[i], began, sizeof began)[0] ? ", " : "", began);
            if (w > width) width = w;
        }
        fprintf(f, "  %-8s %-5s %-20s %11s %11s %5s  ", "pid", "rank", "host", "peak", "live", "ooms");
        if (which) fprintf(f, "%-*s  ", width, "dump");
        fputs("command\n", f);
        for (size_t r = 0; r < in->n; r++) {
            const struct vm_dump *d = &in->dumps[order ? order[r] : r];
            char rank[16];
            if (d->rank_local) snprintf(rank, sizeof rank, "L%d", d->rank);   /* the node's, not the job's */
            else if (d->rank_known) snprintf(rank, sizeof rank, "%d", d->rank);
            else snprintf(rank, sizeof rank, "-");   /* no launcher gave it one */
            fprintf(f, "  %-8d %-5s %-20.20s %11s %11s %5" PRIu64 "  ", d->pid, rank,
                    d->host ? S(d->host, host) : "?", B(d->totals.peak_bytes, a), B(d->totals.live_bytes, b),
                    d->totals.oom_count);
            if (which) {
                char one[96];
                snprintf(dump, sizeof dump, "%s%s%s", vr_dump_which(d, one, sizeof one),
                         vr_began(in, d, began, sizeof began)[0] ? ", " : "", began);
                fprintf(f, "%-*s  ", width, dump);
            }
            fprintf(f, "%s\n", d->argc ? S(d->argv[0], cmd) : "?");
        }
        same_process(f, in);
        peaks_line(f, in);
        struct vr_first w;
        if (vr_first_to_fail(in, &w)) {
            const struct vm_dump *d = &in->dumps[w.dump];
            char who[320];
            fprintf(f, "first to fail: %s, %s%s requested by %s", vr_who(d, who, sizeof who),
                    d->ooms[w.oom].requested_rounded ? "about " : "", B(d->ooms[w.oom].requested, a),
                    S(d->ooms[w.oom].api, api));
            char why[128];
            if (w.said) fprintf(f, ": %s", S(vr_first_why(in, &w, why, sizeof why), api));
            fputc('\n', f);
            if (w.said && w.passed) {
                const struct vm_dump *p = &in->dumps[w.passed_dump];
                fprintf(f, "  not %s, which failed %.3f s earlier: %s", vr_who(p, who, sizeof who),
                        secs(d->start_unix_ns + d->ooms[w.oom].time_ns - p->start_unix_ns - p->ooms[0].time_ns),
                        S(vr_passed_why(in, &w, why, sizeof why), api));
                if (w.passed > 1) fprintf(f, " (and %zu more such)", w.passed - 1);
                fputc('\n', f);
            }
        }
        vr_fleet_text(f, in, o);
        size_t n;
        struct vr_combined *c = vr_combine(in, o->at, &n);
        fprintf(f, "holders at %s combined across processes:\n", vr_moment_name(o->at));
        for (size_t i = 0; i < n && i < (size_t)o->top; i++) {
            fprintf(f, "  %11s in %" PRIu64 " allocation%s in %zu process%s  ", B(c[i].bytes, a),
                    c[i].count, c[i].count == 1 ? "" : "s", c[i].processes,
                    c[i].processes == 1 ? "" : "es");
            vr_put_safe(f, c[i].where);
            fputc('\n', f);
        }
        vr_combined_free(c, n);
        fputc('\n', f);
    } else if (in->n == 1 && in->dumps[0].world_size > 1) {
        vr_fleet_text(f, in, o);
        fputc('\n', f);
    }
    for (size_t r = 0; r < in->n; r++) {
        size_t i = order ? order[r] : r;
        if (r) fputc('\n', f);
        one(f, in, &in->dumps[i], o, vr_has_sibling(in, i));
    }
    free(order);
    return 0;
}
