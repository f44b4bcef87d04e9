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

/* Keep the VT_VIEW_SITES largest of n holders in top[], largest first (an
 * insertion into a short sorted array: n is large, the top is small). */
static uint32_t keep_largest(const struct vt_holder *h, uint32_t n, struct vt_holder *top) {
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (h[i].bytes == 0) continue;
        if (k == VT_VIEW_SITES && vt_holder_order(&h[i], &top[k - 1]) >= 0) continue;
        uint32_t at = k < VT_VIEW_SITES ? k++ : k - 1;
        while (at > 0 && vt_holder_order(&h[i], &top[at - 1]) < 0) {
            top[at] = top[at - 1];
            at--;
        }
        top[at] = h[i];
    }
    return k;
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
    v->nsteps = vt_steps_newest(v->steps, VT_VIEW_STEPS, &v->steps_total, vt_tick_scale(v->now_ns));
    uint32_t n = 0;
    struct vt_holder *h = vt_account_holders(&n, 0);
    v->nsites = h ? keep_largest(h, n, v->sites) : 0;
    for (uint32_t i = 0; i < v->nsites; i++) v->stacks[i] = vt_stacks.list[v->sites[i].stack];
    vt_global_unlock();
    free(h);
    return 1;
}
