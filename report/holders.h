/* holders.h -- who holds the memory: the tracker's per-site counters as a
 * snapshot carries them, by stack and merged by call site. */
#ifndef VT_HOLDERS_H
#define VT_HOLDERS_H

#include <stddef.h>
#include <stdint.h>

#include "../tracker/tracker.h"
#include "symbolize.h"

/* Live device allocations (pinned host memory excluded) grouped by stack,
 * largest first (ties: more allocations first, then lower stack id): a
 * copy of the snapshot's holders, which the tracker's counters made at the
 * point its live list was copied (they sum to that list exactly). Returns
 * a malloc'd array and its length in *n; NULL when empty. */
struct vt_holder *vt_holders(const struct vt_snapshot *s, size_t *n);

/* The same of every kind of memory (device_only 0: what the leak check
 * counts; the snapshot's all_holders) or of device memory only (1:
 * vt_holders). An allocation whose stack is not among the snapshot's (it
 * could not be kept) is in no group. */
struct vt_holder *vt_holders_of(const struct vt_snapshot *s, int device_only, size_t *n);

/* The holders of device `device`'s memory alone, by stack, largest first,
 * from the snapshot's live list (the tracker's counters are by stack over
 * every device): what a device's out-of-memory failure is about when the
 * process holds memory on other devices too. Returns a malloc'd array and
 * its length in *n; NULL when none (or memory ran out). */
struct vt_holder *vt_holders_on_device(const struct vt_snapshot *s, int device, size_t *n);

/* The same of pinned host memory (vt_kind_is_host): what a failure of
 * pinned host memory is about. */
struct vt_holder *vt_holders_of_host(const struct vt_snapshot *s, size_t *n);

/* Whether the snapshot holds live device memory on a device other than
 * `device`. */
int vt_other_devices_hold(const struct vt_snapshot *s, int device);

/* Holders h[0..n) (by stack) merged by call site: the stacks of one
 * vt_site_groups group are one row, their bytes and counts summed, as a
 * report's "by call site" table shows them (a Python line reached through
 * many native stacks, a function called from many places). A row's stack
 * is the stack of its largest holder (ties: the lower stack id); its label
 * is the row's. Without symbols each holder is its own row. Sorted by
 * common/labels.h's vt_rank_order, as the CLI sorts its rows. Returns a malloc'd array and its length in *nout;
 * NULL when n is 0 or memory ran out. */
struct vt_holder *vt_holders_by_site(const struct vt_holder *h, size_t n, const struct vt_symbols *sym,
                                     size_t *nout);

/* Holders h[0..n) (by stack, largest first) less the failing request's
 * own handles (o->taken_count of them, o->taken_bytes, made at o->stack
 * before it failed: tracker/handlerun.h), taken from the holder of that
 * stack, largest first again: not memory the program holds. Returns a
 * malloc'd array and its length in *nout (NULL when none is left or
 * memory ran out); a copy of h when o took none. */
struct vt_holder *vt_holders_less_taken(const struct vt_holder *h, size_t n, const struct vt_oom *o, size_t *nout);

/* Sort the snapshot's live allocations largest first, in place (ties: older
 * first). */
void vt_sort_live(struct vt_snapshot *s);

#endif
