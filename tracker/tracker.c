/* tracker.c -- the tracker's front: set-up, and the operations hooked calls
 * make (an allocation, a free in two steps, a mapping).
 *
 * A hooked call works in its own slot (slot.h), under the slot's lock: the
 * record goes in or out of the slot's live table and the op into its log
 * at once, in program order, so a free always finds the allocation it
 * frees. A hooked call never takes the global lock (except for a thread's
 * first record, and to apply the logs when its own is half full): the
 * counts, the history and the interned stacks are brought up to date from
 * the logs (log.h) by whoever reads them. */
#define _GNU_SOURCE
#include <pthread.h>

#include "../common/warn.h"
#include "clock.h"
#include "cow.h"
#include "handlerun.h"
#include "history.h"
#include "intern.h"
#include "internal.h"
#include "log.h"
#include "mappings.h"
#include "slot.h"
#include "table.h"

pthread_mutex_t vt_tracker_lock = PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP;
uint64_t vt_global_since;     /* internal.h: the lock probe's, in a probe build */
const char *vt_global_where;
int vt_global_wanted;

void vt_global_lock_slow(void) {
    VT_PROBE_WAIT_BEGIN(probe_t0, probe_holder, vt_global_where);
    __atomic_add_fetch(&vt_global_wanted, 1, __ATOMIC_SEQ_CST);
    pthread_mutex_lock(&vt_tracker_lock);
    __atomic_sub_fetch(&vt_global_wanted, 1, __ATOMIC_RELAXED);
    VT_PROBE_WAIT_END(VT_PROBE_GLOBAL, probe_t0, probe_holder);
}

void vt_global_let_in(void) {
    struct timespec start = {0, 0};
    for (unsigned i = 0; __atomic_load_n(&vt_global_wanted, __ATOMIC_SEQ_CST) && vt_let_in_step(i, &start); i++)
        continue;
}
__thread int32_t vt_my_tid __attribute__((tls_model("initial-exec")));
struct vt_tracker_flags vt_tracker_flags __attribute__((aligned(64))) = {.alloc_rare = VT_ALLOC_FIRST};

void vt_tracker_init(int depth, size_t event_capacity) {
    vt_global_lock();
    vt_clock_start();
    (void)depth;
    vt_history_init(event_capacity);
    vt_global_unlock();
}

void vt_tracker_alloc(uint64_t address, uint64_t bytes, int kind, int device,
                      const char *api, const uintptr_t *frames, int depth) {
    vt_tracker_alloc_at(address, bytes, kind, device, api, vt_tracker_stack_id(frames, depth));
}

/* The records of key k in the tables of threads other than `mine`: each
 * leaves its table, logged as replaced in that slot's log (where its
 * allocation's op is, so that the two are applied in order), before the
 * new allocation's time stamp is taken. More than one table may hold the
 * key: a record left behind before anything set its VT_ALLOC_STALE. */
static void replace_elsewhere(struct vt_slot *mine, const struct vt_key *k, uint32_t khash) {
    for (struct vt_slot *l = vt_slots_first(); l; l = l->next) {
        if (l == mine) continue;
        size_t at;
        slot_lock(l, 1);
        struct vt_rec *r = table_find_at(&l->table, k, khash, &at);
        if (r) {
            table_del_found(&l->table, r, khash, at);
            log_op(l, &r->a, vt_ticks(), OP_REPLACED);
        }
        slot_give(l);
        if (r) rec_put(r);
    }
}

/* What an allocation does first while vt_tracker_flags.alloc_rare is set:
 * for the process's first, `touched` set; after memory of its name space
 * may have gone back unseen, the other threads' tables looked in (one
 * probe a thread). Out of line, so that the usual allocation tests one
 * word and no more. */
__attribute__((noinline, cold)) static void alloc_rare(uint64_t address, int kind) {
    unsigned rare = __atomic_load_n(&vt_tracker_flags.alloc_rare, __ATOMIC_RELAXED);
    if (rare & VT_ALLOC_FIRST) {
        if (!__atomic_load_n(&vt_tracker_flags.touched, __ATOMIC_RELAXED))
            __atomic_store_n(&vt_tracker_flags.touched, 1, __ATOMIC_RELAXED);
        __atomic_and_fetch(&vt_tracker_flags.alloc_rare, ~VT_ALLOC_FIRST, __ATOMIC_RELAXED);
    }
    int space = vt_kind_space(kind);
    if (rare & VT_ALLOC_STALE(space)) {
        struct vt_key k = {address, (uint32_t)space, 0};
        replace_elsewhere(vt_my_slot, &k, key_hash(&k));
    }
}

/* The driver handing out an address this thread's table still holds
 * means the old allocation's memory went back without a free vramtrace
 * saw (a reset or a context's destruction that released nothing in the
 * counts, a free that passed through unrecorded): the old record leaves,
 * logged as replaced (the applier counts it as released without a free,
 * account.h), and the new one takes its place. */
void vt_tracker_alloc_at(uint64_t address, uint64_t bytes, int kind, int device,
                         const char *api, uint32_t id) {
    if (__builtin_expect(__atomic_load_n(&vt_tracker_flags.alloc_rare, __ATOMIC_RELAXED) != 0, 0))
        alloc_rare(address, kind);
    struct vt_slot *l = vt_my_slot;
    if (!l && !(l = vt_slot_attach())) { vt_records_lost("an allocation's record (no thread slot)"); return; }
    struct vt_rec *r = rec_get();
    if (!r) { vt_records_lost("an allocation's record"); return; }
    uint64_t ts = vt_ticks();
    struct vt_key key = {address, (uint32_t)vt_kind_space(kind), 0};
    r->key = key;
    r->a = (struct vt_alloc){.address = address, .bytes = bytes, .time_ns = ts, .api = api,
                             .stack = id, .thread = vt_thread_id(),
                             .device = (int16_t)(vt_kind_is_host(kind) ? VT_HOST_DEVICE : device),
                             .kind = (uint8_t)kind};
    uint64_t tag = key_tag(&key);
    uint32_t khash = tag_hash(tag);
    struct vt_rec *old;
    slot_lock(l, 2);
    size_t at;
    old = table_find_tag_at(&l->table, &key, tag, khash, &at);
    if (old) {
        table_del_found(&l->table, old, khash, at);
        log_op(l, &old->a, ts, OP_REPLACED);
    }
    if (!(old ? table_add(&l->table, r, khash) : table_add_at(&l->table, r, tag, khash, at))) {
        slot_give(l);
        rec_put(r);
        if (old) rec_put(old);
        vt_records_lost("an allocation's record (the live table could not grow)");
        return;
    }
    log_op(l, &r->a, ts, OP_ALLOC);
    slot_give(l);
    if (old) rec_put(old);
    if (__builtin_expect(kind == VT_KIND_VMM, 0)) vt_handle_run_add(id, device, bytes, ts);
    else vt_handle_run_end();
}

void vt_tracker_unseen_release(unsigned spaces) {
    unsigned bits = 0;
    for (int s = 0; s <= VT_SPACE_IMPORTED; s++)
        if (spaces & (1u << s)) bits |= VT_ALLOC_STALE(s);
    __atomic_or_fetch(&vt_tracker_flags.alloc_rare, bits, __ATOMIC_RELAXED);
}

/* Take (space, address) out of a slot's table and log its free; the slot
 * is locked with room for one entry. */
static inline __attribute__((always_inline)) struct vt_rec *take(struct vt_slot *l, const struct vt_key *k, uint32_t khash, uint64_t ts) {
    size_t at;
    struct vt_rec *r = table_find_at(&l->table, k, khash, &at);
    if (r) {
        table_del_found(&l->table, r, khash, at);
        log_op(l, &r->a, ts, OP_FREE);
    }
    return r;
}

/* take() in slot l, under its lock; fills f on success. */
static inline __attribute__((always_inline)) int take_from(struct vt_slot *l, const struct vt_key *k, uint32_t khash, struct vt_free *f) {
    slot_lock(l, 1);
    struct vt_rec *r = take(l, k, khash, f->ts);
    slot_give(l);
    if (!r) return 0;
    f->rec = r;
    f->slot = l;
    return 1;
}

/* The other thread's slot in which this thread's last free of another
 * thread's memory found its record: a thread that frees what another
 * allocated mostly frees what that same thread allocated (a producer and
 * its consumer), so that slot is looked in before all the others. While
 * `hint_first` is set (the last free found its record there), it is
 * looked in before this thread's own slot too: a consumer's own table
 * then costs it no probe (a cache miss at every free) for an address it
 * never holds. A free found in this thread's own slot clears it. */
static __thread struct vt_slot *free_hint __attribute__((tls_model("initial-exec")));
static __thread int hint_first __attribute__((tls_model("initial-exec")));

/* take_from in the other threads' slots but `skip` (looked in already):
 * the hinted one first, unless skipped too. Out of line, so that the free
 * of the thread's own memory stays short. */
__attribute__((noinline)) static int take_elsewhere(struct vt_slot *mine, struct vt_slot *skip, const struct vt_key *k,
                                                    uint32_t khash, struct vt_free *f) {
    struct vt_slot *hint = free_hint;
    if (hint && hint != mine && hint != skip && take_from(hint, k, khash, f)) {
        if (!hint_first) hint_first = 1;
        return 1;
    }
    for (struct vt_slot *l = vt_slots_first(); l; l = l->next)
        if (l != mine && l != hint && take_from(l, k, khash, f)) {
            free_hint = l;
            if (!hint_first) hint_first = 1;
            return 1;
        }
    return 0;
}

/* The free of a record not in the slot vt_tracker_free_begin looked in
 * first (`looked`: this thread's own, or for a consumer the hinted one,
 * see free_hint; NULL for a thread without a slot): then this thread's
 * own, when that was not it, and the others. Out of line, so that the
 * usual free keeps its key and answer in registers. */
__attribute__((noinline)) static struct vt_free free_elsewhere(int space, uint64_t address, uint64_t ts,
                                                               struct vt_slot *mine, struct vt_slot *looked,
                                                               uint32_t khash) {
    struct vt_free f = {address, ts, space, NULL, NULL};
    struct vt_key k = {address, (uint32_t)space, 0};
    if (looked && looked != mine) {
        /* A consumer whose hinted slot did not hold it. */
        if (mine && take_from(mine, &k, khash, &f)) {
            hint_first = 0;
            return f;
        }
        if (take_elsewhere(mine, looked, &k, khash, &f)) return f;
    } else if (take_elsewhere(mine, NULL, &k, khash, &f)) {
        return f;
    }
    /* A pointer never seen: counted through this thread's log. */
    struct vt_slot *l = mine;
    if (!l && !(l = vt_slot_attach())) { vt_records_lost("a free's record (no thread slot)"); return f; }
    slot_lock(l, 1);
    log_op(l, NULL, f.ts, OP_UNKNOWN);
    slot_give(l);
    return f;
}

/* The record leaves its table, and its free is logged, before the real
 * free: once the driver has the address back it may hand it to another
 * thread, whose allocation must not find ours. Looked for in this
 * thread's table first (or, for a consumer, in the hinted one first; see
 * free_hint), then in the hinted one, then in the others'. An address is
 * live in one table at most (a record leaves its table before the driver
 * can hand its address out again), so the order changes only the cost;
 * only after a free vramtrace did not see can a stale record in one table
 * share its address with a live one in another, and then the order picks
 * which goes, as the walk's order did before. A free that fails puts the
 * record back and undoes the count (vt_tracker_free_end). */
struct vt_free vt_tracker_free_begin(int space, uint64_t address) {
    if (__builtin_expect(space == VT_SPACE_HANDLE, 0)) vt_handle_run_end();
    uint64_t ts = vt_ticks();
    struct vt_key k = {address, (uint32_t)space, 0};
    uint32_t khash = key_hash(&k);
    struct vt_slot *mine = vt_my_slot;
    /* This thread's own slot first, or a consumer's hinted one: either way
     * one lock, one probe and the record in registers, as for its own. */
    struct vt_slot *first = __builtin_expect(!hint_first, 1) ? mine : free_hint;
    if (__builtin_expect(first != NULL, 1)) {
        slot_lock(first, 1);
        struct vt_rec *r = take(first, &k, khash, ts);
        slot_give(first);
        if (r) return (struct vt_free){address, ts, space, r, first};
    }
    return free_elsewhere(space, address, ts, mine, first, khash);
}

/* A free the driver refused: the record back in the table and in the
 * counts, unless the address was handed out again meanwhile (then that
 * allocation is current). Out of line, so that the free that succeeded
 * sets up no frame for it. */
__attribute__((noinline, cold)) static void put_back(const struct vt_free *f) {
    struct vt_rec *r = f->rec;
    struct vt_slot *l = f->slot;
    uint32_t khash = key_hash(&r->key);
    struct vt_rec *now;
    slot_lock(l, 1);
    now = table_find(&l->table, &r->key, khash);
    if (!now && table_add(&l->table, r, khash)) {
        log_op(l, &r->a, vt_ticks(), OP_RESTORED);
    }
    else if (!now) now = r; /* no memory to put it back: dropped */
    slot_give(l);
    if (now == r) /* r was not in the table: only the dropped branch sets it */
        vt_records_lost("a record a failed free gave back (the live table could not grow)");
    if (now) rec_put(r);
}

void vt_tracker_free_end(const struct vt_free *f, int ok) {
    struct vt_rec *r = f->rec;
    if (!r) return;
    if (__builtin_expect(ok, 1)) rec_put(r);
    else put_back(f);
}

int vt_tracker_find(int space, uint64_t address, struct vt_alloc *out) {
    struct vt_key k = {address, (uint32_t)space, 0};
    uint32_t khash = key_hash(&k);
    for (struct vt_slot *l = vt_slots_first(); l; l = l->next) {
        struct vt_rec *r;
        slot_take(l);
        r = table_find(&l->table, &k, khash);
        if (r && out) *out = r->a;
        slot_give(l);
        if (r) return 1;
    }
    return 0;
}

/* The live record of (space, address), in whichever table holds it, its
 * references moved by one: up (delta > 0), or down when it has more than
 * its first. 1 when moved. No snapshot copies `refs`: no chunk is copied
 * first (vt_tracker_map's). */
static int move_refs(int space, uint64_t address, int delta) {
    struct vt_key k = {address, (uint32_t)space, 0};
    uint32_t khash = key_hash(&k);
    for (struct vt_slot *l = vt_slots_first(); l; l = l->next) {
        slot_take(l);
        struct vt_rec *r = table_find(&l->table, &k, khash);
        int moved = r && (delta > 0 || r->a.refs > 0);
        if (moved && delta > 0) r->a.refs++;
        else if (moved) r->a.refs--;
        slot_give(l);
        if (r) return moved;
    }
    return 0;
}

int vt_tracker_ref(int space, uint64_t address) { return move_refs(space, address, 1); }

int vt_tracker_unref(int space, uint64_t address) { return move_refs(space, address, -1); }

uint64_t vt_tracker_map(uint64_t handle, uint64_t address, uint64_t bytes) {
    vt_handle_run_end(); /* a request maps its handles once it made them all */
    struct vt_key k = {handle, VT_SPACE_HANDLE, 0};
    uint32_t khash = key_hash(&k);
    for (struct vt_slot *l = vt_slots_first(); l; l = l->next) {
        struct vt_rec *r;
        slot_take(l);
        r = table_find(&l->table, &k, khash);
        if (r && l->table.cow) vt_cow_touch_key(&l->table, khash); /* copied as it was */
        int device = r ? r->a.device : 0;
        if (r) r->a.mapped = address;
        slot_give(l);
        /* Into the history with no slot's lock held: it applies the logs. */
        if (r) return vt_mappings_add(handle, address, bytes, device);
    }
    return 0;
}
