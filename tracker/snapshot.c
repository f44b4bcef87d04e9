/* snapshot.c -- a consistent copy of the tracker's state, and the tracker
 * across fork.
 *
 * A snapshot applies every log, then copies the live tables (one slot at a
 * time: a thread allocating meanwhile waits for its own slot only), then
 * the counts, the history and the stacks, all under the global lock. A
 * thread goes on allocating while other slots are copied, so each slot's
 * ops logged since the merge are applied as its table is copied, under its
 * lock: the counts then hold exactly what the copied tables hold. Around
 * fork every lock is held, so that the child starts from a state no thread
 * was changing; the child then forgets everything but the devices' facts. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../common/freeall.h"
#include "../common/warn.h"
#include "account.h"
#include "clock.h"
#include "history.h"
#include "intern.h"
#include "live_spill.h"
#include "log.h"
#include "mark.h"
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

/* Record a, its API at index api, as the next of s->live (room made), or
 * past the first run of a spilled list, of its file. */
static inline void keep(struct vt_snapshot *s, const struct vt_alloc *a, double scale, uint8_t api,
                        size_t *mapped_cap) {
    struct vt_live x = {a->address, a->bytes, vt_ticks_to_ns(a->time_ns, scale), a->stack,
                        a->thread, a->device, a->kind, api, mapped_index(s, a->mapped, mapped_cap)};
    vt_live_keep(s, &x);
}

/* Every slot's live records into s->live (compact: struct vt_live), in no
 * particular order, each slot's log applied as it is copied; with
 * `since`, only the device memory made at or after that tick. Past the
 * run's records (VRAMTRACE_SPILL) the rest go to a temporary file
 * (s->spill), or stay in memory where none can be made. 0 when a slot's
 * lock was not free before `until` (then s->live is freed). */
static int copy_live(struct vt_snapshot *s, const struct timespec *until, double scale, const uint64_t *since) {
    size_t cap = 0, mapped_cap = 0, run = vt_live_spill_run();
    int in_memory = 0; /* no file could be made: every record in memory */
    const char *last_api = NULL;
    uint8_t last_index = VT_LIVE_NO_API;
    for (struct vt_slot *l = vt_slots.first; l; l = l->next) {
        if (!until) slot_take(l);
        else if (!vt_slot_take_until(l, until)) {
            free(s->live);
            s->live = NULL;
            vt_live_spill_close(s->spill);
            s->spill = NULL;
            return 0;
        }
        apply_own_log(l);
        size_t n = l->table.count, need = s->nlive + n;
        if (need > run && !s->spill && !in_memory && !(s->spill = vt_live_spill_open(run))) in_memory = 1;
        if (s->spill) vt_live_spill_reserve(s->spill, need);
        if (s->spill) need = need < run ? need : run;
        if (need > cap) {
            size_t want = cap ? cap : 64;
            while (want < need) want *= 2;
            if (s->spill && want > run) want = run;
            struct vt_live *bigger = realloc(s->live, want * sizeof *bigger);
            if (bigger) {
                s->live = bigger;
                cap = want;
            } else {
                vt_records_lost("a thread's live allocations in a snapshot");
            }
        }
        if (need <= cap)
            TABLE_WALK(&l->table, r, TABLE_AHEAD, {
                const struct vt_alloc *a = &r->a;
                if (since && (a->time_ns < *since || !vt_kind_owned_device(a->kind))) continue;
                if (a->api != last_api || !last_api) {
                    last_api = a->api;
                    last_index = api_index(s, a->api);
                }
                keep(s, a, scale, last_index, &mapped_cap);
            });
        slot_give(l);
    }
    if (s->spill) vt_live_spill_flush(s->spill, &s->nlive);
    if (s->spill && s->nlive <= run) { /* fewer kept than counted (since) */
        vt_live_spill_close(s->spill);
        s->spill = NULL;
    }
    if (!s->live) s->live = malloc(sizeof *s->live);
    return 1;
}

/* The snapshot; with `until`, NULL if a lock it needs is not free before
 * then; with `since`, its live allocations copy_live's. */
static struct vt_snapshot *snapshot(const struct timespec *until, const uint64_t *since) {
    struct vt_snapshot *s = calloc(1, sizeof *s);
    if (!s) { vt_records_lost("a snapshot"); return NULL; }
    if (!until) pthread_mutex_lock(&vt_tracker_lock);
    else if (pthread_mutex_timedlock(&vt_tracker_lock, until) != 0) {
        free(s);
        return NULL;
    }
    vt_log_drain();
    s->start_unix_ns = vt_clock.start_unix_ns;
    s->now_ns = vt_now_ns();
    double scale = vt_tick_scale(s->now_ns);
    if (!copy_live(s, until, scale, since)) {
        pthread_mutex_unlock(&vt_tracker_lock);
        free(s);
        return NULL;
    }
    vt_account_copy(s, scale); /* after copy_live: the counts of the same point */
    vt_history_copy(s, scale);
    vt_steps_copy(s, scale);
    size_t nstacks = vt_stacks.n;
    s->stacks = malloc((nstacks ? nstacks : 1) * sizeof *s->stacks);
    if (s->stacks) {
        if (nstacks) memcpy(s->stacks, vt_stacks.list, nstacks * sizeof *vt_stacks.list);
        s->nstacks = nstacks;
    } else {
        vt_records_lost("a snapshot's stacks");
    }
    pthread_mutex_unlock(&vt_tracker_lock);
    return s;
}

struct vt_snapshot *vt_tracker_snapshot(void) { return snapshot(NULL, NULL); }

const struct vt_stack **vt_tracker_stacks(size_t *n, uint64_t within_ns) {
    *n = 0;
    struct timespec until;
    if (within_ns) vt_deadline(&until, within_ns);
    if (!within_ns) pthread_mutex_lock(&vt_tracker_lock);
    else if (pthread_mutex_timedlock(&vt_tracker_lock, &until) != 0) return NULL;
    size_t k = vt_stacks.n;
    const struct vt_stack **out = malloc((k ? k : 1) * sizeof *out);
    if (out) {
        if (k) memcpy(out, vt_stacks.list, k * sizeof *out);
        *n = k;
    }
    pthread_mutex_unlock(&vt_tracker_lock);
    return out;
}

struct vt_snapshot *vt_snapshot_since(uint64_t since) { return snapshot(NULL, &since); }

struct vt_snapshot *vt_tracker_snapshot_within(uint64_t ns) {
    struct timespec until;
    vt_deadline(&until, ns);
    struct vt_snapshot *s = snapshot(&until, NULL);
    if (s) s->give_back_ns = ns;
    return s;
}

void vt_snapshot_free(struct vt_snapshot *s) {
    if (s && s->ring) {
        /* The exit path waits no longer than it did for the snapshot: a
         * lock never let go leaves the ring lent (its newest events held
         * back, then not kept), which at exit no one reads again. */
        struct timespec until;
        if (s->give_back_ns) vt_deadline(&until, s->give_back_ns);
        if (!s->give_back_ns) pthread_mutex_lock(&vt_tracker_lock);
        if (!s->give_back_ns || pthread_mutex_timedlock(&vt_tracker_lock, &until) == 0) {
            vt_history_give_back(s);
            pthread_mutex_unlock(&vt_tracker_lock);
        }
    }
    if (s) vt_live_spill_close(s->spill);
    if (s) VT_FREE_ALL(s->live, s->mapped, s->ooms, s->events, s->steps, s->stacks, s->holders, s->all_holders, s->peak_holders, s);
}

void vt_tracker_lock_all(void) {
    pthread_mutex_lock(&vt_tracker_lock);
    for (struct vt_slot *l = vt_slots.first; l; l = l->next) slot_take(l);
    vt_rec_depot_lock();
}

void vt_tracker_unlock_all(void) {
    vt_rec_depot_unlock();
    for (struct vt_slot *l = vt_slots.first; l; l = l->next) slot_give(l);
    pthread_mutex_unlock(&vt_tracker_lock);
}

void vt_tracker_reset_child(void) {
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ADAPTIVE_NP);
    pthread_mutex_init(&vt_tracker_lock, &attr);
    pthread_mutexattr_destroy(&attr);
    vt_slots_reset_child();
    vt_intern_reset_child();
    vt_history_reset_child();
    vt_steps_reset_child();
    vt_account_reset_child();
    vt_marks_reset_child();
    vt_tracker_flags.touched = 0;
    vt_my_tid = 0;
    __atomic_add_fetch(&vt_tracker_flags.generation, 1, __ATOMIC_RELEASE);
}
