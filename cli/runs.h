/* runs.h -- dumps of earlier runs of the same job told apart from the
 * newest run's, so that a report over `vt.*.json` (where vramtrace kept an
 * earlier run's dumps aside under their pids) speaks of one run. */
#ifndef VT_RUNS_H
#define VT_RUNS_H

#include "reporters.h"

/* Orders in->dumps[0..in->n) so that the newest run's come first, in the
 * order given (of their ranks), and the earlier runs' after them, and sets
 * in->n to the newest run's count and in->earlier, in->nearlier and
 * in->earlier_runs to the rest. A run: the processes (a pid, start and
 * host; its dumps' latest time its end) whose lifetimes overlap, one after
 * another, joined in time order until a group of them repeats a rank the
 * run already has (the job ran again, or its launcher restarted it): that
 * group begins the next run. Workers that all say one rank and run at
 * once are one run; ranks run one after another, each once, are one run.
 * Only the ranks of dumps that say their job's size (world_size) count:
 * processes that no launcher gave a rank (all read 0) never begin a run.
 * Returns -1 when memory ran out (nothing changed), else 0. */
int vr_newest_run(struct vr_input *in);

/* How long before the newest run the latest earlier run began (ns). */
uint64_t vr_earlier_ago_ns(const struct vr_input *in);

/* The line that says which dumps were left out ("earlier runs: left out 4
 * dumps of 1 earlier run, the latest begun 183.204 s before this one:
 * a.json, b.json, ..."), at most `most` paths named; nothing when none. */
void vr_earlier_text(FILE *f, const struct vr_input *in, size_t most);

#endif
