/* growth.c -- finding staircases in the event history. */
#include <stdlib.h>
#include <string.h>

#include "../common/format.h"
#include "growth.h"
#include "holders.h"

#define WINDOWS 4

struct site {
    int64_t live;          /* replayed live bytes */
    int64_t delta;         /* sum of the history's changes */
    uint64_t t_first, t_last, allocs;
    size_t i_first, i_last;  /* indexes in the events of those two */
    uint64_t nev, ev;      /* the site's events up to the end; replayed so far */
    int seen, window;
    int64_t floor[WINDOWS];
};

static int by_rise(const void *a, const void *b) {
    const struct vt_growth *x = a, *y = b;
    uint64_t rx = x->end_bytes - x->first_floor, ry = y->end_bytes - y->first_floor;
    if (rx != ry) return rx < ry ? 1 : -1;
    return x->stack < y->stack ? -1 : x->stack > y->stack;
}

/* The step event i of s falls in: one past the number of the last kept
 * boundary at or before it; before every kept boundary, the first kept
 * one's number (the step it falls in, when no boundary was dropped). */
static uint64_t step_of(const struct vt_snapshot *s, size_t i) {
    size_t lo = 0, hi = s->nsteps; /* boundaries [0, lo) are at or before i */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (vt_step_event(s, &s->steps[mid]) <= (int64_t)i) lo = mid + 1;
        else hi = mid;
    }
    return lo ? s->steps[lo - 1].step + 1 : s->steps[0].step;
}

struct vt_growth *vt_find_growth(const struct vt_snapshot *s, const struct vt_symbols *sym, uint64_t t_end,
                                 size_t *n) {
    *n = 0;
    if (s->nstacks == 0 || s->nevents == 0) return NULL;
    size_t ns = 0;
    uint32_t *lowest = NULL;
    uint32_t *group = vt_site_groups(sym, s->nstacks, &ns, &lowest);
    struct site *st = group ? calloc(ns, sizeof *st) : NULL;
    int64_t *end = group ? calloc(ns, sizeof *end) : NULL;
    if (!st || !end) { free(st); free(end); free(group); free(lowest); return NULL; }
    for (size_t i = 0; i < s->nlive; i++)
        if (vt_kind_owned_device(s->live[i].kind) && s->live[i].stack < s->nstacks)
            end[group[s->live[i].stack]] += (int64_t)s->live[i].bytes;
    /* Pass 1: each site's first event and net change over the history, so
     * that the replay can start from what the site held before it. */
    for (size_t i = 0; i < s->nevents; i++) {
        const struct vt_event ev = vt_event_at(s, i), *e = &ev;
        if (e->type == VT_EV_OOM || !vt_kind_owned_device(e->kind) || e->stack >= s->nstacks) continue;
        struct site *x = &st[group[e->stack]];
        x->delta += e->type == VT_EV_ALLOC ? (int64_t)e->bytes : -(int64_t)e->bytes;
        if (e->time_ns > t_end) continue;
        x->nev++;
        /* The earliest event, not the first in the ring: a history written by
         * several threads need not be in time order. */
        if (!x->seen || e->time_ns < x->t_first) { x->seen = 1; x->t_first = e->time_ns; x->i_first = i; }
        if (e->type == VT_EV_ALLOC) {
            x->allocs++;
            if (e->time_ns > x->t_last || x->allocs == 1) { x->t_last = e->time_ns; x->i_last = i; }
        }
    }
    for (size_t k = 0; k < ns; k++) {
        st[k].live = end[k] - st[k].delta;
        if (st[k].live < 0) st[k].live = 0;
        for (int w = 0; w < WINDOWS; w++) st[k].floor[w] = -1;
        st[k].window = 0;
        st[k].floor[0] = st[k].live;
    }
    /* Pass 2: replay up to t_end, keeping each window's floor. */
    for (size_t i = 0; i < s->nevents; i++) {
        const struct vt_event ev = vt_event_at(s, i), *e = &ev;
        if (e->time_ns > t_end) continue;
        if (e->type == VT_EV_OOM || !vt_kind_owned_device(e->kind) || e->stack >= s->nstacks) continue;
        struct site *x = &st[group[e->stack]];
        if (x->allocs < WINDOWS) continue;
        /* Windows of the site's own events, in the history's order: the
         * verdict depends on what the program did, not on how long the
         * machine took to do it or to reach the report. */
        uint64_t wi = x->ev++ * WINDOWS / x->nev;
        int w = wi >= WINDOWS ? WINDOWS - 1 : (int)wi;
        while (x->window < w) { x->window++; x->floor[x->window] = x->live; }
        x->live += e->type == VT_EV_ALLOC ? (int64_t)e->bytes : -(int64_t)e->bytes;
        if (x->live < x->floor[w]) x->floor[w] = x->live;
    }
    struct vt_growth *out = malloc(ns * sizeof *out);
    size_t k = 0;
    int marked = s->nsteps && s->steps[0].time_ns <= t_end;
    for (size_t i = 0; out && i < ns; i++) {
        struct site *x = &st[i];
        if (x->allocs < WINDOWS || x->live <= 0) continue;
        while (x->window < WINDOWS - 1) { x->window++; x->floor[x->window] = x->live; }
        int rising = 1;
        for (int w = 1; w < WINDOWS; w++)
            if (x->floor[w] <= x->floor[w - 1]) rising = 0;
        if (!rising) continue;
        out[k].stack = lowest[i];
        out[k].first_floor = (uint64_t)x->floor[0];
        out[k].end_bytes = (uint64_t)x->live;
        out[k].allocs = x->allocs;
        out[k].t_first_ns = x->t_first;
        out[k].t_last_ns = x->t_last > x->t_first ? x->t_last : x->t_first;
        out[k].steps = marked ? step_of(s, x->i_last) - step_of(s, x->i_first) + 1 : 0;
        out[k].holder[0] = '\0';
        out[k].holder_bytes = 0;
        out[k].holder_device = -1;
        k++;
    }
    free(st);
    free(end);
    free(group);
    free(lowest);
    if (k == 0) { free(out); return NULL; }
    qsort(out, k, sizeof *out, by_rise);
    *n = k;
    return out;
}

struct vt_growth_rate vt_growth_rate(const struct vt_growth *g) {
    struct vt_growth_rate r;
    r.rise = g->end_bytes > g->first_floor ? g->end_bytes - g->first_floor : 0;
    r.units = g->steps ? g->steps : g->allocs;
    r.unit = g->steps ? "step" : "allocation";
    r.per_unit = r.units ? r.rise / r.units : 0;
    r.span_ns = g->t_last_ns > g->t_first_ns ? g->t_last_ns - g->t_first_ns : 0;
    r.bytes_per_second = r.span_ns ? (double)r.rise / ((double)r.span_ns / 1e9) : 0;
    return r;
}

const char *vt_growth_text(const struct vt_growth *g, char *buf, size_t size) {
    struct vt_growth_rate r = vt_growth_rate(g);
    vt_fmt_growth(r.rise, r.units, r.unit, r.span_ns, r.per_unit, buf, size);
    return vt_fmt_held(g->holder, buf, size);
}
