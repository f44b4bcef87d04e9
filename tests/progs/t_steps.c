/* t_steps.c -- step boundaries (vramtrace_step) between known events,
 * found through vramtrace_load as a program would.
 *
 *   a (1 MiB), step 1, b (2 MiB), free a, step 2, step 3, c (4096 bytes)
 *
 * so the events are alloc a, alloc b, free a, alloc c and the steps start
 * at events 1, 3 and 3; then argv[1] more steps (none by default) with
 * nothing between them. Prints what each vt.step() returned. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

#include "../../include/vramtrace.h"

int main(int argc, char **argv) {
    struct vramtrace_api vt;
    vramtrace_load(&vt);
    long more = argc > 1 ? strtol(argv[1], NULL, 10) : 0;
    void *a = NULL, *b = NULL, *c = NULL;
    cudaMalloc(&a, 1 << 20);
    int s1 = vt.step();
    cudaMalloc(&b, 2 << 20);
    cudaFree(a);
    int s2 = vt.step();
    int s3 = vt.step();
    cudaMalloc(&c, 4096);
    int last = s3;
    for (long i = 0; i < more; i++) last = vt.step();
    printf("steps %d %d %d last %d\n", s1, s2, s3, last);
    cudaFree(b);
    cudaFree(c);
    return 0;
}
