/* fleet.h -- what a report over many ranks of one job says first: which
 * ranks have no dump, how uneven the peaks are (the highest over the
 * median), and which call sites hold different memory on different ranks.
 * For the text report over several dumps (fmt_text.c). */
#ifndef VT_FLEET_H
#define VT_FLEET_H

#include <stdio.h>

#include "reporters.h"

/* "ranks: ...", "peak imbalance: ..." and the differing call sites (at
 * most o->top, largest spread first), in the text report's style. */
void vr_fleet_text(FILE *f, const struct vr_input *in, const struct vr_opts *o);

/* The failure a report names as the first to fail: dump `dump`'s
 * ooms[oom]. */
struct vr_first {
    size_t dump, oom;
    /* 2: the process did not get past its last failure (totals'
     * last_oom_survived false) and exited with a failure's status; 1: it
     * did not get past it and its dump says no end (an out-of-memory dump,
     * or one of earlier vramtrace, whose first failure is named); 0: it got
     * past it, exited with 0 or was ended by a signal. */
    int tier;
    /* The dumps say how their processes ended (every dump with a failure
     * has last_oom_survived): the report says why it chose this one. */
    int said;
    /* Processes with a failure earlier than the one named, passed over
     * (lower tier): how many, and the earliest of them. */
    size_t passed, passed_dump;
};

/* The process that failed first: among the dumps with an out-of-memory
 * failure, those of the highest tier (a process whose last failure ended
 * it before one that got past its failures, exited cleanly or was ended
 * by a launcher's signal), and of them the one whose failure named (its
 * last of a process the failure ended, else its first) came first in wall
 * time. 0 when no dump has a failure. The text, HTML and JSON reports'
 * "first to fail". */
int vr_first_to_fail(const struct vr_input *in, struct vr_first *out);

/* Why the choice: "its last failure, not got past; it exited with status
 * 1" for the chosen process, and for the earliest passed over ("it got
 * past its failures", "it exited with status 0", "it was ended by
 * SIGTERM"), in buf. */
const char *vr_first_why(const struct vr_input *in, const struct vr_first *w, char *buf, size_t size);
const char *vr_passed_why(const struct vr_input *in, const struct vr_first *w, char *buf, size_t size);

#endif
