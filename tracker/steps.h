/* steps.h -- the program's own steps (optimizer steps, or whatever unit of
 * work a program marks with vramtrace_step): a bounded record of their
 * boundaries.
 *
 * A step boundary is a point in the order of operations, like a mark: the
 * logs are applied first, so that every allocation and free made before
 * the call is on the earlier side of it. Each boundary keeps its number
 * (1 and up, counted over the whole run), its time, the event ring's write
 * count then (the index, in the ring's whole history, of the first event
 * after it) and the live device bytes of every device then. The newest
 * VT_MAX_STEPS boundaries are kept, oldest overwritten first, in memory
 * mapped at the first step (none, and only the count, when mapping
 * failed). Everything is under the tracker's global lock. */
#ifndef VT_STEPS_H
#define VT_STEPS_H

#include <stdint.h>

#include "tracker.h"

#define VT_MAX_STEPS 4096

/* Count a step boundary now. Returns its number (1 and up). */
uint64_t vt_tracker_step(void);

/* Internal to tracker/: the kept boundaries into a snapshot (s->steps,
 * oldest first, times in nanoseconds with `scale`; s->steps_total), global
 * lock held; and a forked child's steps forgotten (its events start anew). */
void vt_steps_copy(struct vt_snapshot *s, double scale) __attribute__((visibility("hidden")));
void vt_steps_reset_child(void) __attribute__((visibility("hidden")));

#endif
