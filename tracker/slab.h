/* slab.h -- memory a thread carves from slabs of its own, not a malloc
 * each: the tracker's records (recslab.h) and its stacks' nodes
 * (intern.c).
 *
 * A small block malloc'd one by one from a thread's arena grows the
 * arena's heap a page at a time: an mprotect each, which takes the address
 * space's lock as a writer, and every page fault of every thread of the
 * process waits behind it (256 threads keeping 10,000 allocations each
 * made 52,000 of them, and the hooked calls that took over 1 ms waited
 * there). A slab is one malloc: its heap grows once for it. A thread's
 * slabs double from `first` bytes to `most` (a short-lived thread leaves
 * at most `first` unused), or are as large as one carving needs. Nothing
 * carved is given back one by one; every slab of a kind stays on the
 * kind's list, so that a leak checker finds it reachable. Internal to
 * tracker/. */
#ifndef VT_SLAB_H
#define VT_SLAB_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"

struct vt_slab_head;

/* A kind of thing carved: every slab made for it, newest first, under
 * `lock`; and the sizes of a thread's first slab and of its largest. */
struct vt_slab_kind {
    struct vt_slab_head *list;
    pthread_mutex_t lock;
    uint32_t first, most;
};
#define VT_SLAB_KIND(first_bytes, most_bytes) {NULL, PTHREAD_MUTEX_INITIALIZER, (first_bytes), (most_bytes)}

/* A thread's place in its slab of one kind (thread-local): the next byte
 * to carve, how many are left, and the size of its next slab (0: `first`). */
struct vt_slab_cursor {
    char *next;
    uint32_t left, bytes;
};

/* A new slab for cursor `c` with room for `need` bytes, the rest of the
 * old one left unused: 1, or 0 when out of memory (the cursor unchanged). */
int vt_slab_refill(struct vt_slab_kind *k, struct vt_slab_cursor *c, size_t need) VT_HIDDEN;

/* `bytes` (a multiple of 8) carved from the thread's slab, a new slab made
 * first when this one has not room; NULL when out of memory. */
static inline void *vt_slab_carve(struct vt_slab_kind *k, struct vt_slab_cursor *c, size_t bytes) {
    if (c->left < bytes && !vt_slab_refill(k, c, bytes)) return NULL;
    void *p = c->next;
    c->next += bytes;
    c->left -= (uint32_t)bytes;
    return p;
}

/* The kind's list's lock, for fork: taken with the tracker's other locks
 * (vt_tracker_lock_all), so that a child finds the list whole. */
static inline void vt_slab_lock(struct vt_slab_kind *k) { pthread_mutex_lock(&k->lock); }
static inline void vt_slab_unlock(struct vt_slab_kind *k) { pthread_mutex_unlock(&k->lock); }

#endif
