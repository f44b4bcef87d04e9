/* history.h -- the bounded history of events (a ring) and the records of
 * out-of-memory failures.
 *
 * The ring holds the newest event_capacity events, oldest overwritten
 * first, mapped at the first event (none when the capacity is 0 or the
 * mapping failed). OOM records are kept, the first VT_MAX_OOMS of them,
 * with the holders and other processes of the first VT_MAX_OOM_HOLDERS.
 * Global lock held for all of it. Internal to tracker/. */
#ifndef VT_HISTORY_H
#define VT_HISTORY_H

#include <stddef.h>
#include <stdint.h>

#include "internal.h"

#define VT_MAX_OOMS 4096
#define VT_MAX_OOM_HOLDERS 64

struct vt_history {
    struct vt_event *ring;
    size_t cap;       /* entries */
    uint64_t written; /* ever */
    size_t next;      /* written % cap, kept without a division */
    int failed;       /* mapping failed: no history */
    struct vt_oom ooms[VT_MAX_OOMS];
    size_t nooms;
};
extern struct vt_history vt_history VT_HIDDEN;

/* Map the ring; 0 when there is none. */
int vt_history_map(void) VT_HIDDEN;

/* The ring's next entry, or NULL. */
static inline struct vt_event *ring_add(void) {
    if (__builtin_expect(vt_history.ring == NULL, 0) && !vt_history_map()) return NULL;
    struct vt_event *e = &vt_history.ring[vt_history.next];
    if (++vt_history.next == vt_history.cap) vt_history.next = 0;
    vt_history.written++;
    return e;
}

/* The ring's size, from VRAMTRACE_EVENTS; kept once the ring is mapped. */
void vt_history_init(size_t event_capacity) VT_HIDDEN;

/* Copy the history into a snapshot (its events oldest first, its OOMs),
 * times converted to nanoseconds with `scale`. */
void vt_history_copy(struct vt_snapshot *s, double scale) VT_HIDDEN;

/* In a forked child: no events, no OOM records. */
void vt_history_reset_child(void) VT_HIDDEN;

#endif
