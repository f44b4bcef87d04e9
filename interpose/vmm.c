/* vmm.c -- when a virtual-memory handle's memory ends (vmm.h).
 *
 * Two tables under one lock: the handles cuMemCreate made, with their
 * references and mappings, and the mappings by address. An unmap walks the
 * range from its start, one mapping after the next, as the driver requires
 * the range to be whole mappings. The lock is the callers' (driver.c), held
 * from the decision through the driver's call to the bookkeeping, so that
 * two threads ending one handle at once (an unmap each of its two
 * mappings, a release and an unmap) cannot both see it kept. */
#include <pthread.h>
#include <stdlib.h>
#include <uthash.h>

#include "../tracker/tracker.h"
#include "vmm.h"

struct handle {
    uint64_t handle;
    unsigned refs; /* references not yet released */
    unsigned maps; /* mappings not yet unmapped */
    UT_hash_handle hh;
};

struct map {
    uint64_t address, size, handle;
    uint64_t id; /* in the tracker's history of mappings (0: none) */
    UT_hash_handle hh;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct handle *handles;
static struct map *maps;

static struct handle *find(uint64_t h) {
    struct handle *e;
    HASH_FIND(hh, handles, &h, sizeof h, e);
    return e;
}

static struct map *map_at(uint64_t address) {
    struct map *m;
    HASH_FIND(hh, maps, &address, sizeof address, m);
    return m;
}

static void forget(struct handle *e) {
    HASH_DEL(handles, e);
    free(e);
}

void vt_vmm_created(uint64_t h) {
    struct handle *e = find(h);
    if (!e && (e = calloc(1, sizeof *e))) {
        e->handle = h;
        HASH_ADD(hh, handles, handle, sizeof e->handle, e);
    }
    /* a handle value the driver gave again is a new handle */
    if (e) e->refs = 1, e->maps = 0;
}

void vt_vmm_retained(uint64_t h) {
    struct handle *e = find(h);
    if (e) e->refs++;
}

enum vt_vmm_release vt_vmm_release(uint64_t h) {
    enum vt_vmm_release what;
    struct handle *e = find(h);
    if (!e) what = VT_VMM_UNKNOWN;
    else if (e->refs == 0) what = VT_VMM_NONE;
    else if (--e->refs == 0 && e->maps == 0) {
        forget(e);
        what = VT_VMM_LAST;
    } else what = VT_VMM_KEPT;
    return what;
}

void vt_vmm_release_undo(uint64_t h, enum vt_vmm_release what) {
    if (what != VT_VMM_LAST && what != VT_VMM_KEPT) return;
    struct handle *e = find(h);
    if (!e && what == VT_VMM_LAST && (e = calloc(1, sizeof *e))) {
        e->handle = h;
        HASH_ADD(hh, handles, handle, sizeof e->handle, e);
    }
    if (e) e->refs++;
}

void vt_vmm_mapped(uint64_t h, uint64_t address, uint64_t size, uint64_t id) {
    struct handle *e = find(h);
    struct map *m = e && !map_at(address) ? calloc(1, sizeof *m) : NULL;
    if (m) {
        m->address = address;
        m->size = size;
        m->handle = h;
        m->id = id;
        HASH_ADD(hh, maps, address, sizeof m->address, m);
        e->maps++;
    }
}

/* The mappings an unmap of [address, end) takes: from address, each
 * mapping's end the next one's start. Calls fn on each; lock held. */
static void each_map(uint64_t address, uint64_t size, void (*fn)(struct map *, void *), void *arg) {
    uint64_t at = address, end = address + size;
    struct map *m;
    while (at < end && (m = map_at(at)) && m->size) {
        at += m->size;
        fn(m, arg);
    }
}

struct ending {
    size_t n;
    struct handle **seen; /* the handles met so far, each counted once */
    unsigned *taken;      /* how many of each one's mappings the range holds */
    size_t nseen, cap;
};

static void count_taken(struct map *m, void *arg) {
    struct ending *x = arg;
    struct handle *e = find(m->handle);
    if (!e) return;
    size_t i = 0;
    while (i < x->nseen && x->seen[i] != e) i++;
    if (i == x->nseen) {
        if (x->nseen == x->cap) {
            size_t cap = x->cap ? 2 * x->cap : 8;
            struct handle **s = realloc(x->seen, cap * sizeof *s);
            unsigned *t = realloc(x->taken, cap * sizeof *t);
            if (s) x->seen = s;
            if (t) x->taken = t;
            if (!s || !t) return;
            x->cap = cap;
        }
        x->seen[x->nseen] = e;
        x->taken[x->nseen++] = 0;
    }
    x->taken[i]++;
}

size_t vt_vmm_unmap_ending(uint64_t address, uint64_t size, uint64_t *ending, size_t max) {
    struct ending x = {0, NULL, NULL, 0, 0};
    each_map(address, size, count_taken, &x);
    for (size_t i = 0; i < x.nseen; i++) {
        if (x.seen[i]->refs != 0 || x.seen[i]->maps != x.taken[i]) continue;
        if (x.n < max) ending[x.n] = x.seen[i]->handle;
        x.n++;
    }
    free(x.seen);
    free(x.taken);
    return x.n;
}

static void unmap_one(struct map *m, void *arg) {
    (void)arg;
    vt_tracker_unmap(m->id);
    struct handle *e = find(m->handle);
    if (e && e->maps > 0 && --e->maps == 0 && e->refs == 0) forget(e);
    HASH_DEL(maps, m);
    free(m);
}

void vt_vmm_unmapped(uint64_t address, uint64_t size) {
    each_map(address, size, unmap_one, NULL);
}

void vt_vmm_lock(void) { pthread_mutex_lock(&lock); }

void vt_vmm_unlock(void) { pthread_mutex_unlock(&lock); }

void vt_vmm_fork_prepare(void) { pthread_mutex_lock(&lock); }

void vt_vmm_fork_parent(void) { pthread_mutex_unlock(&lock); }

/* The parent's handles are not the child's. */
void vt_vmm_reset_child(void) {
    struct handle *e, *f;
    HASH_ITER(hh, handles, e, f) forget(e);
    struct map *m, *n;
    HASH_ITER(hh, maps, m, n) {
        HASH_DEL(maps, m);
        free(m);
    }
}
