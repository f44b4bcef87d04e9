/* tracker.c -- the live table, interned stacks, totals, history and OOMs.
 *
 * Every thread that allocates has a slot of its own: a table of the live
 * allocations it made, and a log of what happened to them (allocated,
 * freed, with a time stamp and everything the counts need). A hooked call
 * works in its own slot, under the slot's lock, which no other thread
 * takes unless it frees memory this thread allocated. The records go in
 * and out of the table at once, in program order, so a free always finds
 * the allocation it frees; the counts (live and peak bytes per device and
 * per call site, the event history) sit under one global lock, and a
 * hooked call does not take it. The logs are applied to the counts in
 * time-stamp order, all slots' at once, when one of them is half full or when
 * anything reads the counts (a snapshot, an OOM record, the budget). So
 * threads share no cache line in the hot path, the global lock is taken
 * once for hundreds of operations, and peaks are computed in the order the
 * operations happened, not the order threads won a lock. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
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

struct slot;

/* Read by every hooked call and written (almost) never: a cache line of
 * their own, away from what the applier writes at every entry, so that a
 * thread applying the logs does not take them from the others' caches. */
static struct __attribute__((aligned(64))) {
    uint64_t tsc0;
    int use_tsc;
    struct slot *slots;   /* every slot, newest first (pushed under the global lock) */
} hot;

struct vt_tracker_flags vt_tracker_flags __attribute__((aligned(64)));

struct vt_key {
    uint64_t address;
    uint32_t space;
    uint32_t pad;
};

/* A key's hash: a multiply, its high half. From the two fields, not the
 * struct's words: a key is hashed right after its fields are stored, and a
 * 64-bit load of two 32-bit stores cannot be forwarded from them (a stall
 * of a dozen cycles, twice per pair). */
static inline uint32_t key_hash(const struct vt_key *k) {
    uint64_t x = (k->address ^ ((uint64_t)k->space << 59)) * 0x9e3779b97f4a7c15ull;
    return (uint32_t)(x >> 32);
}

struct vt_rec {
    struct vt_key key;
    struct vt_alloc a;  /* a.time_ns: ticks, as taken at the allocation;
                           a.mapped links a free record to the next */
};

/* A slot's live table: open addressing on the key's hash, linear probing,
 * deletion by shifting back (no tombstones), at most half full. An entry
 * keeps the address beside the record, so a probe reads the record only
 * when the address matches. */
struct entry {
    uint64_t address;
    struct vt_rec *rec;  /* NULL: empty */
};

struct table {
    struct entry *e;
    size_t cap;          /* a power of two, or 0 */
    size_t count;
};

static struct vt_rec *table_find(const struct table *t, const struct vt_key *k, uint32_t h) {
    if (!t->cap) return NULL;
    size_t mask = t->cap - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        struct vt_rec *r = t->e[i].rec;
        if (!r) return NULL;
        if (t->e[i].address == k->address && r->key.space == k->space) return r;
    }
}

static int table_grow(struct table *t) {
    size_t cap = t->cap ? t->cap * 2 : 64;
    struct entry *e = calloc(cap, sizeof *e);
    if (!e) return 0;
    for (size_t i = 0; i < t->cap; i++) {
        struct vt_rec *r = t->e[i].rec;
        if (!r) continue;
        size_t j = key_hash(&r->key) & (cap - 1);
        while (e[j].rec) j = (j + 1) & (cap - 1);
        e[j] = t->e[i];
    }
    free(t->e);
    t->e = e;
    t->cap = cap;
    return 1;
}

/* Add a record whose key is not in the table. */
static int table_add(struct table *t, struct vt_rec *r, uint32_t h) {
    if (2 * (t->count + 1) > t->cap && !table_grow(t)) return 0;
    size_t mask = t->cap - 1, i = h & mask;
    while (t->e[i].rec) i = (i + 1) & mask;
    t->e[i].address = r->key.address;
    t->e[i].rec = r;
    t->count++;
    return 1;
}

static void table_del(struct table *t, const struct vt_rec *r, uint32_t h) {
    size_t mask = t->cap - 1, i = h & mask;
    while (t->e[i].rec != r) i = (i + 1) & mask;
    /* Shift later entries of the run back over the hole, unless they
     * belong at or after it. */
    for (size_t j = (i + 1) & mask;; j = (j + 1) & mask) {
        struct vt_rec *x = t->e[j].rec;
        if (!x) break;
        size_t home = key_hash(&x->key) & mask;
        if (((j - home) & mask) >= ((j - i) & mask)) {
            t->e[i] = t->e[j];
            i = j;
        }
    }
    t->e[i].rec = NULL;
    t->e[i].address = 0;
    t->count--;
}

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
static size_t ring_next;      /* ring_written % ring_cap, kept without a division */
static int ring_failed;
static uint64_t start_mono_ns, start_unix_ns;
static uint64_t peak_gen;
static uint64_t missed;       /* atomic: vt_tracker_missed */

static __thread int32_t my_tid __attribute__((tls_model("initial-exec")));
/* Records of freed allocations, kept by the thread that freed them for its
 * next allocations: an alloc/free loop then calls malloc and free not at
 * all. */
#define REC_CACHE 64
static __thread struct vt_rec *rec_cache __attribute__((tls_model("initial-exec")));
static __thread int nrec_cache __attribute__((tls_model("initial-exec")));

/* ---- the slots ---------------------------------------------------------- */

/* An allocation's and a free's are the history's event types. */
enum { OP_ALLOC = VT_EV_ALLOC, OP_FREE = VT_EV_FREE, OP_REPLACED = 8, OP_UNKNOWN, OP_RESTORED };

/* A log entry is what happened, with what the counts and the history
 * need: it has the shape of an event (struct vt_event), its time in ticks
 * (after the allocation returned, before the free was called), its type an
 * OP_*. */

#define LOG_OPS 1024

/* A thread's slot. Under `lock`: the table, and appending to the log
 * (ops[head % LOG_OPS], then head); the owner takes it for every call,
 * another thread only to free what the owner allocated. The applier,
 * under the global lock, reads up to head and then writes tail. A slot
 * outlives its thread (its allocations may still be live, its log not yet
 * applied) and is taken over by the next thread that needs one. */
struct slot {
    int lock;           /* slot_take / slot_give */
    struct table table;
    uint64_t head;
    int owned;          /* 1 while a live thread has it */
    struct slot *next;  /* all slots, newest first; never unlinked */
    /* The applier's, on a line of its own. */
    uint64_t tail __attribute__((aligned(64)));
    /* Two entries a line, none across two. */
    struct vt_event ops[LOG_OPS] __attribute__((aligned(64)));
} __attribute__((aligned(64)));

static __thread struct slot *my_slot __attribute__((tls_model("initial-exec")));
static pthread_key_t slot_key;

/* A slot's lock. Its owner takes it at every call and all but never finds
 * it held, so taking it is one exchange and giving it back a plain store
 * (a pthread mutex pays a second locked instruction to give back, which
 * costs more than the rest of the lock). The others hold it briefly (a
 * free, a snapshot copying the table); a waiter spins, then yields. */
static void slot_wait(struct slot *l) {
    for (unsigned spins = 0;;) {
        while (__atomic_load_n(&l->lock, __ATOMIC_RELAXED)) {
            if (spins++ < 200) {
#if defined(__x86_64__)
                __builtin_ia32_pause();
#endif
            } else {
                sched_yield();
            }
        }
        if (!__atomic_exchange_n(&l->lock, 1, __ATOMIC_ACQUIRE)) return;
    }
}

static inline void slot_take(struct slot *l) {
    if (__builtin_expect(__atomic_exchange_n(&l->lock, 1, __ATOMIC_ACQUIRE), 0)) slot_wait(l);
}

static inline void slot_give(struct slot *l) { __atomic_store_n(&l->lock, 0, __ATOMIC_RELEASE); }
static pthread_once_t slot_once = PTHREAD_ONCE_INIT;
static uint64_t last_applied;         /* ticks of the newest op applied; lock held */
/* Set while a thread applies the logs (written under the global lock, read
 * without it); a line of its own, away from what the applier writes at
 * every entry. */
static struct __attribute__((aligned(64))) {
    int on;
} applying;

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
    "device", "pitched", "managed", "async", "vmm", "host", "array", "imported", "host_vmm", "host_async",
};

const char *vt_kind_name(int kind) {
    return kind >= 0 && kind < VT_KIND_COUNT ? kind_names[kind] : "unknown";
}

int vt_kind_space(int kind) {
    switch (kind) {
    case VT_KIND_HOST: return VT_SPACE_HOST;
    case VT_KIND_VMM: case VT_KIND_HOST_VMM: return VT_SPACE_HANDLE;
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

static inline uint64_t ticks(void) {
#if defined(__x86_64__)
    if (hot.use_tsc) return __builtin_ia32_rdtsc() - hot.tsc0;
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
    if (!hot.use_tsc) return 1.0;
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
        hot.use_tsc = tsc_is_invariant();
#if defined(__x86_64__)
        hot.tsc0 = __builtin_ia32_rdtsc();
#endif
        start_mono_ns = mono_ns();
    }
    (void)depth;
    if (ring == NULL) ring_cap = event_capacity;
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

/* Map the event ring; 0 when there is none (no history asked for, or no
 * memory). Lock held. */
static int ring_map(void) {
    if (ring_cap == 0 || ring_failed) return 0;
    void *m = mmap(NULL, ring_cap * sizeof *ring, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) { ring_failed = 1; return 0; }
    /* Huge pages where the kernel allows them: the ring is written in
     * order, and 2 MiB pages turn thousands of first-touch faults into a
     * handful. */
    madvise(m, ring_cap * sizeof *ring, MADV_HUGEPAGE);
    ring = m;
    return 1;
}

/* The ring's next entry, or NULL. Lock held. */
static inline struct vt_event *ring_add(void) {
    if (__builtin_expect(ring == NULL, 0) && !ring_map()) return NULL;
    struct vt_event *e = &ring[ring_next];
    if (++ring_next == ring_cap) ring_next = 0;
    ring_written++;
    return e;
}

static void add_event(uint64_t now, int type, uint64_t address, uint64_t bytes,
                      uint32_t stack, int device, int kind) {
    struct vt_event *e = ring_add();
    if (e) *e = (struct vt_event){now, address, bytes, stack, (int16_t)device, (uint8_t)type, (uint8_t)kind};
}

static struct vt_device *device_slot(int device) {
    if (device < 0 || device >= VT_MAX_DEVICES) return NULL;
    struct vt_device *d = &devices[device];
    if (__builtin_expect(!d->used, 0)) {
        if (device >= ndevices) ndevices = device + 1;
        d->used = 1;
    }
    return d;
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

/* Add or remove bytes from the live counters. Lock held. Returns the
 * device whose counters moved, NULL for memory that is not the device's
 * own (pinned host, imported). */
static inline __attribute__((always_inline)) struct vt_device *account(const struct vt_event *a, int sign, uint64_t now) {
    if (a->kind == VT_KIND_IMPORTED) {
        if (sign > 0) {
            totals.imported_live_bytes += a->bytes;
            totals.imported_live_count++;
        } else {
            totals.imported_live_bytes -= a->bytes;
            totals.imported_live_count--;
        }
        return NULL;
    }
    if (vt_kind_is_host(a->kind)) {
        if (sign > 0) {
            totals.host_live_bytes += a->bytes;
            totals.host_live_count++;
            if (totals.host_live_bytes > totals.host_peak_bytes)
                totals.host_peak_bytes = totals.host_live_bytes;
        } else {
            totals.host_live_bytes -= a->bytes;
            totals.host_live_count--;
        }
        return NULL;
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
            d->live_bytes += a->bytes;
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
            d->live_bytes -= a->bytes;
            d->live_count--;
        }
    }
    return d;
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

static void rec_put(struct vt_rec *r) {
    if (nrec_cache >= REC_CACHE) {
        free(r);
        return;
    }
    r->a.mapped = (uint64_t)(uintptr_t)rec_cache;
    rec_cache = r;
    nrec_cache++;
}

static struct vt_rec *rec_get(void) {
    struct vt_rec *r = rec_cache;
    if (!r) return malloc(sizeof *r);
    rec_cache = (struct vt_rec *)(uintptr_t)r->a.mapped;
    nrec_cache--;
    return r;
}

/* Count one op. Global lock held. `now` is its time stamp, made no older
 * than what was applied before (an op logged late: a free's time stamp is
 * taken before the real call, its entry made after). An allocation's or a
 * free's entry goes to the history as it is (its type is the event's). */
static void apply(const struct vt_event *o) {
    uint64_t now = o->time_ns > last_applied ? o->time_ns : last_applied;
    last_applied = now;
    struct vt_device *d;
    struct vt_event *e;
    switch (o->type) {
    case OP_ALLOC:
        d = account(o, +1, now);
        totals.alloc_count++;
        if (d) d->alloc_count++;
        if ((e = ring_add())) { *e = *o; e->time_ns = now; }
        break;
    case OP_FREE:
        d = account(o, -1, now);
        totals.free_count++;
        if (d) d->free_count++;
        if ((e = ring_add())) { *e = *o; e->time_ns = now; }
        break;
    case OP_REPLACED:
        account(o, -1, now);
        break;
    case OP_RESTORED:
        /* The driver refused a free counted already: the memory is live
         * again (the free's event stays: the program did ask for it). */
        d = account(o, +1, now);
        totals.free_count--;
        if (d) d->free_count--;
        break;
    default:
        totals.unknown_frees++;
        break;
    }
}

/* Apply every op logged so far, all slots' merged by time stamp. Global
 * lock held. Every op of an allocation is in the log of the slot whose
 * table holds it, in order: its free never comes before it. */
static void drain(void) {
    struct src {
        struct slot *l;
        uint64_t t, h, ts; /* ts: of entry t */
    } one[8], *src = one;
    size_t n = 0, cap = 8;
    __atomic_store_n(&applying.on, 1, __ATOMIC_RELAXED);
    for (struct slot *l = __atomic_load_n(&hot.slots, __ATOMIC_ACQUIRE); l; l = l->next) {
        uint64_t h = __atomic_load_n(&l->head, __ATOMIC_ACQUIRE);
        uint64_t t = l->tail;
        if (t == h) continue;
        if (n == cap) {
            struct src *bigger = malloc(cap * 2 * sizeof *bigger);
            if (!bigger) break; /* the rest waits for the next drain */
            memcpy(bigger, src, n * sizeof *src);
            if (src != one) free(src);
            src = bigger;
            cap *= 2;
        }
        src[n].l = l;
        src[n].t = t;
        src[n].h = h;
        src[n].ts = l->ops[t % LOG_OPS].time_ns;
        n++;
    }
    /* The merge: from the log with the oldest entry, every entry up to the
     * next log's oldest; a log done is let go at once. */
    while (n > 1) {
        size_t b = 0;
        uint64_t next = UINT64_MAX;
        for (size_t i = 1; i < n; i++) {
            if (src[i].ts < src[b].ts) {
                next = src[b].ts;
                b = i;
            } else if (src[i].ts < next) {
                next = src[i].ts;
            }
        }
        struct src *x = &src[b];
        do {
            apply(&x->l->ops[x->t % LOG_OPS]);
            if (++x->t == x->h) break;
            x->ts = x->l->ops[x->t % LOG_OPS].time_ns;
        } while (x->ts <= next);
        if (x->t == x->h) {
            __atomic_store_n(&x->l->tail, x->t, __ATOMIC_RELEASE);
            *x = src[--n];
        }
    }
    if (n == 1) {
        for (uint64_t t = src[0].t; t < src[0].h; t++) apply(&src[0].l->ops[t % LOG_OPS]);
        __atomic_store_n(&src[0].l->tail, src[0].h, __ATOMIC_RELEASE);
    }
    if (src != one) free(src);
    __atomic_store_n(&applying.on, 0, __ATOMIC_RELAXED);
}

static void slot_release(void *p) {
    struct slot *l = p;
    my_slot = NULL;
    while (rec_cache) {
        struct vt_rec *r = rec_cache;
        rec_cache = (struct vt_rec *)(uintptr_t)r->a.mapped;
        free(r);
    }
    nrec_cache = 0;
    __atomic_store_n(&l->owned, 0, __ATOMIC_RELEASE);
}

static void slot_key_make(void) { pthread_key_create(&slot_key, slot_release); }

/* This thread's slot: one no live thread has, else a new one. */
static struct slot *slot_attach(void) {
    pthread_once(&slot_once, slot_key_make);
    struct slot *l;
    pthread_mutex_lock(&lock);
    for (l = hot.slots; l; l = l->next) {
        int expected = 0;
        if (__atomic_compare_exchange_n(&l->owned, &expected, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) break;
    }
    if (!l && (l = aligned_alloc(64, sizeof *l))) {
        memset(l, 0, sizeof *l);
        l->owned = 1;
        l->next = hot.slots;
        __atomic_store_n(&hot.slots, l, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&lock);
    if (l) {
        pthread_setspecific(slot_key, l);
        my_slot = l;
    }
    return l;
}

/* Lock a slot with room for `need` ops in its log. Past half full, the
 * logs are applied, unless another thread is at it: then this one goes on
 * into the second half, and waits only when its log is full. (Were the
 * whole log the mark, two threads allocating at once would fill theirs in
 * step, and each would wait out the other's applying, which empties
 * both.) The slot's lock is not held while applying: the applier's
 * readers may take it. */
static void slot_lock_slow(struct slot *l, int need);

/* Entries the log would hold with `need` more. Slot lock held. */
static inline uint64_t log_used(const struct slot *l, int need) {
    return l->head + (uint64_t)need - __atomic_load_n(&l->tail, __ATOMIC_ACQUIRE);
}

static inline void slot_lock(struct slot *l, int need) {
    slot_take(l);
    if (__builtin_expect(log_used(l, need) <= LOG_OPS / 2, 1)) return;
    slot_give(l);
    slot_lock_slow(l, need);
}

static void slot_lock_slow(struct slot *l, int need) {
    for (;;) {
        slot_take(l);
        uint64_t tail = __atomic_load_n(&l->tail, __ATOMIC_ACQUIRE);
        uint64_t used = l->head + (uint64_t)need - tail;
        if (used <= LOG_OPS / 2) return;
        int room = used <= LOG_OPS;
        if (room && __atomic_load_n(&applying.on, __ATOMIC_RELAXED)) return;
        slot_give(l);
        if (pthread_mutex_trylock(&lock) == 0) {
            drain();
            pthread_mutex_unlock(&lock);
            continue;
        }
        if (room) {
            slot_take(l);
            if (log_used(l, need) <= LOG_OPS) return;
            slot_give(l);
        }
        /* Full, and another thread holds the global lock, applying the
         * logs (this one's among them if it was full when that began):
         * wait for this log's tail to move rather than queue on the lock
         * (whose cache line the applier then has to win back to let go of
         * it). Briefly spinning, then yielding: with more threads than
         * cores the applier may be the one waiting for a core (16 threads
         * on 2 cores spent half their time spinning here). */
        for (int i = 0; i < 256 && __atomic_load_n(&l->tail, __ATOMIC_ACQUIRE) == tail; i++) {
            if (i < 128) {
#if defined(__x86_64__)
                __builtin_ia32_pause();
#endif
            } else {
                sched_yield();
            }
        }
    }
}

/* Log an op on allocation `a` (NULL: a free of an unknown pointer),
 * written in place. Slot lock held, with room. */
static inline __attribute__((always_inline)) void log_op(struct slot *l, const struct vt_alloc *a, uint64_t ts, int type) {
    struct vt_event *o = &l->ops[l->head % LOG_OPS];
    if (a) *o = (struct vt_event){ts, a->address, a->bytes, a->stack, a->device, (uint8_t)type, a->kind};
    else *o = (struct vt_event){.time_ns = ts, .type = (uint8_t)type};
    __atomic_store_n(&l->head, l->head + 1, __ATOMIC_RELEASE);
}

uint32_t vt_tracker_stack_id(const uintptr_t *frames, int depth) {
    if (depth > VT_MAX_FRAMES) depth = VT_MAX_FRAMES;
    if (depth < 0) depth = 0;
    struct last_stack *ls = last_stack;
    if (ls && ls->depth == depth && memcmp(ls->frames, frames, (size_t)depth * sizeof *frames) == 0)
        return ls->id;
    uint32_t shash = stack_hash(frames, &depth);
    pthread_mutex_lock(&lock);
    uint32_t id = intern_stack(frames, depth, shash);
    pthread_mutex_unlock(&lock);
    if (id != UINT32_MAX) remember_stack(frames, depth, id);
    return id;
}


void vt_tracker_alloc(uint64_t address, uint64_t bytes, int kind, int device,
                      const char *api, const uintptr_t *frames, int depth) {
    vt_tracker_alloc_at(address, bytes, kind, device, api, vt_tracker_stack_id(frames, depth));
}

void vt_tracker_alloc_at(uint64_t address, uint64_t bytes, int kind, int device,
                         const char *api, uint32_t id) {
    if (!__atomic_load_n(&vt_tracker_flags.touched, __ATOMIC_RELAXED)) __atomic_store_n(&vt_tracker_flags.touched, 1, __ATOMIC_RELAXED);
    struct slot *l = my_slot;
    if (!l && !(l = slot_attach())) return;
    struct vt_rec *r = rec_get();
    if (!r) return;
    uint64_t ts = ticks();
    r->key = (struct vt_key){address, (uint32_t)vt_kind_space(kind), 0};
    r->a = (struct vt_alloc){.address = address, .bytes = bytes, .time_ns = ts, .api = api,
                             .stack = id, .thread = thread_id(),
                             .device = (int16_t)(vt_kind_is_host(kind) ? VT_HOST_DEVICE : device),
                             .kind = (uint8_t)kind};
    uint32_t khash = key_hash(&r->key);
    struct vt_rec *old;
    slot_lock(l, 2);
    old = table_find(&l->table, &r->key, khash);
    if (old) {
        /* The driver handed out an address we still think is live: a free
         * we did not see. The new allocation replaces the old record. */
        table_del(&l->table, old, khash);
        log_op(l, &old->a, ts, OP_REPLACED);
    }
    if (!table_add(&l->table, r, khash)) {
        slot_give(l);
        rec_put(r);
        if (old) rec_put(old);
        return;
    }
    log_op(l, &r->a, ts, OP_ALLOC);
    slot_give(l);
    if (old) rec_put(old);
}

/* Take (space, address) out of a slot's table and log its free; the slot
 * is locked with room for one entry. */
static inline struct vt_rec *take(struct slot *l, const struct vt_key *k, uint32_t khash, uint64_t ts) {
    struct vt_rec *r = table_find(&l->table, k, khash);
    if (r) {
        table_del(&l->table, r, khash);
        log_op(l, &r->a, ts, OP_FREE);
    }
    return r;
}

/* take() in slot l, under its lock; fills f on success. */
static inline int take_from(struct slot *l, const struct vt_key *k, uint32_t khash, struct vt_free *f) {
    slot_lock(l, 1);
    struct vt_rec *r = take(l, k, khash, f->ts);
    slot_give(l);
    if (!r) return 0;
    f->rec = r;
    f->slot = l;
    return 1;
}

/* The record leaves its table, and its free is logged, before the real
 * free: once the driver has the address back it may hand it to another
 * thread, whose allocation must not find ours. Looked for in this
 * thread's table first, then in the others'. A free that fails puts the
 * record back and undoes the count (vt_tracker_free_end). */
struct vt_free vt_tracker_free_begin(int space, uint64_t address) {
    struct vt_free f = {address, ticks(), space, NULL, NULL};
    struct vt_key k = {address, (uint32_t)space, 0};
    uint32_t khash = key_hash(&k);
    struct slot *mine = my_slot;
    if (mine && take_from(mine, &k, khash, &f)) return f;
    for (struct slot *l = __atomic_load_n(&hot.slots, __ATOMIC_ACQUIRE); l; l = l->next)
        if (l != mine && take_from(l, &k, khash, &f)) return f;
    /* A pointer never seen: counted through this thread's log. */
    struct slot *l = mine;
    if (!l && !(l = slot_attach())) return f;
    slot_lock(l, 1);
    log_op(l, NULL, f.ts, OP_UNKNOWN);
    slot_give(l);
    return f;
}

void vt_tracker_free_end(const struct vt_free *f, int ok) {
    struct vt_rec *r = f->rec;
    if (!r) return;
    if (ok) {
        rec_put(r);
        return;
    }
    /* The driver refused it: back in the table and in the counts, unless
     * the address was handed out again meanwhile (then that allocation is
     * current). */
    struct slot *l = f->slot;
    uint32_t khash = key_hash(&r->key);
    struct vt_rec *now;
    slot_lock(l, 1);
    now = table_find(&l->table, &r->key, khash);
    if (!now && table_add(&l->table, r, khash)) {
        log_op(l, &r->a, ticks(), OP_RESTORED);
    }
    else if (!now) now = r; /* no memory to put it back: dropped */
    slot_give(l);
    if (now) rec_put(r);
}

void vt_tracker_missed(void) { __atomic_add_fetch(&missed, 1, __ATOMIC_RELAXED); }

void vt_tracker_map(uint64_t handle, uint64_t address) {
    struct vt_key k = {handle, VT_SPACE_HANDLE, 0};
    uint32_t khash = key_hash(&k);
    for (struct slot *l = __atomic_load_n(&hot.slots, __ATOMIC_ACQUIRE); l; l = l->next) {
        struct vt_rec *r;
        slot_take(l);
        r = table_find(&l->table, &k, khash);
        if (r) r->a.mapped = address;
        slot_give(l);
        if (r) return;
    }
}

void vt_tracker_failed(int is_oom, struct vt_oom *o, const uintptr_t *frames,
                       int depth) {
    pthread_mutex_lock(&lock);
    drain();
    uint64_t now = ticks();
    if (now < last_applied) now = last_applied;
    last_applied = now;
    totals.failed_count++;
    /* Other failures (no driver, bad arguments) are counted but do not make
     * the process one that used a GPU: without a driver, a program must
     * behave and print exactly as it does without vramtrace. */
    struct vt_device *d = !is_oom || !vt_kind_owned_device(o->kind) ? NULL : device_slot(o->device);
    if (d) d->failed_count++;
    if (is_oom) {
        __atomic_store_n(&vt_tracker_flags.touched, 1, __ATOMIC_RELAXED);
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
    pthread_mutex_lock(&lock);
    drain();
    uint64_t live = devices[device].live_bytes;
    pthread_mutex_unlock(&lock);
    return live;
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
        __atomic_or_fetch(&vt_tracker_flags.facts, 1ull << device, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&lock);
}

static int by_time(const void *a, const void *b) {
    const struct vt_alloc *x = a, *y = b;
    if (x->time_ns != y->time_ns) return x->time_ns < y->time_ns ? -1 : 1;
    return x->address < y->address ? -1 : x->address > y->address;
}

/* A slot's lock, taken before `until` (CLOCK_REALTIME), or not at all:
 * 1 when taken. */
static int slot_take_until(struct slot *l, const struct timespec *until) {
    for (;;) {
        if (!__atomic_load_n(&l->lock, __ATOMIC_RELAXED) && !__atomic_exchange_n(&l->lock, 1, __ATOMIC_ACQUIRE))
            return 1;
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        if (now.tv_sec > until->tv_sec || (now.tv_sec == until->tv_sec && now.tv_nsec >= until->tv_nsec))
            return 0;
        sched_yield();
    }
}

/* The snapshot; with `until`, NULL if a lock it needs is not free before
 * then. */
static struct vt_snapshot *snapshot(const struct timespec *until);

struct vt_snapshot *vt_tracker_snapshot(void) { return snapshot(NULL); }

struct vt_snapshot *vt_tracker_snapshot_within(uint64_t ns) {
    struct timespec until;
    vt_deadline(&until, ns);
    return snapshot(&until);
}

void vt_deadline(struct timespec *until, uint64_t ns) {
    clock_gettime(CLOCK_REALTIME, until);
    uint64_t t = (uint64_t)until->tv_nsec + ns % 1000000000ull;
    until->tv_sec += (time_t)(ns / 1000000000ull + t / 1000000000ull);
    until->tv_nsec = (long)(t % 1000000000ull);
}

static struct vt_snapshot *snapshot(const struct timespec *until) {
    struct vt_snapshot *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    if (!until) pthread_mutex_lock(&lock);
    else if (pthread_mutex_timedlock(&lock, until) != 0) {
        free(s);
        return NULL;
    }
    drain();
    s->totals = totals;
    s->totals.missed = __atomic_load_n(&missed, __ATOMIC_RELAXED);
    memcpy(s->devices, devices, sizeof devices);
    s->ndevices = ndevices;
    s->start_unix_ns = start_unix_ns;
    s->now_ns = vt_now_ns();
    double scale = tick_scale(s->now_ns);
#define TO_NS(t) ((uint64_t)((double)(t) * scale))
    s->totals.peak_time_ns = TO_NS(s->totals.peak_time_ns);
    for (int i = 0; i < ndevices; i++) s->devices[i].peak_time_ns = TO_NS(s->devices[i].peak_time_ns);
    /* One slot at a time: a thread allocating meanwhile waits for its own
     * slot only. */
    size_t cap = 0;
    for (struct slot *l = hot.slots; l; l = l->next) {
        if (!until) slot_take(l);
        else if (!slot_take_until(l, until)) {
            pthread_mutex_unlock(&lock);
            free(s->live);
            free(s);
            return NULL;
        }
        size_t n = l->table.count;
        if (s->nlive + n > cap) {
            size_t want = cap ? cap : 64;
            while (want < s->nlive + n) want *= 2;
            struct vt_alloc *bigger = realloc(s->live, want * sizeof *bigger);
            if (bigger) {
                s->live = bigger;
                cap = want;
            }
        }
        if (s->nlive + n <= cap)
            for (size_t i = 0; i < l->table.cap; i++) {
                struct vt_rec *r = l->table.e[i].rec;
                if (!r) continue;
                s->live[s->nlive] = r->a;
                s->live[s->nlive++].time_ns = TO_NS(r->a.time_ns);
            }
        slot_give(l);
    }
    if (!s->live) s->live = malloc(sizeof *s->live);
    /* In the order they were made, as the events have them. */
    if (s->live) qsort(s->live, s->nlive, sizeof *s->live, by_time);
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

void vt_tracker_lock_all(void) {
    pthread_mutex_lock(&lock);
    for (struct slot *l = hot.slots; l; l = l->next) slot_take(l);
}

void vt_tracker_unlock_all(void) {
    for (struct slot *l = hot.slots; l; l = l->next) slot_give(l);
    pthread_mutex_unlock(&lock);
}

void vt_tracker_reset_child(void) {
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ADAPTIVE_NP);
    pthread_mutex_init(&lock, &attr);
    pthread_mutexattr_destroy(&attr);
    /* Other threads' slots came along with their memory, not their
     * threads: emptied and free for the taking; this thread keeps its own. */
    for (struct slot *l = hot.slots; l; l = l->next) {
        l->lock = 0;
        for (size_t i = 0; i < l->table.cap; i++) free(l->table.e[i].rec);
        free(l->table.e);
        memset(&l->table, 0, sizeof l->table);
        l->tail = l->head;
        if (l != my_slot) l->owned = 0;
    }
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
    missed = 0;
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
    ring_next = 0;
    vt_tracker_flags.touched = 0;
    my_tid = 0;
    last_applied = 0;
    /* The only thread here: its remembered stack id is gone with the table. */
    if (last_stack) last_stack->depth = -1;
    __atomic_add_fetch(&vt_tracker_flags.generation, 1, __ATOMIC_RELEASE);
}
