/* t_inline.c -- an allocation made in functions the compiler inlined,
 * built with -O2 as a library is (tests/integration/test_inline.py).
 *
 * grab_inner is inlined into grab_outer, which is inlined into pool_fill:
 * the allocation's return address is in pool_fill's code, and each of the
 * three functions has its own frame in a report, its own line. The
 * markers name the lines the test looks for. */
#include <cuda.h>
#include <stdio.h>
#include <string.h>

static inline __attribute__((always_inline)) CUresult grab_inner(size_t bytes) {
    CUdeviceptr p;
    CUresult r = cuMemAlloc_v2(&p, bytes); /* LINE:alloc */
    __asm__ volatile("" : : : "memory");
    return r;
}

static inline __attribute__((always_inline)) CUresult grab_outer(size_t bytes) {
    CUresult r = grab_inner(bytes * 2); /* LINE:inner */
    __asm__ volatile("" : : : "memory");
    return r;
}

__attribute__((noinline)) CUresult pool_fill(size_t bytes) {
    CUresult r = grab_outer(bytes); /* LINE:outer */
    __asm__ volatile("" : : : "memory");
    return r;
}

/* A frame of its own, not inlined: the stack goes on past the inlined
 * ones as before. */
__attribute__((noinline)) int fill_twice(void) {
    int bad = 0;
    for (int i = 0; i < 2; i++) bad |= pool_fill(1000 + (size_t)i) != CUDA_SUCCESS; /* LINE:twice */
    __asm__ volatile("" : : : "memory");
    return bad;
}

int main(int argc, char **argv) {
    (void)argc;
    (void)argv;
    printf("fill -> %d\n", fill_twice());
    return 0;
}
