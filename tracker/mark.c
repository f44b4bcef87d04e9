/* mark.c -- marks: memory allocated since a point in time (mark.h).
 *
 * Each open mark keeps the allocations counted since it in a table of its
 * own, keyed like the live tables (name space and address), so that a free,
 * whose op does not say when its allocation was made, is counted for the
 * marks that counted the allocation and for no other. By call site it
 * keeps live bytes and, lazily, their values at its last peak, as
 * account.h does for the process (a new peak is a new peak_gen; a site
 * saves its values before it changes if it has not since that peak).
 * Everything here is under the tracker's global lock. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "../common/warn.h"
#include "clock.h"
#include "internal.h"
#include "log.h"
#include "mark.h"

/* One allocation counted since a mark. */
struct entry {
    uint64_t address;
    uint64_t bytes;
    uint32_t stack;
    int16_t device;
    uint8_t space;
    uint8_t used;
    uint8_t owned;   /* the process's own device memory (vt_kind_owned_device): in the usage */
};

struct site {
    uint32_t stack;
    uint8_t used;
    uint64_t bytes, count;           /* the process's own device memory */
    uint64_t other_bytes, other_count; /* pinned host and imported memory: leaks, not usage */
    uint64_t hwm_bytes, hwm_count, hwm_gen;
    uint64_t rel_bytes, rel_count;   /* released by a reset without a free: device memory */
    uint64_t rel_host_bytes, rel_host_count; /* and pinned host memory, apart */
};

/* The last frees a mark counted: a free the driver refuses is undone by an
 * OP_RESTORED, which brings the allocation back for the marks whose
 * allocation it was. */
#define FREED_KEPT 16

struct mark {
    int id;                /* 0: not open */
    uint64_t since;        /* ticks */
    struct vt_mark_usage dev[VT_MAX_DEVICES];
    struct vt_mark_usage all;
    struct entry *e;       /* open addressing, linear probing; cap a power of two */
    size_t cap, n;
    struct site *sites;    /* by stack id: open addressing, linear probing; scap a power of two */
    size_t scap, nsites;
    uint64_t peak_gen;
    struct entry freed[FREED_KEPT];
    unsigned nfreed;       /* total pushed; the ring holds the last FREED_KEPT */
};

static struct mark marks[VT_MAX_MARKS];
int vt_marks_open;
static int serial;

static size_t slot_of(uint64_t address, int space, size_t cap) {
    uint64_t h = (address ^ ((uint64_t)space << 61)) * 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 17) & (cap - 1);
}

static struct entry *find(struct mark *m, uint64_t address, int space) {
    if (!m->cap) return NULL;
    for (size_t i = slot_of(address, space, m->cap);; i = (i + 1) & (m->cap - 1)) {
        struct entry *x = &m->e[i];
        if (!x->used) return NULL;
        if (x->address == address && x->space == space) return x;
    }
}

/* Take x out of the table, moving later entries of its run back so that
 * no lookup stops short. */
static void remove_entry(struct mark *m, struct entry *x) {
    size_t i = (size_t)(x - m->e), mask = m->cap - 1;
    m->e[i].used = 0;
    m->n--;
    for (size_t j = (i + 1) & mask; m->e[j].used; j = (j + 1) & mask) {
        size_t home = slot_of(m->e[j].address, m->e[j].space, m->cap);
        /* e[j] may move to i when i lies on its way from home to j. */
        if (((j - home) & mask) >= ((j - i) & mask)) {
            m->e[i] = m->e[j];
            m->e[j].used = 0;
            i = j;
        }
    }
}

static int insert(struct mark *m, const struct entry *x) {
    if ((m->n + 1) * 2 > m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 64;
        struct entry *bigger = calloc(cap, sizeof *bigger);
        if (!bigger) return 0;
        for (size_t i = 0; i < m->cap; i++) {
            if (!m->e[i].used) continue;
            size_t k = slot_of(m->e[i].address, m->e[i].space, cap);
            while (bigger[k].used) k = (k + 1) & (cap - 1);
            bigger[k] = m->e[i];
        }
        free(m->e);
        m->e = bigger;
        m->cap = cap;
    }
    size_t k = slot_of(x->address, x->space, m->cap);
    while (m->e[k].used) k = (k + 1) & (m->cap - 1);
    m->e[k] = *x;
    m->e[k].used = 1;
    m->n++;
    return 1;
}

static size_t site_slot(uint32_t stack, size_t cap) {
    return (size_t)(((uint64_t)stack * 0x9e3779b97f4a7c15ull) >> 23) & (cap - 1);
}

/* The site of a stack id, made (zero) where the mark has none yet; NULL
 * when memory ran out. A table of the stacks the mark met, not an array
 * by id: the ids of a process's new stacks grow with every stack it ever
 * made, and an array up to the highest was 88 bytes for each of them
 * (176 MB for a mark that met one allocation at a millionth stack, made
 * and read through at each of its reports). */
static struct site *site_of(struct mark *m, uint32_t stack) {
    if ((m->nsites + 1) * 2 > m->scap) {
        size_t cap = m->scap ? m->scap * 2 : 64;
        struct site *bigger = calloc(cap, sizeof *bigger);
        if (!bigger) return NULL;
        for (size_t i = 0; i < m->scap; i++) {
            if (!m->sites[i].used) continue;
            size_t k = site_slot(m->sites[i].stack, cap);
            while (bigger[k].used) k = (k + 1) & (cap - 1);
            bigger[k] = m->sites[i];
        }
        free(m->sites);
        m->sites = bigger;
        m->scap = cap;
    }
    size_t k = site_slot(stack, m->scap);
    for (; m->sites[k].used; k = (k + 1) & (m->scap - 1))
        if (m->sites[k].stack == stack) return &m->sites[k];
    m->sites[k].used = 1;
    m->sites[k].stack = stack;
    m->nsites++;
    return &m->sites[k];
}

/* One allocation of `kind` the mark counted released without a free. */
static void released_at(struct mark *m, uint32_t stack, uint64_t bytes, int kind) {
    struct site *st = site_of(m, stack);
    if (st && vt_kind_is_host(kind)) { st->rel_host_bytes += bytes; st->rel_host_count++; }
    else if (st) { st->rel_bytes += bytes; st->rel_count++; }
    else vt_records_lost("a mark's released memory");
}

/* Count x in or out of the mark's figures (sign +1 or -1). Memory that is
 * not the process's own device memory is counted by its site only, for
 * the leak report (as the exit's leak check counts it): the usage and its
 * peak are device memory's. */
static void count(struct mark *m, const struct entry *x, int sign) {
    struct site *st = site_of(m, x->stack);
    if (!x->owned) {
        if (!st) vt_records_lost("a mark's call sites");
        else if (sign > 0) { st->other_bytes += x->bytes; st->other_count++; }
        else { st->other_bytes -= x->bytes; st->other_count--; }
        return;
    }
    if (st) {
        if (st->hwm_gen != m->peak_gen) {
            st->hwm_bytes = st->bytes;
            st->hwm_count = st->count;
            st->hwm_gen = m->peak_gen;
        }
        if (sign > 0) { st->bytes += x->bytes; st->count++; }
        else { st->bytes -= x->bytes; st->count--; }
    } else {
        vt_records_lost("a mark's call sites");
    }
    struct vt_mark_usage *u[2] = {&m->all, x->device >= 0 && x->device < VT_MAX_DEVICES ? &m->dev[x->device] : NULL};
    for (int i = 0; i < 2 && u[i]; i++) {
        if (sign > 0) {
            u[i]->live_bytes += x->bytes;
            u[i]->live_count++;
            if (u[i]->live_bytes > u[i]->peak_bytes) {
                u[i]->peak_bytes = u[i]->live_bytes;
                if (i == 0) m->peak_gen++;
            }
        } else {
            u[i]->live_bytes -= x->bytes;
            u[i]->live_count--;
        }
    }
}

static void add(struct mark *m, const struct entry *x) {
    if (!insert(m, x)) {
        vt_records_lost("an allocation since a mark");
        return;
    }
    count(m, x, +1);
}

static void drop(struct mark *m, struct entry *x) {
    struct entry gone = *x;
    remove_entry(m, x);
    count(m, &gone, -1);
    m->freed[m->nfreed++ % FREED_KEPT] = gone;
}

/* A refused free's allocation, if this mark counted its free lately:
 * taken off the ring, and live again. */
static void restore(struct mark *m, uint64_t address, int space) {
    unsigned kept = m->nfreed < FREED_KEPT ? m->nfreed : FREED_KEPT;
    for (unsigned k = 0; k < kept; k++) {
        struct entry *x = &m->freed[(m->nfreed - 1 - k) % FREED_KEPT];
        if (x->used && x->address == address && x->space == space) {
            x->used = 0;
            struct entry back = *x;
            add(m, &back);
            return;
        }
    }
}

void vt_mark_op(const struct vt_event *o) {
    if (o->kind >= VT_KIND_COUNT || o->type == OP_UNKNOWN) return;
    int space = vt_kind_space(o->kind);
    for (int i = 0; i < VT_MAX_MARKS; i++) {
        struct mark *m = &marks[i];
        if (!m->id) continue;
        struct entry *x;
        switch (o->type) {
        case OP_ALLOC:
            if (o->time_ns < m->since) break;
            if ((x = find(m, o->address, space))) drop(m, x); /* a free not seen */
            add(m, &(struct entry){o->address, o->bytes, o->stack, o->device, (uint8_t)space, 1,
                                   (uint8_t)vt_kind_owned_device(o->kind)});
            break;
        case OP_FREE:
            if ((x = find(m, o->address, space))) drop(m, x);
            break;
        case OP_REPLACED: /* released without a free (account.h): as vt_marks_released */
            if ((x = find(m, o->address, space))) {
                released_at(m, x->stack, x->bytes, o->kind);
                drop(m, x);
            }
            break;
        case OP_RESTORED:
            restore(m, o->address, space);
            break;
        }
    }
}

uint64_t vt_marks_counting(int space, uint64_t address) {
    uint64_t bits = 0;
    if (!__atomic_load_n(&vt_marks_open, __ATOMIC_RELAXED)) return 0; /* the usual case: no lock */
    vt_global_lock();
    if (vt_marks_open) {
        vt_log_drain(); /* the allocation's op counted by the marks open then */
        for (int i = 0; i < VT_MAX_MARKS; i++)
            if (marks[i].id && find(&marks[i], address, space)) bits |= 1ull << i;
    }
    vt_global_unlock();
    return bits;
}

void vt_marks_released(uint64_t bits, uint32_t stack, uint64_t bytes, int kind) {
    if (!bits) return;
    vt_global_lock();
    for (int i = 0; i < VT_MAX_MARKS; i++)
        if ((bits >> i & 1) && marks[i].id) released_at(&marks[i], stack, bytes, kind);
    vt_global_unlock();
}

/* What the mark's allocations that a reset released held, by stack (as
 * vt_tracker_released: device memory, or with `host` pinned host
 * memory); NULL (and *n 0) when none. Lock held. */
static struct vt_holder *mark_released(const struct mark *m, int host, size_t *n) {
    *n = 0;
    size_t k = 0;
    for (size_t i = 0; i < m->scap; i++)
        k += m->sites[i].used && (host ? m->sites[i].rel_host_count : m->sites[i].rel_count) > 0;
    struct vt_holder *h = k ? malloc(k * sizeof *h) : NULL;
    if (!h) return NULL;
    for (size_t i = 0; i < m->scap; i++) {
        const struct site *st = &m->sites[i];
        uint64_t count = !st->used ? 0 : host ? st->rel_host_count : st->rel_count;
        if (count)
            h[(*n)++] = (struct vt_holder){.stack = st->stack,
                                           .count = count > UINT32_MAX ? UINT32_MAX : (uint32_t)count,
                                           .bytes = host ? st->rel_host_bytes : st->rel_bytes};
    }
    return h;
}

static void clear(struct mark *m) {
    free(m->e);
    free(m->sites);
    memset(m, 0, sizeof *m);
}

/* The open mark of an id, or NULL. Lock held. */
static struct mark *mark_of(int id) {
    if (id <= 0) return NULL;
    struct mark *m = &marks[(id - 1) % VT_MAX_MARKS];
    return m->id == id ? m : NULL;
}

int vt_mark_begin(void) {
    int id = 0;
    vt_global_lock();
    vt_log_drain();
    for (int i = 0; i < VT_MAX_MARKS; i++) {
        struct mark *m = &marks[i];
        if (m->id) continue;
        /* Ids go up, each slot's in steps of VT_MAX_MARKS: an id that was
         * closed does not name the mark opened after it. */
        clear(m);
        m->id = id = serial * VT_MAX_MARKS + i + 1;
        serial = serial >= (0x7fffffff / VT_MAX_MARKS) - 1 ? 0 : serial + 1;
        /* Every op logged before this was applied just now, with an
         * earlier time stamp; every later allocation has this or a later
         * one. */
        m->since = vt_ticks();
        vt_marks_open++;
        break;
    }
    vt_global_unlock();
    return id;
}

int vt_mark_end(int id) {
    vt_global_lock();
    struct mark *m = mark_of(id);
    if (m) {
        vt_log_drain(); /* every op before the end counted while it is open */
        clear(m);
        vt_marks_open--;
    }
    vt_global_unlock();
    return m ? 0 : -1;
}

int vt_mark_usage(int id, int device, struct vt_mark_usage *out) {
    if (device < -1 || device >= VT_MAX_DEVICES) return -1;
    vt_global_lock();
    struct mark *m = mark_of(id);
    if (m) {
        vt_log_drain();
        *out = device < 0 ? m->all : m->dev[device];
    }
    vt_global_unlock();
    return m ? 0 : -1;
}

/* The mark's holders of device memory, now or (at_peak) at its peak, or
 * (other) of every kind now, by stack, largest first; NULL (and *n 0) when
 * there are none or memory ran out. Lock held. */
static struct vt_holder *mark_holders(const struct mark *m, int at_peak, int other, size_t *n) {
    *n = 0;
    struct vt_holder *h = m->nsites ? malloc(m->nsites * sizeof *h) : NULL;
    if (!h) return NULL;
    for (size_t i = 0; i < m->scap; i++) {
        const struct site *st = &m->sites[i];
        if (!st->used) continue;
        int saved = at_peak && st->hwm_gen == m->peak_gen;
        uint64_t b = saved ? st->hwm_bytes : st->bytes, c = saved ? st->hwm_count : st->count;
        if (other) { b += st->other_bytes; c += st->other_count; }
        if (c == 0) continue;
        h[(*n)++] = (struct vt_holder){.stack = st->stack, .count = (uint32_t)c, .bytes = b};
    }
    if (*n == 0) { free(h); return NULL; }
    qsort(h, *n, sizeof *h, vt_holder_order);
    return h;
}

struct vt_snapshot *vt_mark_snapshot(int id) {
    vt_global_lock();
    struct mark *m = mark_of(id);
    uint64_t since = m ? m->since : 0;
    vt_global_unlock();
    if (!m) return NULL;
    struct vt_snapshot *s = vt_snapshot_since(since);
    if (!s) return NULL;
    vt_global_lock();
    /* The holders are the mark's, not the process's (the snapshot made
     * none): its sites' counts, which hold the same memory as the live
     * list it filtered. */
    s->all_is_device = 0;
    m = mark_of(id);
    if (m) {
        /* And what a reset released of the mark's allocations, not the
         * process's (an earlier test's reset was in every later report). */
        s->released = mark_released(m, 0, &s->nreleased);
        s->released_host = mark_released(m, 1, &s->nreleased_host);
        s->peak_holders = mark_holders(m, 1, 0, &s->npeak_holders);
        s->holders = mark_holders(m, 0, 0, &s->nholders);
        /* The leak report's: pinned host memory too, as at exit. */
        s->all_holders = mark_holders(m, 0, 1, &s->nall_holders);
        s->all_is_device = 0;
        /* The figures of the mark, not of the process. */
        s->totals.live_bytes = m->all.live_bytes;
        s->totals.live_count = m->all.live_count;
        s->totals.peak_bytes = m->all.peak_bytes;
    }
    vt_global_unlock();
    if (!m) {
        vt_snapshot_free(s);
        return NULL;
    }
    return s;
}

void vt_marks_reset_child(void) {
    for (int i = 0; i < VT_MAX_MARKS; i++) clear(&marks[i]);
    vt_marks_open = 0;
}
