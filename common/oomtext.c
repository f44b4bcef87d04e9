/* oomtext.c -- an out-of-memory failure's lines (oomtext.h). */
#include <inttypes.h>
#include <string.h>
#include <time.h>

#include "format.h"
#include "oomtext.h"

#define B(v, buf) vt_fmt_bytes((v), (buf), sizeof(buf))

uint64_t vt_oom_outside(uint64_t total, uint64_t free_bytes, uint64_t live, uint64_t graph_reserved,
                        uint64_t graph_used, uint64_t pool_reserved, uint64_t pool_used) {
    if (total < free_bytes || total - free_bytes <= live) return 0;
    uint64_t outside = total - free_bytes - live;
    uint64_t spare = graph_reserved > graph_used ? graph_reserved - graph_used : 0;
    spare += pool_reserved > pool_used ? pool_reserved - pool_used : 0;
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

/* The one wording of where a request was for, for vt_put_oom and
 * vt_oom_where alike: host memory by its label, device memory by its
 * ordinal (a host request's device is -1, no device's). */
static const char *where(const char *host, int device, char *buf, size_t size) {
    if (host) snprintf(buf, size, " (%s)", host);
    else snprintf(buf, size, " on device %d", device);
    return buf;
}

const char *vt_oom_where(const char *kind, int device, char *buf, size_t size) {
    return where(vt_host_memory_label(kind), device, buf, size);
}

static uint64_t field(const void *steps, size_t i, size_t size, size_t off) {
    uint64_t v;
    memcpy(&v, (const char *)steps + i * size + off, sizeof v);
    return v;
}

uint64_t vt_step_at(uint64_t time_ns, const void *steps, size_t n, size_t size, size_t step_off, size_t time_off,
                    uint64_t total) {
    if (total == 0) return 0;
    size_t lo = 0, hi = n; /* boundaries [0, lo) are at or before time_ns */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (field(steps, mid, size, time_off) <= time_ns) lo = mid + 1;
        else hi = mid;
    }
    if (lo) return field(steps, lo - 1, size, step_off) + 1;
    return total > n ? 0 : 1;
}

/* "when: 259206.898 s into the run (72 h 0 min), 2026-12-08 14:03:27 UTC,
 * during step 69". */
static void put_when(FILE *f, const char *prefix, const struct vt_oom_text *o) {
    double s = (double)o->time_ns / 1e9;
    fprintf(f, "%swhen: %.3f s into the run", prefix, s);
    if (s >= 86400) fprintf(f, " (%llu d %llu h %llu min)", (unsigned long long)(s / 86400),
                            (unsigned long long)(s / 3600) % 24, (unsigned long long)(s / 60) % 60);
    else if (s >= 3600) fprintf(f, " (%llu h %llu min)", (unsigned long long)(s / 3600),
                                (unsigned long long)(s / 60) % 60);
    else if (s >= 60) fprintf(f, " (%llu min %llu s)", (unsigned long long)(s / 60), (unsigned long long)s % 60);
    if (o->start_unix_ns) {
        time_t t = (time_t)((o->start_unix_ns + o->time_ns) / 1000000000ull);
        struct tm tm;
        char clock[64];
        if (gmtime_r(&t, &tm) && strftime(clock, sizeof clock, "%Y-%m-%d %H:%M:%S UTC", &tm))
            fprintf(f, ", %s", clock);
    }
    /* Before the first boundary is step 1 only as far as the marks tell:
     * the program may not have started its steps yet (a model moved to
     * the device before training). */
    if (o->step == 1) fputs(", before step 1 ended", f);
    else if (o->step) fprintf(f, ", during step %" PRIu64, o->step);
    fputc('\n', f);
}

void vt_put_oom(FILE *f, const char *prefix, const struct vt_oom_text *o) {
    char a[32], b[32], at[96];
    /* A size known only from PyTorch's error ("Requested : 1.07 GiB") is
     * not given in bytes it never said (1100 MiB asked reads 1.07 GiB). */
    if (o->requested_rounded)
        fprintf(f, "%srequest: about %s (PyTorch's error gives it to two decimals) by %s", prefix,
                B(o->requested, a), o->api);
    else
        fprintf(f, "%srequest: %s (%" PRIu64 " byte%s) by %s%s", prefix, B(o->requested, a), o->requested,
                o->requested == 1 ? "" : "s", o->api, o->budget ? " (refused by VRAMTRACE_LIMIT)" : "");
    fputs(where(o->host, o->device, at, sizeof at), f);
    if (o->device_name && o->device_name[0]) {
        int uuid = o->device_uuid && o->device_uuid[0];
        fprintf(f, " (%s%s%s)", o->device_name, uuid ? ", " : "", uuid ? o->device_uuid : "");
    }
    fprintf(f, "\n%sfailing call: %s\n", prefix, o->site);
    /* The handles the request made before the call that failed (PyTorch's
     * expandable segments make a tensor's pages, then map them): live, but
     * the request's own, so that the tracked bytes below, which count
     * them, are not read as the program's. */
    if (o->taken_count)
        fprintf(f, "%staken by this request before that call: %s in %" PRIu64 " handle%s made one after another at "
                   "this call site and not mapped yet (a request made of pages, as PyTorch's expandable segments "
                   "make them): the request's own, not memory the program holds; counted in the tracked bytes "
                   "below, not among the holders\n",
                prefix, B(o->taken_bytes, a), o->taken_count, o->taken_count == 1 ? "" : "s");
    put_when(f, prefix, o);
    if (o->have_info) {
        fprintf(f, "%s%s: %s free of %s\n", prefix, o->budget ? "budget" : "device", B(o->free_bytes, a),
                B(o->total_bytes, b));
        uint64_t outside = vt_oom_outside(o->total_bytes, o->free_bytes, o->live_bytes, o->graph_reserved,
                                          o->graph_used, o->pool_reserved, o->pool_used);
        if (outside)
            fprintf(f, "%sheld outside this process's tracked allocations: %s "
                       "(CUDA context, other processes, untracked APIs)\n",
                    prefix, B(outside, a));
    }
    if (!o->budget && (o->graph_reserved || o->graph_used))
        fprintf(f, "%sCUDA graphs' memory pool: %s reserved, %s of it in use by graph allocations\n", prefix,
                B(o->graph_reserved, a), B(o->graph_used, b));
    if (!o->budget && (o->pool_reserved || o->pool_used))
        fprintf(f, "%sstream-ordered memory pools: %s reserved, %s of it in use by allocations\n", prefix,
                B(o->pool_reserved, a), B(o->pool_used, b));
    /* A refusal learnt as PyTorch's error reached Python was recorded
     * then, after the failing operation had freed what it had made: its
     * figures are said to be of that moment, and PyTorch's own of the
     * refusal is given beside them, not contradicted by them. */
    const char *then = o->raised_allocated ? "when PyTorch raised the error" : "at the failure";
    if (o->tracked == VT_TRACKED_COUNTS)
        fprintf(f, "%stracked on device %d: %s live in %" PRIu64 " allocation%s %s; peak %s at %.3f s\n",
                prefix, o->device, B(o->live_bytes, a), o->device_live_count, o->device_live_count == 1 ? "" : "s",
                then, B(o->device_peak_bytes, b), (double)o->device_peak_time_ns / 1e9);
    else if (o->tracked == VT_TRACKED_BYTES)
        fprintf(f, "%stracked on device %d: %s live %s\n", prefix, o->device, B(o->live_bytes, a), then);
    if (o->raised_allocated)
        fprintf(f, "%sPyTorch had %s allocated when it refused (its error says so); vramtrace learnt of the refusal "
                   "only as the error reached Python, once the failing operation had freed any outputs it had made: "
                   "the figures above are of that later moment\n",
                prefix, B(o->raised_allocated, a));
    if (o->procs)
        fprintf(f, "%sother processes on this GPU (NVML):%s\n", prefix, o->nprocs ? o->procs : " none");
}
