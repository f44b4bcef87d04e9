/* cow.h -- a slot's live table copied for a snapshot while its thread goes
 * on allocating and freeing: copied on write, a chunk at a time.
 *
 * A snapshot used to copy a table whole under the slot's lock, and the
 * slot's thread waited for it: 45 ms at a million live allocations, a
 * fifth of a second at four million. Now the snapshot arms the table (under
 * the slot's lock, at the point the snapshot is of) and then copies it a
 * chunk of CHUNK_ENTRIES entries at a time, taking the lock for each; the
 * thread in between goes on. Before anything changes an entry of a chunk
 * not yet copied (an add, a delete and the entries it shifts back, a
 * growing table's move, a tombstone, a handle's mapping), the chunk is
 * copied first, by whoever changes it. So every record the table held when
 * armed is copied once, as it was then, and nothing added since is: the
 * copy is the table at that point, and a call waits for at most a chunk's
 * copy (its own, or the snapshot's), not the table's.
 *
 * The arrays copied are the ones the table had when armed (both while it
 * was growing); an array made by a later growth holds only records moved
 * from them (copied before they moved) or added since, and is not read.
 * Internal to tracker/; every function is called under the slot's lock. */
#ifndef VT_COW_H
#define VT_COW_H

#include <stddef.h>
#include <stdint.h>

#include "internal.h"
#include "table.h"

#define CHUNK_ENTRIES 256
_Static_assert(CHUNK_ENTRIES == FRESH_ENTRIES, "a chunk is a block of entries: copy_chunk skips a block never written");

/* Where copied records go: keep(ctx, recs, n) with the records of one
 * chunk (readable until it returns), called under the slot's lock by the
 * snapshot or by the slot's own thread. `stop`, once set (by the snapshot,
 * giving up), makes the next change of the table let the copy go. */
struct vt_cow_sink {
    void (*keep)(void *ctx, struct vt_rec *const *recs, size_t n);
    void *ctx;
    int stop;
};

/* One array of the table as armed: entries from..cap-1 are the snapshot's;
 * done has a bit a chunk, set once copied. e is NULL once the table let
 * the array go (every chunk that held a record was copied by then). */
struct vt_cow_region {
    struct live_entry *e;
    size_t cap, from;
    uint64_t *done;
    size_t next; /* the snapshot's walk: the next chunk it copies */
};

struct vt_cow {
    struct vt_cow_region r[2]; /* the current array; the old one, or e NULL */
    struct vt_cow_sink *sink;
};

/* Arm t for a copy into sink (t->cow set). 0 when out of memory: nothing
 * armed, and the caller copies the table at once. A table with no records
 * is not armed (there is nothing to copy): 1. */
int vt_cow_begin(struct live_table *t, struct vt_cow_sink *sink) VT_HIDDEN;

/* Copy the next chunk not yet copied: 1 when one was, 0 when the table is
 * all copied (or the sink stopped). */
int vt_cow_step(struct live_table *t) VT_HIDDEN;

/* Disarm t (t->cow NULL), whatever is left uncopied. */
void vt_cow_end(struct live_table *t) VT_HIDDEN;

/* The hooks the table calls before it changes an armed array
 * (vt_cow_touch, vt_cow_touch_run, vt_cow_forget) are declared in table.h.
 * A handle's mapping changes a record in place: */

/* Before a record whose key's key_hash is h changes in place: the chunks
 * of that hash's probe runs, in both arrays, copied. */
void vt_cow_touch_key(struct live_table *t, uint32_t h) VT_HIDDEN;

#endif
