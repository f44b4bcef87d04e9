/* t_api.c -- the C API (include/vramtrace.h) with known answers, found
 * through vramtrace_load as a program would, with and without vramtrace.
 *
 *   before_mark  1 MiB, allocated before the mark, twice: one freed after
 *                it, one kept to the end (never in a mark's report)
 *   keep_small   4096 bytes, since the mark, kept
 *   scratch      8192 bytes, since the mark, freed after keep_big
 *   keep_big     65536 bytes, since the mark, kept
 * so since the mark: live 69632 bytes in 2, peak 77824; a second mark
 * opened after scratch's free counts keep_big's successor only. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <string.h>

#include "../../include/vramtrace.h"

static struct vramtrace_api vt;

static void *before_mark(void) { void *p = NULL; cudaMalloc(&p, 1 << 20); return p; }
static void *keep_small(void) { void *p = NULL; cudaMalloc(&p, 4096); return p; }
static void *scratch(void) { void *p = NULL; cudaMalloc(&p, 8192); return p; }
static void *keep_big(void) { void *p = NULL; cudaMalloc(&p, 65536); return p; }
static void *late(void) { void *p = NULL; cudaMalloc(&p, 512); return p; }

static void usage(const char *what, int mark, int device) {
    struct vramtrace_usage u = {1, 1, 1};
    int r = vt.usage(mark, device, &u);
    printf("%s: %d live %llu in %llu peak %llu\n", what, r, (unsigned long long)u.live_bytes,
           (unsigned long long)u.live_count, (unsigned long long)u.peak_bytes);
}

static char report[1 << 16];

int main(void) {
    int active = vramtrace_load(&vt);
    printf("active %d\n", active);
    void *a = before_mark();
    void *kept = before_mark(); /* live at every report: never the mark's */
    int m = vt.mark();
    printf("mark %s\n", m > 0 ? "ok" : m == VRAMTRACE_INACTIVE ? "inactive" : "failed");
    usage("empty", m, -1);
    long n = vt.peak(m, report, sizeof report);
    printf("empty peak report %ld\n", n);
    void *b = keep_small();
    void *c = scratch();
    void *d = keep_big();
    cudaFree(c);
    cudaFree(a);
    int m2 = vt.mark();
    void *e = late();
    usage("all", m, -1);
    usage("device 0", m, 0);
    usage("device 1", m, 1);
    usage("second", m2, -1);
    usage("bad device", m, 64);
    n = vt.leaks(m, report, sizeof report);
    printf("leaks %ld %zu\n%s", n, strlen(report), report);
    n = vt.peak(m, report, sizeof report);
    printf("peak %ld %zu\n%s", n, strlen(report), report);
    n = vt.leaks(m, report, 10);
    printf("cut %ld %zu\n", n, strlen(report));
    int e1 = vt.mark_end(m2), e2 = vt.mark_end(m2), e3 = vt.mark_end(0);
    printf("end %d %d %d\n", e1, e2, e3);
    usage("ended", m2, -1);
    char path[4096] = "x";
    int r = vt.dump("after keep/big", path, sizeof path);
    printf("dump %d %s\n", r, strrchr(path, '/') ? strrchr(path, '/') + 1 : path);
    char longname[102];
    memset(longname, 'n', 101);
    longname[101] = '\0';
    printf("dump of a 101-character name %d\n", vt.dump(longname, path, sizeof path));
    cudaFree(b);
    cudaFree(d);
    cudaFree(e);
    cudaFree(kept);
    usage("freed", m, -1);
    printf("leaks after free %ld\n", vt.leaks(m, report, sizeof report));
    vt.mark_end(m);
    return 0;
}
