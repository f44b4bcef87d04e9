/* place.c -- a process's place in its job (place.h). */
#include <stdio.h>

#include "../common/display.h"
#include "../common/rankvars.h"
#include "dump.h"
#include "place.h"

const char *vt_job_place(char *buf, size_t size, int world_size, int rank, const char *rank_from, const char *host) {
    char shown[1024];
    if (size) buf[0] = '\0';
    if (world_size <= 1) return buf;
    vt_display(host && host[0] ? host : "?", shown, sizeof shown);
    if (!rank_from) snprintf(buf, size, "of a job of %d, rank not set, on %s", world_size, shown);
    else if (vt_rank_var_is_local(rank_from))
        snprintf(buf, size, "local rank %d on %s of a job of %d", rank, shown, world_size);
    else snprintf(buf, size, "rank %d of %d on %s", rank, world_size, shown);
    return buf;
}

const char *vt_job_place_of(const struct vt_dump_meta *m, char *buf, size_t size) {
    const char *from = m->rank_unknown ? NULL : m->rank_from ? m->rank_from : "RANK";
    return vt_job_place(buf, size, m->world_size, m->rank, from, m->host);
}
