/* slot.c -- making, taking over and letting go of per-thread slots, the
 * slow side of their lock, and copying their live tables (slot.h). */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <linux/futex.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "lsanroot.h"
#include "recslab.h"
#include "slot.h"
#include "tblock.h"

struct vt_slot_list vt_slots;
__thread struct vt_slot *vt_my_slot __attribute__((tls_model("initial-exec")));
__thread struct vt_rec *vt_rec_cache __attribute__((tls_model("initial-exec")));
__thread int vt_nrec_cache __attribute__((tls_model("initial-exec")));

static pthread_key_t slot_key;
static pthread_once_t slot_once = PTHREAD_ONCE_INIT;

/* A waiter's spin. */
static inline void relax(void) {
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
}

/* A waiter's sleep while the lock is held: woken by vt_slot_hand_over, or
 * after 100 us at most. */
static void sleep_on(struct vt_slot *l) {
    struct timespec t = {0, 100 * 1000};
    syscall(SYS_futex, &l->lock, FUTEX_WAIT_PRIVATE, 1, &t, NULL, 0);
}

/* The others hold a slot's lock briefly (a free, a snapshot copying the
 * table a chunk at a time): spin a little, then sleep on the lock's word,
 * counted in `wanted` meanwhile, so that slot_give wakes the sleeper and
 * lets it in first (vt_slot_hand_over). Sleeping, not yielding: where the
 * holder shares the waiter's CPU (more threads than cores), a thread that
 * yields is picked again and again while the holder waits for the CPU, and
 * a chunk's copy of microseconds was measured holding its waiter for a
 * whole scheduler tick (4 ms), over and over. A wake can be missed (the
 * giver reads `wanted` before its store of the lock is seen): the sleep is
 * at most 100 us. */
void vt_slot_wait(struct vt_slot *l) {
    VT_PROBE_WAIT_BEGIN(probe_t0, probe_holder, l->probe_where);
    __atomic_add_fetch(&l->wanted, 1, __ATOMIC_SEQ_CST);
    for (unsigned spins = 0;;) {
        while (__atomic_load_n(&l->lock, __ATOMIC_RELAXED)) {
            if (spins++ < 2000) {
                relax();
            } else {
                sleep_on(l);
                spins = 1800; /* woken: a little spinning again first */
            }
        }
        if (!__atomic_exchange_n(&l->lock, 1, __ATOMIC_ACQUIRE)) break;
    }
    __atomic_sub_fetch(&l->wanted, 1, __ATOMIC_RELAXED);
    VT_PROBE_WAIT_END(VT_PROBE_SLOT, probe_t0, probe_holder);
}

int vt_let_in_step(unsigned i, struct timespec *start) {
    if (i < VT_LET_IN_SPINS) {
        relax();
        return 1;
    }
    /* A woken thread takes tens of microseconds to run (more in a virtual
     * machine): yield to it, 200 us at most (it may not run at all:
     * stopped). */
    if (i % 16 == 0) {
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (!start->tv_sec && !start->tv_nsec) *start = now;
        else if ((now.tv_sec - start->tv_sec) * 1000000000L + (now.tv_nsec - start->tv_nsec) > 200000L) return 0;
    }
    sched_yield();
    return 1;
}

void vt_slot_hand_over(struct vt_slot *l, int may_yield) {
    VT_PROBE_WAIT_BEGIN(probe_t0, probe_holder, l->probe_where);
    syscall(SYS_futex, &l->lock, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    struct timespec start = {0, 0};
    for (unsigned i = 0; __atomic_load_n(&l->wanted, __ATOMIC_RELAXED) && !__atomic_load_n(&l->lock, __ATOMIC_RELAXED) &&
                         (may_yield ? vt_let_in_step(i, &start) : i < VT_LET_IN_SPINS);
         i++)
        if (!may_yield) relax();
    if (!may_yield) VT_PROBE_WAIT_END(VT_PROBE_HANDOVER, probe_t0, probe_holder); /* a hooked call's */
}

int (vt_slot_take_until)(struct vt_slot *l, const struct timespec *until) { /* (the name in brackets: lockprobe.h's macro) */
    __atomic_add_fetch(&l->wanted, 1, __ATOMIC_SEQ_CST); /* handed over to, as vt_slot_wait */
    int got = 0;
    for (unsigned spins = 0;; spins++) {
        if (!__atomic_load_n(&l->lock, __ATOMIC_RELAXED) && !__atomic_exchange_n(&l->lock, 1, __ATOMIC_ACQUIRE)) {
            VT_PROBE_TAKEN(VT_PROBE_SLOT, l->probe_since, l->probe_where);
            got = 1;
            break;
        }
        if (spins < 2000) {
            relax();
            continue;
        }
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        if (now.tv_sec > until->tv_sec || (now.tv_sec == until->tv_sec && now.tv_nsec >= until->tv_nsec)) break;
        sleep_on(l);
    }
    __atomic_sub_fetch(&l->wanted, 1, __ATOMIC_RELAXED);
    return got;
}

/* The depot of freed records (slot.h): a stack of chains, each linked
 * through a.mapped as the caches are, its first record holding the next
 * chain in a.address and its length in a.bytes. */
static struct {
    pthread_mutex_t lock;
    struct vt_rec *top;
} depot = {PTHREAD_MUTEX_INITIALIZER, NULL};

/* The chain from `first` (n records) onto the depot. */
static void depot_push(struct vt_rec *first, unsigned n) {
    first->a.bytes = n;
    pthread_mutex_lock(&depot.lock);
    first->a.address = (uint64_t)(uintptr_t)depot.top;
    depot.top = first;
    pthread_mutex_unlock(&depot.lock);
}

void vt_rec_depot_lock(void) { pthread_mutex_lock(&depot.lock); }
void vt_rec_depot_unlock(void) { pthread_mutex_unlock(&depot.lock); }

void vt_rec_spill(void) {
    struct vt_rec *first = vt_rec_cache, *last = first;
    for (int i = 1; i < REC_BATCH; i++) last = (struct vt_rec *)(uintptr_t)last->a.mapped;
    vt_rec_cache = (struct vt_rec *)(uintptr_t)last->a.mapped;
    vt_nrec_cache -= REC_BATCH;
    last->a.mapped = 0;
    depot_push(first, REC_BATCH);
}

struct vt_rec *vt_rec_refill(void) {
    pthread_mutex_lock(&depot.lock);
    struct vt_rec *r = depot.top;
    if (r) depot.top = (struct vt_rec *)(uintptr_t)r->a.address;
    pthread_mutex_unlock(&depot.lock);
    if (!r) return vt_rec_carve();
    /* A thread without a slot keeps no cache: the rest goes back. */
    struct vt_rec *rest = (struct vt_rec *)(uintptr_t)r->a.mapped;
    unsigned n = (unsigned)r->a.bytes - 1;
    if (rest && vt_my_slot) {
        vt_rec_cache = rest;
        vt_nrec_cache = (int)n;
    } else if (rest) {
        depot_push(rest, n);
    }
    return r;
}

/* The key's value of a thread that frees but has no slot (vt_rec_put_slotless). */
#define SLOTLESS ((void *)1)

/* At the thread's exit: its cached records to the depot, its slot free
 * for the taking (its table and log stay, for whoever takes it over). */
static void slot_release(void *p) {
    struct vt_slot *l = p;
    vt_my_slot = NULL;
    if (vt_rec_cache) depot_push(vt_rec_cache, (unsigned)vt_nrec_cache);
    vt_rec_cache = NULL;
    vt_nrec_cache = 0;
    if (p != SLOTLESS) __atomic_store_n(&l->owned, 0, __ATOMIC_RELEASE);
}

static void slot_key_make(void) { pthread_key_create(&slot_key, slot_release); }

static __thread int slotless_key_set __attribute__((tls_model("initial-exec")));

void vt_rec_put_slotless(struct vt_rec *r) {
    if (!slotless_key_set) {
        pthread_once(&slot_once, slot_key_make);
        if (pthread_setspecific(slot_key, SLOTLESS) != 0) {
            r->a.mapped = 0;
            depot_push(r, 1); /* no cache without the key: straight to the depot */
            return;
        }
        slotless_key_set = 1;
    }
    rec_cache_push(r);
}

/* Slots, from mappings of vramtrace's (tblock.h): not from the thread's
 * malloc arena, on whose lock 256 threads' first calls queued. A slot is
 * never given back (a later thread takes it over); its table points to
 * records, so its mappings are shown to LeakSanitizer. */
static struct vt_tblock_kind slot_blocks = VT_TBLOCK_KIND(sizeof(struct vt_slot), 256, vt_lsan_root);

void vt_slot_blocks_lock(void) { vt_tblock_lock(&slot_blocks); }
void vt_slot_blocks_unlock(void) { vt_tblock_unlock(&slot_blocks); }

/* Without the global lock: a slot is taken by one compare-and-swap of its
 * `owned`, and a new one pushed on the list's head by one of the head, so
 * that a thread's first call never waits for an applier's merge (with 256
 * threads starting at once on 2 CPUs, first calls waited up to a second
 * behind the lock's preempted holders). Whoever walks the list meanwhile
 * sees the new slot or not: its table and log are empty, its first op
 * comes after. */
struct vt_slot *vt_slot_attach(void) {
    pthread_once(&slot_once, slot_key_make);
    struct vt_slot *l;
    for (l = vt_slots_first(); l; l = l->next) {
        int expected = 0;
        if (__atomic_compare_exchange_n(&l->owned, &expected, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) break;
    }
    if (!l && (l = vt_tblock_take(&slot_blocks))) {
        /* All but the log's entries, which are written before they are
         * read (from tail to head): zeroing them wrote 8 more pages in
         * the thread's first call, page faults that are its dearest part
         * when many threads start at once. */
        memset(l, 0, offsetof(struct vt_slot, ops));
        l->owned = 1;
        struct vt_slot *head = vt_slots_first();
        do l->next = head;
        while (!__atomic_compare_exchange_n(&vt_slots.first, &head, l, 1, __ATOMIC_RELEASE, __ATOMIC_ACQUIRE));
    }
    if (l) {
        pthread_setspecific(slot_key, l);
        vt_my_slot = l;
    }
    return l;
}

/* The parent's live tables as a forked child found them: kept, not
 * freed. Freeing a record writes malloc's header beside it, so a child
 * freed a million of them by copying every page of the parent's heap that
 * held one (0.4 s to start a child of a parent with a million live, and
 * that much of the parent's memory copied); left alone, the pages stay
 * shared with the parent and cost the child nothing. Kept reachable, so
 * that a leak checker in the child does not call them leaks (a mapped
 * array is a root of LeakSanitizer's search from its making: lsanroot.h). */
struct parent_table {
    struct live_table t;
    struct parent_table *next;
};
static struct parent_table *parent_tables;

void vt_slots_reset_child(void) {
    pthread_mutex_init(&depot.lock, NULL); /* held by no one: see vt_rec_depot_lock */
    /* Other threads' slots came along with their memory, not their
     * threads: emptied and free for the taking; this thread keeps its own. */
    for (struct vt_slot *l = vt_slots_first(); l; l = l->next) {
        l->lock = 0;
        l->wanted = 0; /* the parent's waiters are not the child's */
        struct parent_table *k = l->table.count ? malloc(sizeof *k) : NULL;
        if (k) {
            k->t = l->table;
            k->t.cow = NULL; /* a forked child's: its snapshot is the parent's */
            k->next = parent_tables;
            parent_tables = k;
            vt_table_forget(&l->table);
        } else {
            vt_table_free(&l->table); /* its records stay where they are, in the parent's slabs */
        }
        l->tail = l->head;
        if (l != vt_my_slot) l->owned = 0;
    }
}
