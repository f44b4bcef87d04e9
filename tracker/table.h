/* table.h -- a thread slot's table of live allocations, by key.
 *
 * Open addressing on the key's hash, linear probing, deletion by shifting
 * back (no tombstones), at most half full. An entry keeps its key's tag
 * (key_tag) beside the record, so a probe reads the record only when the
 * tags match, and a deletion or a move reads none. The table does not own
 * its records: whoever adds one takes it out again. Not thread-safe: the
 * slot's lock guards it.
 *
 * Growing is incremental, so that no call waits for a whole table to be
 * copied (32 ms at a million live, seconds at ten million): a table past
 * half full gets an array twice the size, and the old one is moved over
 * GROW_STEP entries at every later add and delete. Meanwhile a key is in
 * exactly one of the two arrays; lookups look in the new one, then in the
 * old. In the old array a deletion leaves a tombstone (the move scans it in
 * index order, and a shift could carry an entry back over the scan), and
 * the indexes already scanned hold nothing. Internal to tracker/. */
#ifndef VT_TABLE_H
#define VT_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "blocks.h"
#include "internal.h"

/* Where an allocation is known: its address (or handle) in a name space
 * (enum vt_space). */
struct vt_key {
    uint64_t address;
    uint32_t space;
    uint32_t pad;
};

/* A key's tag: its address with its space in the top bits. What a table
 * entry keeps beside its record, so that a probe reads the record only
 * when the tags match, and a deletion's shift and a growing table's move
 * find an entry's home from the entry alone, reading no other record
 * (that record's line sits in the cache of the thread that made it, when
 * another thread frees). Two keys may share a tag (an address or handle
 * with its top bits set): a match is confirmed on the record. From the
 * two fields, not the struct's words: a key is tagged right after its
 * fields are stored, and a 64-bit load of two 32-bit stores cannot be
 * forwarded from them. */
static inline uint64_t key_tag(const struct vt_key *k) { return k->address ^ ((uint64_t)k->space << 59); }

/* A tag's hash: a multiply, its high half. */
static inline uint32_t tag_hash(uint64_t tag) { return (uint32_t)((tag * 0x9e3779b97f4a7c15ull) >> 32); }

/* A key's hash: its tag's. */
static inline uint32_t key_hash(const struct vt_key *k) { return tag_hash(key_tag(k)); }

/* A live allocation as its slot holds it. */
struct vt_rec {
    struct vt_key key;
    struct vt_alloc a;  /* a.time_ns: ticks, as taken at the allocation;
                           a.mapped links a free record to the next */
};

/* Whether record r has key k, its entry's tag being k's: the same space
 * then means the same address too. */
static inline int rec_is(const struct vt_rec *r, const struct vt_key *k) { return r->key.space == k->space; }

/* One entry: the record's key's tag beside it (key_tag). */
struct live_entry {
    uint64_t tag;
    struct vt_rec *rec;  /* NULL: empty; TABLE_TOMB: deleted (old array) */
};

#define TABLE_TOMB ((struct vt_rec *)(uintptr_t)1)
/* Old entries moved at each add and delete while a table grows: the old
 * array is gone before the new one is half full again. */
#define GROW_STEP 8

struct vt_cow;

struct live_table {
    /* What every add, find and delete reads first (40 bytes: with the
     * slot's lock and log head, one cache line, see slot.h). */
    struct live_entry *e;
    size_t cap;          /* a power of two, or 0 */
    size_t count;        /* records in both arrays */
    /* While growing: the array being moved from (NULL when not growing),
     * below its size and how far the move has come (entries below `moved`
     * are all gone). */
    struct live_entry *old;
    /* Set while a snapshot copies the table (cow.h): every change of an
     * entry first has the entry's chunk copied. */
    struct vt_cow *cow;
    /* Read only while the table grows (or must: table_add). While it
     * grows into a mapped array: how many of the array's blocks of
     * FRESH_ENTRIES entries (a 4 KiB page) are not written yet, and which
     * are, a bit each (see entry_rec); let go when the move ends (by then
     * the array is a quarter full or more, every block written). 0 and
     * NULL otherwise. */
    size_t fresh_left;
    size_t old_cap, moved;
    uint64_t *written;
};

/* While the table grows nothing reads a block of the new array that was
 * never written (blocks.h says why: a growing 10,000,000-live table's
 * lookups and move read such blocks inside hooked calls). The bits are
 * those of blocks.h, read and set plainly: the slot's lock guards them.
 * The calls of a table that is not growing test nothing more. */
#define FRESH_ENTRIES 256

static inline int entry_fresh(const struct live_table *t, size_t i) {
    size_t b = i / FRESH_ENTRIES;
    return __builtin_expect(t->fresh_left != 0, 0) && !((t->written[b / 64] >> (b % 64)) & 1);
}

/* Entry i's record; NULL for an entry of a block never written, not read. */
static inline struct vt_rec *entry_rec(const struct live_table *t, size_t i) {
    return entry_fresh(t, i) ? NULL : t->e[i].rec;
}

/* Entry i of the current array is about to be written. */
static inline void entry_write(struct live_table *t, size_t i) {
    if (__builtin_expect(t->fresh_left != 0, 0)) {
        size_t b = i / FRESH_ENTRIES;
        uint64_t bit = 1ull << (b % 64);
        if (!(t->written[b / 64] & bit)) {
            t->written[b / 64] |= bit;
            t->fresh_left--;   /* at 0 the bits are no longer read; they go with the move's end */
        }
    }
}

/* A snapshot's copy on write (tracker/cow.c): before entries from..to
 * (inclusive, round the array's end) of array e change; before a delete at
 * index i of the current array shifts its run back; before array e is let
 * go. Each does nothing for an array the copy does not read. */
void vt_cow_touch(struct live_table *t, const struct live_entry *e, size_t from, size_t to) VT_HIDDEN;
void vt_cow_touch_run(struct live_table *t, size_t i) VT_HIDDEN;
void vt_cow_forget(struct live_table *t, const struct live_entry *e) VT_HIDDEN;

/* Probing the old array: from a key's home, over the indexes not yet
 * scanned by the move (those below `moved` held only entries moved
 * since, so a run crossing them goes on after them). */
static inline size_t old_first(const struct live_table *t, uint32_t h) {
    size_t i = h & (t->old_cap - 1);
    return i < t->moved ? t->moved : i;
}
static inline size_t old_next(const struct live_table *t, size_t i) {
    i = (i + 1) & (t->old_cap - 1);
    return i < t->moved ? t->moved : i;
}

/* A unit test's count of the old array's entries a probe reads. */
#ifndef VT_TABLE_OLD_PROBE
#define VT_TABLE_OLD_PROBE() ((void)0)
#endif

/* The record with key `k` in the old array, or NULL. A probe reads each
 * index the move has not scanned at most once: where those are all taken
 * (entries and tombstones, as at the move's end), a miss read them over
 * and over, old_cap times (11 ms at 8 Mi entries). */
static inline struct vt_rec *table_find_old(const struct live_table *t, const struct vt_key *k, uint32_t h) {
    uint64_t tag = key_tag(k);
    for (size_t i = old_first(t, h), n = 0; n < t->old_cap - t->moved; i = old_next(t, i), n++) {
        VT_TABLE_OLD_PROBE();
        struct vt_rec *r = t->old[i].rec;
        if (!r) return NULL;
        if (r != TABLE_TOMB && t->old[i].tag == tag && rec_is(r, k)) return r;
    }
    return NULL;
}

/* The record with key `k`, whose key_tag is `tag` and whose tag_hash is
 * `h`, or NULL. *at is set to where the probe of the current array
 * stopped: the record's index there, else the empty index that ends its
 * run (where table_add_at may put a new record); SIZE_MAX when the table
 * has no array. While the table grows, *at is not used (table_add_at and
 * table_del_found probe again). */
static inline __attribute__((always_inline)) struct vt_rec *table_find_tag_at(const struct live_table *t, const struct vt_key *k, uint64_t tag, uint32_t h, size_t *at) {
    *at = SIZE_MAX;
    if (!t->cap) return NULL;
    int growing = __builtin_expect(t->old != NULL, 0);
    size_t mask = t->cap - 1, i = h & mask;
    for (;; i = (i + 1) & mask) {
        struct vt_rec *r = growing ? entry_rec(t, i) : t->e[i].rec;
        if (!r) break;
        if (t->e[i].tag == tag && rec_is(r, k)) {
            *at = i;
            return r;
        }
    }
    *at = i;
    return growing ? table_find_old(t, k, h) : NULL;
}

/* table_find_tag_at, the tag computed from k (h its tag_hash). */
static inline __attribute__((always_inline)) struct vt_rec *table_find_at(const struct live_table *t, const struct vt_key *k, uint32_t h, size_t *at) {
    return table_find_tag_at(t, k, key_tag(k), h, at);
}

/* The record with key `k` (whose key_hash is `h`), or NULL. */
static inline struct vt_rec *table_find(const struct live_table *t, const struct vt_key *k, uint32_t h) {
    size_t at;
    return table_find_at(t, k, h, &at);
}

/* Start growing: a new array of twice the size (64 entries the first
 * time), the current one to be moved over. 0 when out of memory, the
 * table then unchanged. */
int vt_table_grow(struct live_table *t) VT_HIDDEN;

/* Move up to GROW_STEP old entries to the new array; the old array is
 * let go once empty. */
void vt_table_move(struct live_table *t) VT_HIDDEN;

/* Put a record, its key's tag `tag` (whose tag_hash is `h`), into the
 * current array (it has room). */
static inline void table_put(struct live_table *t, struct vt_rec *r, uint64_t tag, uint32_t h) {
    size_t mask = t->cap - 1, i = h & mask;
    while (entry_rec(t, i)) i = (i + 1) & mask;
    if (__builtin_expect(t->cow != NULL, 0)) vt_cow_touch(t, t->e, i, i);
    entry_write(t, i);
    t->e[i].tag = tag;
    t->e[i].rec = r;
}

/* Add a record whose key is not in the table. */
static inline int table_add(struct live_table *t, struct vt_rec *r, uint32_t h) {
    if (__builtin_expect(t->old != NULL, 0)) vt_table_move(t);
    else if (2 * (t->count + 1) > t->cap && !vt_table_grow(t)) return 0;
    table_put(t, r, key_tag(&r->key), h);
    t->count++;
    return 1;
}

/* table_add, `at` being where table_find_at's miss of the record's key
 * (whose key_tag is `tag`, and its tag_hash `h`) stopped, with nothing
 * added or taken out since: the record goes there, unless the table must
 * grow or is growing (then it is probed for again). */
static inline int table_add_at(struct live_table *t, struct vt_rec *r, uint64_t tag, uint32_t h, size_t at) {
    if (__builtin_expect(t->old != NULL || at == SIZE_MAX || 2 * (t->count + 1) > t->cap, 0))
        return table_add(t, r, h);
    if (__builtin_expect(t->cow != NULL, 0)) vt_cow_touch(t, t->e, at, at);
    t->e[at].tag = tag;
    t->e[at].rec = r;
    t->count++;
    return 1;
}

/* Take out the entry at index `i` of the current array: later entries of
 * its run shift back over the hole, unless they belong at or after it.
 * `growing`: blocks never written are not read (entry_rec). */
static inline __attribute__((always_inline)) void table_del_run(struct live_table *t, size_t i, int growing) {
    if (__builtin_expect(t->cow != NULL, 0)) vt_cow_touch_run(t, i);
    size_t mask = t->cap - 1;
    for (size_t j = (i + 1) & mask;; j = (j + 1) & mask) {
        struct vt_rec *x = growing ? entry_rec(t, j) : t->e[j].rec;
        if (!x) break;
        size_t home = tag_hash(t->e[j].tag) & mask;
        if (((j - home) & mask) >= ((j - i) & mask)) {
            t->e[i] = t->e[j];
            i = j;
        }
    }
    t->e[i].rec = NULL;
    t->e[i].tag = 0;
    t->count--;
}

/* table_del_run of a table that is not growing. */
static inline void table_del_at(struct live_table *t, size_t i) { table_del_run(t, i, 0); }

/* table_del while the table grows: the record may be in either array. */
void vt_table_del_growing(struct live_table *t, const struct vt_rec *r, uint32_t h) VT_HIDDEN;

/* Take out a record the table holds (`h` its key_hash). */
static inline void table_del(struct live_table *t, const struct vt_rec *r, uint32_t h) {
    if (__builtin_expect(t->old != NULL, 0)) {
        vt_table_del_growing(t, r, h);
        return;
    }
    size_t mask = t->cap - 1, i = h & mask;
    while (t->e[i].rec != r) i = (i + 1) & mask;
    table_del_at(t, i);
}

/* table_del of a record table_find_at just found at `at`, with nothing
 * added or taken out since: no second probe, unless the table is growing. */
static inline void table_del_found(struct live_table *t, const struct vt_rec *r, uint32_t h, size_t at) {
    if (__builtin_expect(t->old != NULL, 0)) {
        vt_table_del_growing(t, r, h);
        return;
    }
    table_del_at(t, at);
}

/* Run `body` with `r` each record (both arrays while growing). With
 * `ahead`, the record that many entries on is fetched while this one is
 * read, so that a walk that reads every record (a snapshot's copy of
 * millions, under the slot's lock) waits for memory a few times instead
 * of at every record. */
#define TABLE_WALK(t, r, ahead, body)                                           \
    do {                                                                        \
        for (size_t vt_i_ = 0; vt_i_ < (t)->cap; vt_i_++) {                     \
            if ((ahead) && vt_i_ + (ahead) < (t)->cap) __builtin_prefetch(entry_rec((t), vt_i_ + (ahead))); \
            struct vt_rec *r = entry_rec((t), vt_i_);                           \
            if (r) { body; }                                                    \
        }                                                                       \
        for (size_t vt_i_ = (t)->moved; (t)->old && vt_i_ < (t)->old_cap; vt_i_++) { \
            if ((ahead) && vt_i_ + (ahead) < (t)->old_cap) __builtin_prefetch((t)->old[vt_i_ + (ahead)].rec); \
            struct vt_rec *r = (t)->old[vt_i_].rec;                             \
            if (r && r != TABLE_TOMB) { body; }                                 \
        }                                                                       \
    } while (0)
#define TABLE_EACH(t, r, body) TABLE_WALK(t, r, 0, body)
#define TABLE_AHEAD 16

/* Let go of the arrays (not the records). */
void vt_table_free(struct live_table *t) VT_HIDDEN;

/* Make t empty without letting go of anything: its arrays and records
 * are someone else's now (a forked child's copy of its parent's). */
void vt_table_forget(struct live_table *t) VT_HIDDEN;

#endif
