/* internal.h -- what the tracker's files share, and no one else sees.
 *
 * The tracker's one global lock (held to change the counts, the interned
 * stacks, the history and the OOM records, never by a hooked call that
 * only adds to its own thread's log) and the calling thread's id. Every
 * name here is hidden from the library's exports. */
#ifndef VT_TRACKER_INTERNAL_H
#define VT_TRACKER_INTERNAL_H

#include <pthread.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tracker.h"

#define VT_HIDDEN __attribute__((visibility("hidden")))

/* Adaptive: the critical sections are short, so a waiter spins a little
 * before it sleeps instead of paying for a futex round-trip. */
extern pthread_mutex_t vt_tracker_lock VT_HIDDEN;

extern __thread int32_t vt_my_tid __attribute__((tls_model("initial-exec"), visibility("hidden")));

/* The calling thread's kernel id, asked once per thread (and again in a
 * forked child, which clears it). */
static inline int32_t vt_thread_id(void) {
    if (vt_my_tid == 0) vt_my_tid = (int32_t)syscall(SYS_gettid);
    return vt_my_tid;
}

#endif
