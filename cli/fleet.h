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

/* The dump whose first out-of-memory failure came first in wall time, in
 * *which; 0 when no dump has one. The text and HTML reports' "first to
 * fail". */
int vr_first_to_fail(const struct vr_input *in, size_t *which);

#endif
