/* t_leakstep.c -- a long job's leak: argv[1] steps (vramtrace_step), each
 * making argv[2] temporary allocations of 4 KiB to 20 KiB in temp (freed
 * at once) and keeping argv[3] KiB in keep, and argv[4] KiB more in keep
 * in the first step alone (a warm-up's buffers). Prints how many steps ran
 * and what keep holds. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

#include "../../include/vramtrace.h"

static __attribute__((noinline)) void *temp(size_t n) {
    void *p = NULL;
    cudaMalloc(&p, n);
    return p;
}

static __attribute__((noinline)) void *keep(size_t n) {
    void *p = NULL;
    return cudaMalloc(&p, n) == cudaSuccess ? p : NULL;
}

int main(int argc, char **argv) {
    struct vramtrace_api vt;
    vramtrace_load(&vt);
    long steps = argc > 1 ? strtol(argv[1], NULL, 10) : 10, k = argc > 2 ? strtol(argv[2], NULL, 10) : 5;
    size_t leak = (size_t)(argc > 3 ? strtol(argv[3], NULL, 10) : 1024) << 10, kept = 0;
    size_t warm = (size_t)(argc > 4 ? strtol(argv[4], NULL, 10) : 0) << 10;
    long s;
    for (s = 0; s < steps; s++) {
        for (long i = 0; i < k; i++) cudaFree(temp(4096 * (size_t)(1 + i % 5)));
        if (s == 0 && warm) {
            if (!keep(warm)) break;
            kept += warm;
        }
        if (!keep(leak)) break;
        kept += leak;
        vt.step();
    }
    printf("steps %ld, kept %zu bytes\n", s, kept);
    return 0;
}
