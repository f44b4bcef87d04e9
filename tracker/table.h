/* table.h -- a thread slot's table of live allocations, by key.
 *
 * Open addressing on the key's hash, linear probing, deletion by shifting
 * back (no tombstones), at most half full. An entry keeps the address
 * beside the record, so a probe reads the record only when the address
 * matches. The table does not own its records: whoever adds one takes it
 * out again. Not thread-safe: the slot's lock guards it. Internal to
 * tracker/. */
#ifndef VT_TABLE_H
#define VT_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "internal.h"

/* Where an allocation is known: its address (or handle) in a name space
 * (enum vt_space). */
struct vt_key {
    uint64_t address;
    uint32_t space;
    uint32_t pad;
};

/* A key's hash: a multiply, its high half. From the two fields, not the
 * struct's words: a key is hashed right after its fields are stored, and a
 * 64-bit load of two 32-bit stores cannot be forwarded from them. */
static inline uint32_t key_hash(const struct vt_key *k) {
    uint64_t x = (k->address ^ ((uint64_t)k->space << 59)) * 0x9e3779b97f4a7c15ull;
    return (uint32_t)(x >> 32);
}

/* A live allocation as its slot holds it. */
struct vt_rec {
    struct vt_key key;
    struct vt_alloc a;  /* a.time_ns: ticks, as taken at the allocation;
                           a.mapped links a free record to the next */
};

/* One entry: the record's address beside it, so that a probe reads the
 * record only when the address matches. */
struct live_entry {
    uint64_t address;
    struct vt_rec *rec;  /* NULL: empty */
};

struct live_table {
    struct live_entry *e;
    size_t cap;          /* a power of two, or 0 */
    size_t count;
};

/* The record with key `k` (whose key_hash is `h`), or NULL. */
static inline struct vt_rec *table_find(const struct live_table *t, const struct vt_key *k, uint32_t h) {
    if (!t->cap) return NULL;
    size_t mask = t->cap - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        struct vt_rec *r = t->e[i].rec;
        if (!r) return NULL;
        if (t->e[i].address == k->address && r->key.space == k->space) return r;
    }
}

/* Double the table (to 64 entries the first time); 0 when out of memory,
 * the table then unchanged. */
int vt_table_grow(struct live_table *t) VT_HIDDEN;

/* Add a record whose key is not in the table. */
static inline int table_add(struct live_table *t, struct vt_rec *r, uint32_t h) {
    if (2 * (t->count + 1) > t->cap && !vt_table_grow(t)) return 0;
    size_t mask = t->cap - 1, i = h & mask;
    while (t->e[i].rec) i = (i + 1) & mask;
    t->e[i].address = r->key.address;
    t->e[i].rec = r;
    t->count++;
    return 1;
}

/* Take out a record the table holds (`h` its key_hash). */
static inline void table_del(struct live_table *t, const struct vt_rec *r, uint32_t h) {
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

#endif
