/* place.h -- a process's place in its job of several ranks, as the
 * library's reports say it after the pid, so that the reports of ranks
 * sharing one log can be told apart. */
#ifndef VT_PLACE_H
#define VT_PLACE_H

#include <stddef.h>

struct vt_dump_meta;

/* "rank 3 of 8 on node1" (the job's rank), "local rank 1 on node1 of a
 * job of 8" (a rank that only a local rank variable gave: node1's local
 * rank 1 is no rank of the job's), "of a job of 8, rank not set, on
 * node1" (no variable gave one), in buf; "" outside a job of several
 * ranks (world_size 1 or unknown). rank_from is the variable that gave
 * the rank (NULL: none); the host is written in its display form. Returns
 * buf. */
const char *vt_job_place(char *buf, size_t size, int world_size, int rank, const char *rank_from, const char *host);

/* The same of a dump's process (its meta: world size, rank, rank_from,
 * host); a meta that says a rank but not its variable is given the job's
 * rank. */
const char *vt_job_place_of(const struct vt_dump_meta *m, char *buf, size_t size);

#endif
