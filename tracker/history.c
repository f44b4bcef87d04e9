/* history.c -- the event ring and the OOM records (history.h). */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "../common/warn.h"
#include "account.h"
#include "clock.h"
#include "handlerun.h"
#include "history.h"

/* Its capacity is set by vt_history_init (VRAMTRACE_EVENTS), before the
 * first event: no initialiser, which would put the whole struct (970 KB
 * of failure records) into the library file's .data. */
struct vt_history vt_history;

void vt_history_init(size_t event_capacity) {
    if (vt_history.ring == NULL) vt_history.cap = event_capacity;
}

int vt_history_map(void) {
    if (vt_history.cap == 0 || vt_history.failed) return 0;
    size_t bytes = vt_history.cap * sizeof *vt_history.ring;
    void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) { vt_history.failed = 1; return 0; }
    /* Small pages only: the ring is touched as events land in it, by the
     * hooked call that applies the logs, and a huge page's first-touch
     * fault clears 2 MiB at once (and may compact memory first): 1 to 3 ms
     * of one call's CPU time, where a small page's fault is a microsecond
     * or two every 128 events. */
    madvise(m, bytes, MADV_NOHUGEPAGE);
    vt_history.ring = m;
    return 1;
}

static void add_event(uint64_t now, int type, uint64_t address, uint64_t bytes,
                      uint32_t stack, int device, int kind) {
    struct vt_event *e = ring_add();
    if (e) *e = (struct vt_event){now, address, bytes, stack, (int16_t)device, (uint8_t)type, (uint8_t)kind};
}

/* The slot of failure number n (1 and up) among the kept records. */
static size_t oom_slot(uint64_t n) {
    if (n <= VT_FIRST_OOMS) return (size_t)(n - 1);
    return VT_FIRST_OOMS + (size_t)((n - VT_FIRST_OOMS - 1) % VT_NEWEST_OOMS);
}

/* Count failure o (numbered already) by its request: its entry, made at
 * its first failure while the table has room, else the count of the
 * others. Global lock held. */
static void count_request(const struct vt_oom *o) {
    struct vt_history *h = &vt_history;
    size_t i = h->request_hint;
    struct vt_oom_request *r = i < h->nrequests ? &h->requests[i] : NULL;
    if (!r || r->requested != o->requested || r->stack != o->stack || r->device != o->device ||
        r->kind != o->kind || r->api != o->api) {
        r = NULL;
        for (i = 0; i < h->nrequests; i++) {
            struct vt_oom_request *x = &h->requests[i];
            if (x->requested == o->requested && x->stack == o->stack && x->device == o->device &&
                x->kind == o->kind && x->api == o->api) {
                r = x;
                break;
            }
        }
    }
    if (!r) {
        if (h->nrequests == VT_OOM_REQUESTS) {
            h->requests_other++;
            return;
        }
        i = h->nrequests++;
        r = &h->requests[i];
        *r = (struct vt_oom_request){.requested = o->requested, .api = o->api, .stack = o->stack,
                                     .device = o->device, .kind = o->kind, .first_number = o->number,
                                     .first_ns = o->time_ns, .first_thread = o->thread};
    }
    h->request_hint = i;
    r->count++;
    r->last_number = o->number;
    r->last_ns = o->time_ns;
    r->last_thread = o->thread;
}

static void (*on_failure)(void);

void vt_tracker_on_failure(void (*listener)(void)) {
    __atomic_store_n(&on_failure, listener, __ATOMIC_RELEASE);
}

__thread int vt_thread_oom_open __attribute__((tls_model("initial-exec")));
__thread uint64_t vt_thread_oom_seq __attribute__((tls_model("initial-exec")));
static __thread int oom_open_device __attribute__((tls_model("initial-exec")));
/* Per device: the kernel id of the thread whose out-of-memory failure there
 * is still open (0: none); see vt_oom_claim. */
static int32_t open_by[VT_MAX_DEVICES];

void vt_oom_close_mine(void) {
    vt_thread_oom_open = 0;
    int32_t me = vt_thread_id();
    __atomic_compare_exchange_n(&open_by[oom_open_device], &me, 0, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}

int vt_oom_claim(int device) {
    if (device < 0 || device >= VT_MAX_DEVICES) return 0;
    return __atomic_exchange_n(&open_by[device], 0, __ATOMIC_RELAXED) != 0;
}

uint64_t vt_tracker_ticks(void) { return vt_ticks(); }

void vt_tracker_failed(int is_oom, struct vt_oom *o, const uintptr_t *frames,
                       int depth) {
    if (is_oom) {
        vt_thread_oom_open = 1;
        if (o->device >= 0 && o->device < VT_MAX_DEVICES) {
            oom_open_device = o->device;
            __atomic_store_n(&open_by[o->device], vt_thread_id(), __ATOMIC_RELAXED);
        }
    } else {
        vt_handle_run_end();
    }
    struct vt_holder *pending = NULL, *pending_dev = NULL;
    uint32_t npending = 0, npending_dev = 0;
    size_t at = SIZE_MAX;
    uint64_t number = 0;
    vt_global_lock();
    vt_log_drain();
    uint64_t now = vt_ticks();
    if (o->time_ns && o->time_ns < now) now = o->time_ns; /* when the call failed (vt_tracker_ticks) */
    if (now < vt_counts.last_applied) now = vt_counts.last_applied;
    vt_counts.last_applied = now;
    vt_counts.totals.failed_count++;
    /* Other failures (no driver, bad arguments) are counted but do not make
     * the process one that used a GPU: without a driver, a program must
     * behave and print exactly as it does without vramtrace. */
    struct vt_device *d = NULL;
    if (vt_kind_owned_device(o->kind) && o->device >= 0 && o->device < VT_MAX_DEVICES) {
        if (is_oom) d = device_slot(o->device);
        else if (vt_counts.devices[o->device].used) d = &vt_counts.devices[o->device]; /* its row counts it too */
    }
    if (d) d->failed_count++;
    if (is_oom) {
        __atomic_store_n(&vt_tracker_flags.touched, 1, __ATOMIC_RELAXED);
        number = o->number = ++vt_history.failures;
        o->time_ns = now;
        o->thread = vt_thread_id();
        o->stack = vt_intern(frames, depth, vt_intern_hash(frames, &depth));
        /* The handles this request made before the one that failed. */
        struct vt_handle_run run;
        vt_handle_run_take(o->kind == VT_KIND_VMM, o->stack, o->device, &run);
        o->taken_count = run.count;
        o->taken_bytes = run.bytes;
        o->taken_since_ns = run.first_ticks;
        o->live_bytes = d ? d->live_bytes : vt_counts.totals.host_live_bytes;
        o->have_counts = d != NULL;
        o->live_count = d ? d->live_count : 0;
        o->peak_bytes = d ? d->peak_bytes : 0;
        o->peak_time_ns = d ? d->peak_time_ns : 0;
        o->alloc_count = vt_counts.totals.alloc_count;
        o->free_count = vt_counts.totals.free_count;
        vt_counts.totals.oom_count++;
        if (d) d->oom_count++;
        o->holders = o->device_holders = NULL;
        o->nholders = o->ndevice_holders = 0;
        if (o->procs) {
            /* The caller's array lives on its stack: keep a copy (first 64
             * OOMs), or none. */
            struct vt_proc *copy = NULL;
            if (number <= VT_MAX_OOM_HOLDERS && (copy = malloc((o->nprocs ? o->nprocs : 1) * sizeof *copy)))
                memcpy(copy, o->procs, o->nprocs * sizeof *copy);
            if (!copy && number <= VT_MAX_OOM_HOLDERS) vt_records_lost("an OOM's list of other processes");
            o->procs = copy;
            if (!copy) o->nprocs = 0;
        }
        /* The holders of this point, sorted after the lock is let go and
         * then attached (at 100,000 stacks the sort held the lock for
         * milliseconds); a snapshot in between sees the OOM without them. */
        if (number <= VT_MAX_OOM_HOLDERS) {
            /* A failure of pinned host memory is about the host's memory:
             * its holders are of it. */
            pending = vt_account_holders(&npending, vt_kind_is_host(o->kind) ? VT_HELD_HOST : VT_HELD_NOW);
            if (!pending) vt_records_lost("an OOM's holder table");
            /* A device's failure is about its own memory: when other
             * devices (or memory of no known device) hold some too, its
             * holders alone as well, as the post-mortem shows them. */
            if (pending && d && (vt_counts.totals.live_count != d->live_count ||
                                 vt_counts.totals.live_bytes != d->live_bytes)) {
                pending_dev = vt_account_holders_on(&npending_dev, o->device);
                if (!pending_dev) vt_records_lost("an OOM's holder table");
            }
        }
        /* Kept: the first ones, or in the ring of the newest over the
         * oldest of them (whose holders and other processes, kept only
         * for the first 64, are none). */
        at = oom_slot(number);
        if (at < vt_history.nooms) {
            struct vt_oom *old = &vt_history.ooms[at];
            free((void *)old->holders);
            free((void *)old->device_holders);
            free((void *)old->procs);
        } else {
            vt_history.nooms = at + 1;
        }
        vt_history.ooms[at] = *o;
        count_request(o);
        add_event(now, VT_EV_OOM, 0, o->requested, o->stack, o->device, o->kind);
    }
    vt_global_unlock();
    if (pending) {
        qsort(pending, npending, sizeof *pending, vt_holder_order);
        if (pending_dev) qsort(pending_dev, npending_dev, sizeof *pending_dev, vt_holder_order);
        vt_global_lock();
        struct vt_oom *kept = at < vt_history.nooms ? &vt_history.ooms[at] : NULL;
        if (kept && !kept->holders && kept->number == number) {
            kept->holders = pending;
            kept->nholders = npending;
            kept->device_holders = pending_dev;
            kept->ndevice_holders = npending_dev;
            o->holders = pending; /* the caller's copy, as before */
            o->nholders = npending;
            o->device_holders = pending_dev;
            o->ndevice_holders = npending_dev;
            pending = pending_dev = NULL;
        }
        vt_global_unlock();
        free(pending);
        free(pending_dev);
    }
    if (is_oom) vt_thread_oom_seq = number;
    void (*listener)(void) = __atomic_load_n(&on_failure, __ATOMIC_ACQUIRE);
    if (is_oom && listener) listener();
}

/* The event of index i (in the whole history) as the history has it now:
 * in the ring, or held back while the ring is lent. Global lock held; i
 * one of the newest cap events written. */
static const struct vt_event *event_now(uint64_t i) {
    if (vt_history.lent && i >= vt_history.lent_first + vt_history.cap)
        return &vt_history.spill[i - vt_history.lent_first - vt_history.cap];
    return &vt_history.ring[i % vt_history.cap];
}

/* The held-back events' room: VT_SPILL_MAX entries mapped once, never
 * moved nor given back (its pages are touched as events land, 4 MiB at
 * most). It filled under the global lock, in the hooked call that
 * applied the logs: grown by realloc there, one call copied a megabyte
 * (261 page faults, 5.7 ms of its CPU time at 10,000,000 live) and a
 * remap's TLB flush waited on every other CPU of the process. */
static int spill_map(void) {
    static int failed; /* not tried again at every event */
    if (vt_history.spill) return 1;
    if (failed) return 0;
    size_t bytes = (size_t)VT_SPILL_MAX * sizeof *vt_history.spill;
    void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) {
        failed = 1;
        return 0;
    }
    madvise(m, bytes, MADV_NOHUGEPAGE); /* as the ring: a page's fault at a time */
    vt_history.spill = m;
    return 1;
}

struct vt_event *vt_history_spill(void) {
    if (vt_history.nspill == VT_SPILL_MAX || !spill_map()) {
        vt_history.spill_lost++;
        return NULL;
    }
    if (++vt_history.next == vt_history.cap) vt_history.next = 0;
    vt_history.written++;
    return &vt_history.spill[vt_history.nspill++];
}

void vt_history_copy(struct vt_snapshot *s, double scale) {
    size_t nooms = vt_history.nooms;
    s->ooms = malloc((nooms ? nooms : 1) * sizeof *s->ooms);
    if (s->ooms) {
        /* By number: the first ones, then the ring's from its oldest. */
        uint64_t n = vt_history.failures, newest = n > VT_FIRST_OOMS ? n - VT_FIRST_OOMS : 0;
        if (newest > VT_NEWEST_OOMS) newest = VT_NEWEST_OOMS;
        size_t first = nooms < VT_FIRST_OOMS ? nooms : VT_FIRST_OOMS;
        memcpy(s->ooms, vt_history.ooms, first * sizeof *s->ooms);
        for (uint64_t k = 0; k < newest; k++) s->ooms[first + k] = vt_history.ooms[oom_slot(n - newest + 1 + k)];
        s->nooms = nooms;
        for (size_t i = 0; i < nooms; i++) {   /* kept in ticks; time_ns at this snapshot's rate */
            s->ooms[i].ticks = s->ooms[i].time_ns;
            s->ooms[i].time_ns = vt_ticks_to_ns(s->ooms[i].ticks, scale);
            s->ooms[i].peak_time_ns = vt_ticks_to_ns(s->ooms[i].peak_time_ns, scale);
            s->ooms[i].taken_since_ns = vt_ticks_to_ns(s->ooms[i].taken_since_ns, scale);
        }
    } else {
        vt_records_lost("a snapshot's OOM records");
    }
    size_t nreq = vt_history.nrequests;
    s->oom_requests = malloc((nreq ? nreq : 1) * sizeof *s->oom_requests);
    if (s->oom_requests) {
        memcpy(s->oom_requests, vt_history.requests, nreq * sizeof *s->oom_requests);
        s->noom_requests = nreq;
        s->oom_requests_other = vt_history.requests_other;
        for (size_t i = 0; i < nreq; i++) {
            s->oom_requests[i].first_ns = vt_ticks_to_ns(s->oom_requests[i].first_ns, scale);
            s->oom_requests[i].last_ns = vt_ticks_to_ns(s->oom_requests[i].last_ns, scale);
        }
    } else if (nreq) {
        vt_records_lost("a snapshot's OOM records");
    }
    vt_history_return(SIZE_MAX); /* the ring whole before it is read or lent again */
    s->events_dropped_while_read = vt_history.read_lost;
    size_t cap = vt_history.cap;
    uint64_t written = vt_history.written;
    size_t ne = written < cap ? written : cap;
    uint64_t first = written - ne;
    s->events_dropped = first;
    s->tick_scale = scale;
    if (!ne) return;
    if (!vt_history.lent) {
        /* Lent in place: the ring's events of this window stay put until
         * the snapshot gives it back (ring_add). */
        vt_history.lent = 1;
        vt_history.lent_first = first;
        s->ring = vt_history.ring;
        s->ring_cap = cap;
        s->nevents = ne;
        return;
    }
    s->events = malloc(ne * sizeof *s->events);
    if (!s->events) {
        vt_records_lost("a snapshot's event history");
        return;
    }
    for (size_t i = 0; i < ne; i++) {
        s->events[i] = *event_now(first + i);
        s->events[i].time_ns = vt_ticks_to_ns(s->events[i].time_ns, scale);
    }
    s->nevents = ne;
}

void vt_history_give_back(struct vt_snapshot *s) {
    if (!s->ring) return;
    s->ring = NULL;
    if (!vt_history.lent) return; /* a forked child's history started anew */
    /* The ring is the recorder's again at once: a new event goes to its
     * own place, over a lent one nobody reads now; the held-back ones
     * still to move are skipped there once something newer is there. */
    vt_history.lent = 0;
    vt_history.returning = 1;
    vt_history.spill_first = vt_history.lent_first + vt_history.cap;
}

int vt_history_return(size_t most) {
    if (!vt_history.returning) return 1;
    uint64_t base = vt_history.spill_first, written = vt_history.written;
    size_t k = vt_history.spill_back, end = vt_history.nspill - k > most ? k + most : vt_history.nspill;
    for (; k < end; k++)
        if (written <= base + k + vt_history.cap) /* nothing newer in its place yet */
            vt_history.ring[(base + k) % vt_history.cap] = vt_history.spill[k];
    vt_history.spill_back = k;
    if (k < vt_history.nspill) return 0;
    uint64_t lost = vt_history.spill_lost;
    vt_history.nspill = vt_history.spill_back = 0; /* its room kept (spill_map) */
    vt_history.spill_lost = 0;
    vt_history.returning = 0;
    /* Counted apart from records_lost: nothing ran short of memory (the
     * exit summary said "dropped for lack of memory in the traced
     * process" of them, and sent users looking for a host memory limit). */
    if (lost) {
        vt_history.read_lost += lost;
        vt_warn("%llu event%s dropped while a dump or report read the event history", (unsigned long long)lost,
                lost == 1 ? "" : "s");
    }
    return 1;
}

void vt_history_reset_child(void) {
    for (size_t i = 0; i < vt_history.nooms; i++) {
        free((void *)vt_history.ooms[i].holders);
        free((void *)vt_history.ooms[i].device_holders);
        free((void *)vt_history.ooms[i].procs);
    }
    vt_history.nooms = 0;
    vt_history.failures = 0;
    vt_history.nrequests = vt_history.request_hint = 0;
    vt_history.requests_other = 0;
    vt_history.written = 0;
    vt_history.next = 0;
    vt_history.nspill = vt_history.spill_back = 0; /* the parent's room is the child's copy */
    vt_history.spill_lost = vt_history.read_lost = 0;
    vt_history.lent = vt_history.returning = 0;
    memset(open_by, 0, sizeof open_by); /* the parent's threads' failures */
    vt_thread_oom_open = 0;
}
