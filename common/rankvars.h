/* rankvars.h -- the launchers' variables that name a process's rank, its
 * rank within its node and the job's size (torchrun, Open MPI, Slurm,
 * MPICH/PMI), known to the library that reads them and to the CLI that
 * reads the dump's `rank_from`. */
#ifndef VT_RANKVARS_H
#define VT_RANKVARS_H

/* NULL-terminated, in the order they are tried. */
extern const char *const vt_rank_vars[];       /* the job's rank: RANK, ... */
extern const char *const vt_local_rank_vars[]; /* the rank within the node: LOCAL_RANK, ... */
extern const char *const vt_world_size_vars[]; /* the job's size: WORLD_SIZE, ... */

/* 1 when name is one of vt_local_rank_vars: a rank that variable gave is
 * the process's rank within its node, not the job's (two hosts each have
 * a local rank 0). 0 for NULL. */
int vt_rank_var_is_local(const char *name);

#endif
