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

#define TAG_SHIFT 48

static int same_code(const struct vt_code_span *a, const struct vt_code_span *b) {
    return a->lo == b->lo && a->hi == b->hi && a->base == b->base && a->build_id_len == b->build_id_len &&
           memcmp(a->build_id, b->build_id, a->build_id_len) == 0 && strcmp(a->path, b->path) == 0;
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

void vt_departed_note(const struct vt_code_span *gone, size_t n) {
    vt_global_lock();
    uint32_t before = vt_stacks.n > UINT32_MAX ? UINT32_MAX : (uint32_t)vt_stacks.n;
    uint32_t have = vt_departed_count;
    for (size_t i = 0; i < n; i++) {
        if (gone[i].lo >= gone[i].hi || gone[i].hi >> TAG_SHIFT) continue;
        /* The same library leaving the same place again (a plugin loaded
         * and unloaded in a loop): its one record covers both stays. */
        struct vt_departed *last = latest_over(&gone[i], have);
        if (last && same_code(&last->span, &gone[i])) {
            __atomic_store_n(&last->before, before, __ATOMIC_RELEASE);
            continue;
        }
        if (have == VT_MAX_DEPARTED) continue;
        char *path = strdup(gone[i].path ? gone[i].path : "");
        if (!path) continue;
        struct vt_departed *d = &records[have];
        d->span = gone[i];
        d->span.path = path;
        d->before = before;
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
    uint32_t pick = 0, pick_before = 0;
    for (uint32_t i = 0; i < n; i++) {
        const struct vt_departed *d = &records[i];
        uint32_t before = __atomic_load_n(&d->before, __ATOMIC_ACQUIRE);
        if (st->id < before && pc >= d->span.lo && pc < d->span.hi && (!pick || before < pick_before)) {
            pick = i + 1;
            pick_before = before;
        }
    }
    return pick ? a | (uintptr_t)pick << TAG_SHIFT : a;
}

const struct vt_departed *vt_departed_of(uintptr_t key) {
    if (key >> 63) return NULL;
    uintptr_t i = key >> TAG_SHIFT;
    if (i == 0 || i > __atomic_load_n(&vt_departed_count, __ATOMIC_ACQUIRE)) return NULL;
    return &records[i - 1];
}

void vt_departed_reset_child(void) { vt_departed_count = 0; }
