/* rankvars.c -- the launchers' rank variables (rankvars.h). */
#include <string.h>

#include "rankvars.h"

const char *const vt_rank_vars[] = {"RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "PMI_RANK", NULL};
const char *const vt_local_rank_vars[] = {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID",
                                          "MPI_LOCALRANKID", NULL};
const char *const vt_world_size_vars[] = {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS", "PMI_SIZE", NULL};

int vt_rank_var_is_local(const char *name) {
    for (const char *const *v = vt_local_rank_vars; name && *v; v++)
        if (strcmp(*v, name) == 0) return 1;
    return 0;
}
