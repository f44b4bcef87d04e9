/* t_deepleak.c -- leaks N allocations of 4 KiB, each from its own stack
 * (30 levels of two functions, chosen by the bits of the allocation's
 * number): a leak report of N entries of 30-odd frames each, for
 * tests/integration/test_leaklines.py. */
#include <cuda.h>
#include <stdlib.h>

#include "primary_ctx.h"

static int down_b(int depth, unsigned k);

__attribute__((noinline)) static int down_a(int depth, unsigned k) {
    if (depth == 0) {
        CUdeviceptr p;
        return (int)cuMemAlloc(&p, 4096);
    }
    return ((k >> (depth % 10)) & 1 ? down_b(depth - 1, k) : down_a(depth - 1, k)) + 0 * depth;
}

__attribute__((noinline)) static int down_b(int depth, unsigned k) {
    if (depth == 0) {
        CUdeviceptr p;
        return (int)cuMemAlloc(&p, 4096);
    }
    return ((k >> (depth % 10)) & 1 ? down_a(depth - 1, k) : down_b(depth - 1, k)) + 0 * depth;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 100;
    use_primary_context(0);
    for (int i = 0; i < n; i++) down_a(30, (unsigned)i);
    return 0;
}
