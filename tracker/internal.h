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

#include "lockprobe.h"
#include "tracker.h"

#define VT_HIDDEN __attribute__((visibility("hidden")))

/* Fetch the line at p for writing (its other cores' copies given up
 * now, not when the store that needs it waits). GCC's write prefetch is a
 * plain read prefetch unless built for a CPU with PREFETCHW, so the
 * instruction is asked for here: x86 CPUs without it take its encoding as
 * a no-op. Never faults. */
static inline __attribute__((always_inline)) void vt_prefetch_w(const void *p) {
#if defined(__x86_64__)
    __asm__ volatile("prefetchw %0" : : "m"(*(const char *)p));
#else
    __builtin_prefetch(p, 1);
#endif
}

/* Adaptive: the critical sections are short, so a waiter spins a little
 * before it sleeps instead of paying for a futex round-trip. */
extern pthread_mutex_t vt_tracker_lock VT_HIDDEN;

/* The global lock taken and given through these (lockprobe.h times the
 * holds in a probe build; elsewhere they are the mutex's calls). */
extern uint64_t vt_global_since VT_HIDDEN;
extern const char *vt_global_where VT_HIDDEN;
/* Threads waiting for the global lock in vt_global_lock (atomic). */
extern int vt_global_wanted VT_HIDDEN;
void vt_global_lock_slow(void) VT_HIDDEN;
static inline void vt_global_lock(void) {
    if (__builtin_expect(pthread_mutex_trylock(&vt_tracker_lock) != 0, 0)) vt_global_lock_slow();
    VT_PROBE_TAKEN(VT_PROBE_GLOBAL, vt_global_since, vt_global_where);
}
static inline int vt_global_trylock(void) {
    int r = pthread_mutex_trylock(&vt_tracker_lock);
    if (r == 0) VT_PROBE_TAKEN(VT_PROBE_GLOBAL, vt_global_since, vt_global_where);
    return r;
}
static inline int vt_global_timedlock(const struct timespec *until) {
    int r = pthread_mutex_timedlock(&vt_tracker_lock, until);
    if (r == 0) VT_PROBE_TAKEN(VT_PROBE_GLOBAL, vt_global_since, vt_global_where);
    return r;
}
static inline void vt_global_unlock(void) {
    VT_PROBE_GIVEN(VT_PROBE_GLOBAL, vt_global_since, vt_global_where);
    pthread_mutex_unlock(&vt_tracker_lock);
}
/* After vt_global_unlock, in a loop that takes the lock again at once (a
 * copy a chunk at a time): a thread waiting for it is let in first (for
 * 200 us at most), as vt_slot_hand_over does for a slot. Without it the
 * mutex's unlock and lock again a few instructions later kept a waiter
 * out for the whole copy. */
void vt_global_let_in(void) VT_HIDDEN;

#ifdef VT_LOCK_PROBE /* each take known by its file and line (lockprobe.h) */
#define vt_global_lock() VT_PROBE_AT(vt_global_lock())
#define vt_global_trylock() VT_PROBE_AT(vt_global_trylock())
#define vt_global_timedlock(until) VT_PROBE_AT(vt_global_timedlock(until))
#endif

extern __thread int32_t vt_my_tid __attribute__((tls_model("initial-exec"), visibility("hidden")));

/* The calling thread's kernel id, asked once per thread (and again in a
 * forked child, which clears it). */
static inline int32_t vt_thread_id(void) {
    if (vt_my_tid == 0) vt_my_tid = (int32_t)syscall(SYS_gettid);
    return vt_my_tid;
}

#endif
