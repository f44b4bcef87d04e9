/* account.c -- reading the counts: holders now and at the peak, a device's
 * live bytes, the devices' facts, and what each kind of memory is counted
 * as (account.h). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/freeall.h"
#include "../common/warn.h"
#include "account.h"
#include "clock.h"

struct vt_counts vt_counts;

static const char *kind_names[VT_KIND_COUNT] = {
    "device", "pitched", "managed",  "async",    "vmm",        "host",
    "array",  "imported", "host_vmm", "host_async", "host_registered", "graph",
};

const char *vt_kind_name(int kind) {
    return kind >= 0 && kind < VT_KIND_COUNT ? kind_names[kind] : "unknown";
}



/* What a site held at the last peak. Lock held. */
static void site_at_peak(const struct vt_site *st, uint64_t *bytes, uint64_t *count) {
    *bytes = st->hwm_gen == vt_counts.peak_gen ? st->hwm_bytes : st->bytes;
    *count = st->hwm_gen == vt_counts.peak_gen ? st->hwm_count : st->count;
}

struct vt_holder *vt_account_holders(uint32_t *n_out, int which) {
    size_t k = 0, nstacks = vt_stacks.n;
    struct vt_holder *h = malloc((nstacks ? nstacks : 1) * sizeof *h);
    if (!h) { *n_out = 0; return NULL; }
    for (size_t i = 0; i < nstacks; i++) {
        const struct vt_site *st = vt_site_of((uint32_t)i);
        uint64_t b = st->bytes, c = st->count;
        if (which == VT_HELD_AT_PEAK) site_at_peak(st, &b, &c);
        if (which == VT_HELD_ALL_KINDS) { b += st->other_bytes; c += st->other_count; }
        if (which == VT_HELD_HOST) { b = st->other_bytes; c = st->other_count; }
        if (b == 0 && c == 0) continue;
        h[k].stack = (uint32_t)i;
        h[k].bytes = b;
        h[k].count = c;
        k++;
    }
    *n_out = (uint32_t)k;
    return h;
}

/* A mixed site's bytes and count by device key - 1 (vt_site's `dev`). */
struct vt_site_split {
    uint64_t bytes[VT_MAX_DEVICES + 1], count[VT_MAX_DEVICES + 1];
};

__attribute__((noinline, cold)) void vt_site_device(struct vt_site *st, uint16_t key, uint64_t bytes, int sign) {
    if (st->dev != VT_SITE_MIXED) {
        if (st->count == 0) { /* nothing live: the site is where this op is */
            if (sign > 0) st->dev = key;
            return;
        }
        struct vt_site_split *sp = calloc(1, sizeof *sp);
        if (!sp) vt_records_lost("a call site's memory by device");
        else {
            sp->bytes[st->dev - 1] = st->bytes;
            sp->count[st->dev - 1] = st->count;
        }
        st->split = sp;
        st->dev = VT_SITE_MIXED;
    }
    struct vt_site_split *sp = st->split;
    if (sign < 0 && st->count <= 1) { /* its last allocation: one device again, or none */
        free(sp);
        st->split = NULL;
        st->dev = 0;
        return;
    }
    if (!sp) return;
    if (sign > 0) {
        sp->bytes[key - 1] += bytes;
        sp->count[key - 1]++;
    } else {
        sp->bytes[key - 1] -= bytes;
        sp->count[key - 1]--;
    }
}

uint64_t vt_site_devices(const struct vt_site *st) {
    if (st->dev >= 2 && st->dev != VT_SITE_MIXED) return (uint64_t)1 << (st->dev - 2);
    uint64_t m = 0;
    if (st->dev == VT_SITE_MIXED && st->split)
        for (int d = 0; d < VT_MAX_DEVICES; d++)
            if (st->split->count[d + 1]) m |= (uint64_t)1 << d;
    return m;
}

struct vt_holder *vt_account_holders_on(uint32_t *n_out, int device) {
    size_t k = 0, nstacks = vt_stacks.n;
    const uint16_t key = (uint16_t)(device + 2);
    struct vt_holder *h = malloc((nstacks ? nstacks : 1) * sizeof *h);
    if (!h) { *n_out = 0; return NULL; }
    for (size_t i = 0; i < nstacks; i++) {
        const struct vt_site *st = vt_site_of((uint32_t)i);
        uint64_t b, c;
        if (st->dev == key) {
            b = st->bytes;
            c = st->count;
        } else if (st->dev == VT_SITE_MIXED && st->split) {
            b = st->split->bytes[key - 1];
            c = st->split->count[key - 1];
        } else {
            continue;
        }
        if (b == 0 && c == 0) continue;
        h[k++] = (struct vt_holder){.stack = (uint32_t)i, .bytes = b, .count = c};
    }
    *n_out = (uint32_t)k;
    return h;
}

int vt_holder_order(const void *a, const void *b) {
    const struct vt_holder *x = a, *y = b;
    if (x->bytes != y->bytes) return x->bytes < y->bytes ? 1 : -1;
    if (x->count != y->count) return x->count < y->count ? 1 : -1;
    return x->stack < y->stack ? -1 : x->stack > y->stack;
}

void vt_tracker_missed(void) {
    __atomic_add_fetch(&vt_counts.missed, 1, __ATOMIC_RELAXED);
    vt_tracker_unseen_release(VT_SPACES_ALL); /* it may have been a free */
}

uint64_t vt_tracker_device_live(int device) {
    if (device < 0 || device >= VT_MAX_DEVICES) return 0;
    vt_global_lock_applied(0);
    uint64_t live = vt_counts.devices[device].live_bytes;
    vt_global_unlock();
    return live;
}

uint64_t vt_outside[VT_MAX_DEVICES];

void vt_tracker_set_outside(int device, uint64_t bytes) {
    if (device < 0 || device >= VT_MAX_DEVICES) return;
    __atomic_store_n(&vt_outside[device], bytes, __ATOMIC_RELAXED);
}

void vt_tracker_set_facts(int device, const char *name, const char *uuid,
                          uint64_t total_bytes) {
    if (device < 0 || device >= VT_MAX_DEVICES) return;
    vt_global_lock();
    struct vt_device *d = &vt_counts.devices[device];
    if (!d->have_facts) {
        snprintf(d->name, sizeof d->name, "%s", name ? name : "");
        snprintf(d->uuid, sizeof d->uuid, "%s", uuid ? uuid : "");
        d->total_bytes = total_bytes;
        __atomic_store_n(&d->have_facts, 1, __ATOMIC_RELEASE);
        __atomic_or_fetch(&vt_tracker_flags.facts, 1ull << device, __ATOMIC_RELEASE);
    }
    vt_global_unlock();
}

void vt_account_sort(struct vt_snapshot *s) {
    if (s->holders) qsort(s->holders, s->nholders, sizeof *s->holders, vt_holder_order);
    if (s->all_holders) qsort(s->all_holders, s->nall_holders, sizeof *s->all_holders, vt_holder_order);
    if (s->peak_holders) qsort(s->peak_holders, s->npeak_holders, sizeof *s->peak_holders, vt_holder_order);
}

int vt_peak_holder_next(const struct vt_snapshot *s, struct vt_peak_cursor *c, struct vt_holder *out) {
    const struct vt_holder *a = NULL, *b = c->j < s->npeak_holders ? &s->peak_holders[c->j] : NULL;
    for (; s->peak_same && s->holders && c->i < s->nholders; c->i++) {
        uint32_t st = s->holders[c->i].stack;
        if (s->peak_same[st / 64] >> (st % 64) & 1) {
            a = &s->holders[c->i];
            break;
        }
    }
    if (!a && !b) return 0;
    if (a && (!b || vt_holder_order(a, b) < 0)) {
        *out = *a;
        c->i++;
    } else {
        *out = *b;
        c->j++;
    }
    return 1;
}

struct vt_site_copy vt_site_copy;

void vt_site_copy_one(uint32_t id) {
    const struct vt_site *st = vt_site_of(id);
    struct vt_site_copy *c = &vt_site_copy;
    if (st->bytes || st->count)
        c->now[c->nnow++] = (struct vt_holder){.stack = id, .count = (uint32_t)st->count, .bytes = st->bytes};
    if (st->other_bytes || st->other_count)
        c->other[c->nother++] =
            (struct vt_holder){.stack = id, .count = (uint32_t)st->other_count, .bytes = st->other_bytes};
    /* At the peak as of the arming: a site not changed since keeps its
     * high-water mark of that peak's generation, or none (then its count
     * now is the one at the peak). */
    int marked = st->hwm_gen == c->peak_gen;
    uint64_t pb = marked ? st->hwm_bytes : st->bytes, pc = marked ? st->hwm_count : st->count;
    if (pb == st->bytes && pc == st->count) {
        if (pb || pc) c->same[id / 64] |= 1ull << (id % 64);
    } else if (pb || pc) {
        c->peak[c->npeak++] = (struct vt_holder){.stack = id, .count = (uint32_t)pc, .bytes = pb};
    }
    c->done[id / 64] |= 1ull << (id % 64);
}

int vt_account_copy(struct vt_snapshot *s, double scale, int sites) {
    s->totals = vt_counts.totals;
    s->totals.missed = __atomic_load_n(&vt_counts.missed, __ATOMIC_RELAXED);
    memcpy(s->devices, vt_counts.devices, sizeof vt_counts.devices);
    s->ndevices = vt_counts.ndevices;
    s->totals.peak_time_ns = vt_ticks_to_ns(s->totals.peak_time_ns, scale);
    for (int i = 0; i < s->ndevices; i++) s->devices[i].peak_time_ns = vt_ticks_to_ns(s->devices[i].peak_time_ns, scale);
    if (!sites) return -1;
    /* Sized now (a mapping: its pages are touched by the copy, after the
     * lock); a site interned later is not the snapshot's. */
    uint32_t n = (uint32_t)vt_stacks.n;
    struct vt_site_copy c = {.n = n, .peak_gen = vt_counts.peak_gen};
    c.done = calloc(n / 64 + 1, sizeof *c.done);
    c.same = calloc(n / 64 + 1, sizeof *c.same);
    c.now = malloc((n ? n : 1) * sizeof *c.now);
    c.peak = malloc((n ? n : 1) * sizeof *c.peak);
    c.other = malloc((n ? n : 1) * sizeof *c.other);
    if (!c.done || !c.same || !c.now || !c.peak || !c.other) {
        VT_FREE_ALL(c.done, c.same, c.now, c.peak, c.other);
        vt_records_lost("the holder tables");
        return -1;
    }
    c.active = 1;
    vt_site_copy = c;
    return 0;
}

void vt_account_copy_sites(uint32_t from, uint32_t to) {
    if (to > vt_site_copy.n) to = vt_site_copy.n;
    for (uint32_t id = from; id < to; id++)
        if (!(vt_site_copy.done[id / 64] >> (id % 64) & 1)) vt_site_copy_one(id);
}

void vt_account_disarm(struct vt_site_copy *out) {
    *out = vt_site_copy;
    vt_site_copy.active = 0;
}

static int by_stack(const void *a, const void *b) {
    const struct vt_holder *x = a, *y = b;
    return x->stack < y->stack ? -1 : x->stack > y->stack;
}

/* Every kind of memory by site: c's device entries with its other kinds'
 * added, both sorted by stack first (into *n_out entries; NULL when out of
 * memory, counted lost). */
static struct vt_holder *all_kinds(struct vt_site_copy *c, size_t *n_out) {
    *n_out = 0;
    struct vt_holder *h = malloc(((size_t)c->nnow + c->nother) * sizeof *h);
    if (!h) {
        vt_records_lost("the holder table of every kind");
        return NULL;
    }
    qsort(c->now, c->nnow, sizeof *c->now, by_stack);
    qsort(c->other, c->nother, sizeof *c->other, by_stack);
    size_t i = 0, j = 0, k = 0;
    while (i < c->nnow || j < c->nother) {
        if (j == c->nother || (i < c->nnow && c->now[i].stack < c->other[j].stack)) {
            h[k++] = c->now[i++];
        } else if (i == c->nnow || c->other[j].stack < c->now[i].stack) {
            h[k++] = c->other[j++];
        } else {
            h[k] = c->now[i++];
            h[k].bytes += c->other[j].bytes;
            h[k++].count += c->other[j++].count;
        }
    }
    *n_out = k;
    return h;
}

void vt_account_holders_of_copy(struct vt_snapshot *s, struct vt_site_copy *c) {
    if (!c->now) return; /* none made: counted as lost when armed */
    /* Where no site holds memory of other kinds, the table of every kind
     * is the device table: left NULL (vt_snapshot's all_is_device). */
    if (c->nother) s->all_holders = all_kinds(c, &s->nall_holders);
    else s->all_is_device = 1;
    s->holders = c->now;
    s->nholders = c->nnow;
    s->peak_holders = c->peak;
    s->npeak_holders = c->npeak;
    s->peak_same = c->same;
    c->now = c->peak = NULL;
    c->same = NULL;
    vt_account_copy_free(c);
}

void vt_account_copy_free(struct vt_site_copy *c) {
    VT_FREE_ALL(c->done, c->same, c->now, c->peak, c->other);
    *c = (struct vt_site_copy){0};
}

void vt_account_reset_child(void) {
    /* A snapshot of the parent's, armed between two chunks of its copy:
     * none in the child (its memory is the parent's thread's to free). */
    vt_site_copy = (struct vt_site_copy){0};
    vt_counts.peak_gen = 0;
    memset(&vt_counts.totals, 0, sizeof vt_counts.totals);
    memset(vt_counts.kinds, 0, sizeof vt_counts.kinds);
    vt_counts.missed = 0;
    for (int i = 0; i < VT_MAX_DEVICES; i++) {
        struct vt_device *d = &vt_counts.devices[i];
        int have = d->have_facts;
        char name[sizeof d->name], uuid[sizeof d->uuid];
        memcpy(name, d->name, sizeof name);
        memcpy(uuid, d->uuid, sizeof uuid);
        uint64_t total = d->total_bytes;
        memset(d, 0, sizeof *d);
        d->have_facts = have;
        memcpy(d->name, name, sizeof name);
        memcpy(d->uuid, uuid, sizeof uuid);
        d->total_bytes = total;
    }
    vt_counts.ndevices = 0;
    vt_counts.last_applied = 0;
}
