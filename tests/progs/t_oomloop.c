/* t_oomloop.c -- a long job's loop of failures: fills 40 MiB of the
 * device (run it on a 64 MiB one), then asks 32 MiB argv[1] times in
 * try_a and 48 MiB argv[2] times in try_b, each failing for lack of
 * memory; prints how many of each failed. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

static int try_a(void **p) {
    return cudaMalloc(p, 32 << 20) != cudaSuccess;
}

static int try_b(void **p) {
    return cudaMalloc(p, 48 << 20) != cudaSuccess;
}

int main(int argc, char **argv) {
    long a = argc > 1 ? strtol(argv[1], NULL, 10) : 1, b = argc > 2 ? strtol(argv[2], NULL, 10) : 1;
    void *fill = NULL, *p = NULL;
    cudaMalloc(&fill, 40 << 20);
    long failed_a = 0, failed_b = 0;
    for (long i = 0; i < a; i++) failed_a += try_a(&p);
    for (long i = 0; i < b; i++) failed_b += try_b(&p);
    printf("failed a %ld b %ld\n", failed_a, failed_b);
    return 0;
}
