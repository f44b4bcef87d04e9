/* intern.c -- interning stacks: one table, read without a lock, and this
 * thread's memo of the last one.
 *
 * See intern.h. A stack's key is a hash of its frames taken as a path from
 * the outermost frame in (heaptrack's trace tree names a stack the same
 * way, by its path; here the path's nodes are not stored, see
 * docs/performance.md for the measurement). The table maps that hash to
 * the stack, whose frames are compared in full before its id is taken, so
 * two stacks never share an id. Look-ups read the table without a lock (an
 * entry, once written, never changes; a table outgrown stays readable
 * until the process ends or forks); only a new stack takes the global lock
 * to add itself. The memo answers "is this the same stack as last time?"
 * for the walker's captures (the capture's serial), which then hash and
 * look up nothing. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "../common/warn.h"
#include "account.h"
#include "intern.h"
#include "stack.h"

#define NONE UINT32_MAX

struct vt_stack_node {
    struct vt_site site;
    struct vt_stack pub;
    uint64_t hash;
    uintptr_t frames[];
};
_Static_assert(offsetof(struct vt_stack_node, pub) == sizeof(struct vt_site),
               "vt_site_of finds a stack's site just before its public part");

struct vt_stacks vt_stacks;

/* ---- the table ----------------------------------------------------------- */

/* One entry: a stack and its hash. `node` is NULL while the entry is
 * empty, and is written last, with release order, once `hash` is in place. */
struct entry {
    uint64_t hash;
    const struct vt_stack_node *node;
};

/* A table, at most half full. `older`: the table it outgrew (kept, since a
 * thread may still be reading it). */
struct table {
    struct entry *e;
    size_t cap, used;
    int shift; /* 64 - log2(cap) */
    struct table *older;
};

/* The current table, read with acquire order and without a lock; replaced
 * under the global lock. */
static struct table *table;

/* The hash of a path, from the outermost frame in: an add and a multiply
 * a frame (a polynomial in the frames, so that a stack's value depends on
 * every frame and its place), four frames a round; the table slot is
 * taken from the top bits, which every frame reaches. */
static inline uint64_t path_hash(const uintptr_t *frames, int depth) {
#ifdef VT_INTERN_COLLIDE
    /* A test build: stacks collide in four hashes, so that look-ups and
     * growth lean on the compare of frames. */
    return (uint64_t)(depth & 3) << 62;
#endif
    const uint64_t m = 0xff51afd7ed558ccdull;
    uint64_t h = 0x9e3779b97f4a7c15ull + (uint64_t)depth;
    int i = depth;
    for (; i >= 4; i -= 4) {
        h = (h + frames[i - 1]) * m;
        h = (h + frames[i - 2]) * m;
        h = (h + frames[i - 3]) * m;
        h = (h + frames[i - 4]) * m;
    }
    for (; i > 0; i--) h = (h + frames[i - 1]) * m;
    return h ^ (h >> 29);
}

static inline int same_frames(const uintptr_t *a, const uintptr_t *b, int depth) {
    return memcmp(a, b, (size_t)depth * sizeof *a) == 0;
}

/* The stack with these frames in table T, or NULL. No lock needed. */
static inline const struct vt_stack_node *find(const struct table *T, uint64_t h, const uintptr_t *frames,
                                               int depth) {
    size_t mask = T->cap - 1;
    for (size_t i = (size_t)(h >> T->shift);; i = (i + 1) & mask) {
        const struct vt_stack_node *n = __atomic_load_n(&T->e[i].node, __ATOMIC_ACQUIRE);
        if (!n) return NULL;
        if (T->e[i].hash == h && n->pub.depth == (uint32_t)depth && same_frames(n->frames, frames, depth)) return n;
    }
}

/* Global lock held for the rest of the table's functions. */

static void put(struct table *T, const struct vt_stack_node *n) {
    size_t mask = T->cap - 1, i = (size_t)(n->hash >> T->shift);
    while (T->e[i].node) i = (i + 1) & mask;
    T->e[i].hash = n->hash;
    __atomic_store_n(&T->e[i].node, n, __ATOMIC_RELEASE);
    T->used++;
}

/* A table twice the size (1,024 entries the first time), every stack in
 * it, published; NULL when out of memory. */
static struct table *grow(void) {
    struct table *old = table, *T = malloc(sizeof *T);
    size_t cap = old ? old->cap * 2 : 1024;
    if (!T || !(T->e = calloc(cap, sizeof *T->e))) {
        free(T);
        return NULL;
    }
    T->cap = cap;
    T->used = 0;
    T->shift = 64 - __builtin_ctzll(cap);
    T->older = old;
    for (size_t i = 0; i < vt_stacks.n; i++)
        put(T, (const struct vt_stack_node *)((const char *)vt_stacks.list[i] - offsetof(struct vt_stack_node, pub)));
    __atomic_store_n(&table, T, __ATOMIC_RELEASE);
    return T;
}

uint32_t vt_intern(const uintptr_t *frames, int depth, uint32_t hash) {
    (void)hash;
    uint64_t h = path_hash(frames, depth);
    struct table *T = table;
    const struct vt_stack_node *found = T ? find(T, h, frames, depth) : NULL;
    if (found) return found->pub.id;
    if (vt_stacks.n == vt_stacks.cap) {
        size_t cap = vt_stacks.cap ? vt_stacks.cap * 2 : 256;
        const struct vt_stack **l = realloc(vt_stacks.list, cap * sizeof *l);
        if (!l) { vt_records_lost("a stack"); return NONE; }
        vt_stacks.list = l;
        vt_stacks.cap = cap;
    }
    if ((!T || 2 * (T->used + 1) > T->cap) && !(T = grow())) { vt_records_lost("a stack"); return NONE; }
    size_t keylen = (size_t)depth * sizeof(uintptr_t);
    struct vt_stack_node *n = malloc(sizeof *n + keylen);
    if (!n) { vt_records_lost("a stack"); return NONE; }
    memcpy(n->frames, frames, keylen);
    memset(&n->site, 0, sizeof n->site);
    n->site.hwm_gen = vt_counts.peak_gen;
    n->pub.id = (uint32_t)vt_stacks.n;
    n->pub.depth = (uint32_t)depth;
    n->pub.frames = n->frames;
    n->hash = h;
    vt_stacks.list[vt_stacks.n++] = &n->pub;
    put(T, n);
    return n->pub.id;
}

uint32_t vt_intern_hash(const uintptr_t *frames, int *depth) {
    (void)frames;
    if (*depth > VT_MAX_FRAMES) *depth = VT_MAX_FRAMES;
    if (*depth < 0) *depth = 0;
    return 0;
}

/* ---- this thread's memo -------------------------------------------------- */

/* The id of the stack this thread interned last, and the serial of the
 * capture it came from (UINT64_MAX: not known, or no stack yet). */
static __thread struct {
    uint64_t serial;
    uint32_t id;
} memo __attribute__((tls_model("initial-exec"))) = {UINT64_MAX, 0};

uint32_t vt_tracker_stack_id(const uintptr_t *frames, int depth) {
    if (depth > VT_MAX_FRAMES) depth = VT_MAX_FRAMES;
    if (depth < 0) depth = 0;
    memo.serial = UINT64_MAX;
    uint64_t h = path_hash(frames, depth);
    const struct table *T = __atomic_load_n(&table, __ATOMIC_ACQUIRE);
    const struct vt_stack_node *n = T ? find(T, h, frames, depth) : NULL;
    uint32_t id;
    if (n) {
        id = n->pub.id;
    } else {
        pthread_mutex_lock(&vt_tracker_lock);
        id = vt_intern(frames, depth, 0);
        pthread_mutex_unlock(&vt_tracker_lock);
    }
    memo.id = id;
    return id;
}

uint32_t vt_tracker_stack_id_captured(int max, vt_capture_since_fn *capture, uint64_t (*serial)(void)) {
    uintptr_t frames[VT_MAX_FRAMES];
    if (max > VT_MAX_FRAMES) max = VT_MAX_FRAMES;
    int depth = capture(frames, max, memo.serial);
    if (depth == VT_STACK_SAME) return memo.id;
    uint32_t id = vt_tracker_stack_id(frames, depth);
    /* The memo now holds this capture's stack, unless interning failed. */
    if (id != NONE) memo.serial = serial();
    return id;
}

void vt_intern_reset_child(void) {
    for (size_t i = 0; i < vt_stacks.n; i++)
        free((char *)vt_stacks.list[i] - offsetof(struct vt_stack_node, pub));
    vt_stacks.n = 0;
    for (struct table *T = table, *older; T; T = older) {
        older = T->older;
        free(T->e);
        free(T);
    }
    table = NULL;
    /* The only thread here: its remembered stack is gone with the table. */
    memo.serial = UINT64_MAX;
}
