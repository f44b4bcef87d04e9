/* growth.c -- finding staircases in the event history. */
#include <stdlib.h>
#include <string.h>

#include "../common/format.h"
#include "../common/summary.h"
#include "growth.h"
#include "owntime.h"
#include "holders.h"
#include "torch.h"

#define WINDOWS 4

struct site {
    int64_t live;          /* replayed live bytes */
    int64_t delta;         /* sum of the history's changes */
    uint64_t t_first, t_last, allocs;
    size_t i_first, i_last;  /* indexes in the events of those two */
    uint64_t nev, ev;      /* the site's bursts up to the end; replayed so far */
    uint64_t bursts;       /* of them, those with an allocation */
    uint64_t t_prev;       /* its latest event so far, in the history's order */
    size_t b_prev;         /* the kept step boundaries before that event */
    int in_alloc_burst;    /* its current burst has an allocation */
    uint64_t steps;        /* the complete steps its growth is counted over */
    size_t cut;            /* the first event after the last of them */
    int64_t live_cut;      /* live bytes then */
    int from_kept;         /* its steps counted from the oldest kept boundary
                              (older ones dropped, its first event before it) */
    int64_t live_kept;     /* with from_kept: live bytes at that boundary */
    uint64_t t_cut;        /* its last allocation before the cut */
    int seen, window;
    int64_t floor[WINDOWS];
    /* Where the ring has overwritten older events (the live table keeps
     * every live allocation with its time): its live allocations older
     * than every event kept, their count, bytes and earliest time, and
     * the bytes of those before the oldest kept step boundary. */
    uint64_t npre, t_pre;
    int64_t lpre, lpre_b0;
    int64_t start;         /* what it held at the oldest event kept */
    /* Its rises from step to step over the steps counted: at the newest
     * boundary it crossed (b_mark), what it held (live_mark); the rises'
     * sum, largest and count. */
    int marking;
    size_t b_mark;
    int64_t live_mark, rise_sum, rise_max;
    uint64_t nrises;
};

/* A step's rise more than this many times a site's other rises' mean is a
 * load (its gradients' buffers made in the first step, a buffer made
 * once), as the forecast's rate has it (forecast.h): its growth per step
 * counts it as that mean. */
#define VT_GROWTH_LOAD 8

/* The site's rise from its last marked boundary to `now` (what it holds),
 * counted among its step rises. */
static void close_step(struct site *x, int64_t now) {
    if (!x->marking || now <= x->live_mark) return;
    int64_t r = now - x->live_mark;
    x->rise_sum += r;
    x->nrises++;
    if (r > x->rise_max) x->rise_max = r;
}

/* Site x's event at b kept step boundaries, before it changes what the
 * site holds: a step's rise closes where it crossed a boundary. */
static void mark_step(struct site *x, size_t b) {
    if (x->marking && b == x->b_mark) return;
    close_step(x, x->live);
    x->marking = 1;
    x->b_mark = b;
    x->live_mark = x->live;
}

/* What the site gained over its steps counted, a load among its step
 * rises counted as the mean of the others: the rise per step was twice
 * the leak's where the first step made the gradients' buffers. */
static uint64_t less_load(const struct site *x, uint64_t counted) {
    if (x->nrises < 2) return counted;
    int64_t mean = (x->rise_sum - x->rise_max) / (int64_t)(x->nrises - 1);
    if (x->rise_max <= mean * VT_GROWTH_LOAD) return counted;
    uint64_t excess = (uint64_t)(x->rise_max - mean);
    return counted > excess ? counted - excess : 0;
}

static int by_rise(const void *a, const void *b) {
    const struct vt_growth *x = a, *y = b;
    uint64_t rx = x->end_bytes - x->first_floor, ry = y->end_bytes - y->first_floor;
    if (rx != ry) return rx < ry ? 1 : -1;
    return x->stack < y->stack ? -1 : x->stack > y->stack;
}

/* A burst: a site's virtual-memory handles (cuMemCreate) made or let go
 * one after the other in the history, nothing between them, each within
 * VT_GROWTH_BURST_NS of the one before. One request of the program is
 * then many allocations at once: PyTorch's expandable segments map a 1 GiB
 * tensor as 52 pages of 20 MiB, which read as a staircase of 52 steps, a
 * leak suspect. The windows count bursts. A leak with a step boundary or
 * any other allocation between, or 1 ms apart, stays one burst an
 * allocation; other kinds of memory are one allocation a request. */
#define VT_GROWTH_BURST_NS 1000000

/* Whether event e of site group g continues that site's burst, the event
 * before it in the history (of those counted) being of group prev_g, b the
 * kept step boundaries before e (a burst never crosses one). */
static int continues(const struct site *x, uint32_t g, uint32_t prev_g, size_t b, const struct vt_event *e) {
    return x->seen && e->kind == VT_KIND_VMM && g == prev_g && b == x->b_prev && e->time_ns >= x->t_prev &&
           e->time_ns - x->t_prev < VT_GROWTH_BURST_NS;
}

/* The kept step boundaries at or before event i, from b (those before
 * the last event asked about): the events are walked in order. */
static size_t boundaries_before(const struct vt_snapshot *s, size_t b, size_t i) {
    while (b < s->nsteps && vt_step_event(s, &s->steps[b]) <= (int64_t)i) b++;
    return b;
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

/* The step time t falls in, as step_of for an event the ring no longer
 * holds: by the kept boundaries' times. */
static uint64_t step_at_time(const struct vt_snapshot *s, uint64_t t) {
    size_t lo = 0, hi = s->nsteps; /* boundaries [0, lo) are at or before t */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->steps[mid].time_ns <= t) lo = mid + 1;
        else hi = mid;
    }
    return lo ? s->steps[lo - 1].step + 1 : s->steps[0].step;
}

/* The newest kept boundary at or before t_end, or -1 (none). */
static ptrdiff_t last_boundary(const struct vt_snapshot *s, uint64_t t_end) {
    ptrdiff_t j = (ptrdiff_t)s->nsteps - 1;
    while (j >= 0 && s->steps[j].time_ns > t_end) j--;
    return j;
}

/* The complete steps x's growth is counted over (growth.h): from the step
 * of its first event to the last step closed, at or before t_end, by the
 * step of its last allocation, both counted; x->cut is then the first
 * event after that step's closing boundary. 0 when none is complete. */
static uint64_t complete_steps(const struct vt_snapshot *s, ptrdiff_t last, struct site *x) {
    if (last < 0) return 0;
    /* A site whose live allocations go back past the events kept begins
     * at the earliest of them, in the step its time falls in. */
    uint64_t a = x->npre ? step_at_time(s, x->t_pre) : step_of(s, x->i_first), z = step_of(s, x->i_last);
    /* Boundaries were dropped (the newest VT_STEPS are kept) and the site
     * began before the oldest kept one: the steps of its events before it
     * are not known. Its growth is counted from that boundary, over the
     * steps after it (the rise before it is no part of those steps: at
     * 12,000 steps, a leak of 128 KiB a step read as 344 KiB a step). */
    int64_t b0 = vt_step_event(s, &s->steps[0]);
    x->from_kept = s->steps_total > s->nsteps &&
                   (x->npre ? x->t_pre < s->steps[0].time_ns : b0 >= 0 && x->i_first < (size_t)b0);
    if (x->from_kept) a = s->steps[0].step + 1;
    uint64_t b = z < s->steps[last].step ? z : s->steps[last].step;
    if (b < a) return 0;
    size_t lo = 0, hi = (size_t)last + 1;   /* the kept boundary numbered b */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->steps[mid].step < b) lo = mid + 1;
        else hi = mid;
    }
    if (lo > (size_t)last || s->steps[lo].step != b) return 0;
    int64_t cut = vt_step_event(s, &s->steps[lo]);
    if (cut < 0) return 0;
    x->cut = (size_t)cut;
    return b - a + 1;
}

uint64_t vt_growth_end(const struct vt_snapshot *s, uint64_t asked) {
    uint64_t end = asked;
    /* Several threads write the history: its newest event need not be its
     * last. */
    for (size_t i = 0; i < s->nevents; i++) {
        uint64_t t = vt_event_at(s, i).time_ns;
        if (t > end) end = t;
    }
    if (s->nsteps && s->steps[s->nsteps - 1].time_ns > end) end = s->steps[s->nsteps - 1].time_ns;
    return end;
}

struct vt_growth *vt_find_growth(const struct vt_snapshot *s, const struct vt_symbols *sym, uint64_t t_end,
                                 size_t *n) {
    struct vt_growth *g = vt_find_growth_on(s, sym, t_end, -1, n);
    /* A PyTorch program that steps an optimizer and has not completed its
     * second step by the end: what sites made in its first step hold
     * (gradients, Adam's state) was made once, and one step cannot tell a
     * leak from that: none of them is a leak suspect, as the post-mortem
     * says of the same failure ("not yet a leak"; the exit summary listed
     * Adam's state at terabytes a second). */
    ptrdiff_t last = g && vt_torch_stepping() ? last_boundary(s, t_end) : -1;
    if (!g || !vt_torch_stepping() || (last >= 0 && s->steps[last].step >= 2)) return g;
    uint64_t first_step_end = last >= 0 ? s->steps[0].time_ns : t_end;
    size_t k = 0;
    for (size_t i = 0; i < *n; i++)
        if (g[i].t_first_ns > first_step_end) g[k++] = g[i];
    *n = k;
    if (k == 0) {
        free(g);
        return NULL;
    }
    return g;
}

/* Whether an allocation or event of `dev` counts for a search of `device`. */
static inline int on(int dev, int device) { return device < 0 || dev == device; }

struct vt_growth *vt_find_growth_on(const struct vt_snapshot *s, const struct vt_symbols *sym, uint64_t t_end,
                                    int device, size_t *n) {
    *n = 0;
    if (s->nstacks == 0 || s->nevents == 0) return NULL;
    size_t ns = 0;
    uint32_t *lowest = NULL;
    uint32_t *group = vt_site_groups(sym, s->nstacks, &ns, &lowest);
    struct site *st = group ? calloc(ns, sizeof *st) : NULL;
    int64_t *end = group ? calloc(ns, sizeof *end) : NULL;
    if (!st || !end) { free(st); free(end); free(group); free(lowest); return NULL; }
    /* Pass 1: each site's first event and net change over the history, so
     * that the replay can start from what the site held before it; and
     * the oldest event kept. */
    uint32_t prev_g = UINT32_MAX;
    size_t b = 0;
    uint64_t t_kept = UINT64_MAX;
    for (size_t i = 0; i < s->nevents; i++) {
        const struct vt_event ev = vt_event_at(s, i), *e = &ev;
        if (e->time_ns < t_kept) t_kept = e->time_ns;
        if (e->type == VT_EV_OOM || !vt_kind_owned_device(e->kind) || e->stack >= s->nstacks ||
            !on(e->device, device))
            continue;
        uint32_t g = group[e->stack];
        struct site *x = &st[g];
        x->delta += e->type == VT_EV_ALLOC ? (int64_t)e->bytes : -(int64_t)e->bytes;
        if (e->time_ns > t_end) continue;
        b = boundaries_before(s, b, i);
        int more = continues(x, g, prev_g, b, e);
        prev_g = g;
        x->t_prev = e->time_ns;
        x->b_prev = b;
        if (!more) {
            x->nev++;
            x->in_alloc_burst = 0;
        }
        if (e->type == VT_EV_ALLOC && !x->in_alloc_burst) {
            x->bursts++;
            x->in_alloc_burst = 1;
        }
        /* The earliest event, not the first in the ring: a history written by
         * several threads need not be in time order. */
        if (!x->seen || e->time_ns < x->t_first) { x->seen = 1; x->t_first = e->time_ns; x->i_first = i; }
        if (e->type == VT_EV_ALLOC) {
            x->allocs++;
            if (e->time_ns > x->t_last || x->allocs == 1) { x->t_last = e->time_ns; x->i_last = i; }
        }
    }
    /* What each site holds at the end; and where the ring overwrote older
     * events, its live allocations older than every event kept (the live
     * table outlives the ring, their times with them): what is known of
     * its history before the events kept. */
    int cut = s->events_dropped > 0;
    struct vt_live_reader *rd = vt_live_read(s, 0);
    for (const struct vt_live *a; rd && (a = vt_live_next(rd));) {
        if (!vt_kind_owned_device(a->kind) || a->stack >= s->nstacks || !on(a->device, device)) continue;
        uint32_t g = group[a->stack];
        end[g] += (int64_t)a->bytes;
        if (!cut || a->time_ns >= t_kept || a->time_ns > t_end) continue;
        struct site *x = &st[g];
        if (!x->npre++ || a->time_ns < x->t_pre) x->t_pre = a->time_ns;
        x->lpre += (int64_t)a->bytes;
        if (s->nsteps && a->time_ns < s->steps[0].time_ns) x->lpre_b0 += (int64_t)a->bytes;
    }
    vt_live_read_end(rd);
    /* The program's work up to the end, in events: the newest event in the
     * history at or before it (any site, any kind). */
    size_t i_end = 0;
    for (size_t i = s->nevents; i-- > 0;)
        if (vt_event_at(s, i).time_ns <= t_end) { i_end = i; break; }
    int marked = s->nsteps && s->steps[0].time_ns <= t_end;
    ptrdiff_t last = marked ? last_boundary(s, t_end) : -1;
    for (size_t k = 0; k < ns; k++) {
        st[k].live = end[k] - st[k].delta;
        if (st[k].live < 0) st[k].live = 0;
        st[k].start = st[k].live;
        st[k].live_cut = st[k].live;
        st[k].steps = st[k].seen ? complete_steps(s, last, &st[k]) : 0;
        for (int w = 0; w < WINDOWS; w++) st[k].floor[w] = -1;
        st[k].window = 0;
        st[k].floor[0] = st[k].live;
    }
    /* Pass 2: replay up to t_end, keeping each window's floor. */
    for (size_t k = 0; k < ns; k++) {
        st[k].t_prev = 0;
        st[k].seen = st[k].seen ? 2 : 0; /* 2: seen, its replay not begun */
    }
    prev_g = UINT32_MAX;
    b = 0;
    /* The oldest kept boundary's place in the events, where the sites
     * counted from it (from_kept) take their live bytes. */
    int64_t kept_at = s->nsteps ? vt_step_event(s, &s->steps[0]) : -1;
    for (size_t i = 0; i < s->nevents; i++) {
        if ((int64_t)i == kept_at)
            for (size_t k = 0; k < ns; k++) st[k].live_kept = st[k].live;
        const struct vt_event ev = vt_event_at(s, i), *e = &ev;
        if (e->time_ns > t_end) continue;
        if (e->type == VT_EV_OOM || !vt_kind_owned_device(e->kind) || e->stack >= s->nstacks ||
            !on(e->device, device))
            continue;
        uint32_t g = group[e->stack];
        struct site *x = &st[g];
        b = boundaries_before(s, b, i);
        int more = x->seen == 1 && continues(x, g, prev_g, b, e);
        prev_g = g;
        x->t_prev = e->time_ns;
        x->b_prev = b;
        x->seen = 1;
        if (x->bursts < WINDOWS) continue;
        /* Windows of the site's own bursts, in the history's order: the
         * verdict depends on what the program did, not on how long the
         * machine took to do it or to reach the report. */
        uint64_t wi = (more ? x->ev - 1 : x->ev++) * WINDOWS / x->nev;
        int w = wi >= WINDOWS ? WINDOWS - 1 : (int)wi;
        while (x->window < w) { x->window++; x->floor[x->window] = x->live; }
        if (x->steps && i < x->cut && (!x->from_kept || (int64_t)i >= kept_at)) mark_step(x, b);
        x->live += e->type == VT_EV_ALLOC ? (int64_t)e->bytes : -(int64_t)e->bytes;
        if (x->live < x->floor[w]) x->floor[w] = x->live;
        if (x->steps && i < x->cut) {
            x->live_cut = x->live;
            if (e->type == VT_EV_ALLOC && e->time_ns > x->t_cut) x->t_cut = e->time_ns;
        }
    }
    if (kept_at >= 0 && (size_t)kept_at >= s->nevents)
        for (size_t k = 0; k < ns; k++) st[k].live_kept = st[k].live;
    struct vt_growth *out = malloc(ns * sizeof *out);
    size_t k = 0;
    for (size_t i = 0; out && i < ns; i++) {
        struct site *x = &st[i];
        if (x->bursts < WINDOWS || x->live <= 0) continue;
        while (x->window < WINDOWS - 1) { x->window++; x->floor[x->window] = x->live; }
        int rising = 1;
        for (int w = 1; w < WINDOWS; w++)
            if (x->floor[w] <= x->floor[w - 1]) rising = 0;
        if (!rising) continue;
        /* A model moved to the device rises once, however long its copy
         * takes, and stays: not a leak suspect. */
        if (lowest && vt_stack_makes_model(sym, lowest[i])) continue;
        /* Still rising: its allocations reach into the later half of the
         * program's work since its first event (a model loaded, or a cache
         * filled in the first step, then kept for the rest of the run is a
         * phase, not a leak). The work is the program's steps where it
         * marked any since that event (a caching allocator's later steps
         * make no event), else, in a run that marked steps before it, the
         * history's events (an evaluation pass after training makes many,
         * but no step), else the time up to the end: in a run that marks
         * no step nothing else counts the work it does without allocating
         * (the events stop with a caching allocator's warm-up, so that its
         * last segments read as the run's end). */
        uint64_t steps_since = 0, steps_spread = 0;
        for (ptrdiff_t j = last; j >= 0 && s->steps[j].time_ns > x->t_first; j--) {
            steps_since++;
            if (s->steps[j].time_ns <= x->t_last) steps_spread++;
        }
        uint64_t since, spread;
        if (steps_since) {
            since = steps_since;
            spread = steps_spread;
        } else if (marked) {
            since = i_end > x->i_first ? i_end - x->i_first : 0;
            spread = x->i_last > x->i_first ? x->i_last - x->i_first : 0;
        } else {
            /* vramtrace's own outputs meanwhile (an earlier dump, a
             * post-mortem) are no work of the program's (owntime.h). */
            since = t_end > x->t_first ? t_end - x->t_first - vt_own_time_within(x->t_first, t_end) : 0;
            spread = x->t_last > x->t_first ? x->t_last - x->t_first - vt_own_time_within(x->t_first, x->t_last) : 0;
        }
        if (spread < since / 2) continue;
        /* Its figures over what is known (growth.h): where the ring
         * overwrote its older events, it begins at its earliest live
         * allocation when that is older than the events kept, the
         * allocations older than them counted, and its first floor is the
         * least it held in its first kept events less those (made after
         * that beginning). */
        int64_t floor0 = x->floor[0] - x->lpre;
        if (floor0 < 0) floor0 = 0;
        uint64_t t_first = x->npre && x->t_pre < x->t_first ? x->t_pre : x->t_first;
        out[k].stack = lowest[i];
        out[k].first_floor = (uint64_t)floor0;
        out[k].end_bytes = (uint64_t)x->live;
        out[k].allocs = x->allocs + x->npre;
        out[k].t_first_ns = t_first;
        out[k].t_last_ns = x->t_last > t_first ? x->t_last : t_first;
        out[k].history_from_ns = cut && x->start > 0 ? t_kept : 0;
        /* Per step only over enough complete steps holding most of the
         * rise (growth.h); else per second, over the whole growth. From
         * the oldest kept boundary, what it held there: replayed, or,
         * before the events kept, its live allocations older than it. */
        int64_t base = !x->from_kept ? floor0 : kept_at >= 0 ? x->live_kept : x->lpre_b0 + floor0;
        uint64_t rise = x->live > base ? (uint64_t)(x->live - base) : 0;
        uint64_t counted = x->live_cut > base ? (uint64_t)(x->live_cut - base) : 0;
        int per_step = x->steps >= VT_GROWTH_MIN_STEPS && counted > rise / 2 && counted > 0;
        uint64_t t_from = x->from_kept ? s->steps[0].time_ns : t_first;
        out[k].marked = marked;
        out[k].steps = per_step ? x->steps : 0;
        if (per_step) close_step(x, x->live_cut);
        out[k].step_rise = per_step ? less_load(x, counted) : 0;
        out[k].run_steps = per_step && x->from_kept ? s->steps_total : 0;
        out[k].t_step_first_ns = t_from;
        out[k].t_step_last_ns = per_step && x->t_cut > t_from ? x->t_cut : t_from;
        out[k].holder[0] = '\0';
        out[k].holder_bytes = 0;
        out[k].holder_device = -1;
        out[k].holder_grew = 0;
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
    r.span_ns = g->t_last_ns > g->t_first_ns ? g->t_last_ns - g->t_first_ns : 0;
    r.bytes_per_second = r.span_ns ? (double)r.rise / ((double)r.span_ns / 1e9) : 0;
    r.run_steps = g->run_steps;
    r.history_from_ns = g->history_from_ns;
    if (g->steps) {
        r.rise = g->step_rise;
        r.span_ns = g->t_step_last_ns > g->t_step_first_ns ? g->t_step_last_ns - g->t_step_first_ns : 0;
        r.units = g->steps;
        r.unit = "step";
        r.per_unit = r.rise / r.units;
    } else if (g->marked && r.span_ns) {
        r.units = g->allocs;
        r.unit = "second";
        r.per_unit = (uint64_t)r.bytes_per_second;
    } else {
        r.units = g->allocs;
        r.unit = "allocation";
        r.per_unit = r.units ? r.rise / r.units : 0;
    }
    return r;
}

const char *vt_growth_text(const struct vt_growth *g, char *buf, size_t size) {
    struct vt_growth_rate r = vt_growth_rate(g);
    vt_fmt_growth(r.rise, r.units, r.unit, r.span_ns, r.per_unit, r.run_steps, buf, size);
    /* A site that is mostly cache is held by no one: the tensors that lie
     * in its segments are not what made it grow. */
    if (!vt_growth_mostly_cache(g->first_floor, g->end_bytes, g->cache_bytes)) vt_fmt_held(g->holder, buf, size);
    return vt_fmt_kept(r.history_from_ns, buf, size);
}
