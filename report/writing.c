/* writing.c -- the outputs' bytes written, and their end (writing.h). */
#include <errno.h>

#include "writing.h"

/* A line of their own: every write of every output adds to the count. */
static struct __attribute__((aligned(64))) {
    uint64_t bytes;
    int abandoned;
} writing;

void vt_writing_count(uint64_t n) { __atomic_add_fetch(&writing.bytes, n, __ATOMIC_RELAXED); }

uint64_t vt_writing_bytes(void) { return __atomic_load_n(&writing.bytes, __ATOMIC_RELAXED); }

void vt_writing_abandon(void) { __atomic_store_n(&writing.abandoned, 1, __ATOMIC_RELEASE); }

int vt_writing_abandoned(void) { return __atomic_load_n(&writing.abandoned, __ATOMIC_ACQUIRE); }

ssize_t vt_writing_refused(void) {
    errno = EPIPE;
    return -1;
}

void vt_writing_reset_child(void) { writing.abandoned = 0; }
