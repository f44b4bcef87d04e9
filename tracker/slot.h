/* slot.h -- per-thread slots: a thread's own live table and log, under a
 * lock of its own.
 *
 * Every thread that allocates has a slot: a table of the live allocations
 * it made (table.h), and a log of what happened to them (log.h). A hooked
 * call works in its own slot, under the slot's lock, which no other thread
 * takes unless it frees memory this thread allocated (or copies the table
 * for a snapshot). A slot outlives its thread (its allocations may still be
 * live, its log not yet applied) and is taken over by the next thread that
 * needs one; slots are never freed. Internal to tracker/. */
#ifndef VT_SLOT_H
#define VT_SLOT_H

#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "internal.h"
#include "table.h"

#define LOG_OPS 1024

/* A thread's slot. Under `lock`: the table, and appending to the log
 * (ops[head % LOG_OPS], then head); the owner takes it for every call,
 * another thread only to free what the owner allocated. The applier,
 * under the global lock, reads up to head and then writes tail. */
struct vt_slot {
    /* What a call reads and writes in its slot, on one cache line: the
     * lock, the log's head and room, the table's first five fields (a free
     * of another thread's memory takes one line from the owner's core,
     * not three). */
    int lock;           /* slot_take / slot_give */
    int wanted;         /* threads waiting for it (vt_slot_wait) */
    uint64_t head;
    /* Where head may go without reading tail (the applier's line): tail +
     * LOG_OPS / 2 as last read under the lock (tail + LOG_OPS, the log's
     * end, while another thread applies: log.c); tail only grows, so it
     * is never more than the room there is. 0 at first. */
    uint64_t room;
    struct live_table table;
    int owned;          /* 1 while a live thread has it */
    VT_PROBE_FIELD      /* lockprobe.h: the holder's CPU time at the take */
    struct vt_slot *next; /* all slots, newest first; never unlinked */
    /* The applier's, on a line of its own. */
    uint64_t tail __attribute__((aligned(64)));
    /* Two entries a line, none across two. */
    struct vt_event ops[LOG_OPS] __attribute__((aligned(64)));
} __attribute__((aligned(64)));
_Static_assert(__builtin_offsetof(struct vt_slot, table.fresh_left) == 64,
               "the slot's lock, log head and room and the table's hot fields share its first cache line");

/* Every slot, newest first (pushed by a compare-and-swap, read without a
 * lock): a cache line of its own, read by every free that is not of the
 * thread's own memory and written only when a slot is made. */
struct vt_slot_list {
    struct vt_slot *first;
} __attribute__((aligned(64)));
extern struct vt_slot_list vt_slots VT_HIDDEN;

static inline struct vt_slot *vt_slots_first(void) { return __atomic_load_n(&vt_slots.first, __ATOMIC_ACQUIRE); }

/* The calling thread's slot, or NULL before its first record. */
extern __thread struct vt_slot *vt_my_slot __attribute__((tls_model("initial-exec"), visibility("hidden")));

/* This thread's slot: one no live thread has, else a new one; NULL when
 * out of memory. */
struct vt_slot *vt_slot_attach(void) VT_HIDDEN;

/* The lock of the mappings slots are carved from, for fork (taken with the
 * tracker's other locks, vt_tracker_lock_all). */
void vt_slot_blocks_lock(void) VT_HIDDEN;
void vt_slot_blocks_unlock(void) VT_HIDDEN;

/* A slot's lock: taking it is one exchange and giving it back a plain
 * store (and a load of `wanted`, on the same line). Its owner all but
 * never finds it held; a waiter spins, then sleeps (vt_slot_wait). */
void vt_slot_wait(struct vt_slot *l) VT_HIDDEN;

static inline void slot_take(struct vt_slot *l) {
    if (__builtin_expect(__atomic_exchange_n(&l->lock, 1, __ATOMIC_ACQUIRE), 0)) vt_slot_wait(l);
    VT_PROBE_TAKEN(VT_PROBE_SLOT, l->probe_since, l->probe_where);
}

/* slot_give while a thread waits for the lock (vt_slot_wait): the waiter
 * woken, and let in before this thread can take the lock again (for up to
 * 200 us). Without it a thread that takes the lock again and again (its
 * owner, between hooked calls; a snapshot's copy, between chunks) keeps a
 * spinning waiter out: it finds the lock free for nanoseconds at a time.
 * Measured so: a snapshot's copy waited milliseconds for the slot of a
 * thread allocating in a loop, and that thread 20 to 40 ms for the copy.
 * With may_yield (slot_give_yielding: a snapshot's copy, between chunks)
 * the giver yields its CPU while it waits, for the woken thread may need
 * it; without (slot_give: a hooked call's own give, which must not lose
 * its CPU to the scheduler: a yield on a busy machine gave it away for 1
 * to 13 ms, 31 to 77 times a dump) it only spins, a few microseconds. */
void vt_slot_hand_over(struct vt_slot *l, int may_yield) VT_HIDDEN;

/* Spins before a hand-over yields (or, without may_yield, gives up). */
#define VT_LET_IN_SPINS 512

/* One step of waiting for a woken thread to take a lock (the hand-overs
 * of a slot's lock and of the global lock, vt_global_let_in): the i-th
 * spins, later ones yield; 0 once 200 us have passed since `start` (zero
 * to begin). */
int vt_let_in_step(unsigned i, struct timespec *start) VT_HIDDEN;

static inline void slot_give_as(struct vt_slot *l, int may_yield) {
    VT_PROBE_GIVEN(VT_PROBE_SLOT, l->probe_since, l->probe_where);
    __atomic_store_n(&l->lock, 0, __ATOMIC_RELEASE);
    if (__builtin_expect(__atomic_load_n(&l->wanted, __ATOMIC_RELAXED) != 0, 0)) vt_slot_hand_over(l, may_yield);
}

static inline void slot_give(struct vt_slot *l) { slot_give_as(l, 0); }

/* slot_give by a thread that may yield its CPU while a waiter is let in
 * (a snapshot's copy): see vt_slot_hand_over. */
static inline void slot_give_yielding(struct vt_slot *l) { slot_give_as(l, 1); }

/* The slot's lock, taken before `until` (CLOCK_REALTIME), or not at all:
 * 1 when taken. */
int vt_slot_take_until(struct vt_slot *l, const struct timespec *until) VT_HIDDEN;

#ifdef VT_LOCK_PROBE /* each take known by its file and line (lockprobe.h) */
#define slot_take(l) VT_PROBE_AT(slot_take(l))
#define vt_slot_take_until(l, until) VT_PROBE_AT(vt_slot_take_until(l, until))
#endif

/* Records of freed allocations, kept for the next allocations: first in
 * the freeing thread's own cache (at most REC_CACHE; the thread's exit
 * hands them on, slot or not), then, REC_BATCH at a time,
 * in a depot that every thread whose cache is empty refills it from. A
 * thread that frees what another allocated (a consumer of a producer's
 * buffers) so hands the records back to the producer through the depot,
 * and neither calls malloc nor free: glibc's free of another thread's
 * chunk takes that arena's lock, and the producer's malloc then finds its
 * own arena empty. The depot keeps every record given to it: records come
 * from slabs and are never freed one by one (recslab.h); a process keeps
 * as many as it ever had live at once. */
#define REC_CACHE 64
#define REC_BATCH 32
extern __thread struct vt_rec *vt_rec_cache __attribute__((tls_model("initial-exec"), visibility("hidden")));
extern __thread int vt_nrec_cache __attribute__((tls_model("initial-exec"), visibility("hidden")));

/* The cache full: its REC_BATCH newest records to the depot. */
void vt_rec_spill(void) VT_HIDDEN;
/* The cache empty: a batch from the depot (the first record returned, the
 * rest cached), else a new record (recslab.h); NULL when out of memory. */
struct vt_rec *vt_rec_refill(void) VT_HIDDEN;

/* The depot's lock, for fork (vt_tracker_lock_all): taken after every
 * slot's (a thread takes it holding none), so that the child finds the
 * depot whole. */
void vt_rec_depot_lock(void) VT_HIDDEN;
void vt_rec_depot_unlock(void) VT_HIDDEN;

/* Push r on this thread's cache (spilling a batch to the depot when full). */
static inline void rec_cache_push(struct vt_rec *r) {
    if (__builtin_expect(vt_nrec_cache >= REC_CACHE, 0)) vt_rec_spill();
    r->a.mapped = (uint64_t)(uintptr_t)vt_rec_cache;
    vt_rec_cache = r;
    vt_nrec_cache++;
}

/* rec_put of a thread without a slot (one that frees what others
 * allocated and never allocates: a consumer): its cache too, its exit
 * handing it to the depot as a slot's does (the slot's key set, with no
 * slot, the first time). Before, its records went back to malloc, and the
 * producer's next allocations called malloc for new ones. */
void vt_rec_put_slotless(struct vt_rec *r) VT_HIDDEN;

static inline void rec_put(struct vt_rec *r) {
    if (__builtin_expect(!vt_my_slot, 0)) {
        vt_rec_put_slotless(r);
        return;
    }
    rec_cache_push(r);
}

/* A record to fill, from the cache, the depot or malloc; NULL when out of
 * memory. */
static inline struct vt_rec *rec_get(void) {
    struct vt_rec *r = vt_rec_cache;
    if (__builtin_expect(!r, 0)) return vt_rec_refill();
    struct vt_rec *next = (struct vt_rec *)(uintptr_t)r->a.mapped;
    vt_rec_cache = next;
    vt_nrec_cache--;
    /* The next record is fetched now, for writing, so that the next
     * allocation finds it in this core's cache: a record that came back
     * through the depot was last written by the thread that freed it. A
     * prefetch never faults, so NULL needs no test. */
    vt_prefetch_w(next);
    return r;
}

/* In a forked child (the only thread, every lock of the parent's held by
 * it or by no one): every slot's table emptied and its log dropped, the
 * slots of the parent's other threads free for the taking. */
void vt_slots_reset_child(void) VT_HIDDEN;

#endif
