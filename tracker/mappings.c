/* mappings.c -- the ring of VMM mappings (mappings.h). */
#define _GNU_SOURCE
#include <stdlib.h>
#include <sys/mman.h>

#include "../common/warn.h"
#include "account.h"
#include "clock.h"
#include "history.h"
#include "log.h"
#include "mappings.h"
#include "ringmap.h"

static struct {
    struct vt_mapping *ring; /* VT_MAX_MAPPINGS entries, mapped at the first mapping */
    uint64_t total;          /* mappings ever counted: the newest one's id */
    int failed;              /* mapping failed: the count only */
} maps;

/* The ring, mapped at the first use; NULL when that failed. Global lock
 * held. */
static struct vt_mapping *ring(void) {
    if (!maps.ring && !maps.failed)
        maps.ring = vt_ring_map(VT_MAX_MAPPINGS * sizeof *maps.ring, &maps.failed, "the history of VMM mappings");
    return maps.ring;
}

/* The present as the history sees it, global lock held: every op logged
 * before now applied, so that the event ring's write count puts each of
 * them before this point; its time never before an event already applied
 * (a late log's stamp is made no older than what was applied). */
static void now(uint64_t *ticks, uint64_t *event) {
    vt_log_drain();
    uint64_t t = vt_ticks();
    *ticks = t < vt_counts.last_applied ? vt_counts.last_applied : t;
    *event = vt_history.written;
}

uint64_t vt_mappings_add(uint64_t handle, uint64_t address, uint64_t bytes, int device) {
    vt_global_lock_applied(0); /* most of now()'s applying, in steps */
    uint64_t id = ++maps.total;
    struct vt_mapping *r = ring();
    if (r) {
        struct vt_mapping *m = &r[(id - 1) % VT_MAX_MAPPINGS];
        *m = (struct vt_mapping){.handle = handle, .address = address, .bytes = bytes, .device = (int16_t)device};
        now(&m->time_ns, &m->event);
    }
    vt_global_unlock();
    return id;
}

void vt_tracker_unmap(uint64_t id) {
    if (id == 0) return;
    vt_global_lock_applied(0);
    /* Still in the ring: not one of the VT_MAX_MAPPINGS made since. */
    if (maps.ring && id <= maps.total && maps.total - id < VT_MAX_MAPPINGS) {
        struct vt_mapping *m = &maps.ring[(id - 1) % VT_MAX_MAPPINGS];
        if (!m->unmapped) {
            now(&m->unmap_ns, &m->unmap_event);
            m->unmapped = 1;
        }
    }
    vt_global_unlock();
}

void vt_mappings_copy(struct vt_snapshot *s, double scale) {
    s->mappings_total = maps.total;
    uint64_t kept = maps.total < VT_MAX_MAPPINGS ? maps.total : VT_MAX_MAPPINGS;
    if (!maps.ring || kept == 0) return;
    s->mappings = malloc(kept * sizeof *s->mappings);
    if (!s->mappings) {
        vt_records_lost("a snapshot's VMM mappings");
        return;
    }
    uint64_t first = maps.total - kept;
    for (uint64_t i = 0; i < kept; i++) {
        struct vt_mapping *m = &s->mappings[i];
        *m = maps.ring[(first + i) % VT_MAX_MAPPINGS];
        m->time_ns = vt_ticks_to_ns(m->time_ns, scale);
        if (m->unmapped) m->unmap_ns = vt_ticks_to_ns(m->unmap_ns, scale);
    }
    s->nmappings = (size_t)kept;
}

void vt_mappings_reset_child(void) { maps.total = 0; }
