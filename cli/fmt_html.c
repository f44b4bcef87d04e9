/* fmt_html.c -- one self-contained HTML page, the report people open first.
 *
 * At the top, what happened in the post-mortem's words (each OOM, the
 * device's state then, the findings with their next steps, the growing
 * call sites), then per device what was allocated, held outside tracked
 * allocations and free. Below it the script (cli/html/) draws, from
 * each dump's JSON block (cli/html/data.c), a timeline per device stacked
 * by call site, a flame graph per device and moment, and the tables of
 * holders and live allocations. With several dumps the page starts with
 * the processes, the first to fail, their peaks side by side and the
 * holders compared across ranks, and a rank selector shows one dump.
 *
 * Everything taken from a dump is escaped (cli/html/html.h). Behind that,
 * the page's content policy runs no script and applies no style but the
 * page's own one block of each, named by their SHA-256 hashes: no inline
 * event handler, no injected <script> or style attribute, no network, no
 * form, no <base>. */
#include <inttypes.h>

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "../common/format.h"
#include "../common/labels.h"
#include "../common/oomtext.h"
#include "../common/summary.h"
#include "fleet.h"
#include "runs.h"
#include "html/html.h"
#include "reporters.h"
#include "sha256.h"

#define B(v, buf) vr_bytes((v), (buf), sizeof(buf))

static double secs(uint64_t ns) { return (double)ns / 1e9; }

static void site(FILE *f, const struct vm_dump *d, size_t stack) {
    char where[1024];
    vh_text(f, vm_site_label(d, stack, where, sizeof where));
}

/* One OOM as the post-mortem tells it: the request, the device's state,
 * the other processes, the call site, the findings and what to do next. */
static void oom(FILE *f, const struct vm_dump *d, size_t i) {
    const struct vm_oom *o = &d->ooms[i];
    char a[32], b[32], c[32];
    fprintf(f, "<div class=\"oom\"><p class=\"oom-line\">out of memory #%" PRIu64 " at %.3f s: %s%s requested by ",
            o->number, secs(o->time_ns), o->requested_rounded ? "about " : "", B(o->requested, a));
    vh_text(f, o->api);
    char where[96];
    fprintf(f, "%s%s", vt_oom_where(o->kind, o->device, where, sizeof where),
            o->budget ? " (refused by VRAMTRACE_LIMIT)" : "");
    if (o->have_info) fprintf(f, "; %s free of %s", B(o->free_bytes, b), B(o->total_bytes, c));
    fprintf(f, "; %s tracked live%s</p>\n<ul class=\"facts\">", B(o->live_bytes, a),
            o->raised_allocated ? " when PyTorch raised the error" : "");
    /* A refusal learnt as PyTorch's error reached Python: its own figure of
     * the refusal beside the later ones (common/oomtext.c's line). */
    if (o->raised_allocated)
        fprintf(f, "<li>PyTorch had %s allocated when it refused (its error says so); the figures here are of the "
                   "later moment its error reached Python, once the failing operation had freed any outputs it had "
                   "made</li>", B(o->raised_allocated, a));
    uint64_t outside = o->have_info ? vt_oom_outside(o->total_bytes, o->free_bytes, o->live_bytes,
                                                     o->graph_reserved, o->graph_used, o->pool_reserved,
                                                     o->pool_used) : 0;
    if (o->taken_count)
        fprintf(f, "<li>taken by this request before that call: %s in %" PRIu64 " handle%s not mapped yet, the "
                   "request's own (counted in the tracked bytes, not among the holders)</li>",
                B(o->taken_bytes, a), o->taken_count, o->taken_count == 1 ? "" : "s");
    if (outside) fprintf(f, "<li>held outside tracked allocations: %s</li>", B(outside, a));
    if (!o->budget && (o->graph_reserved || o->graph_used))
        fprintf(f, "<li>CUDA graphs' memory pool: %s reserved, %s of it in use by graph allocations</li>",
                B(o->graph_reserved, a), B(o->graph_used, b));
    if (!o->budget && (o->pool_reserved || o->pool_used))
        fprintf(f, "<li>stream-ordered memory pools: %s reserved, %s of it in use by allocations</li>",
                B(o->pool_reserved, a), B(o->pool_used, b));
    if (o->procs) {
        fputs("<li>other processes on the GPU:", f);
        for (size_t k = 0; k < o->nprocs; k++) {
            char one[384];
            vh_text(f, vt_fmt_proc(k == 0, o->procs[k].pid, o->procs[k].name, o->procs[k].used_known,
                                   o->procs[k].used_bytes, one, sizeof one));
        }
        fputs(o->nprocs ? "</li>" : " none</li>", f);
    }
    fputs("<li>requested from: <code>", f);
    site(f, d, o->stack);
    fputs("</code></li></ul>\n", f);
    if (o->nfindings) fputs("<ol class=\"findings\">", f);
    for (size_t k = 0; k < o->nfindings; k++) {
        fputs("<li><span class=\"finding\">", f);
        vh_text(f, o->findings[k].finding);
        fputs("</span><br><span class=\"next\">next: ", f);
        vh_text(f, o->findings[k].next);
        fputs("</span></li>", f);
    }
    if (o->nfindings) fputs("</ol>", f);
    vh_torch_table(f, o->torch, "inside PyTorch at this out-of-memory error");
    fputs("</div>\n", f);
}

/* The failures by request (vr_oom_requests), the text report's lines as
 * a list under its heading. */
struct request_lines {
    FILE *f;
    size_t n;
};

static void request_line(void *ctx, const char *text) {
    struct request_lines *r = ctx;
    if (r->n++ == 0) fputs("<h4>out-of-memory failures by request</h4>\n<ul class=\"oom-requests\">", r->f);
    fputs("<li>", r->f);
    vh_text(r->f, text);
    fputs("</li>", r->f);
}

/* Per device: total, allocated (tracked live), and at the device's last
 * OOM that knew them, what was held outside tracked allocations and what
 * was free; "-" where the dump does not say. */
static void devices(FILE *f, const struct vm_dump *d) {
    char a[32], b[32], c[32], e[32];
    fputs("<table class=\"devices\"><thead><tr><th>device</th><th>name</th><th>total</th><th>allocated</th>"
          "<th>outside tracked</th><th>free</th><th>peak</th><th>OOMs</th><th>uuid</th></tr></thead><tbody>\n", f);
    for (size_t i = 0; i < d->ndevices; i++) {
        const struct vm_device *v = &d->devices[i];
        const struct vm_oom *last = NULL;
        for (size_t k = 0; k < d->nooms; k++)
            if (d->ooms[k].device == v->ordinal && d->ooms[k].have_info) last = &d->ooms[k];
        fprintf(f, "<tr><td class=n>%d</td><td>", v->ordinal);
        vh_text(f, v->name ? v->name : "?");
        fprintf(f, "</td><td class=n>%s</td><td class=n>%s</td>", v->total_bytes ? B(v->total_bytes, a) : "?",
                B(v->live_bytes, b));
        if (last) {
            uint64_t used = last->total_bytes > last->free_bytes ? last->total_bytes - last->free_bytes : 0;
            fprintf(f, "<td class=n>%s (at OOM)</td><td class=n>%s (at OOM)</td>",
                    B(used > last->live_bytes ? used - last->live_bytes : 0, c), B(last->free_bytes, e));
        } else {
            fputs("<td class=n>-</td><td class=n>-</td>", f);
        }
        fprintf(f, "<td class=n>%s at %.3f s</td><td class=n>%" PRIu64 "</td><td>", B(v->peak_bytes, a),
                secs(v->peak_time_ns), v->oom_count);
        vh_text(f, v->uuid ? v->uuid : "?");
        fputs("</td></tr>\n", f);
    }
    fputs("</tbody></table>\n", f);
}

static void summary(FILE *f, const struct vm_dump *d, const struct vr_opts *o) {
    char a[32], b[32];
    if (d->rank_local) fprintf(f, "<section class=\"view\" data-view=\"summary\"><h2>local rank %d, pid %d, host ", d->rank, d->pid);
    else fprintf(f, "<section class=\"view\" data-view=\"summary\"><h2>rank %d, pid %d, host ", d->rank, d->pid);
    vh_text(f, d->host ? d->host : "?");
    fputs(": <code>", f);
    for (size_t i = 0; i < d->argc && i < 16; i++) {
        if (i) fputc(' ', f);
        vh_text(f, d->argv[i]);
    }
    fputs("</code></h2>\n<h3>what happened</h3>\n", f);
    size_t shown = d->nooms < (size_t)o->top ? d->nooms : (size_t)o->top;
    for (size_t i = 0; i < shown; i++) oom(f, d, i);
    if (vr_oom_count(d) > shown) {
        fprintf(f, "<p>(%" PRIu64 " more out-of-memory %s)</p>\n", vr_oom_count(d) - shown,
                vr_plural(vr_oom_count(d) - shown, "failure", "failures"));
        struct request_lines r = {f, 0};
        vr_oom_requests(d, o->top, request_line, &r);
        if (r.n) fputs("</ul>\n", f);
        /* The failure that ended the run, when the dump kept it: the
         * library keeps the newest failures whatever their number. */
        if (d->nooms > shown && d->ooms[d->nooms - 1].number == vr_oom_count(d)) {
            fputs("<h4>the last out-of-memory failure</h4>\n", f);
            oom(f, d, d->nooms - 1);
        }
    }
    if (!d->nooms) fputs("<p class=\"no-oom\">no out-of-memory failure</p>\n", f);
    const struct vm_totals *t = &d->totals;
    char when[300], ended[600];
    fputs("<p class=\"totals\">dump written ", f);
    vh_text(f, vr_written(d->reason, when, sizeof when));
    vh_text(f, vr_ended(d, ended, sizeof ended));
    fprintf(f, "; live %s in %" PRIu64 " %s; peak %s at %.3f s; %" PRIu64 " %s, %" PRIu64 " %s, %" PRIu64
               " out-of-memory %s",
            B(t->live_bytes, a), t->live_count, vr_plural(t->live_count, "allocation", "allocations"),
            B(t->peak_bytes, b), secs(t->peak_time_ns), t->alloc_count,
            vr_plural(t->alloc_count, "allocation", "allocations"), t->free_count,
            vr_plural(t->free_count, "free", "frees"), t->oom_count, vr_plural(t->oom_count, "failure", "failures"));
    if (t->oom_survived)
        fprintf(f, " (%" PRIu64 " got past: the same request, asked again, succeeded)", t->oom_survived);
    fputs("</p>\n", f);
    if (t->records_lost)
        fprintf(f, "<p class=\"warn\">incomplete: %" PRIu64 " %s dropped for lack of memory in the traced "
                   "process</p>\n", t->records_lost, vr_plural(t->records_lost, "record", "records"));
    if (t->events_dropped_while_read)
        fprintf(f, "<p class=\"warn\">incomplete: %" PRIu64 " %s dropped while a dump or report read the event "
                   "history (more came meanwhile than it holds back)</p>\n", t->events_dropped_while_read,
                vr_plural(t->events_dropped_while_read, "event", "events"));
    char missed[160];
    if (vt_fmt_missed(t->missed, missed, sizeof missed)) {
        fputs("<p class=\"warn\">", f);
        vh_text(f, missed);
        fputs("</p>\n", f);
    }
    if (d->events_dropped && d->nevents == 0)   /* VRAMTRACE_EVENTS=0: none kept, no late start */
        fprintf(f, "<p class=\"warn\">no event history kept (VRAMTRACE_EVENTS=0): %" PRIu64 " %s dropped</p>\n",
                d->events_dropped, vr_plural(d->events_dropped, "event", "events"));
    else if (d->events_dropped)
        fprintf(f, "<p class=\"warn\">the timeline starts late: %" PRIu64 " older %s were overwritten "
                   "(VRAMTRACE_EVENTS)</p>\n", d->events_dropped, vr_plural(d->events_dropped, "event", "events"));
    /* The library's forecast line, as the text report prints it. */
    const char *fc = d->json ? json_string_value(json_object_get((const json_t *)d->json, "forecast")) : NULL;
    if (fc && fc[0]) {
        fputs("<p class=\"forecast\">forecast: ", f);
        vh_text(f, fc);
        fputs("</p>\n", f);
    }
    if (d->torch) {
        char title[160];
        snprintf(title, sizeof title, "PyTorch's view when the dump was written (%s)", d->reason ? d->reason : "?");
        vh_torch_table(f, d->torch, title);
    }
    /* The leak suspects, then the sites that are mostly PyTorch's cache
     * (vt_put_growing's split). */
    for (int cache = 0; cache < 2; cache++) {
        size_t shown = 0;
        for (size_t i = 0; i < d->ngrowing && shown < (size_t)o->top; i++) {
            const struct vm_growth *g = &d->growing[i];
            if (vt_growth_mostly_cache(g->first_bytes, g->end_bytes, g->cache_bytes) != cache) continue;
            char rate[400];
            if (shown++ == 0)
                fputs(cache ? "<h3>call sites where PyTorch's cache grew (most of their memory holds no tensor: "
                              "segments a larger batch or sequence needed, kept for reuse; not a leak)</h3>"
                              "<ul class=\"growing\">"
                            : "<h3>growing call sites (live bytes rose through the run; leak suspects)</h3>"
                              "<ul class=\"growing\">", f);
            if (g->have_rate) {
                vt_fmt_growth(g->rise_bytes, g->units, g->unit, g->span_ns, g->bytes_per_unit, g->run_steps, rate,
                              sizeof rate);
                vt_fmt_kept(g->history_from_ns, rate, sizeof rate);
            } else
                snprintf(rate, sizeof rate, "over %" PRIu64 " allocation%s", g->allocations,
                         g->allocations == 1 ? "" : "s");
            fputs("<li><code>", f);
            site(f, d, g->stack);
            fprintf(f, "</code>: %s -> %s, ", B(g->first_bytes, a), B(g->end_bytes, b));
            vh_text(f, rate);
            if (cache) fprintf(f, "; %s of it are segments that hold no tensor", B(g->cache_bytes, a));
            fputs("</li>", f);
        }
        if (shown) fputs("</ul>\n", f);
    }
    fputs("<h3>devices</h3>\n", f);
    devices(f, d);
    fputs("</section>\n", f);
}

/* The parts the script fills: the timeline, the flame graph and the
 * tables, each with its controls. */
static void views(FILE *f, size_t index) {
    fprintf(f, "<section class=\"view\" data-view=\"timeline\"><h3>live bytes per device, stacked by call site</h3>\n"
               "<div class=\"controls\"><label>x-axis <select class=\"axis\"><option value=\"event\">event order"
               "</option><option value=\"time\">time</option></select></label> <button class=\"unzoom\" "
               "type=\"button\">reset zoom</button> <span class=\"hint\">drag across a timeline to zoom"
               "</span></div>\n<div class=\"timelines\" data-dump=\"%zu\"></div></section>\n", index);
    fputs("<section class=\"view\" data-view=\"flame\"><h3>flame graph of the holders</h3>\n"
          "<div class=\"controls\"><label>at <select class=\"moment\"></select></label> <label>on <select class=\"fdevice\"></select></label> <label><input "
          "type=\"checkbox\" class=\"collapse\"> hide library frames</label> <label>search <input type=\"search\" "
          "class=\"search\" placeholder=\"frame name\"></label> <span class=\"share\"></span></div>\n"
          "<div class=\"crumbs\"></div><div class=\"flame\"></div><p class=\"flame-note\"></p></section>\n", f);
    fputs("<section class=\"view\" data-view=\"tables\"><div class=\"tables\"></div>"
          "<div class=\"stack-panel\"><h3>stack</h3><p class=\"stack-title\">click a row to see its whole stack"
          "</p><ol class=\"stack\"></ol></div></section>\n", f);
}

/* A dump's bytes at the rows of the compared table (rows: their labels,
 * in row order): bytes[r] for each row r it holds at, those rows listed
 * in touched[0..return value). bytes[] must be zero where the dump holds
 * nothing; dump_rows_clear zeroes it again. Labels `rows` had not are
 * no row. */
static size_t dump_rows(const struct vm_dump *d, enum vr_moment at, struct vt_labels *rows, size_t nrows,
                        uint64_t *bytes, uint32_t *touched) {
    size_t nh, nt = 0;
    int missing;
    const struct vm_holder *h = vr_holders_at(d, at, &nh, &missing);
    for (size_t j = 0; j < nh; j++) {
        char where[1024];
        int added;
        uint32_t g = vt_label_group(rows, vm_site_label(d, h[j].stack, where, sizeof where), &added);
        if (g >= nrows || !h[j].bytes) continue;
        if (!bytes[g]) touched[nt++] = g;
        bytes[g] += h[j].bytes;
    }
    return nt;
}

static void dump_rows_clear(uint64_t *bytes, const uint32_t *touched, size_t nt) {
    for (size_t t = 0; t < nt; t++) bytes[touched[t]] = 0;
}

struct row_bytes {
    uint64_t bytes;
    uint32_t row;
};

static int by_bytes_then_row(const void *a, const void *b) {
    const struct row_bytes *x = a, *y = b;
    if (x->bytes != y->bytes) return x->bytes < y->bytes ? 1 : -1;
    return (x->row > y->row) - (x->row < y->row);
}

/* Mark in keep[] the `top` rows where a dump holds the most (touched: the
 * rows it holds at; ties to the row first in the table's order), with
 * scratch room for nt pairs. */
static void keep_dump_top(const uint64_t *bytes, const uint32_t *touched, size_t nt, int top, char *keep,
                          struct row_bytes *scratch) {
    for (size_t i = 0; i < nt; i++) scratch[i] = (struct row_bytes){bytes[touched[i]], touched[i]};
    qsort(scratch, nt, sizeof *scratch, by_bytes_then_row);
    for (size_t i = 0; i < nt && i < (size_t)top; i++) keep[scratch[i].row] = 1;
}

/* A column's or card's name for dump k among several: its rank, with its
 * pid where another dump has the same rank (an exit dump beside a named
 * one), its pid alone where no launcher gave it a rank, and its local rank,
 * host and pid where only a local rank variable gave it one. */
static void who(FILE *f, const struct vr_input *in, size_t k) {
    const struct vm_dump *d = &in->dumps[k];
    if (!d->rank_known) { fprintf(f, "pid %d", d->pid); return; }
    if (d->rank_local) {
        fprintf(f, "local rank %d on ", d->rank);
        vh_text(f, d->host ? d->host : "?");
        fprintf(f, ", pid %d", d->pid);
        return;
    }
    int shared = 0;
    for (size_t i = 0; i < in->n && !shared; i++) shared = i != k && in->dumps[i].rank == d->rank;
    if (shared) fprintf(f, "rank %d, pid %d", d->rank, d->pid);
    else fprintf(f, "rank %d", d->rank);
}

/* Holders by call site compared across ranks: one row a site (largest
 * combined first), one column a dump. The rows are the --top sites of all
 * dumps together and each dump's own --top: over 200 dumps of 4,000 sites
 * each (each its own) a row per site and a cell per dump made a page of
 * 5.1 GB from 142 MB of dumps. */
static void compared(FILE *f, const struct vr_input *in, const struct vr_opts *o) {
    char a[32];
    size_t n;
    struct vr_combined *c = vr_combine(in, o->at, &n);
    struct vt_labels *rows = vt_labels_new();
    char *keep = calloc(n + 1, 1);
    uint64_t *bytes = calloc(n + 1, sizeof *bytes);
    uint32_t *touched = malloc((n + 1) * sizeof *touched);
    size_t *row_of = malloc((n + 1) * sizeof *row_of); /* a kept row's place among the kept */
    struct row_bytes *scratch = malloc((n + 1) * sizeof *scratch);
    uint64_t *cells = NULL;
    size_t nkept = 0;
    int ok = c && rows && keep && bytes && touched && row_of && scratch;
    for (size_t r = 0; ok && r < n; r++) ok = vt_label_group(rows, c[r].where, NULL) == r;
    for (size_t r = 0; ok && r < n && r < (size_t)o->top; r++) keep[r] = 1;
    for (size_t k = 0; ok && k < in->n; k++) {
        size_t nt = dump_rows(&in->dumps[k], o->at, rows, n, bytes, touched);
        keep_dump_top(bytes, touched, nt, o->top, keep, scratch);
        dump_rows_clear(bytes, touched, nt);
    }
    for (size_t r = 0; ok && r < n; r++)
        if (keep[r]) row_of[r] = nkept++;
    /* The kept rows' cells, a dump at a time. */
    if (ok && !(cells = calloc(nkept * in->n + 1, sizeof *cells))) ok = 0;
    for (size_t k = 0; ok && k < in->n; k++) {
        size_t nt = dump_rows(&in->dumps[k], o->at, rows, n, bytes, touched);
        for (size_t t = 0; t < nt; t++)
            if (keep[touched[t]]) cells[row_of[touched[t]] * in->n + k] = bytes[touched[t]];
        dump_rows_clear(bytes, touched, nt);
    }
    fprintf(f, "<h3>holders at %s compared across ranks</h3>\n<table class=\"sortable compared\"><thead><tr>"
               "<th>call site</th><th>all</th>", vr_moment_name(o->at));
    for (size_t k = 0; k < in->n; k++) {
        fputs("<th>", f);
        who(f, in, k);
        fputs("</th>", f);
    }
    fputs("</tr></thead><tbody>\n", f);
    for (size_t r = 0, i = 0; ok && r < n; r++) {
        if (!keep[r]) continue;
        fputs("<tr><td>", f);
        vh_text(f, c[r].where);
        fprintf(f, "</td><td class=n data-v=\"%" PRIu64 "\">%s</td>", c[r].bytes, B(c[r].bytes, a));
        for (size_t k = 0; k < in->n; k++) {
            uint64_t b = cells[i * in->n + k];
            fprintf(f, "<td class=n data-v=\"%" PRIu64 "\">%s</td>", b, B(b, a));
        }
        fputs("</tr>\n", f);
        i++;
    }
    fputs("</tbody></table>\n", f);
    if (ok && nkept < n)
        fprintf(f, "<p>(%zu more call %s, none among the %d largest of all ranks or of any one rank: the text "
                   "report lists them)</p>\n", n - nkept, vr_plural(n - nkept, "site", "sites"), o->top);
    free(cells);
    free(scratch);
    free(row_of);
    free(touched);
    free(bytes);
    free(keep);
    if (rows) vt_labels_free(rows);
    vr_combined_free(c, n);
}

/* Several dumps: the processes, the first to fail, the peaks side by side,
 * the holders compared, and the selector of the dump shown below. */
static void ranks(FILE *f, const struct vr_input *in, const struct vr_opts *o, size_t shown) {
    char a[32], b[32];
    fprintf(f, "<section class=\"view\" data-view=\"ranks\" id=\"ranks\"><h2>%zu processes</h2>\n", in->n);
    struct vr_first w;
    if (vr_first_to_fail(in, &w)) {
        const struct vm_dump *d = &in->dumps[w.dump];
        const struct vm_oom *m = &d->ooms[w.oom];
        char who[320];
        fputs("<p class=\"first-to-fail\">first to fail: ", f);
        vh_text(f, vr_who(d, who, sizeof who));
        fprintf(f, ", %s%s requested by ", m->requested_rounded ? "about " : "", B(m->requested, a));
        vh_text(f, m->api);
        char where[96];
        fprintf(f, "%s at %.3f s", vt_oom_where(m->kind, m->device, where, sizeof where), secs(m->time_ns));
        char why[128];
        if (w.said) {
            fputs(": ", f);
            vh_text(f, vr_first_why(in, &w, why, sizeof why));
        }
        if (w.said && w.passed) {
            const struct vm_dump *p = &in->dumps[w.passed_dump];
            fputs("<br>not ", f);
            vh_text(f, vr_who(p, who, sizeof who));
            fprintf(f, ", which failed %.3f s earlier: ", secs(d->start_unix_ns + m->time_ns - p->start_unix_ns - p->ooms[0].time_ns));
            vh_text(f, vr_passed_why(in, &w, why, sizeof why));
            if (w.passed > 1) fprintf(f, " (and %zu more such)", w.passed - 1);
        }
        fputs("</p>\n", f);
    } else {
        fputs("<p class=\"first-to-fail\">no process ran out of memory</p>\n", f);
    }
    fputs("<p><label>show rank <select id=\"rank-select\">", f);
    for (size_t i = 0; i < in->n; i++) {
        /* Two dumps of one process (on request and at exit) told apart by
         * why each was written. */
        int again = 0;
        for (size_t k = 0; k < in->n && !again; k++)
            again = k != i && in->dumps[k].pid == in->dumps[i].pid && in->dumps[k].rank == in->dumps[i].rank;
        fprintf(f, "<option value=\"%zu\"%s>%srank %d (pid %d", i, i == shown ? " selected" : "",
                in->dumps[i].rank_local ? "local " : "", in->dumps[i].rank, in->dumps[i].pid);
        if (again) {   /* which of its dumps, as the text's table says it */
            char which[96];
            fputs(", ", f);
            vh_text(f, vr_dump_which(&in->dumps[i], which, sizeof which));
        }
        fputs(")</option>", f);
    }
    fputs("</select></label></p>\n<h3>peaks side by side</h3>\n<div class=\"peaks\">", f);
    uint64_t max = 1;
    for (size_t i = 0; i < in->n; i++)
        if (in->dumps[i].totals.peak_bytes > max) max = in->dumps[i].totals.peak_bytes;
    for (size_t i = 0; i < in->n; i++) {
        const struct vm_dump *d = &in->dumps[i];
        fputs("<div class=\"peak-row\"><span class=\"peak-name\">", f);
        who(f, in, i);
        fprintf(f, "</span><span class=\"bar\" "
                   "data-share=\"%.4f\"></span><span class=\"peak-value\">%s peak, %s live, %" PRIu64 " OOM%s"
                   "</span></div>\n", (double)d->totals.peak_bytes / (double)max,
                B(d->totals.peak_bytes, a), B(d->totals.live_bytes, b), d->totals.oom_count,
                d->totals.oom_count == 1 ? "" : "s");
    }
    fputs("</div>\n<table class=\"sortable processes\"><thead><tr><th>rank</th><th>pid</th><th>host</th><th>peak"
          "</th><th>live</th><th>OOMs</th></tr></thead><tbody>\n", f);
    for (size_t i = 0; i < in->n; i++) {
        const struct vm_dump *d = &in->dumps[i];
        fprintf(f, "<tr><td class=n>%s%d</td><td class=n>%d</td><td>", d->rank_local ? "L" : "", d->rank, d->pid);
        vh_text(f, d->host ? d->host : "?");
        fprintf(f, "</td><td class=n data-v=\"%" PRIu64 "\">%s</td><td class=n data-v=\"%" PRIu64 "\">%s</td>"
                   "<td class=n>%" PRIu64 "</td></tr>\n", d->totals.peak_bytes, B(d->totals.peak_bytes, a),
                d->totals.live_bytes, B(d->totals.live_bytes, b), d->totals.oom_count);
    }
    fputs("</tbody></table>\n", f);
    compared(f, in, o);
    fputs("</section>\n", f);
}

int vr_html(FILE *f, const struct vr_input *in, const struct vr_opts *o, char *err, size_t errsize) {
    (void)err; (void)errsize;
    char script_hash[45], style_hash[45];
    vt_sha256_base64(vt_html_script, script_hash);
    vt_sha256_base64(vt_html_style, style_hash);
    fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
               "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
               "script-src 'sha256-%s'; style-src 'sha256-%s'; base-uri 'none'; form-action 'none'\">\n"
               "<title>vramtrace report</title>\n"
               "<style>%s</style></head><body>\n<header><h1>vramtrace: GPU memory report</h1>\n<nav>"
               "<a href=\"#view=all\">all</a>%s<a href=\"#view=summary\">what happened</a>"
               "<a href=\"#view=timeline\">timeline</a><a href=\"#view=flame\">flame graph</a>"
               "<a href=\"#view=tables\">tables</a></nav></header>\n",
            script_hash, style_hash, vt_html_style, in->n > 1 ? "<a href=\"#view=ranks\">ranks</a>" : "");
    size_t shown = 0;
    if (in->nearlier) {   /* the dumps of earlier runs left out, as the text says it */
        char *line = NULL;
        size_t len = 0;
        FILE *m = open_memstream(&line, &len);
        if (m) {
            vr_earlier_text(m, in, 8);
            fclose(m);
            fputs("<p class=\"earlier-runs\">", f);
            if (line && len) line[len - 1] = '\0';   /* its newline */
            vh_text(f, line ? line : "");
            fputs("</p>\n", f);
        }
        free(line);
    }
    if (in->n > 1) {
        struct vr_first w;
        shown = vr_first_to_fail(in, &w) ? w.dump : 0;
        ranks(f, in, o, shown);
    }
    int series = o->top < 1 ? 1 : o->top > 24 ? 24 : o->top;
    for (size_t i = 0; i < in->n; i++) {
        fprintf(f, "<div class=\"dump%s\" id=\"dump-%zu\" data-index=\"%zu\">\n", i == shown ? "" : " hidden", i, i);
        summary(f, &in->dumps[i], o);
        views(f, i);
        vh_data(f, &in->dumps[i], i, o, series);
        fputs("</div>\n", f);
    }
    fprintf(f, "<script>%s</script>\n</body></html>\n", vt_html_script);
    return ferror(f) ? -1 : 0;
}
