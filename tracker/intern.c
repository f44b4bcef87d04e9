/* intern.c -- interning stacks, and this thread's memo of the last one.
 *
 * See intern.h. The memo answers "is this the same stack as last time?"
 * for every caller, and is the only place vramtrace keeps that answer: a
 * loop that allocates from one place finds its stack in it, told so by the
 * walker (the capture's serial) or by a compare of the frames, and hashes
 * nothing and looks up nothing under the lock. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#define HASH_FUNCTION(keyptr, keylen, hashv) ((hashv) = vt_hash_words((keyptr), (keylen)))
#include <uthash.h>

#include "../common/warn.h"
#include "account.h"
#include "intern.h"
#include "stack.h"

struct vt_stack_node {
    UT_hash_handle hh;
    struct vt_site site;
    struct vt_stack pub;
    uintptr_t frames[];
};
_Static_assert(offsetof(struct vt_stack_node, pub) == offsetof(struct vt_stack_node, site) + sizeof(struct vt_site),
               "vt_site_of finds a stack's site just before its public part");

struct vt_stacks vt_stacks;

/* The stack this thread interned last, its id, and the serial of the
 * capture it came from (UINT64_MAX: not known). */
struct last_stack {
    uint64_t serial;
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

uint32_t vt_intern(const uintptr_t *frames, int depth, uint32_t hash) {
    size_t keylen = (size_t)depth * sizeof(uintptr_t);
    struct vt_stack_node *n;
    HASH_FIND_BYHASHVALUE(hh, vt_stacks.table, frames, keylen, hash, n);
    if (n) return n->pub.id;
    if (vt_stacks.n == vt_stacks.cap) {
        size_t cap = vt_stacks.cap ? vt_stacks.cap * 2 : 256;
        const struct vt_stack **l = realloc(vt_stacks.list, cap * sizeof *l);
        if (!l) { vt_records_lost("a stack"); return UINT32_MAX; }
        vt_stacks.list = l;
        vt_stacks.cap = cap;
    }
    n = malloc(sizeof *n + keylen);
    if (!n) { vt_records_lost("a stack"); return UINT32_MAX; }
    memcpy(n->frames, frames, keylen);
    memset(&n->site, 0, sizeof n->site);
    n->site.hwm_gen = vt_counts.peak_gen;
    n->pub.id = (uint32_t)vt_stacks.n;
    n->pub.depth = (uint32_t)depth;
    n->pub.frames = n->frames;
    HASH_ADD_KEYPTR_BYHASHVALUE(hh, vt_stacks.table, n->frames, keylen, hash, n);
    vt_stacks.list[vt_stacks.n++] = &n->pub;
    return n->pub.id;
}

uint32_t vt_intern_hash(const uintptr_t *frames, int *depth) {
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
    ls->serial = UINT64_MAX;
}

uint32_t vt_tracker_stack_id(const uintptr_t *frames, int depth) {
    if (depth > VT_MAX_FRAMES) depth = VT_MAX_FRAMES;
    if (depth < 0) depth = 0;
    struct last_stack *ls = last_stack;
    if (ls && ls->depth == depth && memcmp(ls->frames, frames, (size_t)depth * sizeof *frames) == 0)
        return ls->id;
    uint32_t shash = vt_intern_hash(frames, &depth);
    pthread_mutex_lock(&vt_tracker_lock);
    uint32_t id = vt_intern(frames, depth, shash);
    pthread_mutex_unlock(&vt_tracker_lock);
    if (id != UINT32_MAX) remember_stack(frames, depth, id);
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
    if (id != UINT32_MAX && (ls = last_stack)) ls->serial = serial();
    return id;
}

void vt_intern_reset_child(void) {
    struct vt_stack_node *n, *ntmp;
    HASH_ITER(hh, vt_stacks.table, n, ntmp) {
        HASH_DEL(vt_stacks.table, n);
        free(n);
    }
    vt_stacks.n = 0;
    /* The only thread here: its remembered stack id is gone with the table. */
    if (last_stack) {
        last_stack->depth = -1;
        last_stack->serial = UINT64_MAX;
    }
}
