/* holders.h -- who holds the memory: live bytes grouped by call site. */
#ifndef VT_HOLDERS_H
#define VT_HOLDERS_H

#include <stddef.h>
#include <stdint.h>

#include "../tracker/tracker.h"

/* Live device allocations (pinned host memory excluded) grouped by stack,
 * largest first (ties: more allocations first, then lower stack id).
 * Returns a malloc'd array and its length in *n; NULL when empty. */
struct vt_holder *vt_holders(const struct vt_snapshot *s, size_t *n);

/* Sort holders largest first (ties: more allocations, then lower stack). */
void vt_sort_holders(struct vt_holder *h, size_t n);

/* Sort the snapshot's live allocations largest first, in place (ties: older
 * first). */
void vt_sort_live(struct vt_snapshot *s);

#endif
