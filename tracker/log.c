/* log.c -- applying the slots' logs: the time-ordered merge, and waiting
 * for room in a full log (log.h). */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "account.h"
#include "log.h"

/* Set while a thread applies the logs (written under the global lock, read
 * without it); a line of its own, away from what the applier writes at
 * every entry. */
static struct __attribute__((aligned(64))) {
    int on;
} applying;

/* Count slot l's entries from .. to - 1 (to - from at most LOG_OPS), in
 * order: at most two runs of the log's array, either side of its end. */
static void apply(struct vt_slot *l, uint64_t from, uint64_t to) {
    size_t i = from % LOG_OPS, n = (size_t)(to - from), first = LOG_OPS - i < n ? LOG_OPS - i : n;
    vt_account_ops(&l->ops[i], first);
    if (n > first) vt_account_ops(&l->ops[0], n - first);
}

void vt_log_drain(void) {
    struct src {
        struct vt_slot *l;
        uint64_t t, h, ts; /* ts: of entry t */
    } one[8], *src = one;
    size_t n = 0, cap = 8;
    __atomic_store_n(&applying.on, 1, __ATOMIC_RELAXED);
    for (struct vt_slot *l = vt_slots_first(); l; l = l->next) {
        uint64_t h = __atomic_load_n(&l->head, __ATOMIC_ACQUIRE);
        uint64_t t = l->tail;
        if (t == h) continue;
        if (n == cap) {
            struct src *bigger = malloc(cap * 2 * sizeof *bigger);
            if (!bigger) break; /* the rest waits for the next drain */
            memcpy(bigger, src, n * sizeof *src);
            if (src != one) free(src);
            src = bigger;
            cap *= 2;
        }
        src[n].l = l;
        src[n].t = t;
        src[n].h = h;
        src[n].ts = l->ops[t % LOG_OPS].time_ns;
        n++;
    }
    /* The merge: from the log with the oldest entry, every entry up to the
     * next log's oldest; a log done is let go at once. */
    while (n > 1) {
        size_t b = 0;
        uint64_t next = UINT64_MAX;
        for (size_t i = 1; i < n; i++) {
            if (src[i].ts < src[b].ts) {
                next = src[b].ts;
                b = i;
            } else if (src[i].ts < next) {
                next = src[i].ts;
            }
        }
        struct src *x = &src[b];
        uint64_t end = x->t;
        do {
            if (++end == x->h) break;
        } while (x->l->ops[end % LOG_OPS].time_ns <= next);
        apply(x->l, x->t, end);
        x->t = end;
        if (x->t == x->h) {
            __atomic_store_n(&x->l->tail, x->t, __ATOMIC_RELEASE);
            *x = src[--n];
        } else {
            x->ts = x->l->ops[x->t % LOG_OPS].time_ns;
        }
    }
    if (n == 1) {
        apply(src[0].l, src[0].t, src[0].h);
        __atomic_store_n(&src[0].l->tail, src[0].h, __ATOMIC_RELEASE);
    }
    if (src != one) free(src);
    __atomic_store_n(&applying.on, 0, __ATOMIC_RELAXED);
}


void vt_log_lock_slow(struct vt_slot *l, int need) {
    for (;;) {
        slot_take(l);
        uint64_t tail = __atomic_load_n(&l->tail, __ATOMIC_ACQUIRE);
        uint64_t used = l->head + (uint64_t)need - tail;
        if (used <= LOG_OPS / 2) return;
        int room = used <= LOG_OPS;
        if (room && __atomic_load_n(&applying.on, __ATOMIC_RELAXED)) {
            /* The rest of the log is this thread's without asking again
             * (a call past the half would take this path at every call
             * while the other thread applies, reading the lines it
             * writes); the room is then re-read from tail. */
            l->room = tail + LOG_OPS;
            return;
        }
        slot_give(l);
        if (vt_global_trylock() == 0) {
            vt_log_drain();
            vt_global_unlock();
            continue;
        }
        if (room) {
            slot_take(l);
            if (log_used(l, need) <= LOG_OPS) return;
            slot_give(l);
        }
        /* Full, and another thread holds the global lock, applying the
         * logs (this one's among them if it was full when that began):
         * wait a little for this log's tail to move rather than queue on
         * the lock (whose cache line the applier then has to win back to
         * let go of it); then sleep on the lock. Not yield: where the
         * holder shares this thread's CPU, a yielding waiter is picked
         * again and again, and the holder waited for the scheduler's next
         * tick (4 ms) at a time. */
        for (int i = 0; i < 256 && __atomic_load_n(&l->tail, __ATOMIC_ACQUIRE) == tail; i++) {
#if defined(__x86_64__)
            __builtin_ia32_pause();
#endif
        }
        if (__atomic_load_n(&l->tail, __ATOMIC_ACQUIRE) == tail) {
            vt_global_lock();
            vt_log_drain();
            vt_global_unlock();
        }
    }
}
