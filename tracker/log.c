/* log.c -- applying the slots' logs: the time-ordered merge, and waiting
 * for room in a full log (log.h). */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

/* The logs being merged: each with its next entry t (time stamp ts) and
 * its head h as read when the merge began. A binary heap by ts. */
struct src {
    struct vt_slot *l;
    uint64_t t, h, ts;
};

static void sift_down(struct src *s, size_t n, size_t i) {
    struct src x = s[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && s[c + 1].ts < s[c].ts) c++;
        if (s[c].ts >= x.ts) break;
        s[i] = s[c];
        i = c;
    }
    s[i] = x;
}

/* The merge's logs, kept from one drain to the next (global lock held):
 * 64 in place, grown past that, never given back, as the slots are never
 * let go. Not malloc'd at
 * each drain: a block of 1 KiB or more made the C library consolidate its
 * arena's free lists first (thousands of freed records, over 1 ms), at
 * every drain of 32 logs or more. */
static struct src srcs_first[64], *srcs = srcs_first;
static size_t srcs_cap = 64;

size_t vt_log_drain_some(size_t budget) {
    size_t n = 0, applied = 0;
    struct src *src = srcs;
    __atomic_store_n(&applying.on, 1, __ATOMIC_RELAXED);
    for (struct vt_slot *l = vt_slots_first(); l; l = l->next) {
        uint64_t h = __atomic_load_n(&l->head, __ATOMIC_ACQUIRE);
        uint64_t t = l->tail;
        if (t == h) continue;
        if (n == srcs_cap) {
            size_t cap = srcs_cap * 2;
            struct src *bigger = srcs == srcs_first ? malloc(cap * sizeof *bigger) : realloc(srcs, cap * sizeof *bigger);
            if (!bigger) break; /* the rest waits for the next drain */
            if (srcs == srcs_first) memcpy(bigger, srcs_first, sizeof srcs_first);
            srcs = src = bigger;
            srcs_cap = cap;
        }
        src[n].l = l;
        src[n].t = t;
        src[n].h = h;
        src[n].ts = l->ops[t % LOG_OPS].time_ns;
        n++;
    }
    for (size_t i = n / 2; i-- > 0;) sift_down(src, n, i);
    /* The merge: from the log with the oldest entry, every entry up to the
     * next log's oldest (the smaller of the heap's second row), so that a
     * run costs a heap step, not a look at every log (256 threads' logs
     * made a scan per entry where two of them alternated); a log done is
     * let go at once. At most `budget` entries: where it runs out, what
     * is applied is still every entry older than the rest. */
    while (n && applied < budget) {
        struct src *x = &src[0];
        uint64_t next = UINT64_MAX;
        if (n > 1) next = src[1].ts;
        if (n > 2 && src[2].ts < next) next = src[2].ts;
        uint64_t end = x->t, stop = budget - applied < x->h - x->t ? x->t + (budget - applied) : x->h;
        if (n == 1) /* the last log: the rest of it, in one run */
            end = stop;
        else
            do {
                if (++end == stop) break;
            } while (x->l->ops[end % LOG_OPS].time_ns <= next);
        apply(x->l, x->t, end);
        applied += (size_t)(end - x->t);
        x->t = end;
        if (x->t == x->h) {
            __atomic_store_n(&x->l->tail, x->t, __ATOMIC_RELEASE);
            src[0] = src[--n];
        } else {
            x->ts = x->l->ops[x->t % LOG_OPS].time_ns;
        }
        sift_down(src, n, 0);
    }
    for (size_t i = 0; i < n; i++) /* the budget ran out: what was applied of the rest */
        if (src[i].t != src[i].l->tail) __atomic_store_n(&src[i].l->tail, src[i].t, __ATOMIC_RELEASE);
    __atomic_store_n(&applying.on, 0, __ATOMIC_RELAXED);
    return applied;
}

void vt_log_drain(void) { vt_log_drain_some(SIZE_MAX); }

void vt_global_lock_applied(int may_yield) {
    vt_global_lock();
    for (int i = 0; i < 64 && vt_log_drain_some(LOG_DRAIN_STEP) == LOG_DRAIN_STEP; i++) {
        vt_global_unlock();
        if (may_yield) {
            vt_global_let_in();
        } else { /* a hooked call: spin a little, never yield (see slot_give) */
            for (unsigned k = 0; k < VT_LET_IN_SPINS && __atomic_load_n(&vt_global_wanted, __ATOMIC_RELAXED); k++) {
#if defined(__x86_64__)
                __builtin_ia32_pause();
#endif
            }
        }
        vt_global_lock();
    }
    vt_log_drain();
}

/* After a step of a call whose log is full: other threads waiting for the
 * global lock are let in first (their steps apply the same oldest ops),
 * and from the third step of the call on, this thread sleeps 50 us
 * before its next, so that the backlog of 256 threads' logs (after a
 * holder of the global lock was preempted, every log fills) is applied by
 * the calls of every thread, not all by the first to find its log full
 * (82 steps, 8 ms, in one call). */
static void full_wait(unsigned *steps) {
    vt_global_let_in();
    if (++*steps > 2) {
        struct timespec t = {0, 50 * 1000};
        nanosleep(&t, NULL);
    }
}

/* The slot taken when its log has room for `need` more entries: 1, held;
 * else 0, not held. */
static int take_if_room(struct vt_slot *l, int need) {
    slot_take(l);
    if (log_used(l, need) <= LOG_OPS) return 1;
    slot_give(l);
    return 0;
}

void vt_log_lock_slow(struct vt_slot *l, int need) {
    unsigned full_steps = 0;
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
            /* One step of the oldest entries: all the logs at once were up
             * to 256 threads' half logs, 131,072 entries, 5 to 17 ms in
             * one hooked call. Each call past the half takes a step while
             * it has room, and by the time its log could be full, 512
             * steps have applied twice what all 256 logs can hold. */
            vt_log_drain_some(LOG_DRAIN_STEP);
            vt_global_unlock();
            if (!room) full_wait(&full_steps);
            else if (take_if_room(l, need)) return;
            continue;
        }
        if (room && take_if_room(l, need)) return;
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
            vt_log_drain_some(LOG_DRAIN_STEP);
            vt_global_unlock();
            full_wait(&full_steps);
        }
    }
}
