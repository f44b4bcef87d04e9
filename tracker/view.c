/* view.c -- the counts as a live view reads them (vt_tracker_view): a
 * small, bounded copy, cheap enough to take a few times a second. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "account.h"
#include "clock.h"
#include "intern.h"
#include "log.h"
#include "steps.h"

/* Sites scanned per hold of the global lock: at 100,000 stacks the scan
 * of them all in one hold (with the holder table it built) held the lock 5
 * ms a round, and every thread whose log filled meanwhile waited for it. */
#define VIEW_CHUNK 4096

/* The VT_VIEW_SITES largest sites so far, kept in a heap whose root is
 * the one that would be listed last (vt_holder_order): a site that comes
 * before it replaces it. O(log k) a site, so that thousands kept over a
 * hundred thousand scanned cost no more than a few of them did. */
static int after(const struct vt_holder *a, const struct vt_holder *b) { return vt_holder_order(a, b) > 0; }

/* Entry i of the heap down to its place; st[] and dm[] (when given) move
 * with it. */
static void sift_down(struct vt_holder *h, const struct vt_stack **st, uint64_t *dm, uint32_t n, uint32_t i) {
    for (;;) {
        uint32_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && after(&h[l], &h[m])) m = l;
        if (r < n && after(&h[r], &h[m])) m = r;
        if (m == i) return;
        struct vt_holder t = h[i];
        h[i] = h[m];
        h[m] = t;
        if (st) {
            const struct vt_stack *x = st[i];
            st[i] = st[m];
            st[m] = x;
            uint64_t y = dm[i];
            dm[i] = dm[m];
            dm[m] = y;
        }
        i = m;
    }
}

static void keep_if_largest(struct vt_holder *heap, uint32_t *k, uint32_t i, uint64_t b, uint64_t c) {
    struct vt_holder h = {.stack = i, .bytes = b, .count = c};
    if (*k < VT_VIEW_SITES) {
        uint32_t at = (*k)++;
        heap[at] = h;
        while (at > 0 && after(&heap[at], &heap[(at - 1) / 2])) {
            struct vt_holder t = heap[at];
            heap[at] = heap[(at - 1) / 2];
            heap[(at - 1) / 2] = t;
            at = (at - 1) / 2;
        }
        return;
    }
    if (vt_holder_order(&h, &heap[0]) >= 0) return;
    heap[0] = h;
    sift_down(heap, NULL, NULL, *k, 0);
}

/* The heap sorted in place, largest first, its stacks with it: the root
 * (the one listed last) goes to the end each time. After the global lock
 * is let go (a qsort of 4,096 under it lengthened every round's hold). */
static void heap_sort(struct vt_holder *h, const struct vt_stack **st, uint64_t *dm, uint32_t n) {
    for (uint32_t end = n; end > 1; end--) {
        struct vt_holder t = h[0];
        h[0] = h[end - 1];
        h[end - 1] = t;
        const struct vt_stack *x = st[0];
        st[0] = st[end - 1];
        st[end - 1] = x;
        uint64_t y = dm[0];
        dm[0] = dm[end - 1];
        dm[end - 1] = y;
        sift_down(h, st, dm, end - 1, 0);
    }
}

int vt_tracker_view(struct vt_view *v) {
    vt_global_lock_applied(1);
    uint64_t stamp = vt_counts.last_applied + (vt_counts.totals.failed_count << 40) + 1;
    uint64_t steps_total = 0;
    struct vt_step none;
    vt_steps_newest(&none, 0, &steps_total, 0);
    if (stamp == v->stamp && steps_total == v->steps_total) {
        vt_global_unlock();
        return 0;
    }
    v->stamp = stamp;
    v->now_ns = vt_now_ns();
    v->totals = vt_counts.totals;
    v->totals.missed = __atomic_load_n(&vt_counts.missed, __ATOMIC_RELAXED);
    v->ndevices = vt_counts.ndevices;
    memcpy(v->devices, vt_counts.devices, (size_t)v->ndevices * sizeof *v->devices);
    for (int d = 0; d < VT_MAX_DEVICES; d++) v->outside[d] = __atomic_load_n(&vt_outside[d], __ATOMIC_RELAXED);
    memcpy(v->kinds, vt_counts.kinds, (size_t)(v->ndevices + 1) * sizeof *v->kinds);
    v->nsteps = vt_steps_newest(v->steps, VT_VIEW_STEPS, &v->steps_total, vt_tick_scale(0));
    /* The top sites, VIEW_CHUNK sites a hold: each site's bytes as they are
     * when its chunk is read, a few milliseconds after the counts above at
     * most (a view, not a snapshot: vt_tracker_snapshot is exact). */
    uint32_t k = 0;
    for (size_t i = 0;; i++) {
        if (i == vt_stacks.n) break;
        if (i && i % VIEW_CHUNK == 0) {
            vt_global_unlock();
            vt_global_let_in();
            vt_global_lock_applied(1);
            if (i >= vt_stacks.n) break;
        }
        const struct vt_site *st = vt_site_of((uint32_t)i);
        if (st->bytes) keep_if_largest(v->sites, &k, (uint32_t)i, st->bytes, st->count);
    }
    v->nsites = k;
    for (uint32_t i = 0; i < v->nsites; i++) {
        v->stacks[i] = vt_stacks.list[v->sites[i].stack];
        v->site_devices[i] = vt_site_devices(vt_site_of(v->sites[i].stack));
    }
    vt_global_unlock();
    heap_sort(v->sites, v->stacks, v->site_devices, k); /* largest first */
    return 1;
}
