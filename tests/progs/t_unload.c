/* t_unload.c -- device memory allocated by plugins the program then
 * unloads (dlclose), and another plugin loaded where one was.
 *
 *   t_unload DIR              libt_unload_a.so allocates 1 MiB and is
 *                             unloaded; libt_unload_b.so, loaded where it
 *                             was, allocates 2 MiB and stays. Both leak.
 *   t_unload DIR loop         a: loaded, allocating 4 KiB and unloaded, ten
 *                             times.
 *   t_unload DIR replace PATH [NEW]
 *                             a copy of a at PATH allocates 1 MiB, is
 *                             unloaded, and PATH is then replaced by NEW
 *                             (b by default; "": not replaced).
 *   t_unload DIR churn COPIES THREADS ITERS
 *                             THREADS threads each load one of the copies
 *                             COPIES/plug0.so ... plug7.so of a at random,
 *                             allocate 4 KiB through it and unload it,
 *                             ITERS times; prints "done".
 *   t_unload DIR based        a built to start at 0x10000 (libt_unload_
 *                             based.so) allocates 1 MiB and is unloaded.
 *   t_unload DIR relink LINK  a, loaded through the symbolic link LINK
 *                             (to DIR's a), allocates 1 MiB; LINK is then
 *                             pointed at DIR's b, and a unloaded.
 *   t_unload DIR chdir        a, loaded as ./libt_unload_a.so from DIR,
 *                             allocates 1 MiB; the program moves to / and
 *                             unloads it.
 *   t_unload DIR marks        the C API's leak report of one mark, printed
 *                             after a allocated 1 MiB, and again after that
 *                             memory was freed, a unloaded and b, loaded
 *                             where it was, allocated 2 MiB (then freed).
 *
 * Prints where each plugin was loaded (the same place, or the test's
 * premise does not hold and it exits 3). */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../include/vramtrace.h"

typedef CUdeviceptr (*alloc_fn)(size_t);

static void *base_of(void *fn) {
    Dl_info i;
    return dladdr(fn, &i) ? i.dli_fbase : NULL;
}

/* Loads path, calls its alloc(n), unloads it unless keep; returns where it
 * was loaded. */
static void *use(const char *path, const char *fn, size_t n, int keep) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) { fprintf(stderr, "dlopen: %s\n", dlerror()); exit(2); }
    alloc_fn f = (alloc_fn)dlsym(h, fn);
    void *base = base_of((void *)f);
    if (!f(n)) exit(2);
    if (!keep && dlclose(h) != 0) exit(2);
    return base;
}

static const char *churn_dir;
static int churn_iters;
static CUcontext churn_ctx;

static void *churn(void *arg) {
    unsigned r = 12345u + 7919u * (unsigned)(long)arg;
    cuCtxSetCurrent(churn_ctx);
    for (int i = 0; i < churn_iters; i++) {
        char p[4200];
        r = r * 1103515245u + 12345u;
        snprintf(p, sizeof p, "%s/plug%u.so", churn_dir, (r >> 16) % 8);
        use(p, "plug_a_alloc", 4096, 0);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    char a[4096], b[4096];
    snprintf(a, sizeof a, "%s/libt_unload_a.so", argv[1]);
    snprintf(b, sizeof b, "%s/libt_unload_b.so", argv[1]);
    CUdevice d;
    CUcontext c;
    if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&c, d) || cuCtxSetCurrent(c)) return 2;
    const char *mode = argc > 2 ? argv[2] : "";
    if (strcmp(mode, "loop") == 0) {
        void *first = NULL;
        for (int i = 0; i < 10; i++) {
            void *at = use(a, "plug_a_alloc", 4096, 0);
            if (first && at != first) return 3;
            first = at;
        }
        printf("ten stays in one place\n");
        return 0;
    }
    if (strcmp(mode, "churn") == 0 && argc > 5) {
        churn_dir = argv[3];
        churn_iters = atoi(argv[5]);
        int n = atoi(argv[4]);
        pthread_t t[64];
        if (n < 1 || n > 64) return 2;
        churn_ctx = c;
        for (long i = 0; i < n; i++) pthread_create(&t[i], NULL, churn, (void *)i);
        for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
        printf("done\n");
        return 0;
    }
    if (strcmp(mode, "based") == 0) {
        char based[4200];
        snprintf(based, sizeof based, "%s/libt_unload_based.so", argv[1]);
        use(based, "plug_a_alloc", 1 << 20, 0);
        printf("unloaded\n");
        return 0;
    }
    if (strcmp(mode, "relink") == 0 && argc > 3) {
        void *h = dlopen(argv[3], RTLD_NOW | RTLD_LOCAL);
        if (!h) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 2; }
        char tmp[4200];
        snprintf(tmp, sizeof tmp, "%s.new", argv[3]);
        if (!((alloc_fn)dlsym(h, "plug_a_alloc"))(1 << 20) || symlink(b, tmp) != 0 || rename(tmp, argv[3]) != 0 ||
            dlclose(h) != 0)
            return 2;
        printf("unloaded after the link moved\n");
        return 0;
    }
    if (strcmp(mode, "chdir") == 0) {
        if (chdir(argv[1]) != 0) return 2;
        void *h = dlopen("./libt_unload_a.so", RTLD_NOW | RTLD_LOCAL);
        if (!h) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 2; }
        if (!((alloc_fn)dlsym(h, "plug_a_alloc"))(1 << 20) || chdir("/") != 0 || dlclose(h) != 0) return 2;
        printf("unloaded from /\n");
        return 0;
    }
    if (strcmp(mode, "replace") == 0 && argc > 3) {
        void *at = use(argv[3], "plug_a_alloc", 1 << 20, 0);
        char cmd[16500];
        snprintf(cmd, sizeof cmd, "cp '%s' '%s.new' && mv '%s.new' '%s'", argc > 4 ? argv[4] : b, argv[3], argv[3], argv[3]);
        if ((argc <= 4 || argv[4][0]) && system(cmd) != 0) return 2;
        printf("replaced %s\n", at ? "after one stay" : "?");
        return 0;
    }
    if (strcmp(mode, "marks") == 0) {
        /* Each plugin's function called from a line of its own: the two
         * stacks differ in main's frame (the same list of return addresses
         * is one stack, interned before a left, and named after a). */
        struct vramtrace_api vt;
        if (!vramtrace_load(&vt)) return 2;
        int m = vt.mark();
        static char report[65536];
        void *ha = dlopen(a, RTLD_NOW | RTLD_LOCAL);
        alloc_fn fa = ha ? (alloc_fn)dlsym(ha, "plug_a_alloc") : NULL;
        CUdeviceptr pa = fa ? fa(1 << 20) : 0;
        if (!pa || vt.leaks(m, report, sizeof report) < 0) return 2;
        printf("report 1:%s", report);
        void *at_a = base_of((void *)fa);
        if (cuMemFree(pa) != CUDA_SUCCESS || dlclose(ha) != 0) return 2;
        void *hb = dlopen(b, RTLD_NOW | RTLD_LOCAL);
        alloc_fn fb = hb ? (alloc_fn)dlsym(hb, "plug_b_alloc") : NULL;
        CUdeviceptr pb = fb ? fb(2 << 20) : 0;
        if (!pb || vt.leaks(m, report, sizeof report) < 0) return 2;
        printf("report 2:%s", report);
        if (cuMemFree(pb) != CUDA_SUCCESS) return 2;
        return at_a == base_of((void *)fb) ? 0 : 3;
    }
    void *at_a = use(a, "plug_a_alloc", 1 << 20, 0);
    void *at_b = use(b, "plug_b_alloc", 2 << 20, 1);
    if (at_a != at_b) return 3;
    printf("b loaded where a was\n");
    return 0;
}
