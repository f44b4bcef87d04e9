/* departed.c -- code that left the process, remembered for the stacks
 * walked through it. See departed.h. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "departed.h"
#include "intern.h"
#include "internal.h"

/* Appended under the global lock, each published by the count's release
 * store; a record's `before` moves (atomically) when the same library
 * leaves the same place again. Read without a lock. */
static struct vt_departed records[VT_MAX_DEPARTED];
uint32_t vt_departed_count;
uint32_t vt_departed_notes;

#define TAG_SHIFT 48

/* Once every record is taken: the mark of the departure that found no
 * room (UINT32_MAX while there is room). */
static uint32_t full_at = UINT32_MAX;

/* The lowest and highest address any record covers: most frames are
 * outside, and are their own key at once. */
static uintptr_t lowest = UINTPTR_MAX, highest;

/* Once full: where libraries left that no record remembers, with the
 * stacks interned by then (a range and the least and most of them; a
 * library that leaves when all OVERFLOW ranges are taken widens the
 * nearest). A frame of a stack interned before such a library left that
 * lies in its range is of unknown code, unless a record says which
 * library was there, and left, before. Entries only ever widen: a reader
 * that sees one half-changed sees a range and bounds within the new. */
#define OVERFLOW 64
static struct overflow {
    uintptr_t lo, hi;
    uint32_t least, most;
} overflow[OVERFLOW];
static uint32_t noverflow;

static void widen_bounds(uintptr_t lo, uintptr_t hi) {
    if (lo < __atomic_load_n(&lowest, __ATOMIC_RELAXED)) __atomic_store_n(&lowest, lo, __ATOMIC_RELAXED);
    if (hi > __atomic_load_n(&highest, __ATOMIC_RELAXED)) __atomic_store_n(&highest, hi, __ATOMIC_RELAXED);
}

/* A library that left with no room for its record (global lock held). */
static void overflowed(const struct vt_code_span *s, uint32_t mark) {
    widen_bounds(s->lo, s->hi);
    uint32_t n = noverflow;
    if (n < OVERFLOW) {
        overflow[n] = (struct overflow){s->lo, s->hi, mark, mark};
        __atomic_store_n(&noverflow, n + 1, __ATOMIC_RELEASE);
        return;
    }
    struct overflow *best = &overflow[0];
    uintptr_t best_gap = UINTPTR_MAX;
    for (uint32_t i = 0; i < n; i++) {
        struct overflow *o = &overflow[i];
        uintptr_t gap = o->hi < s->lo ? s->lo - o->hi : s->hi < o->lo ? o->lo - s->hi : 0;
        if (gap < best_gap) best = o, best_gap = gap;
    }
    if (s->lo < best->lo) __atomic_store_n(&best->lo, s->lo, __ATOMIC_RELAXED);
    if (s->hi > best->hi) __atomic_store_n(&best->hi, s->hi, __ATOMIC_RELAXED);
    if (mark < best->least) __atomic_store_n(&best->least, mark, __ATOMIC_RELAXED);
    if (mark > best->most) __atomic_store_n(&best->most, mark, __ATOMIC_RELAXED);
}

static int same_code(const struct vt_code_span *a, const struct vt_code_span *b) {
    return a->lo == b->lo && a->hi == b->hi && a->base == b->base && a->build_id_len == b->build_id_len &&
           memcmp(a->build_id, b->build_id, a->build_id_len) == 0 && a->text_hash == b->text_hash &&
           strcmp(a->path, b->path) == 0;
}

static int overlap(const struct vt_code_span *a, const struct vt_code_span *b) {
    return a->lo < b->hi && b->lo < a->hi;
}

/* The latest departure over any of span's addresses: the one a stack
 * walked since would otherwise be read by. */
static struct vt_departed *latest_over(const struct vt_code_span *span, uint32_t n) {
    struct vt_departed *best = NULL;
    for (uint32_t i = 0; i < n; i++)
        if (overlap(&records[i].span, span) &&
            (!best || __atomic_load_n(&records[i].before, __ATOMIC_RELAXED) >=
                          __atomic_load_n(&best->before, __ATOMIC_RELAXED)))
            best = &records[i];
    return best;
}

uint32_t vt_departed_mark(void) {
    vt_global_lock();
    uint32_t n = vt_stacks.n > UINT32_MAX ? UINT32_MAX : (uint32_t)vt_stacks.n;
    vt_global_unlock();
    return n;
}

void vt_departed_note(const struct vt_code_span *gone, size_t n, uint32_t from, uint32_t mark) {
    if (n) __atomic_add_fetch(&vt_departed_notes, 1, __ATOMIC_RELEASE);
    vt_global_lock();
    uint32_t have = vt_departed_count;
    for (size_t i = 0; i < n; i++) {
        if (gone[i].lo >= gone[i].hi || gone[i].hi >> TAG_SHIFT) continue;
        /* Full: no record changes any more (one moved on now would claim
         * the stacks walked through a library not remembered). */
        if (__atomic_load_n(&full_at, __ATOMIC_RELAXED) != UINT32_MAX) {
            overflowed(&gone[i], mark);
            continue;
        }
        /* The same library leaving the same place again (a plugin loaded
         * and unloaded in a loop): its one record covers both stays. */
        struct vt_departed *last = latest_over(&gone[i], have);
        if (last && same_code(&last->span, &gone[i])) {
            /* Only its last dlclose's stacks are unknown: those of the one
             * before were walked through this library, in one stay or the
             * other. */
            if (mark > __atomic_load_n(&last->before, __ATOMIC_RELAXED)) {
                __atomic_store_n(&last->from, from, __ATOMIC_RELAXED);
                __atomic_store_n(&last->before, mark, __ATOMIC_RELEASE);
            }
            continue;
        }
        char *path = have < VT_MAX_DEPARTED ? strdup(gone[i].path ? gone[i].path : "") : NULL;
        if (!path) {
            __atomic_store_n(&full_at, mark, __ATOMIC_RELEASE);
            overflowed(&gone[i], mark);
            continue;
        }
        struct vt_departed *d = &records[have];
        d->span = gone[i];
        d->span.path = path;
        d->from = from;
        d->before = mark;
        widen_bounds(d->span.lo, d->span.hi);
        __atomic_store_n(&vt_departed_count, ++have, __ATOMIC_RELEASE);
    }
    vt_global_unlock();
}

uintptr_t vt_code_key_slow(const struct vt_stack *st, uint32_t j, uint32_t n) {
    uintptr_t a = st->frames[j];
    if (a >> TAG_SHIFT || a == 0) return a;
    /* A return address follows its call: the call is what lies in the
     * library. The first departure after the stack was interned is the
     * library that was there when it was walked. */
    uintptr_t pc = a - 1;
    if (pc < __atomic_load_n(&lowest, __ATOMIC_RELAXED) || pc >= __atomic_load_n(&highest, __ATOMIC_RELAXED))
        return a;
    uint32_t pick = 0, pick_before = 0;
    for (uint32_t i = 0; i < n; i++) {
        const struct vt_departed *d = &records[i];
        if (pc < d->span.lo || pc >= d->span.hi) continue;
        uint32_t before = __atomic_load_n(&d->before, __ATOMIC_ACQUIRE);
        if (st->id < before && (!pick || before < pick_before)) {
            pick = i + 1;
            pick_before = before;
        }
    }
    /* A library no record remembers left from here after this stack was
     * interned, perhaps before the one picked: which was there is not
     * known. */
    uint32_t no = __atomic_load_n(&noverflow, __ATOMIC_ACQUIRE);
    for (uint32_t i = 0; i < no; i++) {
        const struct overflow *o = &overflow[i];
        if (pc >= __atomic_load_n(&o->lo, __ATOMIC_RELAXED) && pc < __atomic_load_n(&o->hi, __ATOMIC_RELAXED) &&
            st->id < __atomic_load_n(&o->most, __ATOMIC_RELAXED) &&
            (!pick || __atomic_load_n(&o->least, __ATOMIC_RELAXED) < pick_before))
            return a | (uintptr_t)VT_CODE_UNKNOWN << TAG_SHIFT;
    }
    /* Interned while the dlclose that unloaded it ran: see
     * vt_departed_mark. */
    if (pick && st->id >= __atomic_load_n(&records[pick - 1].from, __ATOMIC_RELAXED))
        return a | (uintptr_t)VT_CODE_UNKNOWN << TAG_SHIFT;
    if (pick) return a | (uintptr_t)pick << TAG_SHIFT;
    return a;
}

const struct vt_departed *vt_departed_of(uintptr_t key) {
    if (key >> 63) return NULL;
    uintptr_t i = key >> TAG_SHIFT;
    if (i == 0 || i == VT_CODE_UNKNOWN || i > __atomic_load_n(&vt_departed_count, __ATOMIC_ACQUIRE)) return NULL;
    return &records[i - 1];
}

void vt_departed_reset_child(void) {
    vt_departed_count = 0;
    noverflow = 0;
    full_at = UINT32_MAX;
    lowest = UINTPTR_MAX;
    highest = 0;
}
