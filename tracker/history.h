/* history.h -- the bounded history of events (a ring) and the records of
 * out-of-memory failures.
 *
 * The ring holds the newest event_capacity events, oldest overwritten
 * first, mapped at the first event (none when the capacity is 0 or the
 * mapping failed). Of the OOM records VT_MAX_OOMS are kept: the first
 * VT_FIRST_OOMS failures, and the newest VT_NEWEST_OOMS after them in a
 * ring, so that the failure that ended a long job (and the ones just
 * before it) is always there; the holders and other processes of the
 * first VT_MAX_OOM_HOLDERS. Every failure is counted by its request
 * (struct vt_oom_request), kept or not. Global lock held for all of it.
 * Internal to tracker/. */
#ifndef VT_HISTORY_H
#define VT_HISTORY_H

#include <stddef.h>
#include <stdint.h>

#include "internal.h"

#define VT_MAX_OOMS 4096
#define VT_NEWEST_OOMS 64
#define VT_FIRST_OOMS (VT_MAX_OOMS - VT_NEWEST_OOMS)
#define VT_MAX_OOM_HOLDERS 64

/* At most this many events are held back while the ring is lent. */
#define VT_SPILL_MAX 131072

struct vt_history {
    struct vt_event *ring;
    size_t cap;       /* entries */
    uint64_t written; /* ever */
    size_t next;      /* written % cap, kept without a division */
    int failed;       /* mapping failed: no history */
    /* While the ring is lent to a snapshot (vt_history_lend), the events
     * of index lent_first .. lent_first + cap - 1 stay where they are: an
     * event that would overwrite one goes to `spill` instead (index
     * lent_first + cap + k in spill[k]), and moves into the ring when the
     * snapshot gives it back. Past VT_SPILL_MAX held back, an event is not
     * kept at all (not counted in `written`): `spill_lost` counts them.
     * `spill` is mapped at its bound the first time it is needed and stays
     * (history.c, spill_map). */
    int lent;
    uint64_t lent_first;
    struct vt_event *spill;
    size_t nspill;
    /* Once given back, the held-back events move into the ring a part at
     * a time (vt_history_return): spill[k] is event spill_first + k, and
     * those below spill_back are done. */
    int returning;
    uint64_t spill_first;
    size_t spill_back;
    uint64_t spill_lost;
    /* spill_lost's events over the run, once each lending is over: not
     * for lack of memory (records_lost), but because more came while a
     * snapshot read the ring than its bound holds back. */
    uint64_t read_lost;
    /* Failure number n (1 and up) is in ooms[n - 1] up to VT_FIRST_OOMS,
     * later ones in the ring after them (oom_slot). */
    struct vt_oom ooms[VT_MAX_OOMS];
    size_t nooms;          /* slots in use */
    uint64_t failures;     /* numbers handed out */
    struct vt_oom_request requests[VT_OOM_REQUESTS];
    size_t nrequests;
    size_t request_hint;   /* the entry the last failure counted in */
    uint64_t requests_other; /* failures of requests past the table */
};
extern struct vt_history vt_history VT_HIDDEN;

/* Map the ring; 0 when there is none. */
int vt_history_map(void) VT_HIDDEN;

/* The entry for an event that would overwrite one the ring's borrower
 * reads: one held back, or NULL (the event is not kept). */
struct vt_event *vt_history_spill(void) VT_HIDDEN;

/* The ring's next entry, or NULL. */
static inline struct vt_event *ring_add(void) {
    if (__builtin_expect(vt_history.ring == NULL, 0) && !vt_history_map()) {
        /* VRAMTRACE_EVENTS=0 keeps no history: every event is dropped, and
         * counted so (the dump's events_dropped) as with any ring size. */
        if (vt_history.cap == 0) vt_history.written++;
        return NULL;
    }
    if (__builtin_expect(vt_history.lent, 0) && vt_history.written >= vt_history.lent_first + vt_history.cap)
        return vt_history_spill();
    struct vt_event *e = &vt_history.ring[vt_history.next];
    if (++vt_history.next == vt_history.cap) vt_history.next = 0;
    vt_history.written++;
    return e;
}

/* The ring's size, from VRAMTRACE_EVENTS; kept once the ring is mapped. */
void vt_history_init(size_t event_capacity) VT_HIDDEN;

/* The history into a snapshot: its OOMs copied, times converted to
 * nanoseconds with `scale`, and its events lent in place (s->ring: read
 * through vt_event_at, never copied) when the ring is not lent already,
 * else copied into s->events (oldest first, times converted). */
void vt_history_copy(struct vt_snapshot *s, double scale) VT_HIDDEN;

/* Give back the ring a snapshot borrowed: from now on new events go into
 * it, and the events held back meanwhile are still to move into it
 * (vt_history_return). Global lock held. */
void vt_history_give_back(struct vt_snapshot *s) VT_HIDDEN;

/* Move up to `most` of the events held back into the ring (one newer
 * event written at its place already makes it moot); 1 when none is left.
 * In parts, the global lock let go between them: the 131,072 events a
 * lent ring may hold back, 4 MiB, moved at once kept every thread whose
 * log filled waiting for milliseconds. Reading or lending the ring again
 * moves the rest first. Global lock held. */
#define VT_RETURN_STEP 8192
int vt_history_return(size_t most) VT_HIDDEN;

/* In a forked child: no events, no OOM records. */
void vt_history_reset_child(void) VT_HIDDEN;

#endif
