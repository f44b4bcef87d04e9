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

/* Keep site i (holding b bytes in c allocations) if it is among the
 * VT_VIEW_SITES largest so far in top[0..*k), largest first (an insertion
 * into a short sorted array). */
static void keep_if_largest(struct vt_holder *top, uint32_t *k, uint32_t i, uint64_t b, uint64_t c) {
    struct vt_holder h = {.stack = i, .bytes = b, .count = c};
    if (*k == VT_VIEW_SITES && vt_holder_order(&h, &top[*k - 1]) >= 0) return;
    uint32_t at = *k < VT_VIEW_SITES ? (*k)++ : *k - 1;
    while (at > 0 && vt_holder_order(&h, &top[at - 1]) < 0) {
        top[at] = top[at - 1];
        at--;
    }
    top[at] = h;
}

int vt_tracker_view(struct vt_view *v) {
    vt_global_lock();
    vt_log_drain();
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
            vt_global_lock();
            vt_log_drain();
            if (i >= vt_stacks.n) break;
        }
        const struct vt_site *st = vt_site_of((uint32_t)i);
        if (st->bytes) keep_if_largest(v->sites, &k, (uint32_t)i, st->bytes, st->count);
    }
    v->nsites = k;
    for (uint32_t i = 0; i < v->nsites; i++) v->stacks[i] = vt_stacks.list[v->sites[i].stack];
    vt_global_unlock();
    return 1;
}
