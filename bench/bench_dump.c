/* bench_dump.c -- the shape of a big dump, for bench/bench_dump.py.
 *
 *   bench_dump N NSTACKS [outer D | reverse]
 *       max(N, NSTACKS) allocations of 256 bytes, the i-th from distinct
 *       stack i % NSTACKS, of which the first N are kept live and the rest
 *       freed (ten levels of calls each made from one of four
 *       functions, below ten levels of plain recursion, as bench_shapes.c's
 *       stacks; with "outer D", the ten chosen levels outermost and D
 *       plain levels below them, stacks.h's outer()), then one named dump
 *       (vramtrace_dump), timed; with "reverse", all N allocations are
 *       kept and then freed last first before the dump (where the ring
 *       holds fewer events than 2 x N, it holds frees whose allocations
 *       were dropped); prints
 *       "dump_s X cpu_s C thread_cpu_s W rss_kb A hwm_added_kb B path P": the
 *       dump's wall and CPU time (the process's, and the dumping thread's
 *       alone: the live publisher's thread runs beside it),
 *       the resident memory before it and how much the dump raised the
 *       peak (VmHWM, reset just before through /proc/self/clear_refs).
 *
 * Built against bench/fastcuda.c's stand-in driver, whose allocation is a
 * few instructions. */
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../include/vramtrace.h"

static CUdeviceptr *kept;
static long nkept;

__attribute__((noinline)) static long alloc_one(void) {
    cuMemAlloc(&kept[nkept], 256);
    return (long)(kept[nkept++] & 1);
}

#define STACKS_LEAF() alloc_one()
#include "stacks.h"

/* A field of /proc/self/status in kB. */
static long status_kb(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, key, strlen(key)) == 0) v = atol(line + strlen(key));
    if (f) fclose(f);
    return v;
}

int main(int argc, char **argv) {
    int below = argc == 5 && strcmp(argv[3], "outer") == 0 ? atoi(argv[4]) : -1;
    int reverse = argc == 4 && strcmp(argv[3], "reverse") == 0;
    if (argc != 3 && below < 0 && !reverse) {
        fprintf(stderr, "usage: bench_dump N NSTACKS [outer D | reverse]\n");
        return 2;
    }
    long n = atol(argv[1]);
    unsigned nstacks = (unsigned)atol(argv[2]);
    if (nstacks < 1) nstacks = 1;
    long total = n > (long)nstacks ? n : (long)nstacks;
    kept = malloc((size_t)(total ? total : 1) * sizeof *kept);
    cuInit(0);
    long sum = 0;
    for (long i = 0; i < total; i++) sum += below >= 0 ? outer(below, (unsigned)(i % nstacks)) : deep(10, (unsigned)(i % nstacks));
    for (long i = n; i < total; i++) cuMemFree(kept[i]);
    for (long i = n; reverse && i-- > 0;) cuMemFree(kept[i]);
    struct vramtrace_api vt;
    vramtrace_load(&vt);
    long rss = status_kb("VmRSS:");
    FILE *c = fopen("/proc/self/clear_refs", "w");
    if (c) { fputs("5", c); fclose(c); }
    long hwm0 = status_kb("VmHWM:");
    char path[4096];
    struct timespec t0, t1, c0, c1, h0, h1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &h0);
    int rc = vt.dump("bench", path, sizeof path);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &h1);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    long hwm1 = status_kb("VmHWM:");
    printf("dump_s %.3f cpu_s %.3f thread_cpu_s %.3f rss_kb %ld hwm_added_kb %ld path %s rc %d sum %ld\n",
           (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9,
           (double)(c1.tv_sec - c0.tv_sec) + (double)(c1.tv_nsec - c0.tv_nsec) / 1e9,
           (double)(h1.tv_sec - h0.tv_sec) + (double)(h1.tv_nsec - h0.tv_nsec) / 1e9, rss, hwm1 - hwm0, path, rc,
           sum & 1);
    return 0;
}
