/* summary.c -- the totals, holders, live allocations, growing call sites
 * and stack frames as both sides print them (summary.h). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "callsite.h"
#include "format.h"
#include "oomtext.h"
#include "summary.h"

#define B(v, buf) vt_fmt_bytes((v), (buf), sizeof(buf))

static const char *plural(uint64_t n, const char *one, const char *many) { return n == 1 ? one : many; }

static void put_text(FILE *f, const char *s, vt_put_fn put) {
    if (put) put(f, s);
    else fputs(s, f);
}

void vt_put_frames(FILE *f, const char *indent, const struct vt_frame *frames, size_t n, vt_put_fn put) {
    for (size_t i = 0; i < n; i++) {
        const struct vt_frame *fr = &frames[i];
        if (fr->python) fprintf(f, "%s#%zu in ", indent, i);
        else fprintf(f, "%s#%zu 0x%" PRIx64 " in ", indent, i, fr->address);
        put_text(f, fr->function ? fr->function : "??", put);
        /* The frames a deep stack left out: their count says it all. */
        if (fr->file && !vt_frame_is_cut(fr)) {
            fputc(' ', f);
            put_text(f, fr->file, put);
            fprintf(f, ":%ld", fr->line);
        } else if (fr->module) {
            fputs(" (", f);
            put_text(f, fr->module, put);
            fprintf(f, "+0x%" PRIx64 ")", fr->offset);
        }
        if (fr->borrowed) fputs(" " VT_BORROWED_NOTE, f);
        if (fr->inlined) fputs(" (inlined)", f);
        fputc('\n', f);
    }
    if (n == 0) fprintf(f, "%s(no stack)\n", indent);
}

void vt_put_totals(FILE *f, const char *prefix, const struct vt_totals_text *t) {
    char a[32], b[32], line[160];
    fprintf(f, "%s  live at %s: %s in %" PRIu64 " %s; peak %s at %.3f s\n", prefix, t->moment, B(t->live_bytes, a),
            t->live_count, plural(t->live_count, "allocation", "allocations"), B(t->peak_bytes, b),
            (double)t->peak_time_ns / 1e9);
    fprintf(f, "%s  allocations %" PRIu64 ", frees %" PRIu64 ", failed %" PRIu64 " (out of memory %" PRIu64, prefix,
            t->alloc_count, t->free_count, t->failed_count, t->oom_count);
    /* A failure an allocator's retry got past (PyTorch's, after it gave
     * back its cache) had its post-mortem all the same: said here. */
    if (t->oom_survived)
        fprintf(f, "; %" PRIu64 " of them got past: the same request, asked again, succeeded", t->oom_survived);
    fputs(")\n", f);
    if (vt_fmt_missed(t->missed, line, sizeof line)) fprintf(f, "%s  %s\n", prefix, line);
    if (t->host_live_count || t->host_peak_bytes)
        fprintf(f, "%s  pinned host memory: %s live in %" PRIu64 " %s; peak %s\n", prefix, B(t->host_live_bytes, a),
                t->host_live_count, plural(t->host_live_count, "allocation", "allocations"),
                B(t->host_peak_bytes, b));
    /* Beside it, as the device's line below: pinned host memory is kept
     * apart from device memory, whatever took it. */
    if (t->released_host_count)
        fprintf(f, "%s  pinned host memory released by a context's reset or destruction without a free: %s in %" PRIu64
                   " %s (leaked: not live, never freed)\n",
                prefix, B(t->released_host_bytes, a), t->released_host_count,
                plural(t->released_host_count, "allocation", "allocations"));
    if (t->imported_live_count)
        fprintf(f, "%s  memory opened from other processes (IPC): %s in %" PRIu64 " %s\n", prefix,
                B(t->imported_live_bytes, a), t->imported_live_count,
                plural(t->imported_live_count, "mapping", "mappings"));
    if (t->released_count)
        fprintf(f, "%s  released by a context's reset or destruction without a free: %s in %" PRIu64 " %s (leaked: not live, never freed)\n",
                prefix, B(t->released_bytes, a), t->released_count,
                plural(t->released_count, "allocation", "allocations"));
    if (t->records_lost)
        fprintf(f, "%s  incomplete: %" PRIu64 " %s dropped for lack of memory in the traced process\n", prefix,
                t->records_lost, plural(t->records_lost, "record", "records"));
    if (t->events_dropped_while_read)
        fprintf(f, "%s  incomplete: %" PRIu64 " %s dropped while a dump or report read the event history (more "
                   "came meanwhile than it holds back)\n",
                prefix, t->events_dropped_while_read, plural(t->events_dropped_while_read, "event", "events"));
}

void vt_put_devices(FILE *f, const char *prefix, const struct vt_devices_text *d) {
    char a[32], b[32], c[32];
    size_t shown = 0;
    fprintf(f, "%sdevices:\n%s  %-3s %-28s %11s %11s %11s %9s %8s %8s %6s %5s  %s\n", prefix, prefix, "#", "name",
            "total", "live", "peak", "peak at", "allocs", "frees", "failed", "ooms", "uuid");
    for (size_t i = 0; i < d->n; i++) {
        struct vt_device_row r = {0};
        if (!d->row(d->ctx, i, &r)) continue;
        char at[32];
        fprintf(f, "%s  %-3d %-28.28s %11s %11s %11s %9s %8" PRIu64 " %8" PRIu64 " %6" PRIu64 " %5" PRIu64 "  %s\n",
                prefix, r.ordinal, r.name, r.total_bytes ? B(r.total_bytes, a) : "?", B(r.live_bytes, b),
                B(r.peak_bytes, c), vt_fmt_secs_cell(r.peak_time_ns, at, sizeof at), r.alloc_count, r.free_count,
                r.failed_count, r.oom_count, r.uuid);
        shown++;
    }
    if (shown == 0) fprintf(f, "%s  (none used)\n", prefix);
}

void vt_put_holders(FILE *f, const char *prefix, const struct vt_holders_text *h, size_t top, vt_put_fn put) {
    const char *at = h->moment ? " at " : "", *moment = h->moment ? h->moment : "";
    const char *title = h->title ? h->title : "largest holders";
    if (h->n == 0) {
        if (h->none) fprintf(f, "%s%s%s%s by call site: none (%s)\n", prefix, title, at, moment, h->none);
        else fprintf(f, "%s%s%s%s by call site: none (no device memory %s)\n", prefix, title, at, moment,
                     h->moment ? "was live then" : "is live");
        return;
    }
    fprintf(f, "%s%s%s%s by call site (%zu call site%s):\n", prefix, title, at, moment, h->n,
            h->n == 1 ? "" : "s");
    char indent[64];
    snprintf(indent, sizeof indent, "%s      ", prefix);
    uint64_t shown = 0;
    for (size_t i = 0; i < h->n && i < top; i++) {
        struct vt_holder_row r = {0};
        char b[32];
        h->row(h->ctx, i, &r);
        char pct[16];
        fprintf(f, "%s  %10s %6s %6" PRIu64 " alloc%s  %s\n", prefix, B(r.bytes, b),
                vt_fmt_pct(r.bytes, h->total, 1, pct, sizeof pct), r.count,
                r.count == 1 ? " " : "s", r.site);
        if (h->stacks) vt_put_frames(f, indent, r.frames, r.nframes, put);
        shown += r.bytes;
    }
    /* The rows left out, said as vramtrace diff says them: without it the
     * percentages shown add up to less than the whole with no word why. */
    if (h->n > top) {
        char b[32], pct[16];
        uint64_t rest = h->total > shown ? h->total - shown : 0;
        fprintf(f, "%s  (%zu more call site%s, %s, %s together, not shown: --top %zu)\n", prefix, h->n - top,
                h->n - top == 1 ? "" : "s", B(rest, b), vt_fmt_pct(rest, h->total, 1, pct, sizeof pct), top);
    }
}

void vt_put_live(FILE *f, const char *prefix, const struct vt_live_text *l, size_t top) {
    size_t shown = 0;
    for (size_t i = 0; i < l->n && shown < top; i++) {
        struct vt_live_row r = {0};
        char b[32], at[32];
        if (!l->row(l->ctx, i, &r)) continue;
        if (shown++ == 0)
            fprintf(f, "%slargest live allocations%s%s (%" PRIu64 " live):\n", prefix, l->moment ? " " : "",
                    l->moment ? l->moment : "", l->live);
        fprintf(f, "%s  %11s  %-7s %-24s dev %-2d 0x%-14" PRIx64 " %9s  %s\n", prefix, B(r.bytes, b), r.kind,
                r.api, r.device, r.address, vt_fmt_secs_cell(r.time_ns, at, sizeof at), r.site);
    }
}

int vt_growth_mostly_cache(uint64_t first_bytes, uint64_t end_bytes, uint64_t cache_bytes) {
    uint64_t rise = end_bytes > first_bytes ? end_bytes - first_bytes : 0;
    return cache_bytes > 0 && cache_bytes >= rise / 2 && cache_bytes >= end_bytes / 2;
}

void vt_put_growing(FILE *f, const char *prefix, const struct vt_growing_text *g, size_t top) {
    if (g->n == 0) return;
    /* Each site's kind, found once: the leak suspects are printed, then
     * the sites that are mostly cache (without room to keep the kinds,
     * each section asks the rows again). */
    unsigned char *cache = malloc(g->n);
    size_t count[2] = {0, 0};
    for (size_t i = 0; i < g->n; i++) {
        struct vt_growth_row r = {0};
        g->row(g->ctx, i, &r);
        int c = vt_growth_mostly_cache(r.first_bytes, r.end_bytes, r.cache_bytes);
        if (cache) cache[i] = (unsigned char)c;
        count[c]++;
    }
    for (int c = 0; c < 2; c++) {
        if (count[c] == 0) continue;
        if (!c)
            fprintf(f, "%sgrowing call site%s (live bytes rose through the run; %s):\n", prefix,
                    count[c] == 1 ? "" : "s", count[c] == 1 ? "a leak suspect" : "leak suspects");
        else
            fprintf(f, "%scall site%s where PyTorch's cache grew (most of %s memory holds no tensor: segments a "
                       "larger batch or sequence needed, kept for reuse; not a leak):\n",
                    prefix, count[c] == 1 ? "" : "s", count[c] == 1 ? "its" : "their");
        size_t shown = 0;
        for (size_t i = 0; i < g->n && shown < top; i++) {
            if (cache && cache[i] != c) continue;
            struct vt_growth_row r = {0};
            g->row(g->ctx, i, &r);
            if (!cache && vt_growth_mostly_cache(r.first_bytes, r.end_bytes, r.cache_bytes) != c) continue;
            shown++;
            vt_put_growth(f, prefix, r.site, r.first_bytes, r.end_bytes, r.rate);
            if (c) {
                char b[32], e[32];
                fprintf(f, "%s      %s of %s are segments that hold no tensor; torch.cuda.empty_cache() gives them "
                           "back\n",
                        prefix, vt_fmt_bytes(r.cache_bytes, b, sizeof b), vt_fmt_bytes(r.end_bytes, e, sizeof e));
            }
        }
    }
    free(cache);
}

int vt_kind_name_owned_device(const char *kind) {
    return kind && !vt_host_memory_label(kind) && strcmp(kind, "imported") != 0;
}
