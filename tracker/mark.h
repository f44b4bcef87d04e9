/* mark.h -- what a mark needs: the memory allocated since a point in
 * time, live and at its peak.
 *
 * A mark is a point in the order of operations: every allocation whose
 * time stamp is at or after it is counted "since the mark" until it is
 * freed. Its usage (live, peak) is this process's own device memory's
 * (vt_kind_owned_device); its leak report holds every kind the exit's
 * leak check holds (pinned host and imported memory too). For each
 * mark the tracker keeps, per device, the live bytes and allocations since
 * the mark and the peak of those live bytes, and by call site (stack) what
 * was live at the peak of the sum over all devices. Marks are counted as
 * the logs are applied (vt_account_op, in time-stamp order, under the
 * global lock), so the peak is the one the operations' order gives, as
 * for the process's own peak. Allocations made before a mark and freed
 * after it change nothing. At most VT_MAX_MARKS marks are open at once.
 * All functions are thread-safe. */
#ifndef VT_MARK_H
#define VT_MARK_H

#include <stdint.h>

#include "tracker.h"

#define VT_MAX_MARKS 64

/* What a mark counts on one device, or on all (device -1). */
struct vt_mark_usage {
    uint64_t live_bytes;  /* allocated since the mark, still live */
    uint64_t live_count;
    uint64_t peak_bytes;  /* highest live_bytes since the mark */
};

/* Open a mark now. Returns its id (1 and up), or 0 when VT_MAX_MARKS are
 * open or memory ran out. */
int vt_mark_begin(void);

/* Close a mark; its id may be handed out again. 0, or -1 for an id that
 * is not open. */
int vt_mark_end(int mark);

/* What mark counts on `device` (-1: the sum over devices, whose peak is
 * the peak of the sum). 0, or -1 for an id that is not open or a device
 * out of range. */
int vt_mark_usage(int mark, int device, struct vt_mark_usage *out);

/* A snapshot (vt_tracker_snapshot's) whose live allocations are only
 * those made since the mark and still live (all_holders: every kind, for
 * the leak report; holders: device memory), and whose peak_holders are
 * the device memory live since the mark at its peak (of the sum over
 * devices), by stack, largest first. NULL for an id that is not open
 * or when memory ran out. Free with vt_snapshot_free. */
struct vt_snapshot *vt_mark_snapshot(int mark);

/* Internal to tracker/: how many marks are open (global lock held to read
 * or write), counting one applied op for each open mark (vt_account_op,
 * global lock held), and a forked child's marks closed. */
extern int vt_marks_open __attribute__((visibility("hidden")));
void vt_mark_op(const struct vt_event *o) __attribute__((visibility("hidden")));
void vt_marks_reset_child(void) __attribute__((visibility("hidden")));

/* A context's reset or destruction (released.c): the open marks that
 * counted the live allocation (space, address), a bit per mark slot (0
 * when none), asked before its release; once released, those marks count
 * its memory as released without a free, by stack, as the process does
 * (their leak reports add it, as the exit's adds the process's). */
uint64_t vt_marks_counting(int space, uint64_t address) __attribute__((visibility("hidden")));
void vt_marks_released(uint64_t marks, uint32_t stack, uint64_t bytes, int kind) __attribute__((visibility("hidden")));

/* Internal to tracker/ (snapshot.c): vt_tracker_snapshot's snapshot with
 * only the live allocations whose time stamp (ticks) is `since` or
 * later, and no holders nor released memory (the mark's own are put in:
 * vt_mark_snapshot). */
struct vt_snapshot *vt_snapshot_since(uint64_t since) __attribute__((visibility("hidden")));

#endif
