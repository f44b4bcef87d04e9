/* log.h -- a slot's log of operations, and the merge that applies every
 * slot's log to the counts in time-stamp order.
 *
 * A hooked call appends to its own slot's log under the slot's lock; the
 * logs are applied to the counts (account.h) and the history (history.h)
 * under the global lock, all slots' at once, merged by time stamp, when
 * one of them is half full or when anything reads the counts. Every op of
 * an allocation is in the log of the slot whose table holds it, in order,
 * so its free never comes before it; peaks are computed in the order the
 * operations happened, not the order threads won a lock. Internal to
 * tracker/. */
#ifndef VT_LOG_H
#define VT_LOG_H

#include <stdint.h>

#include "internal.h"
#include "slot.h"

/* A log entry is what happened, with what the counts and the history
 * need: it has the shape of an event (struct vt_event), its time in ticks
 * (after the allocation returned, before the free was called), its type an
 * OP_*. An allocation's and a free's are the history's event types. */
enum { OP_ALLOC = VT_EV_ALLOC, OP_FREE = VT_EV_FREE, OP_REPLACED = 8, OP_UNKNOWN, OP_RESTORED };

/* Apply every op logged so far, all slots' merged by time stamp. Global
 * lock held. */
void vt_log_drain(void) VT_HIDDEN;

/* The oldest `budget` ops of all the logs at most, merged the same way;
 * how many were applied. Global lock held. */
size_t vt_log_drain_some(size_t budget) VT_HIDDEN;

/* The global lock, with every op logged before the call applied: in
 * steps of LOG_DRAIN_STEP, the lock let go between them and a thread
 * waiting for it let in first, so that no one waits for all the logs at
 * once (256 threads' half logs, 131,072 entries, held the lock 5 ms in the
 * live view's thread); after 64 steps, the rest at once. `may_yield`: 0 in
 * a hooked call, which only spins a little for the waiter (a yield there
 * gave the CPU away for a scheduler's slice on a busy machine). */
void vt_global_lock_applied(int may_yield) VT_HIDDEN;

/* A hooked call's step of applying (vt_log_lock_slow): about 100 us of
 * work. */
#define LOG_DRAIN_STEP 1024

/* Lock a slot with room for `need` ops in its log. Past half full, a
 * step of the logs' oldest ops is applied (LOG_DRAIN_STEP) at each call,
 * unless another thread is at it: then this one goes on into the second
 * half, and waits only when its log is full. (Were the
 * whole log the mark, two threads allocating at once would fill theirs in
 * step, and each would wait out the other's applying, which empties
 * both.) The slot's lock is not held while applying: the applier's
 * readers may take it. */
void vt_log_lock_slow(struct vt_slot *l, int need) VT_HIDDEN;

/* Entries the log would hold with `need` more. Slot lock held. */
static inline uint64_t log_used(const struct vt_slot *l, int need) {
    return l->head + (uint64_t)need - __atomic_load_n(&l->tail, __ATOMIC_ACQUIRE);
}

/* The slot's lock, with room for `need` more ops in its log (the fast
 * half of vt_log_lock_slow): tail, which the applier writes, is read only
 * when head reaches the room last read from it. */
static inline void slot_lock(struct vt_slot *l, int need) {
    slot_take(l);
    if (__builtin_expect(l->head + (uint64_t)need <= l->room, 1)) return;
    uint64_t tail = __atomic_load_n(&l->tail, __ATOMIC_ACQUIRE);
    if (l->head + (uint64_t)need - tail <= LOG_OPS / 2) {
        l->room = tail + LOG_OPS / 2;
        return;
    }
    slot_give(l);
    vt_log_lock_slow(l, need);
}

/* Log an op on allocation `a` (NULL: a free of an unknown pointer),
 * written in place. Slot lock held, with room. */
static inline __attribute__((always_inline)) void log_op(struct vt_slot *l, const struct vt_alloc *a, uint64_t ts, int type) {
    struct vt_event *o = &l->ops[l->head % LOG_OPS];
    if (a) *o = (struct vt_event){ts, a->address, a->bytes, a->stack, a->device, (uint8_t)type, a->kind};
    else *o = (struct vt_event){.time_ns = ts, .type = (uint8_t)type};
    __atomic_store_n(&l->head, l->head + 1, __ATOMIC_RELEASE);
}

#endif
