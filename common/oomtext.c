/* oomtext.c -- an out-of-memory failure's lines (oomtext.h). */
#include <inttypes.h>
#include <string.h>

#include "format.h"
#include "oomtext.h"

#define B(v, buf) vt_fmt_bytes((v), (buf), sizeof(buf))

uint64_t vt_oom_outside(uint64_t total, uint64_t free_bytes, uint64_t live, uint64_t graph_reserved,
                        uint64_t graph_used) {
    if (total < free_bytes || total - free_bytes <= live) return 0;
    uint64_t outside = total - free_bytes - live;
    uint64_t spare = graph_reserved > graph_used ? graph_reserved - graph_used : 0;
    return outside > spare ? outside - spare : 0;
}

const char *vt_host_memory_label(const char *kind) {
    if (!kind) return NULL;
    if (strcmp(kind, "host_vmm") == 0) return "host memory from cuMemCreate";
    if (strcmp(kind, "host_async") == 0) return "host memory from a pool on the host";
    if (strcmp(kind, "host") == 0) return "pinned host memory";
    if (strcmp(kind, "host_registered") == 0) return "host memory pinned by cuMemHostRegister";
    return NULL;
}

void vt_put_oom(FILE *f, const char *prefix, const struct vt_oom_text *o) {
    char a[32], b[32];
    fprintf(f, "%srequest: %s (%" PRIu64 " byte%s) by %s%s", prefix, B(o->requested, a), o->requested,
            o->requested == 1 ? "" : "s", o->api, o->budget ? " (refused by VRAMTRACE_LIMIT)" : "");
    if (o->host) fprintf(f, " (%s)", o->host);
    else fprintf(f, " on device %d", o->device);
    if (o->device_name && o->device_name[0]) {
        int uuid = o->device_uuid && o->device_uuid[0];
        fprintf(f, " (%s%s%s)", o->device_name, uuid ? ", " : "", uuid ? o->device_uuid : "");
    }
    fprintf(f, "\n%sfailing call: %s\n", prefix, o->site);
    if (o->have_info) {
        fprintf(f, "%s%s: %s free of %s\n", prefix, o->budget ? "budget" : "device", B(o->free_bytes, a),
                B(o->total_bytes, b));
        uint64_t outside = vt_oom_outside(o->total_bytes, o->free_bytes, o->live_bytes, o->graph_reserved,
                                          o->graph_used);
        if (outside)
            fprintf(f, "%sheld outside this process's tracked allocations: %s "
                       "(CUDA context, other processes, untracked APIs)\n",
                    prefix, B(outside, a));
    }
    if (!o->budget && (o->graph_reserved || o->graph_used))
        fprintf(f, "%sCUDA graphs' memory pool: %s reserved, %s of it in use by graph allocations\n", prefix,
                B(o->graph_reserved, a), B(o->graph_used, b));
    if (o->tracked == VT_TRACKED_COUNTS)
        fprintf(f, "%stracked on device %d: %s live in %" PRIu64 " allocation%s at the failure; peak %s at %.3f s\n",
                prefix, o->device, B(o->live_bytes, a), o->device_live_count, o->device_live_count == 1 ? "" : "s",
                B(o->device_peak_bytes, b), (double)o->device_peak_time_ns / 1e9);
    else if (o->tracked == VT_TRACKED_BYTES)
        fprintf(f, "%stracked on device %d: %s live at the failure\n", prefix, o->device, B(o->live_bytes, a));
    if (o->procs)
        fprintf(f, "%sother processes on this GPU (NVML):%s\n", prefix, o->nprocs ? o->procs : " none");
}
