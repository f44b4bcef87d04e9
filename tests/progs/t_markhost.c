/* t_markhost.c -- a mark's leak report of pinned host memory, as the exit
 * check reports it:
 *
 *   keep_device  3000 bytes of device memory since the mark, freed after
 *                the first report
 *   keep_pinned  5000 bytes of pinned host memory since the mark, never
 *                freed (the exit check's leak)
 *   7000 bytes of device memory allocated and freed between them
 * so the first report holds 5000 + 3000 bytes, the second 5000; the
 * mark's usage is device memory's: 3000 live, peak 10000, then 0. */
#include <cuda_runtime_api.h>
#include <stdio.h>

#include "../../include/vramtrace.h"

static struct vramtrace_api vt;

static void *keep_device(void) { void *p = NULL; cudaMalloc(&p, 3000); return p; }
static void *keep_pinned(void) { void *p = NULL; cudaMallocHost(&p, 5000); return p; }

static void usage(const char *what, int mark) {
    struct vramtrace_usage u = {1, 1, 1};
    int r = vt.usage(mark, -1, &u);
    printf("%s: %d live %llu in %llu peak %llu\n", what, r, (unsigned long long)u.live_bytes,
           (unsigned long long)u.live_count, (unsigned long long)u.peak_bytes);
}

static char report[1 << 16];

int main(void) {
    vramtrace_load(&vt);
    int m = vt.mark();
    void *d = keep_device();
    void *h = keep_pinned();
    void *t = NULL;
    cudaMalloc(&t, 7000);
    cudaFree(t);
    usage("kept", m);
    vt.leaks(m, report, sizeof report);
    printf("leaks\n%s", report);
    cudaFree(d);
    usage("freed", m);
    vt.leaks(m, report, sizeof report);
    printf("leaks after free\n%s", report);
    vt.mark_end(m);
    (void)h;
    return 0;
}
