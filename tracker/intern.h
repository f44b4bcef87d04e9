/* intern.h -- interned stacks: one id per distinct stack, for the process's
 * life, and the one "same stack as last time?" memo.
 *
 * A stack (its frames, innermost first) is interned once under the global
 * lock and gets the next id; ids are never reused and a stack's frames are
 * never freed while the process runs (a forked child starts anew). Each
 * stack carries the counters accounting keeps for its call site, so an op
 * finds them from its stack id with one load. Internal to tracker/. */
#ifndef VT_INTERN_H
#define VT_INTERN_H

#include <stddef.h>
#include <stdint.h>

#include "internal.h"

/* What one call site holds now, and what it held at the last peak of the
 * process's device bytes. `bytes` and `count` are the process's own device
 * memory; `other_*` the rest (pinned host, imported), which the leak
 * report groups with it. The peak values are kept lazily (memray's
 * high-water-mark scheme): `hwm_*` is valid only while `hwm_gen` equals
 * the counts' peak_gen; otherwise the site has not changed since the last
 * peak and its current values are the ones at the peak (account.h).
 * `dev` says which device its live device memory is on (account.c's
 * vt_site_device): the device + 2 (1: memory of no known device), 0 while
 * none is live, VT_SITE_MIXED while it is on several, and then `split`
 * has its bytes and count by device (NULL when it could not be made). */
struct vt_site_split;
struct vt_site {
    uint64_t bytes, count;
    uint64_t other_bytes, other_count;
    uint64_t hwm_bytes, hwm_count;
    uint64_t hwm_gen;
    struct vt_site_split *split;
    uint16_t dev;
};
#define VT_SITE_MIXED UINT16_MAX

/* Every interned stack, by id. Global lock held to read or write. */
struct vt_stacks {
    const struct vt_stack **list; /* by id */
    size_t n, cap;
};
extern struct vt_stacks vt_stacks VT_HIDDEN;

/* The site of stack `id`, or NULL for an id never handed out. Global lock
 * held. The node's public part (struct vt_stack) is what the list holds;
 * the site sits just before it. */
static inline struct vt_site *vt_site_of(uint32_t id) {
    if (id >= vt_stacks.n) return NULL;
    return (struct vt_site *)((char *)vt_stacks.list[id] - sizeof(struct vt_site));
}

/* The depth clamped to 0..VT_MAX_FRAMES, before the lock is taken.
 * Returns 0: vt_intern hashes the frames itself and ignores its `hash`. */
uint32_t vt_intern_hash(const uintptr_t *frames, int *depth) VT_HIDDEN;

/* The id of this stack, added if it is new; UINT32_MAX when out of memory
 * (counted as a stack lost). Global lock held. */
uint32_t vt_intern(const uintptr_t *frames, int depth, uint32_t hash) VT_HIDDEN;

/* The id of this stack if it is interned, else UINT32_MAX; without the
 * lock (the look-up vt_tracker_stack_id makes first). */
uint32_t vt_intern_lookup(const uintptr_t *frames, int depth) VT_HIDDEN;

/* The most indexes of an outgrown table's array that one vt_intern call
 * moves into the new table (so the most stacks it moves). */
#define VT_INTERN_STEP 8

/* How the table's growth has gone since the start (or the last fork).
 * `moved_last`: the stacks the last vt_intern that added a stack moved;
 * `moved_most`: the most any one call moved; `growths`: tables made;
 * `moving`: a move under way now; `cap`: the current table's entries;
 * `giving_back`: an outgrown array's pages still being given back. */
struct vt_intern_stats {
    size_t moved_last, moved_most, growths, cap;
    int moving, giving_back;
};

/* The figures above, for tests and benchmarks. Global lock held. */
void vt_intern_stats(struct vt_intern_stats *out) VT_HIDDEN;

/* The bytes left in this thread's slab of nodes (for the tests). */
unsigned vt_intern_slab_left(void) VT_HIDDEN;

/* The nodes' slabs' list's lock, for fork (vt_tracker_lock_all). */
void vt_intern_slabs_lock(void) VT_HIDDEN;
void vt_intern_slabs_unlock(void) VT_HIDDEN;

/* In a forked child: every stack forgotten, and with them this thread's
 * memo. */
void vt_intern_reset_child(void) VT_HIDDEN;

#endif
