/* tracker.c -- the live table, interned stacks, totals, history and OOMs.
 *
 * One mutex guards everything here. Callers unwind before they come in, so
 * the lock covers only hashing and a few additions. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* A word-at-a-time hash for the tables here (keys are frame arrays and
 * 16-byte address keys, both whole words): far cheaper than uthash's
 * default byte-wise Jenkins on 200-byte stacks, and computed before the
 * lock is taken. */
#define HASH_FUNCTION(keyptr, keylen, hashv) ((hashv) = vt_hash_words((keyptr), (keylen)))
#include <stdint.h>
static inline uint32_t vt_hash_words(const void *key, size_t len);
#include <uthash.h>

/* Four independent lanes, so that the multiplies overlap; the lanes are
 * locals so that they stay in registers. */
static inline uint32_t vt_hash_words(const void *key, size_t len) {
    const unsigned char *p = key;
    const uint64_t m = 0xff51afd7ed558ccdull;
    uint64_t h0 = 0x9e3779b97f4a7c15ull ^ len, h1 = 0xc2b2ae3d27d4eb4full;
    uint64_t h2 = 0x165667b19e3779f9ull, h3 = 0x27d4eb2f165667c5ull;
    size_t i = 0;
    for (; i + 32 <= len; i += 32) {
        uint64_t w[4];
        memcpy(w, p + i, 32);
        h0 = (h0 ^ w[0]) * m;
        h1 = (h1 ^ w[1]) * m;
        h2 = (h2 ^ w[2]) * m;
        h3 = (h3 ^ w[3]) * m;
    }
    for (; i + 8 <= len; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h0 = (h0 ^ w) * m;
    }
    for (; i < len; i++) h1 = (h1 ^ p[i]) * 0x100000001b3ull;
    uint64_t x = h0 ^ (h1 >> 7) ^ (h2 << 3) ^ (h3 >> 11) ^ (h1 * m) ^ (h3 * 0x9e3779b97f4a7c15ull);
    x ^= x >> 29;
    x *= m;
    return (uint32_t)(x ^ (x >> 32));
}

#include "tracker.h"

#define VT_MAX_OOMS 4096

struct vt_key {
    uint64_t address;
    uint32_t space;
    uint32_t pad;
};

struct vt_rec {
    struct vt_key key;
    struct vt_alloc a;
    UT_hash_handle hh;
};

/* What one call site holds now, and what it held at the last peak of the
 * process's device bytes. The peak values are kept lazily (memray's
 * high-water-mark scheme): `hwm_*` is valid only while `hwm_gen` equals
 * peak_gen; otherwise the site has not changed since the last peak and its
 * current values are the ones at the peak. O(1) per event. */
struct vt_site {
    uint64_t bytes, count;
    uint64_t hwm_bytes, hwm_count;
    uint64_t hwm_gen;
};

struct vt_stack_node {
    UT_hash_handle hh;
    struct vt_site site;
    struct vt_stack pub;
    uintptr_t frames[];
};

#define VT_MAX_OOM_HOLDERS 64

/* Adaptive: the critical sections are short, so a waiter spins a little
 * before it sleeps instead of paying for a futex round-trip. */
static pthread_mutex_t lock = PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP;
static struct vt_rec *live_table;
/* Always in live_table, under a key no allocation has, so that the table
 * never empties: uthash frees its buckets when the last item goes and
 * rebuilds them with the next, which an alloc/free loop would pay for at
 * every step. Never counted, never listed. */
static struct vt_rec sentinel = {.key = {0, UINT32_MAX, 0}};
static struct vt_stack_node *stack_table;
static const struct vt_stack **stack_list;
static size_t nstacks, stack_cap;
static struct vt_totals totals;
static struct vt_device devices[VT_MAX_DEVICES];
static int ndevices;
static struct vt_oom ooms[VT_MAX_OOMS];
static size_t nooms;
static struct vt_event *ring;
static size_t ring_cap = 1000000;
static uint64_t ring_written;
static int ring_failed;
static int touched;
static uint64_t start_mono_ns, start_unix_ns;
static uint64_t peak_gen;

static __thread int32_t my_tid __attribute__((tls_model("initial-exec")));
/* The record of this thread's last free, kept for its next allocation: an
 * alloc/free loop then calls malloc and free not at all. */
static __thread struct vt_rec *spare __attribute__((tls_model("initial-exec")));

/* The stack this thread interned last, and its id: a loop that allocates
 * from one place finds its stack here, with a compare, and hashes nothing
 * and looks up nothing under the lock. */
struct last_stack {
    uint32_t id;
    int depth;
    uintptr_t frames[VT_MAX_FRAMES];
};
static __thread struct last_stack *last_stack __attribute__((tls_model("initial-exec")));
static pthread_key_t last_stack_key;
static pthread_once_t last_stack_once = PTHREAD_ONCE_INIT;

static void last_stack_free(void *p) {
    free(p);
    last_stack = NULL;
}

static void last_stack_key_make(void) { pthread_key_create(&last_stack_key, last_stack_free); }

static const char *kind_names[VT_KIND_COUNT] = {
    "device", "pitched", "managed", "async", "vmm", "host", "array", "imported",
};

const char *vt_kind_name(int kind) {
    return kind >= 0 && kind < VT_KIND_COUNT ? kind_names[kind] : "unknown";
}

int vt_kind_space(int kind) {
    switch (kind) {
    case VT_KIND_HOST: return VT_SPACE_HOST;
    case VT_KIND_VMM: return VT_SPACE_HANDLE;
    case VT_KIND_ARRAY: return VT_SPACE_ARRAY;
    case VT_KIND_IMPORTED: return VT_SPACE_IMPORTED;
    default: return VT_SPACE_DEVICE;
    }
}

static uint64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t vt_now_ns(void) { return mono_ns() - start_mono_ns; }

/* Time stamps in the hot path are ticks: the TSC where it is invariant
 * (constant_tsc and nonstop_tsc: the same rate on every core, in every
 * power state), which costs a few cycles, else nanoseconds from
 * clock_gettime. A snapshot converts ticks to nanoseconds with the rate
 * measured over the whole run. */
static int use_tsc;
static uint64_t tsc0;

static inline uint64_t ticks(void) {
#if defined(__x86_64__)
    if (use_tsc) return __builtin_ia32_rdtsc() - tsc0;
#endif
    return mono_ns() - start_mono_ns;
}

static int tsc_is_invariant(void) {
#if defined(__x86_64__)
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return 0;
    char line[4096];
    int ok = 0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "flags", 5) != 0) continue;
        ok = strstr(line, " constant_tsc") && strstr(line, " nonstop_tsc");
        break;
    }
    fclose(f);
    return ok;
#else
    return 0;
#endif
}

/* Nanoseconds per tick over the run so far. */
static double tick_scale(uint64_t now_ns) {
    if (!use_tsc) return 1.0;
    uint64_t t = ticks();
    return t ? (double)now_ns / (double)t : 1.0;
}

static int32_t thread_id(void) {
    if (my_tid == 0) my_tid = (int32_t)syscall(SYS_gettid);
    return my_tid;
}

void vt_tracker_init(int depth, size_t event_capacity) {
    pthread_mutex_lock(&lock);
    if (start_mono_ns == 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        start_unix_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
        use_tsc = tsc_is_invariant();
#if defined(__x86_64__)
        tsc0 = __builtin_ia32_rdtsc();
#endif
        start_mono_ns = mono_ns();
    }
    (void)depth;
    if (ring == NULL) ring_cap = event_capacity;
    if (live_table == NULL) HASH_ADD(hh, live_table, key, sizeof sentinel.key, &sentinel);
    pthread_mutex_unlock(&lock);
}

/* Return the id of this stack, adding it if it is new. Lock held; `hash`
 * is stack_hash(frames, depth), computed before the lock. */
static uint32_t intern_stack(const uintptr_t *frames, int depth, uint32_t hash) {
    size_t keylen = (size_t)depth * sizeof(uintptr_t);
    struct vt_stack_node *n;
    HASH_FIND_BYHASHVALUE(hh, stack_table, frames, keylen, hash, n);
    if (n) return n->pub.id;
    if (nstacks == stack_cap) {
        size_t cap = stack_cap ? stack_cap * 2 : 256;
        const struct vt_stack **l = realloc(stack_list, cap * sizeof *l);
        if (!l) return UINT32_MAX;
        stack_list = l;
        stack_cap = cap;
    }
    n = malloc(sizeof *n + keylen);
    if (!n) return UINT32_MAX;
    memcpy(n->frames, frames, keylen);
    memset(&n->site, 0, sizeof n->site);
    n->site.hwm_gen = peak_gen;
    n->pub.id = (uint32_t)nstacks;
    n->pub.depth = (uint32_t)depth;
    n->pub.frames = n->frames;
    HASH_ADD_KEYPTR_BYHASHVALUE(hh, stack_table, n->frames, keylen, hash, n);
    stack_list[nstacks++] = &n->pub;
    return n->pub.id;
}

/* Append to the event ring, mapping it on first use. Lock held. */
static void add_event(uint64_t now, int type, uint64_t address, uint64_t bytes,
                      uint32_t stack, int device, int kind) {
    if (ring_cap == 0 || ring_failed) return;
    if (ring == NULL) {
        void *m = mmap(NULL, ring_cap * sizeof *ring, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED) { ring_failed = 1; return; }
        /* Huge pages where the kernel allows them: the ring is written in
         * order, and 2 MiB pages turn thousands of first-touch faults into
         * a handful. */
        madvise(m, ring_cap * sizeof *ring, MADV_HUGEPAGE);
        ring = m;
    }
    struct vt_event *e = &ring[ring_written % ring_cap];
    e->time_ns = now;
    e->address = address;
    e->bytes = bytes;
    e->stack = stack;
    e->device = (int16_t)device;
    e->type = (uint8_t)type;
    e->kind = (uint8_t)kind;
    ring_written++;
}

static struct vt_device *device_slot(int device) {
    if (device < 0 || device >= VT_MAX_DEVICES) return NULL;
    if (device >= ndevices) ndevices = device + 1;
    devices[device].used = 1;
    return &devices[device];
}

static struct vt_stack_node *node_of(uint32_t stack) {
    if (stack >= nstacks) return NULL;
    return (struct vt_stack_node *)((char *)stack_list[stack] -
                                    offsetof(struct vt_stack_node, pub));
}

/* What a site held at the last peak. Lock held. */
static void site_at_peak(const struct vt_site *st, uint64_t *bytes, uint64_t *count) {
    *bytes = st->hwm_gen == peak_gen ? st->hwm_bytes : st->bytes;
    *count = st->hwm_gen == peak_gen ? st->hwm_count : st->count;
}

/* Sites holding device memory now, as a malloc'd array. Lock held. */
static struct vt_holder *sites_now(uint32_t *n_out, int at_peak) {
    size_t k = 0;
    struct vt_holder *h = malloc((nstacks ? nstacks : 1) * sizeof *h);
    if (!h) { *n_out = 0; return NULL; }
    for (size_t i = 0; i < nstacks; i++) {
        struct vt_stack_node *n = node_of((uint32_t)i);
        uint64_t b = n->site.bytes, c = n->site.count;
        if (at_peak) site_at_peak(&n->site, &b, &c);
        if (b == 0 && c == 0) continue;
        h[k].stack = (uint32_t)i;
        h[k].bytes = b;
        h[k].count = c;
        k++;
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

/* Add or remove bytes from the live counters. Lock held. */
static void account(const struct vt_alloc *a, int sign, uint64_t now) {
    if (a->kind == VT_KIND_IMPORTED) {
        if (sign > 0) {
            totals.imported_live_bytes += a->bytes;
            totals.imported_live_count++;
        } else {
            totals.imported_live_bytes -= a->bytes;
            totals.imported_live_count--;
        }
        return;
    }
    if (a->kind == VT_KIND_HOST) {
        if (sign > 0) {
            totals.host_live_bytes += a->bytes;
            totals.host_live_count++;
            if (totals.host_live_bytes > totals.host_peak_bytes)
                totals.host_peak_bytes = totals.host_live_bytes;
        } else {
            totals.host_live_bytes -= a->bytes;
            totals.host_live_count--;
        }
        return;
    }
    struct vt_device *d = device_slot(a->device);
    struct vt_stack_node *n = node_of(a->stack);
    if (n) {
        struct vt_site *st = &n->site;
        if (st->hwm_gen != peak_gen) {
            st->hwm_bytes = st->bytes;
            st->hwm_count = st->count;
            st->hwm_gen = peak_gen;
        }
        if (sign > 0) { st->bytes += a->bytes; st->count++; }
        else { st->bytes -= a->bytes; st->count--; }
    }
    if (sign > 0) {
        totals.live_bytes += a->bytes;
        totals.live_count++;
        if (totals.live_bytes > totals.peak_bytes) {
            totals.peak_bytes = totals.live_bytes;
            totals.peak_time_ns = now;
            peak_gen++;
        }
        if (d) {
            /* Atomic: the budget check reads it without the lock. */
            __atomic_store_n(&d->live_bytes, d->live_bytes + a->bytes, __ATOMIC_RELAXED);
            d->live_count++;
            if (d->live_bytes > d->peak_bytes) {
                d->peak_bytes = d->live_bytes;
                d->peak_time_ns = now;
            }
        }
    } else {
        totals.live_bytes -= a->bytes;
        totals.live_count--;
        if (d) {
            __atomic_store_n(&d->live_bytes, d->live_bytes - a->bytes, __ATOMIC_RELAXED);
            d->live_count--;
        }
    }
}

static uint32_t stack_hash(const uintptr_t *frames, int *depth) {
    if (*depth > VT_MAX_FRAMES) *depth = VT_MAX_FRAMES;
    if (*depth < 0) *depth = 0;
    return vt_hash_words(frames, (size_t)*depth * sizeof(uintptr_t));
}

static void remember_stack(const uintptr_t *frames, int depth, uint32_t id) {
    struct last_stack *ls = last_stack;
    if (!ls) {
        pthread_once(&last_stack_once, last_stack_key_make);
        if (!(ls = malloc(sizeof *ls))) return;
        pthread_setspecific(last_stack_key, ls);
        last_stack = ls;
    }
    memcpy(ls->frames, frames, (size_t)depth * sizeof *frames);
    ls->depth = depth;
    ls->id = id;
}

void vt_tracker_alloc(uint64_t address, uint64_t bytes, int kind, int device,
                      const char *api, const uintptr_t *frames, int depth) {
    struct vt_rec *r = spare;
    if (r) spare = NULL;
    else if (!(r = malloc(sizeof *r))) return;
    memset(r, 0, offsetof(struct vt_rec, hh));
    r->key.address = address;
    r->key.space = (uint32_t)vt_kind_space(kind);
    r->a.address = address;
    r->a.bytes = bytes;
    r->a.kind = (uint8_t)kind;
    r->a.device = (int16_t)(kind == VT_KIND_HOST ? VT_HOST_DEVICE : device);
    r->a.api = api;
    r->a.thread = thread_id();
    if (depth > VT_MAX_FRAMES) depth = VT_MAX_FRAMES;
    if (depth < 0) depth = 0;
    struct last_stack *ls = last_stack;
    int same = ls && ls->depth == depth && memcmp(ls->frames, frames, (size_t)depth * sizeof *frames) == 0;
    uint32_t shash = same ? 0 : stack_hash(frames, &depth);
    uint32_t khash = vt_hash_words(&r->key, sizeof r->key);

    pthread_mutex_lock(&lock);
    /* Read under the lock, so that the event ring is in time order. */
    uint64_t now = ticks();
    r->a.time_ns = now;
    __atomic_store_n(&touched, 1, __ATOMIC_RELAXED);
    r->a.stack = same ? ls->id : intern_stack(frames, depth, shash);
    struct vt_rec *old;
    HASH_FIND_BYHASHVALUE(hh, live_table, &r->key, sizeof r->key, khash, old);
    if (old) {
        /* The driver handed out an address we still think is live: a free
         * we did not see. The new allocation replaces the old record. */
        HASH_DEL(live_table, old);
        account(&old->a, -1, now);
        free(old);
    }
    HASH_ADD_BYHASHVALUE(hh, live_table, key, sizeof r->key, khash, r);
    account(&r->a, +1, now);
    totals.alloc_count++;
    if (vt_kind_owned_device(kind)) {
        struct vt_device *d = device_slot(device);
        if (d) d->alloc_count++;
    }
    add_event(now, VT_EV_ALLOC, address, bytes, r->a.stack, r->a.device, kind);
    pthread_mutex_unlock(&lock);
    if (!same && r->a.stack != UINT32_MAX) remember_stack(frames, depth, r->a.stack);
}

/* The free is counted here, in one lock round-trip, as if it will work:
 * a free that fails (rare: a bad pointer the driver rejects) is undone by
 * vt_tracker_restore. */
struct vt_alloc *vt_tracker_take(int space, uint64_t address) {
    struct vt_key k = {address, (uint32_t)space, 0};
    uint32_t khash = vt_hash_words(&k, sizeof k);
    struct vt_rec *r;
    pthread_mutex_lock(&lock);
    uint64_t now = ticks();
    HASH_FIND_BYHASHVALUE(hh, live_table, &k, sizeof k, khash, r);
    if (r) {
        HASH_DEL(live_table, r);
        account(&r->a, -1, 0);
        totals.free_count++;
        if (vt_kind_owned_device(r->a.kind)) {
            struct vt_device *d = device_slot(r->a.device);
            if (d) d->free_count++;
        }
        add_event(now, VT_EV_FREE, r->a.address, r->a.bytes, r->a.stack, r->a.device, r->a.kind);
    } else {
        totals.unknown_frees++;
    }
    pthread_mutex_unlock(&lock);
    return r ? &r->a : NULL;
}

static struct vt_rec *rec_of(struct vt_alloc *a) {
    return (struct vt_rec *)((char *)a - offsetof(struct vt_rec, a));
}

void vt_tracker_commit_free(struct vt_alloc *a) {
    struct vt_rec *r = rec_of(a);
    if (!spare) spare = r;
    else free(r);
}

void vt_tracker_restore(struct vt_alloc *a) {
    struct vt_rec *r = rec_of(a);
    struct vt_rec *old;
    uint64_t now = ticks();
    pthread_mutex_lock(&lock);
    /* Undo the free that vt_tracker_take counted (its event stays in the
     * history: the program did ask for it). */
    totals.free_count--;
    if (vt_kind_owned_device(r->a.kind)) {
        struct vt_device *d = device_slot(r->a.device);
        if (d) d->free_count--;
    }
    HASH_FIND(hh, live_table, &r->key, sizeof r->key, old);
    if (old) {
        free(r); /* Someone got the address meanwhile: theirs is current. */
    } else {
        HASH_ADD(hh, live_table, key, sizeof r->key, r);
        account(&r->a, +1, now);
    }
    pthread_mutex_unlock(&lock);
}

void vt_tracker_map(uint64_t handle, uint64_t address) {
    struct vt_key k = {handle, VT_SPACE_HANDLE, 0};
    struct vt_rec *r;
    pthread_mutex_lock(&lock);
    HASH_FIND(hh, live_table, &k, sizeof k, r);
    if (r) r->a.mapped = address;
    pthread_mutex_unlock(&lock);
}

void vt_tracker_failed(int is_oom, struct vt_oom *o, const uintptr_t *frames,
                       int depth) {
    pthread_mutex_lock(&lock);
    uint64_t now = ticks();
    totals.failed_count++;
    /* Other failures (no driver, bad arguments) are counted but do not make
     * the process one that used a GPU: without a driver, a program must
     * behave and print exactly as it does without vramtrace. */
    struct vt_device *d = !is_oom || !vt_kind_owned_device(o->kind) ? NULL : device_slot(o->device);
    if (d) d->failed_count++;
    if (is_oom) {
        __atomic_store_n(&touched, 1, __ATOMIC_RELAXED);
        o->time_ns = now;
        o->thread = thread_id();
        o->stack = intern_stack(frames, depth, stack_hash(frames, &depth));
        o->live_bytes = d ? d->live_bytes : totals.host_live_bytes;
        totals.oom_count++;
        if (d) d->oom_count++;
        o->holders = NULL;
        o->nholders = 0;
        if (o->procs) {
            /* The caller's array lives on its stack: keep a copy (first 64
             * OOMs), or none. */
            struct vt_proc *copy = NULL;
            if (nooms < VT_MAX_OOM_HOLDERS && (copy = malloc((o->nprocs ? o->nprocs : 1) * sizeof *copy)))
                memcpy(copy, o->procs, o->nprocs * sizeof *copy);
            o->procs = copy;
            if (!copy) o->nprocs = 0;
        }
        if (nooms < VT_MAX_OOM_HOLDERS) {
            uint32_t k;
            struct vt_holder *h = sites_now(&k, 0);
            if (h) qsort(h, k, sizeof *h, vt_holder_order);
            o->holders = h;
            o->nholders = h ? k : 0;
        }
        if (nooms < VT_MAX_OOMS) ooms[nooms++] = *o;
        else {
            free((void *)o->holders);
            free((void *)o->procs);
        }
        add_event(now, VT_EV_OOM, 0, o->requested, o->stack, o->device, o->kind);
    }
    pthread_mutex_unlock(&lock);
}

uint64_t vt_tracker_device_live(int device) {
    if (device < 0 || device >= VT_MAX_DEVICES) return 0;
    return __atomic_load_n(&devices[device].live_bytes, __ATOMIC_RELAXED);
}

int vt_tracker_needs_facts(int device) {
    if (device < 0 || device >= VT_MAX_DEVICES) return 0;
    return !__atomic_load_n(&devices[device].have_facts, __ATOMIC_ACQUIRE);
}

void vt_tracker_set_facts(int device, const char *name, const char *uuid,
                          uint64_t total_bytes) {
    if (device < 0 || device >= VT_MAX_DEVICES) return;
    pthread_mutex_lock(&lock);
    struct vt_device *d = &devices[device];
    if (!d->have_facts) {
        snprintf(d->name, sizeof d->name, "%s", name ? name : "");
        snprintf(d->uuid, sizeof d->uuid, "%s", uuid ? uuid : "");
        d->total_bytes = total_bytes;
        __atomic_store_n(&d->have_facts, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&lock);
}

int vt_tracker_touched(void) {
    return __atomic_load_n(&touched, __ATOMIC_RELAXED);
}

struct vt_snapshot *vt_tracker_snapshot(void) {
    struct vt_snapshot *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    pthread_mutex_lock(&lock);
    s->totals = totals;
    memcpy(s->devices, devices, sizeof devices);
    s->ndevices = ndevices;
    s->start_unix_ns = start_unix_ns;
    s->now_ns = vt_now_ns();
    double scale = tick_scale(s->now_ns);
#define TO_NS(t) ((uint64_t)((double)(t) * scale))
    s->totals.peak_time_ns = TO_NS(s->totals.peak_time_ns);
    for (int i = 0; i < ndevices; i++) s->devices[i].peak_time_ns = TO_NS(s->devices[i].peak_time_ns);
    size_t n = HASH_COUNT(live_table);
    s->live = malloc((n ? n : 1) * sizeof *s->live);
    if (s->live) {
        struct vt_rec *r, *tmp;
        HASH_ITER(hh, live_table, r, tmp) {
            if (r == &sentinel) continue;
            s->live[s->nlive] = r->a;
            s->live[s->nlive++].time_ns = TO_NS(r->a.time_ns);
        }
    }
    s->ooms = malloc((nooms ? nooms : 1) * sizeof *s->ooms);
    if (s->ooms) {
        memcpy(s->ooms, ooms, nooms * sizeof *ooms);
        s->nooms = nooms;
        for (size_t i = 0; i < nooms; i++) s->ooms[i].time_ns = TO_NS(ooms[i].time_ns);
    }
    size_t ne = ring_written < ring_cap ? ring_written : ring_cap;
    s->events = ne ? malloc(ne * sizeof *s->events) : NULL;
    if (s->events) {
        size_t first = ring_written - ne;
        for (size_t i = 0; i < ne; i++) {
            s->events[i] = ring[(first + i) % ring_cap];
            s->events[i].time_ns = TO_NS(s->events[i].time_ns);
        }
        s->nevents = ne;
        s->events_dropped = first;
    }
    uint32_t np = 0;
    s->peak_holders = sites_now(&np, 1);
    s->npeak_holders = np;
    if (s->peak_holders) qsort(s->peak_holders, np, sizeof *s->peak_holders, vt_holder_order);
    s->stacks = malloc((nstacks ? nstacks : 1) * sizeof *s->stacks);
    if (s->stacks) {
        memcpy(s->stacks, stack_list, nstacks * sizeof *stack_list);
        s->nstacks = nstacks;
    }
#undef TO_NS
    pthread_mutex_unlock(&lock);
    return s;
}

void vt_snapshot_free(struct vt_snapshot *s) {
    if (!s) return;
    free(s->live);
    free(s->ooms);
    free(s->events);
    free(s->stacks);
    free(s->peak_holders);
    free(s);
}

void vt_tracker_lock_all(void) { pthread_mutex_lock(&lock); }
void vt_tracker_unlock_all(void) { pthread_mutex_unlock(&lock); }

void vt_tracker_reset_child(void) {
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ADAPTIVE_NP);
    pthread_mutex_init(&lock, &attr);
    pthread_mutexattr_destroy(&attr);
    struct vt_rec *r, *tmp;
    HASH_ITER(hh, live_table, r, tmp) {
        HASH_DEL(live_table, r);
        if (r != &sentinel) free(r);
    }
    HASH_ADD(hh, live_table, key, sizeof sentinel.key, &sentinel);
    struct vt_stack_node *n, *ntmp;
    HASH_ITER(hh, stack_table, n, ntmp) {
        HASH_DEL(stack_table, n);
        free(n);
    }
    nstacks = 0;
    peak_gen = 0;
    for (size_t i = 0; i < nooms; i++) {
        free((void *)ooms[i].holders);
        free((void *)ooms[i].procs);
    }
    memset(&totals, 0, sizeof totals);
    for (int i = 0; i < VT_MAX_DEVICES; i++) {
        struct vt_device *d = &devices[i];
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
    ndevices = 0;
    nooms = 0;
    ring_written = 0;
    touched = 0;
    my_tid = 0;
    free(spare);
    spare = NULL;
    /* The only thread here: its remembered stack id is gone with the table. */
    if (last_stack) last_stack->depth = -1;
}
