/* recslab.h -- where new records come from: slabs a thread carves them
 * from, not a malloc each.
 *
 * A record is 72 bytes; from malloc it took an 80-byte chunk, and every
 * 56 of them the arena's heap grew by a page (slab.h says what that costs).
 * Records are never given back one by one (the depot keeps them all,
 * slot.h). Internal to tracker/. */
#ifndef VT_RECSLAB_H
#define VT_RECSLAB_H

#include <stdint.h>

#include "table.h"

/* A new record of this thread's slab, or NULL when out of memory. */
struct vt_rec *vt_rec_carve(void) VT_HIDDEN;

/* How many records have been carved so far, and how many this thread's
 * slab has left (for the tests). */
uint64_t vt_rec_made(void) VT_HIDDEN;
unsigned vt_rec_slab_left(void) VT_HIDDEN;

/* The slabs' list's lock, for fork: taken with the depot's
 * (vt_tracker_lock_all), so that a child finds the list whole. */
void vt_rec_slabs_lock(void) VT_HIDDEN;
void vt_rec_slabs_unlock(void) VT_HIDDEN;

#endif
