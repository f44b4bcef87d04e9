/* mappings.h -- the bounded history of virtual-memory mappings: where each
 * VMM handle was mapped (cuMemMap) and until when (cuMemUnmap).
 *
 * The event ring knows a handle's memory by the handle alone (cuMemCreate
 * is its allocation, the end of its memory its free), with no address; a
 * report that places memory at addresses (PyTorch's snapshot) finds the
 * address of a handle freed before the dump here. Each mapping keeps its
 * handle, address, bytes and device, its time and the event ring's write
 * count then (the index, in the whole history of events, of the first
 * event after it), and the same two of its unmap. The write counts are
 * taken with the logs applied, as a step boundary's are (steps.h): every
 * allocation and free made before the call is before the mapping, so a
 * reader matches a mapping to its handle's allocation and free by their
 * order, exactly, even where the driver gave a released handle's value
 * again.
 *
 * The newest VT_MAX_MAPPINGS are kept, oldest overwritten first, in a ring
 * mapped at the first mapping (VT_MAX_MAPPINGS * 64 bytes, 2 MiB; none,
 * and only the count, when mapping failed). Mapping and unmapping are rare
 * (PyTorch's expandable segments map a page of 2 or 20 MiB at a time), so
 * each takes the global lock; the hot path never comes here. Internal to
 * tracker/, but for vt_tracker_map and vt_tracker_unmap (tracker.h). */
#ifndef VT_MAPPINGS_H
#define VT_MAPPINGS_H

#include <stdint.h>

#include "internal.h"

#define VT_MAX_MAPPINGS 32768

/* A mapping of `handle` (of `device`) at [address, address + bytes)
 * counted now. Returns its id (1 and up; what vt_tracker_unmap takes). */
uint64_t vt_mappings_add(uint64_t handle, uint64_t address, uint64_t bytes, int device) VT_HIDDEN;

/* The kept mappings into a snapshot (s->mappings, oldest first, times in
 * nanoseconds with `scale`; s->mappings_total), global lock held; and a
 * forked child's forgotten (the parent's mappings are not its own). */
void vt_mappings_copy(struct vt_snapshot *s, double scale) VT_HIDDEN;
void vt_mappings_reset_child(void) VT_HIDDEN;

#endif
