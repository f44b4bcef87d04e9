/* postmortem.c -- the human post-mortem and exit summary. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "../common/format.h"
#include "../common/oomtext.h"
#include "analysis.h"
#include "postmortem.h"

#define B(v, buf) vt_fmt_bytes((v), (buf), sizeof(buf))

static void holders_table(FILE *f, const struct vt_snapshot *s, const struct vt_symbols *sym,
                          const struct vt_analysis *an, int top) {
    size_t n = an->nby_site;
    const struct vt_holder *h = an->by_site;
    if (n == 0) { fputs("vramtrace:   no device memory is live\n", f); return; }
    fprintf(f, "vramtrace: largest holders by call site (%zu call site%s):\n", n,
            n == 1 ? "" : "s");
    for (size_t i = 0; i < n && i < (size_t)top; i++) {
        char b[32], site[512];
        vt_site_label(sym, h[i].stack, site, sizeof site);
        double pct = s->totals.live_bytes ? 100.0 * (double)h[i].bytes / (double)s->totals.live_bytes : 0;
        fprintf(f, "vramtrace:   %10s %5.1f%% %6" PRIu64 " alloc%s  %s\n", B(h[i].bytes, b), pct,
                h[i].count, h[i].count == 1 ? " " : "s", site);
    }
}

static void live_table(FILE *f, const struct vt_snapshot *s, const struct vt_symbols *sym,
                       int top) {
    size_t shown = 0;
    for (size_t i = 0; i < s->nlive && shown < (size_t)top; i++) {
        const struct vt_alloc *a = &s->live[i];
        if (!vt_kind_owned_device(a->kind)) continue;
        if (shown == 0) fputs("vramtrace: largest live allocations:\n", f);
        char b[32], site[512];
        vt_site_label(sym, a->stack, site, sizeof site);
        fprintf(f, "vramtrace:   %10s  %-7s %-22s dev %d  0x%" PRIx64 "  %s\n", B(a->bytes, b),
                vt_kind_name(a->kind), a->api, a->device,
                a->kind == VT_KIND_VMM && a->mapped ? a->mapped : a->address, site);
        shown++;
    }
}

static const struct vt_device *dev(const struct vt_snapshot *s, int d) {
    return d >= 0 && d < s->ndevices ? &s->devices[d] : NULL;
}

/* What the numbers at this failure say, most likely first. */
static void findings(FILE *f, const struct vt_analysis *an) {
    const struct vt_oom_findings *fs = an->latest;
    if (!fs || fs->n == 0) return;
    fputs("vramtrace: what the numbers say, most likely first:\n", f);
    for (int i = 0; i < fs->n; i++) vt_put_finding(f, "vramtrace: ", i + 1, fs->f[i].text, fs->f[i].next, NULL);
}

/* Calls passed through unrecorded (totals.missed), one line when any. */
static void missed_line(FILE *f, uint64_t missed) {
    char line[160];
    if (vt_fmt_missed(missed, line, sizeof line)) fprintf(f, "vramtrace:   %s\n", line);
}

static void header(FILE *f, const char *what, const struct vt_dump_meta *m) {
    fprintf(f, "vramtrace: %s in pid %d", what, m->pid);
    if (m->argc > 0) fprintf(f, " (%s)", m->argv[0]);
    fputc('\n', f);
}

void vt_postmortem_oom(FILE *f, const struct vt_snapshot *s, const struct vt_symbols *sym,
                       const struct vt_analysis *an, const struct vt_dump_meta *m, const char *dump_path,
                       int top) {
    if (s->nooms == 0) return;
    const struct vt_oom *o = &s->ooms[s->nooms - 1];
    const struct vt_device *d = dev(s, o->device);
    char site[512], procs[VT_MAX_PROCS * 96];
    vt_site_label(sym, o->stack, site, sizeof site);
    int facts = d && d->have_facts;
    struct vt_oom_text t = {
        .requested = o->requested, .api = o->api, .host = vt_host_memory_label(vt_kind_name(o->kind)),
        .device = o->device, .budget = o->budget, .device_name = facts ? d->name : NULL,
        .device_uuid = facts ? d->uuid : NULL, .site = site, .have_info = o->have_info,
        .free_bytes = o->free_bytes, .total_bytes = o->total_bytes, .live_bytes = o->live_bytes,
        .tracked = d ? VT_TRACKED_COUNTS : VT_TRACKED_NONE, .device_live_count = d ? d->live_count : 0,
        .device_peak_bytes = d ? d->peak_bytes : 0, .device_peak_time_ns = d ? d->peak_time_ns : 0,
        .procs = o->procs ? vt_procs_text(o->procs, o->nprocs, procs, sizeof procs) : NULL, .nprocs = o->nprocs,
    };
    header(f, "out of memory", m);
    vt_put_oom(f, "vramtrace:   ", &t);
    if (s->totals.oom_count > 1)
        fprintf(f, "vramtrace:   out-of-memory failures so far: %" PRIu64 "\n", s->totals.oom_count);
    missed_line(f, s->totals.missed);
    holders_table(f, s, sym, an, top);
    live_table(f, s, sym, top);
    findings(f, an);
    if (dump_path) fprintf(f, "vramtrace: dump: %s\n", dump_path);
    fflush(f);
}

void vt_postmortem_exit(FILE *f, const struct vt_snapshot *s, const struct vt_symbols *sym,
                        const struct vt_analysis *an, const struct vt_dump_meta *m, const char *dump_path,
                        int top) {
    const struct vt_totals *t = &s->totals;
    char a[32], b[32];
    header(f, "exit", m);
    fprintf(f, "vramtrace:   live at exit: %s in %" PRIu64 " allocation%s; peak %s at %.3f s\n",
            B(t->live_bytes, a), t->live_count, t->live_count == 1 ? "" : "s",
            B(t->peak_bytes, b), (double)t->peak_time_ns / 1e9);
    fprintf(f, "vramtrace:   allocations %" PRIu64 ", frees %" PRIu64 ", failed %" PRIu64
               " (out of memory %" PRIu64 ")\n",
            t->alloc_count, t->free_count, t->failed_count, t->oom_count);
    missed_line(f, t->missed);
    if (t->host_live_count || t->host_peak_bytes)
        fprintf(f, "vramtrace:   pinned host memory: %s live in %" PRIu64 " allocation%s; peak %s\n",
                B(t->host_live_bytes, a), t->host_live_count,
                t->host_live_count == 1 ? "" : "s", B(t->host_peak_bytes, b));
    if (t->imported_live_count)
        fprintf(f, "vramtrace:   memory opened from other processes (IPC): %s in %" PRIu64 " mapping%s\n",
                B(t->imported_live_bytes, a), t->imported_live_count, t->imported_live_count == 1 ? "" : "s");
    for (int i = 0; i < s->ndevices; i++) {
        const struct vt_device *d = &s->devices[i];
        if (!d->used) continue;
        fprintf(f, "vramtrace:   device %d%s%s%s: %s live, peak %s", i, d->name[0] ? " (" : "",
                d->name, d->name[0] ? ")" : "", B(d->live_bytes, a), B(d->peak_bytes, b));
        if (d->total_bytes) fprintf(f, " of %s", vt_fmt_bytes(d->total_bytes, a, sizeof a));
        fputc('\n', f);
    }
    if (t->live_count) holders_table(f, s, sym, an, top);
    if (an->ngrowth) {
        fprintf(f, "vramtrace: growing call site%s (live bytes rose through the run; %s):\n",
                an->ngrowth == 1 ? "" : "s", an->ngrowth == 1 ? "a leak suspect" : "leak suspects");
        for (size_t i = 0; i < an->ngrowth && i < (size_t)top; i++) {
            const struct vt_growth *g = &an->growth[i];
            char site[512];
            vt_site_label(sym, g->stack, site, sizeof site);
            char rate[160];
            vt_put_growth(f, "vramtrace: ", site, g->first_floor, g->end_bytes, vt_growth_text(g, rate, sizeof rate));
        }
    }
    if (dump_path) fprintf(f, "vramtrace: dump: %s\n", dump_path);
    fflush(f);
}
