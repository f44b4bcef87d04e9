/* bench_alloc.c -- the loops the benchmarks time.
 *
 *   bench_alloc pairs cuda|malloc DEPTH N THREADS [cold]
 *       N allocate+free pairs per thread at stack depth DEPTH, after an
 *       untimed warm-up unless "cold"; prints
 *       "ns_per_pair X pairs_per_sec Y rss_kb Z"
 *   bench_alloc live N SITES
 *       N allocations kept, from SITES call sites; prints
 *       "alloc_s X rss_kb Y"
 *   bench_alloc churn N
 *       N allocate+free pairs at a shallow depth; prints "rss_kb Y" */
#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"

static int use_malloc;
static long iterations;

__attribute__((noinline)) static long loop(void) {
    long sum = 0;
    for (long i = 0; i < iterations; i++) {
        if (use_malloc) {
            void *p = malloc(256);
            __asm__ volatile("" : : "r"(p) : "memory");
            sum += (long)((unsigned long)p & 1);
            free(p);
        } else {
            CUdeviceptr p;
            cuMemAlloc(&p, 256);
            sum += (long)(p & 1);
            cuMemFree(p);
        }
    }
    return sum;
}

/* Recurse to the wanted depth first; the +1 keeps each frame on the stack. */
__attribute__((noinline)) static long deep(int d) {
    if (d <= 0) return loop();
    long r = deep(d - 1);
    __asm__ volatile("" : : : "memory");
    return r + 1;
}

static int depth;
static void *thread_main(void *arg) { (void)arg; deep(depth); return NULL; }

/* Untimed: fills vramtrace's event ring once round (its pages are touched
 * the first time only) and warms malloc and the unwinder's caches. */
static void warm_up(void) {
    long n = iterations;
    iterations = 600000;
    deep(depth);
    iterations = n;
}

#define SITE(n) __attribute__((noinline)) static void site##n(CUdeviceptr *p) { cuMemAlloc(p, 256); }
SITE(0) SITE(1) SITE(2) SITE(3) SITE(4) SITE(5) SITE(6) SITE(7)
static void (*sites[8])(CUdeviceptr *) = {site0, site1, site2, site3, site4, site5, site6, site7};

int main(int argc, char **argv) {
    cuInit(0);
    if (argc >= 6 && strcmp(argv[1], "pairs") == 0) {
        use_malloc = strcmp(argv[2], "malloc") == 0;
        depth = atoi(argv[3]);
        iterations = atol(argv[4]);
        int threads = atoi(argv[5]);
        pthread_t t[64];
        if (!(argc > 6 && strcmp(argv[6], "cold") == 0)) warm_up();
        double t0 = now();
        for (int i = 0; i < threads && i < 64; i++) pthread_create(&t[i], NULL, thread_main, NULL);
        for (int i = 0; i < threads && i < 64; i++) pthread_join(t[i], NULL);
        double dt = now() - t0;
        double pairs = (double)iterations * threads;
        printf("ns_per_pair %.1f pairs_per_sec %.0f rss_kb %ld\n", dt * 1e9 / pairs * threads, pairs / dt, rss_kb());
        return 0;
    }
    if (argc >= 4 && strcmp(argv[1], "live") == 0) {
        long n = atol(argv[2]);
        int ns = atoi(argv[3]);
        if (ns < 1 || ns > 8) ns = 1;
        long before = rss_kb();
        double t0 = now();
        for (long i = 0; i < n; i++) {
            CUdeviceptr p;
            sites[i % ns](&p);
        }
        printf("alloc_s %.3f rss_kb %ld rss_before_kb %ld\n", now() - t0, rss_kb(), before);
        return 0;
    }
    if (argc >= 3 && strcmp(argv[1], "churn") == 0) {
        iterations = atol(argv[2]);
        loop();
        printf("rss_kb %ld\n", rss_kb());
        return 0;
    }
    fprintf(stderr, "usage: see bench_alloc.c\n");
    return 2;
}
