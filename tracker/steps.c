/* steps.c -- the ring of step boundaries (steps.h). */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "../common/warn.h"
#include "account.h"
#include "clock.h"
#include "history.h"
#include "log.h"
#include "ringmap.h"
#include "steps.h"

static struct {
    struct vt_step *ring;  /* VT_MAX_STEPS entries, mapped at the first step */
    uint64_t total;        /* boundaries ever counted */
    int failed;            /* mapping failed: the count only */
} steps;

/* The ring, mapped at the first use; NULL when that failed. Global lock
 * held. */
static struct vt_step *ring(void) {
    if (!steps.ring && !steps.failed)
        steps.ring = vt_ring_map(VT_MAX_STEPS * sizeof *steps.ring, &steps.failed, "the step boundaries");
    return steps.ring;
}

uint64_t vt_tracker_step(void) {
    /* Every op logged before this call is applied, and so in the ring,
     * before the write count is read. */
    vt_global_lock_applied(0);
    uint64_t n = ++steps.total;
    struct vt_step *r = ring();
    if (r) {
        struct vt_step *x = &r[(n - 1) % VT_MAX_STEPS];
        uint64_t now = vt_ticks();
        /* Never before an event already applied (a late log's stamp is
         * made no older than what was applied, as in vt_tracker_failed). */
        if (now < vt_counts.last_applied) now = vt_counts.last_applied;
        x->step = n;
        x->time_ns = now;
        x->event = vt_history.written;
        x->ndevices = vt_counts.ndevices;
        for (int d = 0; d < VT_MAX_DEVICES; d++)
            x->live_bytes[d] = d < vt_counts.ndevices ? vt_counts.devices[d].live_bytes : 0;
    }
    vt_global_unlock();
    return n;
}

void vt_steps_copy(struct vt_snapshot *s, double scale) {
    s->steps_total = steps.total;
    uint64_t kept = steps.total < VT_MAX_STEPS ? steps.total : VT_MAX_STEPS;
    if (!steps.ring || kept == 0) return;
    s->steps = malloc(kept * sizeof *s->steps);
    if (!s->steps) {
        vt_records_lost("a snapshot's step boundaries");
        return;
    }
    uint64_t first = steps.total - kept;
    for (uint64_t i = 0; i < kept; i++) {
        s->steps[i] = steps.ring[(first + i) % VT_MAX_STEPS];
        s->steps[i].time_ns = vt_ticks_to_ns(s->steps[i].time_ns, scale);
    }
    s->nsteps = (size_t)kept;
}

uint32_t vt_steps_newest(struct vt_step *out, uint32_t max, uint64_t *total, double scale) {
    *total = steps.total;
    uint64_t kept = steps.total < VT_MAX_STEPS ? steps.total : VT_MAX_STEPS;
    if (!steps.ring) return 0;
    if (kept > max) kept = max;
    for (uint64_t i = 0; i < kept; i++) {
        out[i] = steps.ring[(steps.total - kept + i) % VT_MAX_STEPS];
        out[i].time_ns = vt_ticks_to_ns(out[i].time_ns, scale);
    }
    return (uint32_t)kept;
}

void vt_steps_reset_child(void) { steps.total = 0; }
