/* summary_view.c -- a dump's model in common/summary.h's shapes
 * (summary_view.h). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "../common/format.h"
#include "../common/labels.h"
#include "../common/summary.h"
#include "summary_view.h"

void vr_put_totals(FILE *f, const struct vm_dump *d) {
    const struct vm_totals *t = &d->totals;
    struct vt_totals_text tt = {
        .moment = strcmp(d->reason, "exit") == 0 ? "exit" : "the dump", .live_bytes = t->live_bytes,
        .live_count = t->live_count, .peak_bytes = t->peak_bytes, .peak_time_ns = t->peak_time_ns,
        .alloc_count = t->alloc_count, .free_count = t->free_count, .failed_count = t->failed_count,
        .oom_count = t->oom_count, .missed = t->missed, .host_live_bytes = t->host_live_bytes,
        .host_live_count = t->host_live_count, .host_peak_bytes = t->host_peak_bytes,
        .imported_live_bytes = t->imported_live_bytes, .imported_live_count = t->imported_live_count,
        .records_lost = t->records_lost, .events_dropped_while_read = t->events_dropped_while_read,
        .oom_survived = t->oom_survived,
    };
    for (size_t i = 0; i < d->nreleased; i++) {
        tt.released_bytes += d->released[i].bytes;
        tt.released_count += d->released[i].count;
    }
    for (size_t i = 0; i < d->nreleased_host; i++) {
        tt.released_host_bytes += d->released_host[i].bytes;
        tt.released_host_count += d->released_host[i].count;
    }
    vt_put_totals(f, "", &tt);
}

static int device_row(const void *ctx, size_t i, struct vt_device_row *r) {
    const struct vm_device *v = &((const struct vm_dump *)ctx)->devices[i];
    r->ordinal = v->ordinal;
    vr_safe(v->name ? v->name : "?", r->name, sizeof r->name);
    vr_safe(v->uuid ? v->uuid : "?", r->uuid, sizeof r->uuid);
    r->total_bytes = v->total_bytes;
    VT_COPY_COUNTERS(r, v);
    return 1;
}

void vr_put_devices(FILE *f, const struct vm_dump *d) {
    struct vt_devices_text dt = {.n = d->ndevices, .row = device_row, .ctx = d};
    vt_put_devices(f, "", &dt);
}

struct holders_ctx {
    const struct vm_dump *d;
    const struct vr_combined *c;
};

static void holder_row(const void *ctx, size_t i, struct vt_holder_row *r) {
    const struct holders_ctx *h = ctx;
    const struct vm_stack *s = &h->d->stacks[h->c[i].stack];
    r->bytes = h->c[i].bytes;
    r->count = h->c[i].count;
    vr_safe(h->c[i].where, r->site, sizeof r->site);
    r->frames = vm_stack_flat(h->d, h->c[i].stack);
    r->nframes = r->frames ? s->nframes : 0;
}

void vr_put_holders(FILE *f, const struct vm_dump *d, const struct vr_opts *o) {
    size_t n;
    int missing;
    vr_holders_at(d, o->at, &n, &missing);
    if (missing) {
        fprintf(f, "largest holders at %s: this dump has none (%s)\n", vr_moment_name(o->at),
                o->at != VR_AT_OOM ? "written by an older vramtrace"
                : d->nooms ? "the first out-of-memory failure's holders were not kept"
                           : "no out-of-memory failure");
        return;
    }
    struct vm_dump *one = (struct vm_dump *)d; /* vr_combine only reads it */
    struct vr_input in = {.dumps = one, .n = 1};
    struct vr_combined *c = vr_combine(&in, o->at, &n);
    if (!c) { fputs("largest holders: out of memory\n", f); return; }
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) total += c[i].bytes;
    struct holders_ctx ctx = {d, c};
    /* At an OOM of one device among several: its memory alone, titled as
     * the post-mortem titles it. */
    int dev = vr_holders_device(d, o->at);
    char title[64], none[64];
    snprintf(title, sizeof title, "largest holders of device %d's memory", dev);
    snprintf(none, sizeof none, "nothing of device %d's was live then", dev);
    struct vt_holders_text h = {.title = dev >= 0 ? title : NULL, .none = dev >= 0 ? none : NULL,
                                .moment = o->at == VR_AT_EXIT ? NULL : vr_moment_name(o->at), .n = n,
                                .total = total, .stacks = 1, .row = holder_row, .ctx = &ctx};
    vt_put_holders(f, "", &h, (size_t)o->top, vr_put_safe);
    vr_combined_free(c, n);
}

/* What resets released, by call site as the holders table groups its
 * stacks: the stacks of one label in one row, with the largest one's
 * frames. */
struct released_site {
    char *label;
    uint64_t bytes, count, largest;
    size_t stack;
};

static int by_label(const void *a, const void *b) {
    return strcmp(((const struct released_site *)a)->label, ((const struct released_site *)b)->label);
}

static int by_released(const void *a, const void *b) {
    const struct released_site *x = a, *y = b;
    return vt_rank_order(x->bytes, x->label, x->stack, y->bytes, y->label, y->stack);
}

struct released_ctx {
    const struct vm_dump *d;
    const struct released_site *s;
};

static void released_row(const void *ctx, size_t i, struct vt_holder_row *r) {
    const struct released_ctx *c = ctx;
    const struct released_site *x = &c->s[i];
    r->bytes = x->bytes;
    r->count = x->count;
    vr_safe(x->label, r->site, sizeof r->site);
    r->frames = vm_stack_flat(c->d, x->stack);
    r->nframes = r->frames ? c->d->stacks[x->stack].nframes : 0;
}

/* One list of what resets released (nr of them), under `title`. */
static void put_released(FILE *f, const struct vm_dump *d, const struct vm_holder *released, size_t nr,
                         const char *title, int top) {
    if (!nr) return;
    struct released_site *s = calloc(nr, sizeof *s);
    if (!s) { fprintf(f, "%s: out of memory\n", title); return; }
    char where[2048];
    size_t made = 0;
    for (; made < nr; made++) {
        const struct vm_holder *x = &released[made];
        s[made] = (struct released_site){.bytes = x->bytes, .count = x->count, .largest = x->bytes, .stack = x->stack,
                                         .label = strdup(vm_site_label(d, x->stack, where, sizeof where))};
        if (!s[made].label) break;
    }
    if (made < nr) {
        fprintf(f, "%s: out of memory\n", title);
        for (size_t i = 0; i < made; i++) free(s[i].label);
        free(s);
        return;
    }
    qsort(s, nr, sizeof *s, by_label);
    size_t n = 0;
    uint64_t total = 0;
    for (size_t i = 0; i < nr; i++) {
        total += s[i].bytes;
        if (n && strcmp(s[n - 1].label, s[i].label) == 0) {
            struct released_site *y = &s[n - 1];
            y->bytes += s[i].bytes;
            y->count += s[i].count;
            if (s[i].largest > y->largest) { y->largest = s[i].largest; y->stack = s[i].stack; }
            free(s[i].label);
        } else if (n++ != i) {
            s[n - 1] = s[i];
        }
    }
    qsort(s, n, sizeof *s, by_released);
    struct released_ctx c = {d, s};
    struct vt_holders_text h = {.title = title, .n = n, .total = total, .stacks = 1, .row = released_row, .ctx = &c};
    vt_put_holders(f, "", &h, (size_t)top, vr_put_safe);
    for (size_t i = 0; i < n; i++) free(s[i].label);
    free(s);
}

void vr_put_released(FILE *f, const struct vm_dump *d, int top) {
    put_released(f, d, d->released, d->nreleased,
                 "released by a context's reset or destruction without a free (leaks, not live)", top);
    /* Pinned host memory apart, as the totals keep it. */
    put_released(f, d, d->released_host, d->nreleased_host,
                 "pinned host memory released by a context's reset or destruction without a free (leaks, not live)",
                 top);
}

static int live_row(const void *ctx, size_t i, struct vt_live_row *r) {
    const struct vm_dump *d = ctx;
    const struct vm_alloc *x = &d->live[i];
    const char *kind = vm_alloc_kind(d, x);
    if (!vt_kind_name_owned_device(kind)) return 0;
    char where[1024];
    r->bytes = x->bytes;
    r->address = x->address;
    r->time_ns = x->time_ns;
    r->device = x->device;
    vr_safe(kind, r->kind, sizeof r->kind);
    vr_safe(vm_alloc_api(d, x), r->api, sizeof r->api);
    vr_safe(vm_site_label(d, x->stack, where, sizeof where), r->site, sizeof r->site);
    return 1;
}

void vr_put_live(FILE *f, const struct vm_dump *d, int top) {
    struct vt_live_text l = {.n = d->nlive, .live = d->totals.live_count, .row = live_row, .ctx = d};
    vt_put_live(f, "", &l, (size_t)top);
}

static void growth_row(const void *ctx, size_t i, struct vt_growth_row *r) {
    const struct vm_dump *d = ctx;
    const struct vm_growth *g = &d->growing[i];
    char where[1024];
    vr_safe(vm_site_label(d, g->stack, where, sizeof where), r->site, sizeof r->site);
    r->first_bytes = g->first_bytes;
    r->end_bytes = g->end_bytes;
    r->cache_bytes = g->cache_bytes;
    if (g->have_rate) {
        char holder[256];
        vt_fmt_growth(g->rise_bytes, g->units, g->unit, g->span_ns, g->bytes_per_unit, g->run_steps, r->rate,
                      sizeof r->rate);
        if (!vt_growth_mostly_cache(g->first_bytes, g->end_bytes, g->cache_bytes))   /* as vt_growth_text */
            vt_fmt_held(g->holder ? vr_safe(g->holder, holder, sizeof holder) : NULL, r->rate, sizeof r->rate);
        vt_fmt_kept(g->history_from_ns, r->rate, sizeof r->rate);
    } else
        snprintf(r->rate, sizeof r->rate, "over %" PRIu64 " allocation%s", g->allocations,
                 g->allocations == 1 ? "" : "s");
}

void vr_put_growing(FILE *f, const struct vm_dump *d, int top) {
    struct vt_growing_text g = {.n = d->ngrowing, .row = growth_row, .ctx = d};
    vt_put_growing(f, "", &g, (size_t)top);
}

void vr_put_stack(FILE *f, const struct vm_dump *d, size_t stack, const char *indent) {
    const struct vm_stack *s = &d->stacks[stack];
    const struct vt_frame *fr = vm_stack_flat(d, stack);
    vt_put_frames(f, indent, fr, fr ? s->nframes : 0, vr_put_safe);
}
