/* t_heldback.c -- events made while a dump on request reads the event
 * history, past what it holds back, for tests/integration/test_dumpmem.py.
 *
 *   t_heldback DUMP PAIRS
 *
 * Run with VRAMTRACE_EVENTS below 1,200 and VRAMTRACE_REPORT naming a
 * FIFO whose pipe the caller keeps open and full: 600 allocation-free
 * pairs fill the ring, then SIGUSR2 asks for a dump, which lends the ring
 * and, once its file DUMP is in place, waits to write its line into the
 * full FIFO until the caller reads it. Meanwhile PAIRS pairs more of
 * cudaMalloc and cudaFree, each of its events held back or dropped, then
 * vramtrace_step() (which applies every thread's log, so that each of
 * those events meets the lent ring). Prints "made PAIRS", then waits for a
 * line on stdin, writes the dump named "after" (which waits for the one
 * on request to be done) and returns. */
#include <cuda_runtime_api.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../include/vramtrace.h"

static int pairs(long n) {
    for (long k = 0; k < n; k++) {
        void *p = NULL;
        if (cudaMalloc(&p, 4096) != cudaSuccess || cudaFree(p) != cudaSuccess) return -1;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 3) return 2;
    long n = atol(argv[2]);
    struct vramtrace_api vt;
    vramtrace_load(&vt);
    if (pairs(600) != 0) return 1;
    raise(SIGUSR2);
    struct stat st;
    for (int i = 0; stat(argv[1], &st) != 0; i++) {
        if (i == 10000) return 3; /* 10 s: no dump */
        usleep(1000);
    }
    if (pairs(n) != 0) return 1;
    vt.step();
    printf("made %ld\n", n);
    fflush(stdout);
    char line[16];
    if (!fgets(line, sizeof line, stdin)) return 4;
    return vt.dump("after", NULL, 0) == 0 ? 0 : 5;
}
