/* tblock.c -- a thread's large blocks, from mappings of vramtrace's own
 * (tblock.h). */
#include <sys/mman.h>
#include <unistd.h>

#include "tblock.h"

/* A new mapping of k's blocks, or NULL. Made without the lock where it can
 * be: an mmap waits for the address space's lock, and 64 threads' first
 * calls waited behind a taker mapping under the kind's lock. */
static char *map_blocks(struct vt_tblock_kind *k) {
    size_t bytes = k->size * k->per_map;
    char *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) return NULL;
    madvise(m, bytes, MADV_NOHUGEPAGE); /* a page's fault at a time, as it is used */
    if (k->root) k->root(m, bytes);
    return m;
}

void *vt_tblock_take(struct vt_tblock_kind *k) {
    pthread_mutex_lock(&k->lock);
    void *p = k->free;
    if (p) {
        k->free = *(void **)p;
        pthread_mutex_unlock(&k->lock);
        return p;
    }
    if (k->next == k->end && k->spare) { /* the mapping made ahead */
        k->next = k->spare;
        k->end = k->spare + k->size * k->per_map;
        k->spare = NULL;
    }
    if (k->next == k->end) { /* none made ahead: made now, under the lock */
        char *m = map_blocks(k);
        if (m) {
            k->next = m;
            k->end = m + k->size * k->per_map;
        }
    }
    if (k->next != k->end) {
        p = k->next;
        k->next += k->size;
    }
    /* A quarter of the mapping left: the next one is made now, by this
     * taker, out of the lock, while the others go on taking; unless
     * another taker of this process is at it (`mapping` set by another
     * process is a forked child's copy of its parent's: no one in the
     * child is making that one). */
    int ahead = 0;
    if (!k->spare && (size_t)(k->end - k->next) < k->size * (k->per_map / 4)) {
        pid_t me = getpid();
        if (k->mapping != me) {
            k->mapping = me;
            ahead = 1;
        }
    }
    pthread_mutex_unlock(&k->lock);
    if (ahead) {
        char *m = map_blocks(k);
        pthread_mutex_lock(&k->lock);
        k->spare = m;
        k->mapping = 0;
        pthread_mutex_unlock(&k->lock);
    }
    return p;
}

void vt_tblock_give(struct vt_tblock_kind *k, void *p) {
    pthread_mutex_lock(&k->lock);
    *(void **)p = k->free;
    k->free = p;
    pthread_mutex_unlock(&k->lock);
}
