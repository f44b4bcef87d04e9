/* intern.c -- interning stacks: one table, read without a lock, and this
 * thread's memo of the last one.
 *
 * See intern.h. A stack's key is a hash of its frames taken as a path from
 * the outermost frame in (heaptrack's trace tree names a stack the same
 * way, by its path; here the path's nodes are not stored, see
 * docs/performance.md for the measurement). The table maps that hash to
 * the stack, whose frames are compared in full before its id is taken, so
 * two stacks never share an id. Look-ups read the table without a lock (an
 * entry, once written, never changes); only a new stack takes the global
 * lock to add itself.
 *
 * The table grows without a stall (one call rehashing every stack took 54
 * ms at a million stacks): a table half full gets an array twice the size,
 * published at once, and each later new stack moves the entries of the
 * next VT_INTERN_STEP indexes of the old array into it (tracker/table.c
 * grows the live tables the same way). Meanwhile look-ups search the new
 * array, then the old, which stays whole until the move has passed its
 * last index. Then its pages are given back, 64 at a time at the calls
 * after; its mapping stays, so a reader still inside it reads zeros, never
 * unmapped memory, and sees the table changed before it takes a miss for
 * an answer (see lookup).
 * What outgrown arrays keep is their address space (less than the current
 * array's), until a forked child lets them go. The memo answers "is this the same stack as last time?"
 * for the walker's captures (the capture's serial), which then hash and
 * look up nothing. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "../common/warn.h"
#include "account.h"
#include "blocks.h"
#include "intern.h"
#include "lsanroot.h"
#include "slab.h"
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

/* Nodes come from a thread's slabs (slab.h): a malloc of each grew the
 * thread's arena's heap a page at a time (an mprotect, the address space's
 * lock as a writer, every 15 or so nodes of 20 frames). A new slab is made
 * under the global lock, as each node's malloc was: made before the lock
 * is taken, many threads grew their heaps at once, and with 256 threads
 * the hooked calls over 1 ms were more, not fewer (docs/performance.md).
 * Nodes are never freed. */
static struct vt_slab_kind nodes = VT_SLAB_KIND(4 << 10, 64 << 10);
static __thread struct vt_slab_cursor nodes_at __attribute__((tls_model("initial-exec")));
#define NODE_BYTES(depth) (sizeof(struct vt_stack_node) + (size_t)(depth) * sizeof(uintptr_t))

/* ---- the table ----------------------------------------------------------- */

/* One entry: a stack and its hash. `node` is NULL while the entry is
 * empty, and is written last, with release order, once `hash` is in place;
 * an entry, once written, never changes (until its array's pages are given
 * back, when it reads as empty). */
struct entry {
    uint64_t hash;
    const struct vt_stack_node *node;
};

/* A table, at most half full (`used` counts the stacks of the array being
 * moved from too). While it grows, `older` is the table it outgrew, whose
 * entries below index `moved` have been put into this one; NULL when not
 * growing. `older` is read without the lock (acquire), the rest of the
 * growth's state only under it. `prev`: every table outgrown before this
 * one, newest first (their arrays stay mapped: see give_back). */
struct table {
    struct entry *e;
    size_t cap, used;
    int shift; /* 64 - log2(cap) */
    struct table *older;
    size_t moved;
    struct table *prev;
    size_t given_back; /* bytes of the array given back so far, once outgrown */
    /* How many of the array's blocks of BLOCK_ENTRIES entries (a 4 KiB
     * page) were never written (read atomically without the lock; 0 once
     * all were), and which were, a bit each (set after the block's first
     * entry is in place; NULL when none could be had: blocks are then read
     * as before). Kept with the table. */
    size_t fresh_left;
    uint64_t *written;
};

/* Nothing reads a block never written (blocks.h). The look-ups of a table
 * whose every block was written test one word more. */
#define BLOCK_ENTRIES (4096 / sizeof(struct entry))

static inline int unwritten(const struct table *T, size_t i) {
    if (__builtin_expect(!__atomic_load_n(&T->fresh_left, __ATOMIC_RELAXED), 1)) return 0;
    return !vt_block_written(T->written, i / BLOCK_ENTRIES);
}

/* The current table, read with acquire order and without a lock; replaced
 * under the global lock. `giving_back`: the outgrown table whose pages are
 * being given back, NULL when none (lock held). */
static struct table *table, *giving_back;
static struct vt_intern_stats stats;

#if defined(__x86_64__)
/* 1 when the CPU has SSE4.2's crc32 instruction, 0 when not, -1 before it
 * is asked (at the first hash; every thread finds the same answer, so the
 * race to store it is harmless). Every hash of the process is then made
 * the same way. */
static int crc_ok = -1;

static __attribute__((noinline, cold)) int crc_ask(void) {
    unsigned a, b, c, d;
    int ok = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_SSE4_2);
    __atomic_store_n(&crc_ok, ok, __ATOMIC_RELAXED);
    return ok;
}

static inline int have_crc(void) {
    int ok = __atomic_load_n(&crc_ok, __ATOMIC_RELAXED);
    return __builtin_expect(ok >= 0, 1) ? ok : crc_ask();
}

/* One step of CRC-32C: written as an instruction, so that it inlines into
 * code built without -msse4.2 (run only where have_crc said so). */
static inline uint64_t crc_step(uint64_t c, uint64_t x) {
    __asm__("crc32q %1, %0" : "+r"(c) : "rm"(x));
    return c;
}
#endif

/* The hash of a path, from the outermost frame in, so that a stack's value
 * depends on every frame and its place; the table slot is taken from the
 * top bits, which every frame reaches. Where the CPU has it: CRC-32C in
 * two lanes (the frames alternately, one instruction a frame), the lanes
 * then joined and mixed by a multiply. Else an add and a multiply a frame
 * (a polynomial in the frames), four frames a round. */
static inline __attribute__((always_inline)) uint64_t path_hash(const uintptr_t *frames, int depth) {
#ifdef VT_INTERN_COLLIDE
    /* A test build: stacks collide in four hashes, so that look-ups and
     * growth lean on the compare of frames. */
    return (uint64_t)(depth & 3) << 62;
#endif
    int i = depth;
#if defined(__x86_64__)
    if (__builtin_expect(have_crc(), 1)) {
        uint64_t a = (uint64_t)depth, b = ~(uint64_t)depth;
        const uintptr_t *p = frames + depth, *const four = frames + 4;
        for (; p >= four; p -= 4) {
            a = crc_step(a, p[-1]);
            b = crc_step(b, p[-2]);
            a = crc_step(a, p[-3]);
            b = crc_step(b, p[-4]);
        }
        for (; p >= frames + 2; p -= 2) {
            a = crc_step(a, p[-1]);
            b = crc_step(b, p[-2]);
        }
        if (p > frames) a = crc_step(a, frames[0]);
        uint64_t h = ((a << 32) | (uint32_t)b) * 0x9e3779b97f4a7c15ull;
        return h ^ (h >> 29);
    }
#endif
    const uint64_t m = 0xff51afd7ed558ccdull;
    uint64_t h = 0x9e3779b97f4a7c15ull + (uint64_t)depth;
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

/* The stack with these frames in table T's array, or NULL. No lock
 * needed. */
static inline const struct vt_stack_node *find(const struct table *T, uint64_t h, const uintptr_t *frames,
                                               int depth) {
    size_t mask = T->cap - 1;
    for (size_t i = (size_t)(h >> T->shift);; i = (i + 1) & mask) {
        if (unwritten(T, i)) return NULL;
        const struct vt_stack_node *n = __atomic_load_n(&T->e[i].node, __ATOMIC_ACQUIRE);
        if (!n) return NULL;
        if (T->e[i].hash == h && n->pub.depth == (uint32_t)depth && same_frames(n->frames, frames, depth)) return n;
    }
}

/* The same in the table being moved from, out of the hot path. */
static __attribute__((noinline)) const struct vt_stack_node *find_older(const struct table *O, uint64_t h,
                                                                        const uintptr_t *frames, int depth) {
    return find(O, h, frames, depth);
}

/* The stack with these frames, or NULL; without the lock. `older` is read
 * before the current array is searched: when it reads NULL, every stack
 * the move put into the current array is visible (the move's end is
 * stored with release order after its last put), and when it does not,
 * the older array holds every stack it held for as long as `older` still
 * names it (its pages are given back only after the move's end). So a
 * miss is checked against the table and its `older` read again: if
 * neither changed during the search, the stack was not there when the
 * look-up began; if one did (a growth, or a move's end, while this thread
 * searched, perhaps in an array given back since), the look-up starts
 * again. Hits and misses with nothing changed, the hot path's cases, read
 * each pointer once. */
static inline __attribute__((always_inline)) const struct vt_stack_node *lookup(uint64_t h, const uintptr_t *frames,
                                                                             int depth) {
    for (;;) {
        const struct table *T = __atomic_load_n(&table, __ATOMIC_ACQUIRE);
        if (!T) return NULL;
        const struct table *O = __atomic_load_n(&T->older, __ATOMIC_ACQUIRE);
        const struct vt_stack_node *n = find(T, h, frames, depth);
        if (__builtin_expect(n != NULL, 1)) return n;
        if (O && (n = find_older(O, h, frames, depth))) return n;
        if (__atomic_load_n(&table, __ATOMIC_ACQUIRE) == T && __atomic_load_n(&T->older, __ATOMIC_ACQUIRE) == O)
            return NULL;
    }
}

uint32_t vt_intern_lookup(const uintptr_t *frames, int depth) {
    const struct vt_stack_node *n = lookup(path_hash(frames, depth), frames, depth);
    return n ? n->pub.id : NONE;
}

/* Global lock held for the rest of the table's functions. */

/* Arrays are mapped, with small pages: a new one is zero pages, touched a
 * page at a time as entries land in it (a huge page's first touch would
 * clear 2 MiB inside one hooked call), and an outgrown one's pages can be
 * given back while its mapping stays readable. */
static struct entry *array_new(size_t cap) {
    size_t bytes = cap * sizeof(struct entry);
    void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return NULL;
    madvise(m, bytes, MADV_NOHUGEPAGE);
    return m;
}

static void put(struct table *T, const struct vt_stack_node *n) {
    size_t mask = T->cap - 1, i = (size_t)(n->hash >> T->shift);
    while (!unwritten(T, i) && T->e[i].node) i = (i + 1) & mask;
    int first = unwritten(T, i);
    T->e[i].hash = n->hash;
    __atomic_store_n(&T->e[i].node, n, __ATOMIC_RELEASE);
    if (first) { /* the block is real memory now: readers may look in it */
        vt_block_mark(T->written, i / BLOCK_ENTRIES);
        __atomic_store_n(&T->fresh_left, T->fresh_left - 1, __ATOMIC_RELEASE);
    }
}

static void table_free(struct table *T) {
    if (!T) return;
    free(T->written);
    free(T);
}

/* Hands back the pages of the outgrown table being given back, at most
 * GIVE_BACK_CHUNK bytes a call (a madvise of 64 pages), or all of them
 * when `all`. Its mapping stays: a reader still inside it reads zeros,
 * which end its probe as a miss. The mapping is let go only in a forked
 * child (vt_intern_reset_child). */
#define GIVE_BACK_CHUNK ((size_t)256 << 10)
static void give_back(int all) {
    struct table *O = giving_back;
    if (!O) return;
    size_t bytes = O->cap * sizeof(struct entry);
    size_t n = all ? bytes - O->given_back : GIVE_BACK_CHUNK;
    if (n > bytes - O->given_back) n = bytes - O->given_back;
    madvise((char *)O->e + O->given_back, n, MADV_DONTNEED);
    O->given_back += n;
    if (O->given_back == bytes) giving_back = NULL;
}

/* Moves the entries at the next VT_INTERN_STEP indexes of T's older array
 * into T (so at most that many); once the last index is passed, the move's
 * end is published and the older array is queued to be given back, from
 * the next call on. Returns the entries moved. */
static size_t move_step(struct table *T) {
    struct table *O = T->older;
    size_t end = T->moved + VT_INTERN_STEP, moved = 0;
    if (end > O->cap) end = O->cap;
    for (size_t i = T->moved; i < end; i++) {
        const struct vt_stack_node *n = O->e[i].node;
        if (n) {
            put(T, n);
            moved++;
        }
    }
    T->moved = end;
    if (end == O->cap) {
        __atomic_store_n(&T->older, NULL, __ATOMIC_RELEASE);
        give_back(1); /* the one before, if not done yet (never, by the sizes: see grow) */
        giving_back = O;
    }
    return moved;
}

/* A table twice the size (1,024 entries the first time), published empty,
 * the current one to be moved into it VT_INTERN_STEP indexes a new stack;
 * NULL when out of memory. A table grows when half full: the move of its
 * C indexes then ends after C / VT_INTERN_STEP new stacks, well before the
 * new table (2C entries, C / 2 used) is half full again after C / 2, so a
 * growth never finds a move still under way (if it did, it would end it
 * here, and the stats would show the call's moves). */
static struct table *grow(void) {
    struct table *old = table, *T = malloc(sizeof *T);
    size_t cap = old ? old->cap * 2 : 1024;
    if (!T || !(T->e = array_new(cap))) {
        free(T);
        return NULL;
    }
    size_t blocks = (cap + BLOCK_ENTRIES - 1) / BLOCK_ENTRIES;
    T->written = calloc(VT_BLOCK_WORDS(blocks), sizeof *T->written);
    T->fresh_left = T->written ? blocks : 0;
    if (old && old->older) {
        size_t moved = 0;
        while (old->older) moved += move_step(old);
        stats.moved_last += moved;
    }
    T->cap = cap;
    T->used = old ? old->used : 0;
    T->shift = 64 - __builtin_ctzll(cap);
    T->moved = 0;
    T->prev = old;
    T->given_back = 0;
    T->older = old && old->used ? old : NULL;
    __atomic_store_n(&table, T, __ATOMIC_RELEASE);
    stats.growths++;
    return T;
}

/* The list of stacks by id twice the size (512 the first time); 0 when
 * out of memory. It is mapped and grown by mremap, which moves its pages
 * without copying them: a realloc would copy it whenever malloc's mapping
 * threshold had risen above its size (milliseconds at millions of
 * stacks). Everyone reads the list under the lock, so it may move. */
static int list_grow(void) {
    size_t cap = vt_stacks.cap ? vt_stacks.cap * 2 : 512, bytes = cap * sizeof *vt_stacks.list;
    size_t old_bytes = vt_stacks.cap * sizeof *vt_stacks.list;
    void *m;
    if (vt_stacks.list) {
        m = mremap((void *)vt_stacks.list, old_bytes, bytes, MREMAP_MAYMOVE);
    } else {
        m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m != MAP_FAILED) madvise(m, bytes, MADV_NOHUGEPAGE);
    }
    if (m == MAP_FAILED) return 0;
    /* LeakSanitizer does not look inside a mapping of vramtrace's own: the
     * list, which holds every stack, is a root of its search. */
    vt_lsan_unroot(vt_stacks.list, old_bytes);
    vt_lsan_root(m, bytes);
    vt_stacks.list = m;
    vt_stacks.cap = cap;
    return 1;
}

/* The stack with these frames, or NULL; lock held, so exact: the older
 * array is whole while the move goes on, and its stacks that were moved
 * are in the current one too. */
static const struct vt_stack_node *find_locked(const struct table *T, uint64_t h, const uintptr_t *frames,
                                               int depth) {
    const struct vt_stack_node *n = find(T, h, frames, depth);
    return n || !T->older ? n : find(T->older, h, frames, depth);
}

uint32_t vt_intern(const uintptr_t *frames, int depth, uint32_t hash) {
    (void)hash;
    uint64_t h = path_hash(frames, depth);
    struct table *T = table;
    const struct vt_stack_node *found = T ? find_locked(T, h, frames, depth) : NULL;
    if (found) return found->pub.id;
    stats.moved_last = 0;
    if (vt_stacks.n == vt_stacks.cap && !list_grow()) { vt_records_lost("a stack"); return NONE; }
    if (!T || 2 * (T->used + 1) > T->cap) {
        if (!(T = grow())) { vt_records_lost("a stack"); return NONE; }
    } else if (T->older) {
        stats.moved_last = move_step(T);
    } else if (giving_back) {
        give_back(0);
    }
    if (stats.moved_last > stats.moved_most) stats.moved_most = stats.moved_last;
    size_t keylen = (size_t)depth * sizeof(uintptr_t);
    struct vt_stack_node *n = vt_slab_carve(&nodes, &nodes_at, NODE_BYTES(depth));
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
    T->used++;
    return n->pub.id;
}

void vt_intern_stats(struct vt_intern_stats *out) {
    *out = stats;
    out->moving = table && table->older;
    out->cap = table ? table->cap : 0;
    out->giving_back = giving_back != NULL;
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

/* vt_tracker_stack_id, inlined into both of its callers (the walker's
 * captures change stack at every call at many stacks). */
static inline __attribute__((always_inline)) uint32_t stack_id(const uintptr_t *frames, int depth) {
    if (depth > VT_MAX_FRAMES) depth = VT_MAX_FRAMES;
    if (depth < 0) depth = 0;
    memo.serial = UINT64_MAX;
    const struct vt_stack_node *n = lookup(path_hash(frames, depth), frames, depth);
    uint32_t id;
    if (n) {
        id = n->pub.id;
    } else {
        vt_global_lock();
        id = vt_intern(frames, depth, 0);
        vt_global_unlock();
    }
    memo.id = id;
    return id;
}

uint32_t vt_tracker_stack_id(const uintptr_t *frames, int depth) { return stack_id(frames, depth); }

unsigned vt_intern_slab_left(void) { return nodes_at.left; }
void vt_intern_slabs_lock(void) { vt_slab_lock(&nodes); }
void vt_intern_slabs_unlock(void) { vt_slab_unlock(&nodes); }

uint32_t vt_tracker_stack_id_captured(int max, vt_capture_since_fn *capture, uint64_t (*serial)(void)) {
    uintptr_t frames[VT_MAX_FRAMES];
    if (max > VT_MAX_FRAMES) max = VT_MAX_FRAMES;
    int depth = capture(frames, max, memo.serial);
    if (depth == VT_STACK_SAME) return memo.id;
    uint32_t id = stack_id(frames, depth);
    /* The memo now holds this capture's stack, unless interning failed. */
    if (id != NONE) memo.serial = serial();
    return id;
}

/* The parent's stacks as a forked child found them: kept, not freed (as
 * the parent's live records are, slot.c: a free of each would copy every
 * page of the parent's heap that held one), reachable from here. */
struct parent_stacks {
    struct vt_stacks s;
    struct parent_stacks *next;
};
static struct parent_stacks *parent_stacks;

void vt_intern_reset_child(void) {
    struct parent_stacks *k = vt_stacks.n ? malloc(sizeof *k) : NULL;
    if (k) {
        k->s = vt_stacks;
        k->next = parent_stacks;
        parent_stacks = k;
        vt_stacks = (struct vt_stacks){0};
    }
    for (size_t i = 0; i < vt_stacks.n; i++) {
        struct vt_stack_node *n = (struct vt_stack_node *)((char *)vt_stacks.list[i] - offsetof(struct vt_stack_node, pub));
        free(n->site.split); /* the node stays in its slab */
    }
    vt_stacks.n = 0;
    for (struct table *T = table, *prev; T; T = prev) {
        prev = T->prev;
        munmap(T->e, T->cap * sizeof *T->e);
        table_free(T);
    }
    table = giving_back = NULL;
    memset(&stats, 0, sizeof stats);
    /* The only thread here: its remembered stack is gone with the table. */
    memo.serial = UINT64_MAX;
}
