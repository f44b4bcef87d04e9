/* tblock.h -- the large blocks a thread takes at its first call (the
 * walker's cache, its slot), from mappings of vramtrace's own.
 *
 * malloc gave each from the thread's arena, which 256 threads on 2 CPUs
 * share 16 to an arena: the arena's heap grew for each (an mprotect under
 * the arena's lock), and a holder preempted, or waiting for the address
 * space's lock, kept every thread of its arena waiting: runs in which most
 * of 256 first calls slept over 1 ms, all on one arena's lock
 * (docs/performance.md). A kind's blocks are carved from mappings of
 * `per_map` blocks each (address space: their pages are written only as
 * they are used), never unmapped; the next mapping is made ahead, out of
 * the lock, once a quarter of the current one is left. A block given back
 * goes on the kind's list for the next thread. A fresh block reads as zeros; one given
 * back holds what its last thread left. Internal to tracker/. */
#ifndef VT_TBLOCK_H
#define VT_TBLOCK_H

#include <pthread.h>
#include <stddef.h>
#include <sys/types.h>

#include "internal.h"

/* A kind: its blocks' size (a multiple of 64), how many a mapping holds,
 * and, where its blocks hold pointers to heap blocks, the function that
 * shows a new mapping to LeakSanitizer (vt_lsan_root; NULL: none). */
struct vt_tblock_kind {
    size_t size;
    unsigned per_map;
    void (*root)(const void *p, size_t bytes);
    pthread_mutex_t lock;
    void *free;       /* blocks given back, each one's first word the next */
    char *next, *end; /* the newest mapping's blocks not yet taken */
    char *spare;      /* the next mapping, made ahead (NULL: none yet) */
    pid_t mapping;    /* the process whose taker is making it (0: none; a
                       * forked child's copy names the parent's) */
};
#define VT_TBLOCK_KIND(bytes, per, root_fn) \
    {(((bytes) + 63) & ~(size_t)63), (per), (root_fn), PTHREAD_MUTEX_INITIALIZER, NULL, NULL, NULL, NULL, 0}

/* A block: one given back if there is one, else a fresh one; NULL when no
 * memory could be mapped. */
void *vt_tblock_take(struct vt_tblock_kind *k) VT_HIDDEN;

/* Block p, taken from k, back on k's list. */
void vt_tblock_give(struct vt_tblock_kind *k, void *p) VT_HIDDEN;

/* The kind's lock, for fork: held across it, so that a child finds the
 * list whole. */
static inline void vt_tblock_lock(struct vt_tblock_kind *k) { pthread_mutex_lock(&k->lock); }
static inline void vt_tblock_unlock(struct vt_tblock_kind *k) { pthread_mutex_unlock(&k->lock); }

#endif
