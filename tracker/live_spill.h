/* live_spill.h -- a snapshot's live list past a bound, on an unlinked
 * temporary file (tracker/live_spill.c). Internal to tracker/.
 *
 * Record i of the list is at byte i * sizeof(struct vt_live) of the file,
 * except the first `inmem`, which are still the snapshot's `live` (the
 * first run: copied into memory before the list was found too long, and
 * sorted there before they are written). */
#ifndef VT_LIVE_SPILL_H
#define VT_LIVE_SPILL_H

#include <stddef.h>

#include "internal.h"

/* A full stage taken out to be written with no lock held (the copy of a
 * table that its thread goes on changing: see snapshot.c). */
struct vt_live_stage {
    struct vt_live *buf;
    size_t n, at;
};

/* Full stages that wait at most (16 MiB): past them the one who puts
 * writes the oldest itself, under whatever lock it holds, so that a copy
 * whose thread is kept off its CPU cannot hold the whole list in memory. */
#define VT_SPILL_QUEUE_MAX 64

struct vt_live_spill {
    int fd;
    size_t run;              /* records in a run: the most kept in memory */
    size_t inmem;            /* records 0 .. inmem - 1 are in s->live */
    struct vt_live *stage;   /* records waiting to be written (while copied) */
    size_t nstage, stage_at; /* how many, and the index of the first */
    int defer;               /* a full stage waits in `full` for
                                vt_live_spill_take_stage */
    struct vt_live_stage *full; /* full stages waiting: full[full_head .. nfull - 1], oldest first */
    size_t full_head, nfull, full_cap;
    struct vt_live *spare;   /* a stage's memory, written and given back */
    size_t reserved;         /* records the file's size holds */
    uint64_t lost;           /* records dropped: memory was short */
    int broken;              /* a write failed: nothing more is written, the
                                stages stay in memory (the flush reads the
                                list back into memory) */
    int err;                 /* the errno of that write */
};

/* The records a snapshot keeps in memory before it spills the rest, and
 * the length of the runs the spilled list is sorted in: VRAMTRACE_SPILL's
 * bytes (vt_tracker_spill), at least a page's worth. */
size_t vt_live_spill_run(void) VT_HIDDEN;

/* An unlinked temporary file in the spill directory for a list whose
 * first `run` records are in memory; NULL when none can be made (warned
 * once: the list then stays in memory, as it did before spilling). Called
 * under the tracker's lock: a few system calls. */
struct vt_live_spill *vt_live_spill_open(size_t run) VT_HIDDEN;

/* Make the file hold n records (a sparse size, no blocks), ahead of the
 * writes: a write that extends a file updates its size each time, which
 * costs several times the copy (measured: 0.62 to 0.83 s of CPU for 400 MB
 * written 256 KiB at a time, 0.11 to 0.12 s into a file made that long
 * first). A failure here only loses that gain. */
void vt_live_spill_reserve(struct vt_live_spill *sp, size_t n) VT_HIDDEN;

/* Add record a as record *n of the list and count it in *n. Records are
 * written a stage (256 KiB) at a time; from a stage that cannot be written
 * on (the disk full), the stages stay in memory. A record memory cannot
 * hold then is dropped (not counted in *n), counted in sp->lost. */
void vt_live_spill_put(struct vt_live_spill *sp, size_t *n, const struct vt_live *a) VT_HIDDEN;

/* Add a as the next record of s's live list: in s->live up to the first
 * run's end (or always, without a spill file), past it to the file. The
 * snapshot's copy and the tests fill a list the one way. */
static inline void vt_live_keep(struct vt_snapshot *s, const struct vt_live *a) {
    if (!s->spill || s->nlive < s->spill->run) s->live[s->nlive++] = *a;
    else vt_live_spill_put(s->spill, &s->nlive, a);
}

/* With `defer` set: the oldest full stage into *out (a stage that fills
 * while another waits is queued behind it, with a new one begun: never
 * one made longer, whose copy would fault in all its pages inside one
 * keep); 0 when none is full (or no memory for a new one: it is written
 * at the flush). Under the lock of whoever puts. */
int vt_live_spill_take_stage(struct vt_live_spill *sp, struct vt_live_stage *out) VT_HIDDEN;

/* Write a stage taken out; 0 when it could not be written (then
 * vt_live_spill_keep_stage). No lock needed. */
int vt_live_spill_write_stage(struct vt_live_spill *sp, const struct vt_live_stage *st) VT_HIDDEN;

/* A stage's memory back, after its write: kept for the next stage (its
 * pages touched already), or let go. Under the lock of whoever puts. */
void vt_live_spill_give_stage(struct vt_live_spill *sp, struct vt_live_stage *st) VT_HIDDEN;

/* A stage taken out could not be written: kept in memory with the stages
 * queued (st->buf NULL after). Where memory for that is short, it and
 * every record after it are dropped (vt_live_spill_drop_from). Under the
 * lock of whoever puts. */
void vt_live_spill_keep_stage(struct vt_live_spill *sp, size_t *n, struct vt_live_stage *st) VT_HIDDEN;

/* Every record from `at` on dropped (*n back to `at`), counted lost, and
 * nothing more written. Under the lock of whoever puts. */
void vt_live_spill_drop_from(struct vt_live_spill *sp, size_t *n, size_t at) VT_HIDDEN;

/* Write what is staged of s's spilled list (the end of the copy) and let
 * the stage go, with the count of what was dropped (warned once). Where
 * a write failed, the whole list is read back into memory instead
 * (s->live, s->spill closed and NULL), as if no file could be made; what
 * memory cannot hold is counted in s->live_lost. */
void vt_live_spill_flush(struct vt_snapshot *s) VT_HIDDEN;

/* Sort s's spilled list as runs of sp->run records, each in place in
 * s->live's memory and written back, then let that memory go (s->live
 * NULL). A run that cannot be read or written back leaves the list its
 * first run alone, in memory (the rest counted lost, warned). */
void vt_live_spill_sort(struct vt_snapshot *s) VT_HIDDEN;

/* Records from .. from + n - 1 of s's spilled list into out; how many were
 * read (fewer only when the file could not be read: warned once). */
size_t vt_live_spill_read(const struct vt_snapshot *s, size_t from, size_t n, struct vt_live *out) VT_HIDDEN;

/* Close the file (its blocks go with it) and free sp. */
void vt_live_spill_close(struct vt_live_spill *sp) VT_HIDDEN;

#endif
