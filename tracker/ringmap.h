/* ringmap.h -- a fixed ring of records mapped at its first use (the step
 * boundaries', the VMM mappings'): only the pages touched take memory. */
#ifndef VT_RINGMAP_H
#define VT_RINGMAP_H

#include <stddef.h>
#include <sys/mman.h>

#include "../common/warn.h"

/* A ring of `bytes`, mapped; NULL, with *failed set and `what` counted
 * lost, when that failed (the caller asks no more). Global lock held. */
static inline void *vt_ring_map(size_t bytes, int *failed, const char *what) {
    void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m != MAP_FAILED) return m;
    *failed = 1;
    vt_records_lost(what);
    return NULL;
}

#endif
