/* released.c -- memory a context's reset gave back without a free.
 *
 * cuDevicePrimaryCtxReset (cudaDeviceReset reaches it) "destroys all
 * allocations" of the device's primary context (but stream-ordered
 * memory: released.h). What the program never
 * freed is then neither live (the device has the memory back; a later
 * allocation may get the same address) nor freed by the program: it is
 * what compute-sanitizer's leak check reports at a reset. So the tracker
 * takes such records out of the live tables through the ordinary free
 * (the counts, the history and the tables stay as one free would leave
 * them) and keeps them here, by stack, for the leak check at exit and the
 * dump (`released`, and `released_host` for pinned host memory, which
 * vramtrace keeps apart from device memory everywhere). A table of stacks
 * (and whether host memory), not of records: a program that resets in a
 * loop and leaks each time grows it by its call sites only.
 *
 * Where the tracker cannot tell which records a reset released (the
 * program made a context of its own on the device) or a context's
 * destruction keeps some (its arrays), they stay live, and the first
 * sign that their memory went is the driver handing one's address out
 * again: that record then comes here too, when the log that replaced it
 * is applied (account.h), counted as a free as the others are. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <uthash.h>

#include "../common/warn.h"
#include "internal.h"
#include "mark.h"
#include "released.h"

/* The key: a stack and whether its memory was host memory (a call site
 * reached through a pointer to cudaMalloc or cudaMallocHost may be one
 * stack for both). */
struct released_key {
    uint32_t stack;
    uint32_t host;
};

struct released_site {
    struct released_key key;
    uint64_t bytes, count;
    UT_hash_handle hh;
};

static pthread_mutex_t released_lock = PTHREAD_MUTEX_INITIALIZER;
static struct released_site *released;
/* A bit per device on which the program made a context of its own; all
 * set for a device past the 64th. */
static uint64_t own_contexts;
static int own_beyond;

void vt_tracker_own_context(int device) {
    if (device >= 0 && device < 64) __atomic_or_fetch(&own_contexts, 1ull << device, __ATOMIC_RELAXED);
    else __atomic_store_n(&own_beyond, 1, __ATOMIC_RELAXED);
}

static int has_own_context(int device) {
    if (device < 0 || device >= 64) return __atomic_load_n(&own_beyond, __ATOMIC_RELAXED);
    return (__atomic_load_n(&own_contexts, __ATOMIC_RELAXED) >> device) & 1;
}

struct vt_release {
    size_t n;
    struct vt_release_rec { struct vt_free f; uint64_t bytes, marks; uint32_t stack; uint8_t kind; } rec[];
};

int vt_kind_in_context(int kind) {
    switch (kind) {
    case VT_KIND_DEVICE: case VT_KIND_PITCHED: case VT_KIND_MANAGED:
    case VT_KIND_ARRAY: case VT_KIND_IMPORTED:
        return 1;
    default:   /* stream-ordered memory (a graph's allocations are too),
                  cuMemCreate's handles, host memory */
        return 0;
    }
}

/* The records leave their tables before the reset, as a free's record
 * leaves before the driver's free: once the driver has the memory back it
 * may hand the addresses out again, to another thread too, and those
 * allocations are new records that nothing here takes. */
/* The live records that `take` picks leave their tables (see above). */
static struct vt_release *release_begin(int (*take)(const struct vt_live *a, void *arg), void *arg) {
    struct vt_snapshot *s = vt_tracker_snapshot();
    if (!s) {
        vt_tracker_unseen_release(VT_SPACES_ALL); /* its records stay in the tables */
        return NULL;
    }
    size_t n = 0, cap = 0;
    struct vt_release *rl = NULL;
    struct vt_live_reader *rd = vt_live_read(s, 0);
    for (const struct vt_live *a; rd && (a = vt_live_next(rd));) {
        if (!take(a, arg)) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            struct vt_release *m = realloc(rl, sizeof *rl + cap * sizeof rl->rec[0]);
            if (!m) {
                vt_records_lost("a reset's release");
                vt_tracker_unseen_release(VT_SPACES_ALL);
                break;
            }
            rl = m;
        }
        uint64_t marks = vt_marks_counting(vt_kind_space(a->kind), a->address);
        struct vt_free f = vt_tracker_free_begin(vt_kind_space(a->kind), a->address);
        if (f.rec) rl->rec[n++] = (struct vt_release_rec){f, a->bytes, marks, a->stack, a->kind};
    }
    vt_live_read_end(rd);
    vt_snapshot_free(s);
    if (rl) rl->n = n;
    return rl;
}

struct on_device_arg { int device; int (*pinned_here)(uint64_t address, void *arg); void *arg; };

static int on_device(const struct vt_live *a, void *arg) {
    const struct on_device_arg *o = arg;
    if (a->kind == VT_KIND_HOST) return o->pinned_here && o->pinned_here(a->address, o->arg);
    return a->device == o->device && vt_kind_in_context(a->kind);
}

/* What a reset may take: the kinds above and pinned host memory. */
static int reset_kind(int kind) { return vt_kind_in_context(kind) || kind == VT_KIND_HOST; }

/* The name spaces of the kinds `pick` says yes to, a bit each. */
static unsigned spaces_of(int (*pick)(int kind)) {
    unsigned spaces = 0;
    for (int k = 0; k < VT_KIND_COUNT; k++)
        if (pick(k)) spaces |= 1u << vt_kind_space(k);
    return spaces;
}

struct vt_release *vt_tracker_release_begin(int device, int (*pinned_here)(uint64_t address, void *arg), void *arg) {
    if (has_own_context(device)) {
        /* Its records stay: the next allocation at one's address finds it. */
        vt_tracker_unseen_release(spaces_of(reset_kind));
        return NULL;
    }
    struct on_device_arg o = {device, pinned_here, arg};
    return release_begin(on_device, &o);
}

/* The memory a context's destruction takes that is known by its address
 * ("cuMemAlloc(), cuMemAllocHost(), cuMemAllocManaged() and
 * cuMemAllocPitch()"); not stream-ordered memory or cuMemCreate's
 * handles (no context's), nor arrays (known by handle). */
static int kind_destroyed_by_address(int kind) {
    return kind == VT_KIND_DEVICE || kind == VT_KIND_PITCHED || kind == VT_KIND_MANAGED || kind == VT_KIND_HOST;
}

struct owned_by { int (*owned)(uint64_t address, void *arg); void *arg; };

static int in_context(const struct vt_live *a, void *arg) {
    const struct owned_by *o = arg;
    return kind_destroyed_by_address(a->kind) && o->owned(a->address, o->arg);
}

static int array_kind(int kind) { return kind == VT_KIND_ARRAY; }

static int destroyed_kind(int kind) { return array_kind(kind) || kind_destroyed_by_address(kind); }

struct vt_release *vt_tracker_release_context_begin(int (*owned)(uint64_t address, void *arg), void *arg) {
    /* Its arrays stay, and without `owned` all of it. */
    vt_tracker_unseen_release(spaces_of(owned ? array_kind : destroyed_kind));
    if (!owned) return NULL;
    struct owned_by o = {owned, arg};
    return release_begin(in_context, &o);
}

void vt_tracker_release_end(struct vt_release *rl, int ok) {
    if (!rl) return;
    for (size_t i = 0; i < rl->n; i++) {
        const struct vt_release_rec *x = &rl->rec[i];
        vt_tracker_free_end(&x->f, ok);   /* a reset that failed puts them back */
        /* An IPC mapping the reset unmapped is closed, not leaked: the
         * memory is another process's (report/leaks.h). */
        if (!ok || x->kind == VT_KIND_IMPORTED) continue;
        vt_released_add(x->stack, x->bytes, x->kind);
        vt_marks_released(x->marks, x->stack, x->bytes, x->kind);
    }
    free(rl);
}

void vt_released_add(uint32_t stack, uint64_t bytes, int kind) {
    struct released_key key = {stack, (uint32_t)vt_kind_is_host(kind)};
    pthread_mutex_lock(&released_lock);
    struct released_site *r;
    HASH_FIND(hh, released, &key, sizeof key, r);
    if (!r && (r = calloc(1, sizeof *r))) {
        r->key = key;
        HASH_ADD(hh, released, key, sizeof r->key, r);
    }
    if (r) { r->bytes += bytes; r->count++; }
    else vt_records_lost("a reset's release");
    pthread_mutex_unlock(&released_lock);
}

struct vt_holder *vt_tracker_released(int host, size_t *n) {
    *n = 0;
    pthread_mutex_lock(&released_lock);
    size_t k = 0;
    struct released_site *r, *t;
    HASH_ITER(hh, released, r, t) k += r->key.host == (uint32_t)!!host;
    struct vt_holder *h = k ? malloc(k * sizeof *h) : NULL;
    if (h) {
        HASH_ITER(hh, released, r, t) {
            if (r->key.host != (uint32_t)!!host) continue;
            h[(*n)++] = (struct vt_holder){.stack = r->key.stack, .bytes = r->bytes,
                                           .count = r->count > UINT32_MAX ? UINT32_MAX : (uint32_t)r->count};
        }
    } else if (k) vt_records_lost("the released list");
    pthread_mutex_unlock(&released_lock);
    if (*n) qsort(h, *n, sizeof *h, vt_holder_order);
    return h;
}

void vt_released_reset_child(void) {
    pthread_mutex_init(&released_lock, NULL);
    own_contexts = 0;   /* a child makes contexts of its own anew */
    own_beyond = 0;
    struct released_site *r, *t;
    HASH_ITER(hh, released, r, t) {
        HASH_DEL(released, r);
        free(r);
    }
}
