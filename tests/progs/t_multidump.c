/* t_multidump.c -- a process that writes two named dumps and frees, before
 * it exits, what it allocated between them: argv[1] MiB kept to the end,
 * twice that made after the first dump and freed after the second
 * (test_cli.py: the report of several such processes compares each at
 * its exit dump). */
#include <cuda_runtime_api.h>
#include <stdlib.h>

#include "../../include/vramtrace.h"

static void *keep(size_t mib) {
    void *p = NULL;
    cudaMalloc(&p, mib << 20);
    return p;
}

static void *grow(size_t mib) {
    void *p = NULL;
    cudaMalloc(&p, mib << 20);
    return p;
}

int main(int argc, char **argv) {
    struct vramtrace_api vt;
    vramtrace_load(&vt);
    size_t mib = argc > 1 ? (size_t)atoi(argv[1]) : 1;
    void *a = keep(mib);
    vt.dump("one", 0, 0);
    void *b = grow(2 * mib);
    vt.dump("two", 0, 0);
    cudaFree(b);
    (void)a;
    return 0;
}
