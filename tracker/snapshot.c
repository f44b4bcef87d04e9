/* snapshot.c -- a consistent copy of the tracker's state, and the tracker
 * across fork.
 *
 * A snapshot applies every log and arms every slot's live table for its
 * copy (cow.h), each slot's ops logged since the merge applied as it is
 * armed, under its lock, so that the counts hold exactly what the armed
 * tables hold; then it copies the counts, the history and the stacks, all
 * under the global lock. After it lets that lock go it copies the tables a
 * chunk at a time, while their threads go on: a thread that changes a
 * chunk not yet copied copies it first, so the copy is of the armed point
 * and no call waits for more than a chunk. Around fork every lock is held,
 * so that the child starts from a state no thread was changing; the child
 * then forgets everything but the devices' facts. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../common/freeall.h"
#include "../common/warn.h"
#include "account.h"
#include "clock.h"
#include "cow.h"
#include "departed.h"
#include "history.h"
#include "intern.h"
#include "live_spill.h"
#include "lockprobe.h"
#include "log.h"
#include "mappings.h"
#include "mark.h"
#include "released.h"
#include "recslab.h"
#include "slot.h"
#include "steps.h"

/* Apply the ops slot l logged since the last merge, so that the counts
 * hold what its table holds. Global and slot lock held. Every op of an
 * allocation is in the log of the slot whose table holds it (log.h), so
 * the table equals the counts' view of the slot after this. The ops are
 * applied ahead of other slots' later ones (no merge): a time stamp older
 * than what was applied is made no older, as for any op logged late. */
static void apply_own_log(struct vt_slot *l) {
    uint64_t h = l->head;
    for (uint64_t t = l->tail; t < h; t++) vt_account_op(&l->ops[t % LOG_OPS]);
    __atomic_store_n(&l->tail, h, __ATOMIC_RELEASE);
}

/* A live list being copied: where every slot's records go while the
 * tables are copied on write (cow.h), from the snapshot's thread and from
 * any thread that changes its table meanwhile; under `lock` (taken under a
 * slot's lock). */
struct live_copy {
    struct vt_cow_sink sink;
    pthread_mutex_t lock;
    struct vt_snapshot *s;
    double scale;
    int has_since;   /* only the memory made at or after `since` */
    uint64_t since;
    size_t cap, mapped_cap, run;
    int in_memory; /* no file could be made: every record in memory */
    const char *last_api;
    uint8_t last_index;
};

/* The index of API name `api` in s->apis, added when new; VT_LIVE_NO_API
 * for none, or past VT_LIVE_NO_API names (never seen: the names are the
 * hooks' own, a few dozen). */
static uint8_t api_index(struct vt_snapshot *s, const char *api) {
    if (!api) return VT_LIVE_NO_API;
    for (unsigned i = 0; i < s->napis; i++)
        if (s->apis[i] == api || strcmp(s->apis[i], api) == 0) return (uint8_t)i;
    if (s->napis == VT_LIVE_NO_API) {
        vt_records_lost("a live allocation's API name");
        return VT_LIVE_NO_API;
    }
    s->apis[s->napis] = api;
    return (uint8_t)s->napis++;
}

/* 1 + the index in s->mapped of address m (0 for none). */
static uint32_t mapped_index(struct vt_snapshot *s, uint64_t m, size_t *cap) {
    if (!m) return 0;
    if (s->nmapped == *cap) {
        size_t want = *cap ? *cap * 2 : 64;
        uint64_t *bigger = want < UINT32_MAX ? realloc(s->mapped, want * sizeof *bigger) : NULL;
        if (!bigger) {
            vt_records_lost("a VMM handle's mapped address in a snapshot");
            return 0;
        }
        s->mapped = bigger;
        *cap = want;
    }
    s->mapped[s->nmapped++] = m;
    return (uint32_t)s->nmapped;
}

/* The list's file, its stages written by write_stage_out (no slot's lock
 * held); where none can be made every record stays in memory. 1 when made. */
static int open_spill(struct live_copy *c) {
    if (!(c->s->spill = vt_live_spill_open(c->run))) {
        c->in_memory = 1;
        return 0;
    }
    c->s->spill->defer = 1;
    return 1;
}

/* Room for one more record in the list: past the first run (with a file)
 * on the file, else in s->live, made twice as long when full. 0: none. */
static int room(struct live_copy *c) {
    struct vt_snapshot *s = c->s;
    if (s->spill) {
        if (s->nlive >= s->spill->reserved) vt_live_spill_reserve(s->spill, 2 * s->nlive);
        return 1;
    }
    if (s->nlive < c->cap) return 1;
    if (s->nlive >= c->run && !c->in_memory && open_spill(c)) return room(c);
    size_t want = c->cap ? 2 * c->cap : 64;
    if (!c->in_memory && want > c->run) want = c->run;
    struct vt_live *bigger = realloc(s->live, want * sizeof *bigger);
    if (!bigger) return 0;
    s->live = bigger;
    c->cap = want;
    return 1;
}

/* The sink's keep: the records of one chunk into the list (cow.h). */
static void keep_records(void *ctx, struct vt_rec *const *recs, size_t n) {
    struct live_copy *c = ctx;
    struct vt_snapshot *s = c->s;
#ifdef VT_LOCK_PROBE
    uint64_t probe_t0 = vt_probe_cpu_ns();
    if (pthread_mutex_trylock(&c->lock) != 0) {
        VT_PROBE_COUNT(VT_PC_KEEP_WAIT, 1);
        pthread_mutex_lock(&c->lock);
    }
    VT_PROBE_COUNT(VT_PC_RECS, n);
#else
    pthread_mutex_lock(&c->lock);
#endif
    size_t lost = 0;
    for (size_t i = 0; i < n && !c->sink.stop; i++) {
        const struct vt_alloc *a = &recs[i]->a;
        if (c->has_since && a->time_ns < c->since) continue;
        if (!room(c)) {
            lost++;
            continue;
        }
        if (a->api != c->last_api || !c->last_api) {
            c->last_api = a->api;
            c->last_index = api_index(s, a->api);
        }
        struct vt_live x = {a->address, a->bytes, vt_ticks_to_ns(a->time_ns, c->scale), a->stack,
                            a->thread, a->device, a->kind, c->last_index, mapped_index(s, a->mapped, &c->mapped_cap)};
        vt_live_keep(s, &x);
    }
    pthread_mutex_unlock(&c->lock);
    VT_PROBE_COUNT(VT_PC_KEEP_US, (vt_probe_cpu_ns() - probe_t0) / 1000);
    if (lost) vt_records_lost_n(lost, "live allocations in a snapshot (out of memory)");
    if (lost) __atomic_add_fetch(&s->live_lost, lost, __ATOMIC_RELAXED);
}

/* The slot's lock: at once, or before `until`. */
static int take(struct vt_slot *l, const struct timespec *until) {
    if (!until) {
        slot_take(l);
        return 1;
    }
    return vt_slot_take_until(l, until);
}

/* Give up a copy: nothing more kept, and every slot still armed disarmed
 * where its lock is free before `until`. Where it is not, and the slot is
 * still armed, its thread disarms it at its next change, and c (which it
 * still points to) is never freed. 1 when c may be freed: no table points
 * to it (a table's copy, once let go, is never armed again but by the next
 * snapshot, so reading it unlocked as NULL is safe). */
static int copy_give_up(struct live_copy *c, const struct timespec *until) {
    pthread_mutex_lock(&c->lock);
    __atomic_store_n(&c->sink.stop, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&c->lock);
    int all = 1;
    for (struct vt_slot *l = vt_slots_first(); l; l = l->next) {
        if (!take(l, until)) {
            if (__atomic_load_n(&l->table.cow, __ATOMIC_ACQUIRE)) all = 0;
            continue;
        }
        vt_cow_end(&l->table);
        slot_give(l);
    }
    return all;
}

/* Before any lock: memory for the list as long as the tables are now,
 * and past the first run its file, made that long (a file's size grown
 * under a slot's lock kept that slot's thread waiting milliseconds). */
static void prepare_live(struct live_copy *c, const struct timespec *until) {
    size_t est = 0;
    for (struct vt_slot *l = vt_slots_first(); l; l = l->next)
        if (take(l, until)) {
            est += l->table.count;
            slot_give(l);
        }
    size_t first = est < c->run ? est : c->run;
    if (first && (c->s->live = malloc(first * sizeof *c->s->live))) c->cap = first;
    if (est > c->run && c->s->live && open_spill(c)) vt_live_spill_reserve(c->s->spill, est + est / 8);
}

/* Arm every slot's table for its copy (global lock held), each slot's log
 * applied as it is armed, so that the counts hold what the armed tables
 * hold; a table that cannot be armed (out of memory) is copied at once.
 * 0 when a slot's lock was not free before `until` (the copy given up). */
static int arm_live(struct live_copy *c, const struct timespec *until) {
    for (struct vt_slot *l = vt_slots_first(); l; l = l->next) {
        if (!take(l, until)) return 0;
        apply_own_log(l);
        if (!vt_cow_begin(&l->table, &c->sink)) TABLE_WALK(&l->table, r, TABLE_AHEAD, keep_records(c, &r, 1));
        slot_give(l);
    }
    return 1;
}

/* A full stage of the spilled list written, with no lock held: a write to
 * the file under a slot's lock (the copy's, or its thread's while it
 * copies what it changes) kept that thread waiting 1 to 8 ms. */
static void write_stage_out(struct live_copy *c) {
    for (;;) { /* every stage full by now, oldest first */
        struct vt_live_stage st;
        pthread_mutex_lock(&c->lock);
        struct vt_live_spill *sp = c->s->spill;
        int got = sp && vt_live_spill_take_stage(sp, &st);
        pthread_mutex_unlock(&c->lock);
        if (!got) return;
        int ok = vt_live_spill_write_stage(sp, &st);
        pthread_mutex_lock(&c->lock);
        if (!ok) vt_live_spill_keep_stage(sp, &c->s->nlive, &st);
        else vt_live_spill_give_stage(sp, &st);
        pthread_mutex_unlock(&c->lock);
    }
}

/* Copy every armed table, a chunk at a time under its slot's lock (the
 * global lock not held), and disarm it. With `within_ns`, each chunk's
 * lock waited for that long at most (the bound is on a lock held, not on
 * the whole copy, which takes seconds at ten million live); 0 when one was
 * not free in time. */
static int copy_armed(struct live_copy *c, uint64_t within_ns) {
    for (struct vt_slot *l = vt_slots_first(); l; l = l->next) {
        for (int more = 1; more;) {
            struct timespec until;
            if (within_ns) vt_deadline(&until, within_ns);
            if (!take(l, within_ns ? &until : NULL)) return 0;
            more = vt_cow_step(&l->table);
            if (!more) vt_cow_end(&l->table);
            slot_give_yielding(l); /* a thread waiting for it goes first */
            write_stage_out(c);
        }
    }
    return 1;
}

/* The list done: the file's stage written, or no file where the list
 * turned out short (since), and a list of at least one record's memory. */
static void copy_done(struct vt_snapshot *s) {
    if (s->spill) vt_live_spill_flush(s);
    if (s->spill && s->nlive <= s->spill->run) {
        vt_live_spill_close(s->spill);
        s->spill = NULL;
    }
    if (!s->live) s->live = malloc(sizeof *s->live);
}

/* Snapshots one at a time: one copies the tables after it lets the global
 * lock go, and a table is armed for one copy at a time. */
static pthread_mutex_t snapshot_lock = PTHREAD_MUTEX_INITIALIZER;

/* Let go of a copy no armed table points to. */
static void copy_free(struct live_copy *c) {
    pthread_mutex_destroy(&c->lock);
    free(c);
}

/* Let go of a snapshot not made, and of its copy where no armed table
 * points to it any more. */
static void not_made(struct vt_snapshot *s, struct live_copy *c, int free_copy) {
    vt_live_spill_close(s->spill);
    free(s->live);
    free(s->mapped);
    free(s);
    if (free_copy) copy_free(c);
}

/* Interned stacks and sites copied per hold of the global lock. */
#define SITES_CHUNK 4096

/* The stack list (pointers that never change once written; the list's
 * array may move as it grows, so it is read under the lock) and the armed
 * sites (account.h), SITES_CHUNK a hold of the global lock; then the site
 * copy disarmed into *held. 0 when the lock could not be had before
 * `until`: the site copy then stays armed (the applier still writes it,
 * so its memory is never freed). */
static int copy_sites(struct vt_snapshot *s, int sites, struct vt_site_copy *held, const struct timespec *until) {
    size_t n = s->stacks ? s->nstacks : 0;
    if (sites && vt_site_copy.n > n) n = vt_site_copy.n; /* (read unlocked: only this snapshot writes n) */
    for (size_t from = 0;; from += SITES_CHUNK) {
        if (!until) vt_global_lock();
        else if (vt_global_timedlock(until) != 0) return 0;
        size_t to = from + SITES_CHUNK < n ? from + SITES_CHUNK : n;
        if (s->stacks && from < s->nstacks)
            memcpy(s->stacks + from, vt_stacks.list + from, ((to < s->nstacks ? to : s->nstacks) - from) * sizeof *s->stacks);
        if (sites) vt_account_copy_sites((uint32_t)from, (uint32_t)to);
        if (to == n) {
            if (sites) vt_account_disarm(held);
            vt_global_unlock();
            return 1;
        }
        vt_global_unlock();
        vt_global_let_in();
    }
}

/* The snapshot; with `within_ns`, NULL if a lock it needs is not free
 * within that long; with `since`, its live allocations only those made
 * at or after that tick.
 *
 * Under the global lock: every log applied, every slot's table armed for
 * its copy (cow.h) with its own log applied as it is, then the counts, the
 * history and the stacks: all of one point. After it, the tables are
 * copied a chunk at a time, while their threads go on (and copy what they
 * change first). Past the run's records (VRAMTRACE_SPILL) the list goes to
 * a temporary file (s->spill), or stays in memory where none can be made. */
static struct vt_snapshot *snapshot(uint64_t within_ns, const uint64_t *since) {
    struct timespec deadline, *until = NULL;
    if (within_ns) vt_deadline(until = &deadline, within_ns);
    struct vt_snapshot *s = calloc(1, sizeof *s);
    struct live_copy *c = calloc(1, sizeof *c);
    if (!s || !c) {
        free(s);
        free(c);
        vt_records_lost("a snapshot");
        return NULL;
    }
    pthread_mutex_init(&c->lock, NULL);
    c->sink = (struct vt_cow_sink){keep_records, c, 0};
    c->s = s;
    c->run = vt_live_spill_run();
    c->last_index = VT_LIVE_NO_API;
    if (since) {
        c->has_since = 1;
        c->since = *since;
    }
    if (!until) pthread_mutex_lock(&snapshot_lock);
    else if (pthread_mutex_timedlock(&snapshot_lock, until) != 0) {
        not_made(s, c, 1);
        return NULL;
    }
    prepare_live(c, until);
    if (!until) vt_global_lock();
    else if (vt_global_timedlock(until) != 0) {
        pthread_mutex_unlock(&snapshot_lock);
        not_made(s, c, 1);
        return NULL;
    }
    vt_log_drain();
    s->start_unix_ns = vt_clock.start_unix_ns;
    s->now_ns = vt_now_ns();
    double scale = vt_tick_scale(vt_history.nooms > 0);   /* fixed from the first snapshot after a failure */
    c->scale = scale;
    if (!arm_live(c, until)) {
        vt_global_unlock();
        int all = copy_give_up(c, until);
        pthread_mutex_unlock(&snapshot_lock);
        not_made(s, c, all);
        return NULL;
    }
    /* After the tables are armed: the counts of the same point. A mark's
     * snapshot has holders and released memory of the mark's own
     * (mark.c): the process's, a pass over every stack it ever made, are
     * not made for it. */
    int sites = vt_account_copy(s, scale, !since) == 0;
    vt_history_copy(s, scale);
    vt_steps_copy(s, scale);
    vt_mappings_copy(s, scale);
    size_t nstacks = vt_stacks.n;
    s->stacks = malloc((nstacks ? nstacks : 1) * sizeof *s->stacks);
    if (s->stacks) s->nstacks = nstacks;
    else vt_records_lost("a snapshot's stacks");
    vt_global_unlock();
    struct vt_site_copy held = {0};
    if (!copy_sites(s, sites, &held, until) || !copy_armed(c, within_ns)) {
        vt_account_copy_free(&held);
        int all = copy_give_up(c, until);
        pthread_mutex_unlock(&snapshot_lock);
        /* What the global lock's part took (the lent ring) given back
         * with the rest, waiting for that lock no longer than for the
         * others. */
        s->give_back_ns = within_ns;
        vt_snapshot_free(s);
        if (all) copy_free(c);
        return NULL;
    }
    vt_account_holders_of_copy(s, &held);
    pthread_mutex_unlock(&snapshot_lock);
    copy_done(s);
    vt_account_sort(s);
    copy_free(c);
    if (!since) {
        s->released = vt_tracker_released(0, &s->nreleased);
        s->released_host = vt_tracker_released(1, &s->nreleased_host);
    }
    return s;
}

struct vt_snapshot *vt_tracker_snapshot(void) { return snapshot(0, NULL); }

const struct vt_stack **vt_tracker_stacks(size_t *n, uint64_t within_ns) {
    *n = 0;
    struct timespec until;
    if (within_ns) vt_deadline(&until, within_ns);
    if (!within_ns) vt_global_lock();
    else if (vt_global_timedlock(&until) != 0) return NULL;
    size_t k = vt_stacks.n;
    const struct vt_stack **out = malloc((k ? k : 1) * sizeof *out);
    if (out) {
        if (k) memcpy(out, vt_stacks.list, k * sizeof *out);
        *n = k;
    }
    vt_global_unlock();
    return out;
}

struct vt_snapshot *vt_snapshot_since(uint64_t since) { return snapshot(0, &since); }

struct vt_snapshot *vt_tracker_snapshot_within(uint64_t ns) {
    struct vt_snapshot *s = snapshot(ns, NULL);
    if (s) s->give_back_ns = ns;
    return s;
}

void vt_snapshot_free(struct vt_snapshot *s) {
    /* The exit path waits no longer than it did for the snapshot: a lock
     * never let go leaves the ring lent (its newest events held back, then
     * not kept), which at exit no one reads again. */
    for (int done = !s || !s->ring, gave = 0; !done;) {
        struct timespec until;
        if (s->give_back_ns) vt_deadline(&until, s->give_back_ns);
        if (!s->give_back_ns) vt_global_lock();
        else if (vt_global_timedlock(&until) != 0) break;
        if (!gave) vt_history_give_back(s);
        gave = 1;
        done = vt_history_return(VT_RETURN_STEP);
        vt_global_unlock();
    }
    if (s) vt_live_spill_close(s->spill);
    if (s) VT_FREE_ALL(s->live, s->mapped, s->ooms, s->oom_requests, s->events, s->steps, s->mappings, s->stacks, s->holders, s->all_holders, s->peak_holders, s->peak_same, s->released, s->released_host, s);
}

void vt_tracker_lock_all(void) {
    vt_global_lock();
    for (struct vt_slot *l = vt_slots_first(); l; l = l->next) slot_take(l);
    vt_rec_depot_lock();
    vt_rec_slabs_lock();
    vt_intern_slabs_lock();
    vt_slot_blocks_lock();
}

void vt_tracker_unlock_all(void) {
    vt_slot_blocks_unlock();
    vt_intern_slabs_unlock();
    vt_rec_slabs_unlock();
    vt_rec_depot_unlock();
    for (struct vt_slot *l = vt_slots_first(); l; l = l->next) slot_give(l);
    vt_global_unlock();
}

void vt_tracker_reset_child(void) {
    /* A copy the parent had under way is not the child's (its tables are
     * emptied): the lock that kept it alone, held or not, made anew. */
    pthread_mutex_init(&snapshot_lock, NULL);
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ADAPTIVE_NP);
    pthread_mutex_init(&vt_tracker_lock, &attr);
    pthread_mutexattr_destroy(&attr);
    vt_slots_reset_child();
    vt_intern_reset_child();
    vt_departed_reset_child();
    vt_history_reset_child();
    vt_steps_reset_child();
    vt_mappings_reset_child();
    vt_account_reset_child();
    vt_marks_reset_child();
    vt_released_reset_child();
    vt_tracker_flags.touched = 0;
    vt_tracker_flags.alloc_rare = VT_ALLOC_FIRST; /* its tables start empty: nothing left behind */
    vt_my_tid = 0;
    __atomic_add_fetch(&vt_tracker_flags.generation, 1, __ATOMIC_RELEASE);
}
