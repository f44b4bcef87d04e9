/* intern.c -- interning stacks as nodes of a prefix tree, and this thread's
 * memo of the last one.
 *
 * See intern.h. A stack is a path in a tree of return addresses rooted at
 * the outermost frame: node 0 is the empty path, and the child of node p by
 * return address ip is the path p with ip below it (one edge (p, ip) ->
 * child in an open-addressed table). Two stacks that share their callers
 * share the nodes of those callers, so a stack is found by one look-up per
 * frame from the outermost in, and the "same stack" answer is the node.
 * A node that was ever a whole stack has a stack id (the next one, at its
 * first use), and with it the stack's frames and site (struct vt_stack, the
 * face report/ reads by id; unchanged by the tree).
 *
 * Each thread remembers its last stack's frames and the node of every one
 * of its frames. A new stack is compared with it from the outer end; the
 * callers it shares keep their node, and only the frames below them are
 * looked up. Look-ups read the edge table without a lock (an edge, once
 * written, never changes; a table outgrown stays readable until the
 * process ends or forks); only a miss takes the global lock to add. The
 * memo also answers "is this the same stack as last time?" for every
 * caller, told so by the walker (the capture's serial) or by a compare of
 * the frames. */
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
#define ROOT 0u

struct vt_stack_node {
    struct vt_site site;
    struct vt_stack pub;
    uintptr_t frames[];
};
_Static_assert(offsetof(struct vt_stack_node, pub) == sizeof(struct vt_site),
               "vt_site_of finds a stack's site just before its public part");

struct vt_stacks vt_stacks;

/* ---- the tree ------------------------------------------------------------ */

/* One edge: the child of `parent` by return address `ip`. `child` is 0
 * while the entry is empty (node 0, the root, is nobody's child), and is
 * written last, with release order, once `ip` and `parent` are in place. */
struct edge {
    uintptr_t ip;
    uint32_t parent;
    uint32_t child;
};

/* An edge table, at most half full. `older`: the table it outgrew (kept,
 * since a thread may still be reading it). */
struct edges {
    struct edge *e;
    size_t cap, used;
    int shift; /* 64 - log2(cap) */
    struct edges *older;
};

/* The current table, read with acquire order and without a lock; replaced
 * under the global lock. */
static struct edges *edges;

/* Per node, its stack id or NONE, in chunks that never move (read without
 * the lock); node ids are handed out under it. */
#define CHUNK_BITS 16
#define NCHUNKS (1u << (32 - CHUNK_BITS))
static uint32_t *chunks[NCHUNKS];
static uint32_t nnodes = 1;

static inline size_t edge_slot(uint32_t parent, uintptr_t ip, int shift) {
    uint64_t h = ((uint64_t)ip ^ ((uint64_t)parent * 0x9e3779b97f4a7c15ull)) * 0xff51afd7ed558ccdull;
    return (size_t)(h >> shift);
}

/* The child of `parent` by `ip` in table E, or 0. No lock needed. */
static inline uint32_t child_in(const struct edges *E, uint32_t parent, uintptr_t ip) {
    size_t mask = E->cap - 1;
    for (size_t i = edge_slot(parent, ip, E->shift);; i = (i + 1) & mask) {
        const struct edge *e = &E->e[i];
        uint32_t c = __atomic_load_n(&e->child, __ATOMIC_ACQUIRE);
        if (!c) return 0;
        if (e->ip == ip && e->parent == parent) return c;
    }
}

uint32_t vt_intern_child(uint32_t parent, uintptr_t ip) {
    const struct edges *E = __atomic_load_n(&edges, __ATOMIC_ACQUIRE);
    return E ? child_in(E, parent, ip) : 0;
}

/* The stack id of `node`, NONE if it has none yet. No lock needed. */
static inline uint32_t stack_of(uint32_t node) {
    const uint32_t *c = __atomic_load_n(&chunks[node >> CHUNK_BITS], __ATOMIC_ACQUIRE);
    return c ? __atomic_load_n(&c[node & ((1u << CHUNK_BITS) - 1)], __ATOMIC_ACQUIRE) : NONE;
}

/* Global lock held for the rest of the tree's functions. */

static void put(struct edges *E, uint32_t parent, uintptr_t ip, uint32_t child) {
    size_t mask = E->cap - 1, i = edge_slot(parent, ip, E->shift);
    while (E->e[i].child) i = (i + 1) & mask;
    E->e[i].ip = ip;
    E->e[i].parent = parent;
    __atomic_store_n(&E->e[i].child, child, __ATOMIC_RELEASE);
    E->used++;
}

/* A table twice the size (1,024 edges the first time), every edge in it,
 * published; NULL when out of memory. */
static struct edges *grow(void) {
    struct edges *old = edges, *E = malloc(sizeof *E);
    size_t cap = old ? old->cap * 2 : 1024;
    if (!E || !(E->e = calloc(cap, sizeof *E->e))) {
        free(E);
        return NULL;
    }
    E->cap = cap;
    E->used = 0;
    E->shift = 64 - __builtin_ctzll(cap);
    E->older = old;
    if (old)
        for (size_t i = 0; i < old->cap; i++)
            if (old->e[i].child) put(E, old->e[i].parent, old->e[i].ip, old->e[i].child);
    __atomic_store_n(&edges, E, __ATOMIC_RELEASE);
    return E;
}

/* The chunk that holds `node`'s stack id, made if need be. */
static uint32_t *chunk_for(uint32_t node) {
    uint32_t **at = &chunks[node >> CHUNK_BITS];
    if (!*at) {
        uint32_t *c = malloc(sizeof *c << CHUNK_BITS);
        if (!c) return NULL;
        memset(c, 0xff, sizeof *c << CHUNK_BITS);
        __atomic_store_n(at, c, __ATOMIC_RELEASE);
    }
    return *at;
}

/* The child of `parent` by `ip`, added if new; 0 when out of memory. */
static uint32_t child_add(uint32_t parent, uintptr_t ip) {
    struct edges *E = edges;
    uint32_t c = E ? child_in(E, parent, ip) : 0;
    if (c) return c;
    if (nnodes == NONE) return 0;
    if (!chunk_for(nnodes)) return 0;
    if ((!E || 2 * (E->used + 1) > E->cap) && !(E = grow())) return 0;
    c = nnodes++;
    put(E, parent, ip, c);
    return c;
}

/* The stack id of `node`, whose path is `frames` (innermost first), made
 * if it has none; NONE when out of memory. */
static uint32_t stack_add(uint32_t node, const uintptr_t *frames, int depth) {
    uint32_t id = stack_of(node);
    if (id != NONE) return id;
    uint32_t *c = chunk_for(node);
    if (!c) return NONE;
    if (vt_stacks.n == vt_stacks.cap) {
        size_t cap = vt_stacks.cap ? vt_stacks.cap * 2 : 256;
        const struct vt_stack **l = realloc(vt_stacks.list, cap * sizeof *l);
        if (!l) return NONE;
        vt_stacks.list = l;
        vt_stacks.cap = cap;
    }
    size_t keylen = (size_t)depth * sizeof(uintptr_t);
    struct vt_stack_node *n = malloc(sizeof *n + keylen);
    if (!n) return NONE;
    memcpy(n->frames, frames, keylen);
    memset(&n->site, 0, sizeof n->site);
    n->site.hwm_gen = vt_counts.peak_gen;
    n->pub.id = (uint32_t)vt_stacks.n;
    n->pub.depth = (uint32_t)depth;
    n->pub.frames = n->frames;
    vt_stacks.list[vt_stacks.n++] = &n->pub;
    __atomic_store_n(&c[node & ((1u << CHUNK_BITS) - 1)], n->pub.id, __ATOMIC_RELEASE);
    return n->pub.id;
}

/* Frames i..0 of `frames` below `node`, added where new, each frame's node
 * into nodes[] (when given); then the stack's id. NONE, counted as a stack
 * lost, when out of memory. */
static uint32_t add_below(uint32_t node, const uintptr_t *frames, int i, int depth, uint32_t *nodes) {
    for (; i >= 0; i--) {
        if (!(node = child_add(node, frames[i]))) {
            vt_records_lost("a stack");
            return NONE;
        }
        if (nodes) nodes[i] = node;
    }
    uint32_t id = stack_add(node, frames, depth);
    if (id == NONE) vt_records_lost("a stack");
    return id;
}

uint32_t vt_intern(const uintptr_t *frames, int depth, uint32_t hash) {
    (void)hash;
    return add_below(ROOT, frames, depth - 1, depth, NULL);
}

uint32_t vt_intern_hash(const uintptr_t *frames, int *depth) {
    (void)frames;
    if (*depth > VT_MAX_FRAMES) *depth = VT_MAX_FRAMES;
    if (*depth < 0) *depth = 0;
    return 0;
}

uint32_t vt_intern_node_of(const uintptr_t *frames, int depth) {
    uint32_t node = ROOT;
    for (int i = depth - 1; i >= 0 && node != NONE; i--)
        if (!(node = vt_intern_child(node, frames[i]))) node = NONE;
    return node;
}

size_t vt_intern_nodes(void) {
    pthread_mutex_lock(&vt_tracker_lock);
    size_t n = nnodes;
    pthread_mutex_unlock(&vt_tracker_lock);
    return n;
}

/* ---- this thread's memo -------------------------------------------------- */

/* The stack this thread interned last (depth -1: none), its id, the serial
 * of the capture it came from (UINT64_MAX: not known), and the node of each
 * of its frames (node[i]: the path from the outermost frame to frame i). */
struct last_stack {
    uint64_t serial;
    uint32_t id;
    int depth;
    uint32_t node[VT_MAX_FRAMES];
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

__attribute__((noinline)) static struct last_stack *memo_new(void) {
    pthread_once(&last_stack_once, last_stack_key_make);
    struct last_stack *ls = malloc(sizeof *ls);
    if (!ls) return NULL;
    ls->depth = -1;
    ls->serial = UINT64_MAX;
    pthread_setspecific(last_stack_key, ls);
    return last_stack = ls;
}

uint32_t vt_tracker_stack_id(const uintptr_t *frames, int depth) {
    if (depth > VT_MAX_FRAMES) depth = VT_MAX_FRAMES;
    if (depth < 0) depth = 0;
    struct last_stack *ls = last_stack;
    if (!ls && !(ls = memo_new())) {
        pthread_mutex_lock(&vt_tracker_lock);
        uint32_t id = vt_intern(frames, depth, 0);
        pthread_mutex_unlock(&vt_tracker_lock);
        return id;
    }
    /* k: the outer frames this stack shares with the last one. */
    int d0 = ls->depth, k = 0;
    if (d0 >= 0) {
        int lim = depth < d0 ? depth : d0;
        const uintptr_t *a = frames + depth - 1, *b = ls->frames + d0 - 1;
        while (k < lim && a[-k] == b[-k]) k++;
        if (k == depth && depth == d0) {
            ls->serial = UINT64_MAX;
            return ls->id;
        }
        if (k && depth != d0) memmove(&ls->node[depth - k], &ls->node[d0 - k], (size_t)k * sizeof ls->node[0]);
    }
    uint32_t node = k ? ls->node[depth - k] : ROOT, id = NONE;
    int i = depth - k - 1;
    const struct edges *E = __atomic_load_n(&edges, __ATOMIC_ACQUIRE);
    if (E)
        for (uint32_t c; i >= 0 && (c = child_in(E, node, frames[i])); i--) ls->node[i] = node = c;
    if (i < 0) id = stack_of(node);
    if (id == NONE) {
        pthread_mutex_lock(&vt_tracker_lock);
        id = add_below(node, frames, i, depth, ls->node);
        pthread_mutex_unlock(&vt_tracker_lock);
    }
    if (id == NONE) {
        ls->depth = -1;
        return NONE;
    }
    /* The shared outer frames are in place already when the depth is the same. */
    memcpy(ls->frames, frames, (size_t)(depth == d0 ? depth - k : depth) * sizeof *frames);
    ls->depth = depth;
    ls->id = id;
    ls->serial = UINT64_MAX;
    return id;
}

uint32_t vt_tracker_stack_id_captured(int max, vt_capture_since_fn *capture, uint64_t (*serial)(void)) {
    struct last_stack *ls = last_stack;
    uintptr_t frames[VT_MAX_FRAMES];
    if (max > VT_MAX_FRAMES) max = VT_MAX_FRAMES;
    int depth = capture(frames, max, ls ? ls->serial : UINT64_MAX);
    if (depth == VT_STACK_SAME) return ls->id;
    uint32_t id = vt_tracker_stack_id(frames, depth);
    /* The memo now holds these frames, unless interning failed. */
    if (id != NONE && (ls = last_stack)) ls->serial = serial();
    return id;
}

void vt_intern_reset_child(void) {
    for (size_t i = 0; i < vt_stacks.n; i++)
        free((char *)vt_stacks.list[i] - offsetof(struct vt_stack_node, pub));
    vt_stacks.n = 0;
    for (struct edges *E = edges, *older; E; E = older) {
        older = E->older;
        free(E->e);
        free(E);
    }
    edges = NULL;
    for (uint32_t c = 0; c <= (nnodes - 1) >> CHUNK_BITS; c++) {
        free(chunks[c]);
        chunks[c] = NULL;
    }
    nnodes = 1;
    /* The only thread here: its remembered stack is gone with the tree. */
    if (last_stack) {
        last_stack->depth = -1;
        last_stack->serial = UINT64_MAX;
    }
}
