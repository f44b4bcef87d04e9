/* t_ranks.c -- holders whose order by stack and by call site differ, and
 * two call sites of equal bytes (the order of every format's holders and
 * what the JSON's --top keeps; tests/integration/test_cli.py):
 *
 *   grab   10 MiB from each of 10 lines: 100 MiB in 10 stacks
 *   one    50 MiB once
 *   zeta   30 MiB, allocated before alpha
 *   alpha  30 MiB */
#include <cuda_runtime_api.h>

#define MiB ((size_t)1 << 20)

__attribute__((noinline)) static void *grab(size_t n) { void *p; cudaMalloc(&p, n); return p; }
__attribute__((noinline)) static void *one(size_t n) { void *p; cudaMalloc(&p, n); return p; }
__attribute__((noinline)) static void *zeta(size_t n) { void *p; cudaMalloc(&p, n); return p; }
__attribute__((noinline)) static void *alpha(size_t n) { void *p; cudaMalloc(&p, n); return p; }

int main(void) {
    grab(10 * MiB);
    grab(10 * MiB);
    grab(10 * MiB);
    grab(10 * MiB);
    grab(10 * MiB);
    grab(10 * MiB);
    grab(10 * MiB);
    grab(10 * MiB);
    grab(10 * MiB);
    grab(10 * MiB);
    one(50 * MiB);
    zeta(30 * MiB);
    alpha(30 * MiB);
    return 0;
}
