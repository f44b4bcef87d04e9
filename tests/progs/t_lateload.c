/* t_lateload.c -- the C API of a libvramtrace.so that the program loads
 * itself: by dlopen after start (argv[1] its path, argv[2] "global" or
 * "local"), or, built as t_linked, linked into the program. A 64 MiB
 * allocation is left live since a mark. */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "vramtrace.h"

int main(int argc, char **argv) {
    CUcontext ctx;
    if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0) || cuCtxSetCurrent(ctx)) return 1;
    if (argc > 2) {
        void *h = dlopen(argv[1], RTLD_NOW | (strcmp(argv[2], "global") == 0 ? RTLD_GLOBAL : RTLD_LOCAL));
        if (!h) return 2;
        /* RTLD_LOCAL: the API is found on the handle, as ctypes finds it. */
        if (strcmp(argv[2], "local") == 0) {
            int (*active)(void) = (int (*)(void))dlsym(h, "vramtrace_active");
            int (*mark)(void) = (int (*)(void))dlsym(h, "vramtrace_mark");
            printf("active %d mark %d\n", active(), mark());
            return 0;
        }
    }
    struct vramtrace_api vt;
    printf("active %d\n", vramtrace_load(&vt));
    int mark = vt.mark();
    CUdeviceptr p;
    printf("mark %d alloc %d\n", mark, (int)cuMemAlloc(&p, 64 << 20));
    struct vramtrace_usage u;
    int r = vt.usage(mark, -1, &u);
    printf("usage %d live %llu in %llu\n", r, (unsigned long long)u.live_bytes, (unsigned long long)u.live_count);
    char report[4096] = "x";
    long n = vt.leaks(mark, report, sizeof report);
    const char *summary = strstr(report, "SUMMARY") ? strstr(report, "SUMMARY") : report;
    if (n > 0 && n == (long)strlen(report)) printf("leaks whole %s\n", summary); /* all of it in the buffer */
    else printf("leaks %ld %s\n", n, summary);
    printf("step %d end %d\n", vt.step(), vt.mark_end(mark));
    return 0;
}
