/* table.c -- growing a live table step by step, and letting it go
 * (table.h): the steps that are not in the hot path.
 *
 * Arrays of 64 KiB or more are mapped, not malloc'd: a new one is then
 * zero pages, touched a page at a time as entries land in it, and the old
 * one's pages are given back as the move passes them, so neither making
 * the new array nor dropping the old one costs a call more than a few
 * pages' work (small pages: see array_new). */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "lockprobe.h"
#include "lsanroot.h"
#include "table.h"

/* Arrays of MAP_MIN bytes or more are mapped, and a new one's blocks are
 * touched as entries land (FRESH_ENTRIES); the pages of an old one of
 * GIVE_MIN or more are given back as the move passes them, smaller ones
 * all at its end. With 256 threads of 10,000 live each, the tables' arrays
 * of 128 to 512 KiB were calloc'd: the first writes after lookups' reads
 * replaced zero pages (IPIs), and 512 KiB written at once is 128 page
 * faults, with the C library's consolidation of its free lists before a
 * large block: each of them now and then over 1 ms inside one call. */
#define MAP_MIN ((size_t)64 << 10)
#define GIVE_MIN ((size_t)1 << 20)
#define CHUNK ((size_t)256 << 10) /* given back 64 pages at a time */

/* Mapped arrays given back, kept for the next table that grows into their
 * size. With 256 threads growing their tables at once, every array mapped
 * and unmapped took the address space's lock as a writer, and each page
 * fault of every thread waited behind it: the hooked calls of a run that
 * took over 1 ms were those waits. An array kept is emptied first
 * (MADV_DONTNEED: its pages given back, zeros when next touched, the
 * mapping kept; the lock taken as a reader), then taken by the next
 * array_new of its size. KEEP_EACH arrays of each size at most, the rest
 * unmapped. Lock-free slots (a fork between two steps leaves the child
 * nothing half done). */
#define KEEP_SIZES 24 /* MAP_MIN << 0 .. << 23: 64 KiB to 512 GiB */
#define KEEP_EACH 8
static struct live_entry *kept[KEEP_SIZES][KEEP_EACH];

/* The size class of a mapped array of `bytes` (a power of two, MAP_MIN or
 * more), or -1 past the last. */
static int keep_class(size_t bytes) {
    int k = 0;
    while (k < KEEP_SIZES && (MAP_MIN << k) < bytes) k++;
    return k < KEEP_SIZES && (MAP_MIN << k) == bytes ? k : -1;
}

static struct live_entry *keep_take(size_t bytes) {
    int k = keep_class(bytes);
    for (int i = 0; k >= 0 && i < KEEP_EACH; i++) {
        struct live_entry *e = __atomic_load_n(&kept[k][i], __ATOMIC_RELAXED);
        if (e && __atomic_compare_exchange_n(&kept[k][i], &e, NULL, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) return e;
    }
    return NULL;
}

/* Whether e (emptied) was kept. */
static int keep_put(struct live_entry *e, size_t bytes) {
    int k = keep_class(bytes);
    for (int i = 0; k >= 0 && i < KEEP_EACH; i++) {
        struct live_entry *none = NULL;
        if (__atomic_compare_exchange_n(&kept[k][i], &none, e, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED)) return 1;
    }
    return 0;
}

static struct live_entry *array_new(size_t cap) {
    size_t bytes = cap * sizeof(struct live_entry);
    if (bytes < MAP_MIN) {
        /* Written now, not calloc'd: calloc may leave memory fresh from
         * the kernel unwritten, and a lookup's read of it maps the shared
         * zero page, whose replacement at the first write flushes the TLB
         * of every CPU the process runs on (see FRESH_ENTRIES). At most
         * 16 pages, a plain first touch each. */
        struct live_entry *e = malloc(bytes);
        __asm__ volatile("" : : "r"(e) : "memory"); /* or the compiler makes the two a calloc */
        if (e) memset(e, 0, bytes);
        return e;
    }
    struct live_entry *again = keep_take(bytes);
    if (again) return again; /* still a root of the leak search, and no huge pages */
    void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return NULL;
    /* Small pages, where the kernel would give huge ones to every mapping:
     * a huge page's first touch clears 2 MiB inside one hooked call. */
    madvise(m, bytes, MADV_NOHUGEPAGE);
    /* LeakSanitizer looks inside malloc's blocks, not inside a mapping of
     * vramtrace's own: the records a mapped array holds are reachable from
     * it only as a root of its search (a forked child's copy of the
     * parent's, kept, stays one). */
    vt_lsan_root(m, bytes);
    return m;
}

static void array_free(struct live_entry *e, size_t cap) {
    size_t bytes = cap * sizeof(struct live_entry);
    if (bytes < MAP_MIN) {
        free(e);
        return;
    }
    VT_PROBE_COUNT(VT_PC_UNMAPS, 1);
    if (madvise(e, bytes, MADV_DONTNEED) == 0 && keep_put(e, bytes)) return;
    vt_lsan_unroot(e, bytes);
    munmap(e, bytes);
}

/* Move every remaining old entry now (out of memory for a new array: the
 * table then stays as it is, fully moved). */
static void move_all(struct live_table *t) {
    while (t->old) vt_table_move(t);
}

/* The new current array's blocks, none written yet, for a mapped array
 * the table grows into (cap 0: none kept, the move over; out of memory:
 * none kept, and blocks are read as before). */
static void fresh_blocks(struct live_table *t, size_t cap) {
    free(t->written);
    t->written = NULL;
    t->fresh_left = 0;
    if (cap * sizeof(struct live_entry) < MAP_MIN) return;
    size_t blocks = (cap + FRESH_ENTRIES - 1) / FRESH_ENTRIES;
    if ((t->written = calloc(VT_BLOCK_WORDS(blocks), sizeof *t->written))) t->fresh_left = blocks;
}

int vt_table_grow(struct live_table *t) {
    if (t->old) move_all(t);
    size_t cap = t->cap ? t->cap * 2 : 64;
    struct live_entry *e = array_new(cap);
    if (!e) return 0;
    fresh_blocks(t, t->count ? cap : 0);   /* an empty table does not grow: it starts again */
    if (t->count == 0) {
        if (t->cow) vt_cow_forget(t, t->e);
        if (t->e) array_free(t->e, t->cap);
    } else {
        t->old = t->e;
        t->old_cap = t->cap;
        t->moved = 0;
    }
    t->e = e;
    t->cap = cap;
    return 1;
}

void vt_table_move(struct live_table *t) {
    VT_PROBE_COUNT(VT_PC_MOVES, 1);
    size_t end = t->moved + GROW_STEP;
    if (end > t->old_cap) end = t->old_cap;
    size_t i = t->moved;
    if (t->cow && end > i) vt_cow_touch(t, t->old, i, end - 1);
    for (; i < end; i++) {
        struct vt_rec *r = t->old[i].rec;
        if (r && r != TABLE_TOMB) table_put(t, r, t->old[i].tag, tag_hash(t->old[i].tag));
    }
    /* The chunks of pages the move has passed are given back (they read as zeros
     * after, and nothing reads below `moved`). */
    size_t bytes = t->old_cap * sizeof(struct live_entry);
    if (bytes >= GIVE_MIN) {
        size_t from = t->moved * sizeof(struct live_entry) / CHUNK, to = i * sizeof(struct live_entry) / CHUNK;
        if (to > from) VT_PROBE_COUNT(VT_PC_UNMAPS, 1);
        if (to > from) madvise((char *)t->old + from * CHUNK, (to - from) * CHUNK, MADV_DONTNEED);
    }
    t->moved = i;
    if (i == t->old_cap) {
        fresh_blocks(t, 0);
        if (t->cow) vt_cow_forget(t, t->old);
        array_free(t->old, t->old_cap);
        t->old = NULL;
        t->old_cap = t->moved = 0;
    }
}

void vt_table_del_growing(struct live_table *t, const struct vt_rec *r, uint32_t h) {
    size_t mask = t->cap - 1, i = h & mask;
    for (; entry_rec(t, i) && t->e[i].rec != r; i = (i + 1) & mask) continue;
    if (entry_rec(t, i)) {
        table_del_run(t, i, 1);
    } else { /* not in the new array: a tombstone in the old */
        size_t j = old_first(t, h);
        while (t->old[j].rec != r) j = old_next(t, j);
        if (t->cow) vt_cow_touch(t, t->old, j, j);
        t->old[j].rec = TABLE_TOMB;
        t->count--;
    }
    vt_table_move(t);
}

void vt_table_forget(struct live_table *t) {
    t->cow = NULL;
    t->written = NULL;
    t->fresh_left = 0;
    t->e = t->old = NULL;
    t->cap = t->old_cap = t->moved = t->count = 0;
}

void vt_table_free(struct live_table *t) {
    t->cow = NULL; /* a forked child's: its snapshot is the parent's */
    if (t->e) array_free(t->e, t->cap);
    if (t->old) array_free(t->old, t->old_cap);
    free(t->written);
    t->written = NULL;
    t->fresh_left = 0;
    t->e = t->old = NULL;
    t->cap = t->old_cap = t->moved = t->count = 0;
}
