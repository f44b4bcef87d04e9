/* cow.c -- a slot's live table copied for a snapshot, chunk by chunk, each
 * chunk before its first change (cow.h). */
#include <stdlib.h>

#include "cow.h"
#include "lockprobe.h"

/* Chunks in an array of cap entries (the last may be short). */
static size_t nchunks(size_t cap) { return (cap + CHUNK_ENTRIES - 1) / CHUNK_ENTRIES; }

static int is_done(const struct vt_cow_region *g, size_t k) { return (g->done[k / 64] >> (k % 64)) & 1; }

/* Copy chunk k of region g to the sink: its records, fetched ahead while
 * the entries are read, handed on at once. */
static void copy_chunk(struct live_table *t, struct vt_cow_region *g, size_t k) {
    struct vt_cow *c = t->cow;
    g->done[k / 64] |= 1ull << (k % 64);
    if (__atomic_load_n(&c->sink->stop, __ATOMIC_ACQUIRE)) return;
    if (g->e == t->e && entry_fresh(t, k * CHUNK_ENTRIES)) return;   /* a block never written: empty, not read */
    VT_PROBE_COUNT(VT_PC_CHUNKS, 1);
    size_t lo = k * CHUNK_ENTRIES, hi = lo + CHUNK_ENTRIES, n = 0;
    if (hi > g->cap) hi = g->cap;
    if (lo < g->from) lo = g->from;
    struct vt_rec *recs[CHUNK_ENTRIES];
    for (size_t i = lo; i < hi; i++) {
        struct vt_rec *r = g->e[i].rec;
        if (r && r != TABLE_TOMB) {
            __builtin_prefetch(r);
            recs[n++] = r;
        }
    }
    if (n) c->sink->keep(c->sink->ctx, recs, n);
}

/* Arm region g for array e of cap entries, from index `from`; 0 when out
 * of memory. Chunks wholly below `from` (a growing table's moved part)
 * start done. */
static int region_arm(struct vt_cow_region *g, struct live_entry *e, size_t cap, size_t from) {
    size_t n = nchunks(cap);
    g->done = calloc((n + 63) / 64, sizeof *g->done);
    if (!g->done) return 0;
    g->e = e;
    g->cap = cap;
    g->from = from;
    for (size_t k = 0; k < n && (k + 1) * CHUNK_ENTRIES <= from; k++) g->done[k / 64] |= 1ull << (k % 64);
    g->next = from / CHUNK_ENTRIES;
    return 1;
}

int vt_cow_begin(struct live_table *t, struct vt_cow_sink *sink) {
    if (!t->count) return 1;
    struct vt_cow *c = calloc(1, sizeof *c);
    if (!c) return 0;
    c->sink = sink;
    if (!region_arm(&c->r[0], t->e, t->cap, 0) || (t->old && !region_arm(&c->r[1], t->old, t->old_cap, t->moved))) {
        free(c->r[0].done);
        free(c);
        return 0;
    }
    t->cow = c;
    return 1;
}

void vt_cow_end(struct live_table *t) {
    struct vt_cow *c = t->cow;
    if (!c) return;
    free(c->r[0].done);
    free(c->r[1].done);
    free(c);
    __atomic_store_n(&t->cow, NULL, __ATOMIC_RELEASE); /* read unlocked by a snapshot giving up */
}

int vt_cow_step(struct live_table *t) {
    struct vt_cow *c = t->cow;
    if (!c || __atomic_load_n(&c->sink->stop, __ATOMIC_ACQUIRE)) return 0;
    for (int j = 0; j < 2; j++) {
        struct vt_cow_region *g = &c->r[j];
        if (!g->e) continue;
        for (size_t n = nchunks(g->cap); g->next < n; g->next++)
            if (!is_done(g, g->next)) {
                copy_chunk(t, g, g->next++);
                return 1;
            }
    }
    return 0;
}

/* The armed region of array e, or NULL; a stopped sink lets the copy go
 * (then NULL too). */
static struct vt_cow_region *region_of(struct live_table *t, const struct live_entry *e) {
    struct vt_cow *c = t->cow;
    if (__atomic_load_n(&c->sink->stop, __ATOMIC_ACQUIRE)) {
        vt_cow_end(t);
        return NULL;
    }
    for (int j = 0; j < 2; j++)
        if (c->r[j].e == e) return &c->r[j];
    return NULL;
}

void vt_cow_touch(struct live_table *t, const struct live_entry *e, size_t from, size_t to) {
    struct vt_cow_region *g = region_of(t, e);
    if (!g) return;
    size_t n = nchunks(g->cap), k = from / CHUNK_ENTRIES, last = to / CHUNK_ENTRIES;
    for (;; k = (k + 1) % n) {
        if (!is_done(g, k)) copy_chunk(t, g, k);
        if (k == last) break;
    }
}

void vt_cow_touch_run(struct live_table *t, size_t i) {
    size_t mask = t->cap - 1, j = i;
    while (entry_rec(t, (j + 1) & mask)) j = (j + 1) & mask;
    vt_cow_touch(t, t->e, i, j);
}

void vt_cow_forget(struct live_table *t, const struct live_entry *e) {
    struct vt_cow_region *g = region_of(t, e);
    if (g) g->e = NULL;
}

void vt_cow_touch_key(struct live_table *t, uint32_t h) {
    if (t->cap) {
        size_t mask = t->cap - 1, i = h & mask, j = i;
        while (entry_rec(t, j)) j = (j + 1) & mask;
        vt_cow_touch(t, t->e, i, j);
    }
    if (t->cow && t->old) {
        size_t i = old_first(t, h), j = i;
        for (size_t n = 1; t->old[j].rec && n < t->old_cap - t->moved; n++) j = old_next(t, j);
        vt_cow_touch(t, t->old, i, j);
    }
}
