/* account.h -- the counts: live and peak bytes per device, per kind of
 * memory and per call site, with their high-water marks.
 *
 * Ops reach the counts only through the merge of the logs (log.c), one at
 * a time in time-stamp order, under the global lock. A peak of the
 * process's device bytes is marked by a new peak_gen, and every site keeps
 * its values at the last peak lazily (struct vt_site): O(1) an op.
 * Internal to tracker/. */
#ifndef VT_ACCOUNT_H
#define VT_ACCOUNT_H

#include <stdint.h>

#include "history.h"
#include "intern.h"
#include "internal.h"
#include "log.h"
#include "mark.h"
#include "released.h"

/* Global lock held to read or write, except `missed` (atomic). */
struct vt_counts {
    struct vt_totals totals;
    struct vt_device devices[VT_MAX_DEVICES];
    int ndevices;
    uint64_t peak_gen;
    uint64_t last_applied; /* ticks of the newest op applied */
    uint64_t missed;       /* atomic: vt_tracker_missed */
    struct vt_kind_counts kinds[VT_MAX_DEVICES + 1]; /* VT_KINDS_HOST, then device d at d + 1 */
};
extern struct vt_counts vt_counts VT_HIDDEN;
extern uint64_t vt_outside[VT_MAX_DEVICES] VT_HIDDEN; /* vt_tracker_set_outside's */

/* Device `device`'s counters, marked used; NULL for no device. */
static inline struct vt_device *device_slot(int device) {
    if (device < 0 || device >= VT_MAX_DEVICES) return NULL;
    struct vt_device *d = &vt_counts.devices[device];
    if (__builtin_expect(!d->used, 0)) {
        if (device >= vt_counts.ndevices) vt_counts.ndevices = device + 1;
        d->used = 1;
    }
    return d;
}

/* The kinds counted as the process's own device memory, as bits: the
 * kinds vt_kind_owned_device accepts that have per-kind counters. */
#define VT_OWNED_KINDS                                                                                  \
    ((1u << VT_KIND_DEVICE) | (1u << VT_KIND_PITCHED) | (1u << VT_KIND_MANAGED) | (1u << VT_KIND_ASYNC) | \
     (1u << VT_KIND_VMM) | (1u << VT_KIND_ARRAY) | (1u << VT_KIND_GRAPH))
_Static_assert(VT_KIND_COUNT <= 32, "a kind is a bit of VT_OWNED_KINDS");

/* A snapshot's copy of every site's counts, of the point its tables were
 * armed (snapshot.c), made a chunk of sites at a time after the global
 * lock is let go, as the live tables are (cow.h): before an op changes a
 * site not yet copied, the applier copies it (site_copy_touch). At 100,000
 * stacks the three holder tables built in one hold of the global lock
 * held it 3.7 to 4.6 ms. A site copied is its holder entries, written
 * into the snapshot's tables as they will be (in the order copied, sorted
 * later): device memory now, at the peak, and the memory of other kinds
 * (pinned host, imported) of the sites that hold any. A copy of each
 * site's six counts first (48 bytes a site) was 48 MB of the 153 MB a dump
 * added at 1,000,000 stacks. A site that held at the peak what it holds
 * now has no peak entry of its own, only a bit in `same` (at an OOM most
 * sites do; at 1,000,000 stacks the peak table was 16 of the 65 MiB a dump
 * added). Each table has room for n entries: past
 * malloc's threshold a mapping, whose pages become resident only as
 * entries are written. Global lock held to read or write any of it. */
struct vt_site_copy {
    int active;
    uint32_t n;        /* the sites copied: ids below n */
    uint64_t peak_gen; /* vt_counts.peak_gen when armed */
    uint64_t *done;    /* a bit per site copied */
    struct vt_holder *now, *peak, *other;
    uint32_t nnow, npeak, nother;
    uint64_t *same;    /* a bit per site whose `now` entry is its peak entry too */
};
extern struct vt_site_copy vt_site_copy VT_HIDDEN;

/* Copy site `id` into vt_site_copy (not copied yet, id < n). Lock held. */
void vt_site_copy_one(uint32_t id) VT_HIDDEN;

static inline void site_copy_touch(uint32_t id) {
    if (__builtin_expect(vt_site_copy.active, 0) && id < vt_site_copy.n &&
        !(vt_site_copy.done[id / 64] >> (id % 64) & 1))
        vt_site_copy_one(id);
}

/* Site st's memory by device, for an op of `bytes` (sign: +1 added, -1
 * taken away) on the device of key `key` (vt_site's `dev`) when st->dev
 * is not that key: a site with nothing live takes the op's device; one
 * with memory live on another becomes mixed and keeps its bytes by device
 * from then on, until nothing of it is live again. Lock held, before the
 * op changes st's counts. */
void vt_site_device(struct vt_site *st, uint16_t key, uint64_t bytes, int sign) VT_HIDDEN;

/* A bit per device (0 to 63) site st's device memory is on. Lock held. */
uint64_t vt_site_devices(const struct vt_site *st) VT_HIDDEN;

/* Add or remove bytes from the live counters. Lock held. Returns the
 * device whose counters moved, NULL for memory that is not the device's
 * own (pinned host, imported). The op's fields are read once, into
 * locals: the counters are stored through pointers the compiler cannot
 * tell apart from the op's, and would otherwise be read again after each
 * store. */
static inline __attribute__((always_inline)) struct vt_device *account(const struct vt_event *a, int sign, uint64_t now) {
    const unsigned kind = a->kind;
    const int device = a->device;
    const uint64_t bytes = a->bytes;
    const int on_device = device >= 0 && device < VT_MAX_DEVICES;
    struct vt_site *st = vt_site_of(a->stack);
    if (st) site_copy_touch(a->stack); /* before any of its counts change */
    if (kind < VT_KIND_COUNT) {
        struct vt_kind_counts *kc = &vt_counts.kinds[on_device ? device + 1 : VT_KINDS_HOST];
        if (sign < 0) kc->live_bytes[kind] -= bytes;
        else if ((kc->live_bytes[kind] += bytes) > kc->peak_bytes[kind])
            kc->peak_bytes[kind] = kc->live_bytes[kind];
        if (__builtin_expect(!((VT_OWNED_KINDS >> kind) & 1), 0)) {
            if (st) {
                if (sign > 0) { st->other_bytes += bytes; st->other_count++; }
                else { st->other_bytes -= bytes; st->other_count--; }
            }
            if (kind == VT_KIND_IMPORTED) {
                if (sign > 0) {
                    vt_counts.totals.imported_live_bytes += bytes;
                    vt_counts.totals.imported_live_count++;
                } else {
                    vt_counts.totals.imported_live_bytes -= bytes;
                    vt_counts.totals.imported_live_count--;
                }
                return NULL;
            }
            /* The host's kinds. */
            if (sign > 0) {
                vt_counts.totals.host_live_bytes += bytes;
                vt_counts.totals.host_live_count++;
                if (vt_counts.totals.host_live_bytes > vt_counts.totals.host_peak_bytes)
                    vt_counts.totals.host_peak_bytes = vt_counts.totals.host_live_bytes;
            } else {
                vt_counts.totals.host_live_bytes -= bytes;
                vt_counts.totals.host_live_count--;
            }
            return NULL;
        }
    }
    /* The process's own device memory (a kind past VT_KIND_COUNT too, as
     * vt_kind_owned_device counts it). Only an op that adds bytes marks
     * the device used: one that takes them away follows, in the same log,
     * the allocation that added them (a forked child keeps no record of
     * its parent's). */
    struct vt_device *d = !on_device ? NULL : sign > 0 ? device_slot(device) : &vt_counts.devices[device];
    if (st) {
        /* A site's memory on one device (the rule) costs this compare. */
        const uint16_t key = on_device ? (uint16_t)(device + 2) : 1;
        if (__builtin_expect(st->dev != key, 0)) vt_site_device(st, key, bytes, sign);
        if (st->hwm_gen != vt_counts.peak_gen) {
            st->hwm_bytes = st->bytes;
            st->hwm_count = st->count;
            st->hwm_gen = vt_counts.peak_gen;
        }
        if (sign > 0) { st->bytes += bytes; st->count++; }
        else { st->bytes -= bytes; st->count--; }
    }
    if (sign > 0) {
        vt_counts.totals.live_bytes += bytes;
        vt_counts.totals.live_count++;
        if (vt_counts.totals.live_bytes > vt_counts.totals.peak_bytes) {
            vt_counts.totals.peak_bytes = vt_counts.totals.live_bytes;
            vt_counts.totals.peak_time_ns = now;
            vt_counts.peak_gen++;
        }
        if (d) {
            d->live_bytes += bytes;
            d->live_count++;
            if (d->live_bytes > d->peak_bytes) {
                d->peak_bytes = d->live_bytes;
                d->peak_time_ns = now;
            }
        }
    } else {
        vt_counts.totals.live_bytes -= bytes;
        vt_counts.totals.live_count--;
        if (d) {
            d->live_bytes -= bytes;
            d->live_count--;
        }
    }
    return d;
}

/* Count one op at time `now` (its time stamp, made no older than what was
 * applied before): 1 when its event goes to the history as it is (an
 * allocation's or a free's: its type is the event's), 2 when it goes there
 * as an allocation (a free the driver refused: the memory is live again),
 * 3 when it goes there as a free (a record replaced), else 0. Global lock
 * held. */
static inline __attribute__((always_inline)) int count_op(const struct vt_event *o, uint64_t now) {
    struct vt_device *d;
    /* Tested in turn, allocations and frees first (a switch's jump table
     * costs its bound check and an indirect jump at every op). */
    if (__builtin_expect(o->type == OP_ALLOC, 1)) {
        d = account(o, +1, now);
        vt_counts.totals.alloc_count++;
        if (d) d->alloc_count++;
        return 1;
    }
    if (__builtin_expect(o->type == OP_FREE, 1)) {
        d = account(o, -1, now);
        vt_counts.totals.free_count++;
        if (d) d->free_count++;
        return 1;
    }
    if (o->type == OP_REPLACED) {
        /* The driver handed the address out again: the memory went back
         * without a free vramtrace saw (a reset or a context's destruction
         * that released nothing in the counts). Counted as a reset's
         * release is: a free, and released without one, a leak. */
        d = account(o, -1, now);
        vt_counts.totals.free_count++;
        if (d) d->free_count++;
        vt_released_add(o->stack, o->bytes, o->kind);
        return 3;
    } else if (o->type == OP_RESTORED) {
        /* The driver refused a free counted already: the memory is live
         * again. The free's event stays (the program did ask for it) and
         * an allocation's follows it, so that a replay of the events ends
         * with the memory live, as the counts do. */
        d = account(o, +1, now);
        vt_counts.totals.free_count--;
        if (d) d->free_count--;
        return 2;
    } else {
        vt_counts.totals.unknown_frees++;
    }
    return 0;
}

/* Count one op. Global lock held. Its time stamp is made no older than
 * what was applied before (an op logged late: a free's time stamp is
 * taken before the real call, its entry made after). An allocation's or a
 * free's entry goes to the history as it is. */
static inline __attribute__((always_inline)) void vt_account_op(const struct vt_event *o) {
    uint64_t now = o->time_ns > vt_counts.last_applied ? o->time_ns : vt_counts.last_applied;
    vt_counts.last_applied = now;
    struct vt_event *e;
    int w = count_op(o, now);
    if (w && (e = ring_add())) {
        *e = *o;
        e->time_ns = now;
        if (__builtin_expect(w != 1, 0)) e->type = w == 2 ? VT_EV_ALLOC : VT_EV_FREE;
    }
    if (__builtin_expect(vt_marks_open, 0)) vt_mark_op(o);
}

/* Count the ops o[0] .. o[n-1], in order: the same as vt_account_op on
 * each. Global lock held. When the ring is mapped, not lent, and has room
 * for n events before its end, and no mark is open (the usual case), the
 * newest time stamp and the ring's cursor are kept in locals for the run,
 * and the events written without ring_add's checks: the counters are
 * stored through pointers the compiler cannot tell apart from the
 * history's, which it would otherwise read again at every op. */
static inline void vt_account_ops(const struct vt_event *o, size_t n) {
    if (__builtin_expect(!vt_history.ring || vt_history.lent || vt_marks_open || vt_history.cap - vt_history.next < n,
                         0)) {
        for (size_t i = 0; i < n; i++) vt_account_op(&o[i]);
        return;
    }
    struct vt_event *const first = &vt_history.ring[vt_history.next];
    struct vt_event *e = first;
    uint64_t last = vt_counts.last_applied;
    for (size_t i = 0; i < n; i++) {
        uint64_t now = o[i].time_ns > last ? o[i].time_ns : last;
        last = now;
        int w = count_op(&o[i], now);
        if (w) {
            *e = o[i];
            e->time_ns = now;
            if (__builtin_expect(w != 1, 0)) e->type = w == 2 ? VT_EV_ALLOC : VT_EV_FREE;
            e++;
        }
    }
    vt_counts.last_applied = last;
    size_t k = (size_t)(e - first);
    vt_history.next += k;
    if (vt_history.next == vt_history.cap) vt_history.next = 0;
    vt_history.written += k;
}

/* What vt_account_holders counts: device memory now, device memory at the
 * last peak, every kind of memory now (device, pinned host, imported), or
 * the memory not the device's own now (pinned host, and imported: a
 * site's counts do not tell the two apart). */
enum { VT_HELD_NOW, VT_HELD_AT_PEAK, VT_HELD_ALL_KINDS, VT_HELD_HOST };

/* Memory by call site (`which`: a VT_HELD_*), as a malloc'd array in stack
 * order (NULL when out of memory); *n_out its length. Lock held. */
struct vt_holder *vt_account_holders(uint32_t *n_out, int which) VT_HIDDEN;

/* The same of device `device`'s memory alone (0 <= device <
 * VT_MAX_DEVICES), device memory now. Lock held. */
struct vt_holder *vt_account_holders_on(uint32_t *n_out, int device) VT_HIDDEN;

/* Copy the counts into a snapshot, times converted with `scale`: totals
 * and devices, and (with `sites`) arm vt_site_copy for the holders (now,
 * of every kind, at the peak), of the same point. Lock held, every log
 * applied: the snapshot's live tables must have been armed at the same
 * point (snapshot.c). 0, or -1 when out of memory or not asked for
 * (nothing armed). */
int vt_account_copy(struct vt_snapshot *s, double scale, int sites) VT_HIDDEN;

/* Copy the armed sites [from, to) not copied yet. Lock held. */
void vt_account_copy_sites(uint32_t from, uint32_t to) VT_HIDDEN;

/* Every armed site copied: disarm, the copy handed to *out (lock held);
 * then the snapshot's holder tables built from it with no lock held (in
 * no order: vt_account_sort), and its memory let go. */
void vt_account_disarm(struct vt_site_copy *out) VT_HIDDEN;
void vt_account_holders_of_copy(struct vt_snapshot *s, struct vt_site_copy *c) VT_HIDDEN;
/* A disarmed copy's memory let go, unused. */
void vt_account_copy_free(struct vt_site_copy *c) VT_HIDDEN;

/* Sort a snapshot's holder tables, largest first, with no lock held: at
 * 100,000 stacks the sort took 16 to 32 ms, and under the global lock
 * every thread whose log filled waited for it. */
void vt_account_sort(struct vt_snapshot *s) VT_HIDDEN;

/* In a forked child: every count zero, the devices' facts kept. */
void vt_account_reset_child(void) VT_HIDDEN;

#endif
