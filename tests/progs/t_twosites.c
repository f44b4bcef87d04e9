/* t_twosites.c -- two holders, neither enough alone
 * (tests/integration/test_host.py).
 *
 * t_twosites A B C [D]: allocates A MiB at site_a, B MiB at site_b (and D
 * MiB at site_d), then asks C MiB at main's line; prints the status of
 * the request. */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>

#include "primary_ctx.h"

__attribute__((noinline)) void site_a(CUdeviceptr *p, size_t n) { cuMemAlloc(p, n); }
__attribute__((noinline)) void site_b(CUdeviceptr *p, size_t n) { cuMemAlloc(p, n); }
__attribute__((noinline)) void site_d(CUdeviceptr *p, size_t n) { cuMemAlloc(p, n); }

int main(int argc, char **argv) {
    if (argc < 4) return 2;
    use_primary_context(0);
    size_t mib = 1 << 20;
    CUdeviceptr a, b, x, y;
    site_a(&a, (size_t)atol(argv[1]) * mib);
    site_b(&b, (size_t)atol(argv[2]) * mib);
    if (argc > 4) site_d(&y, (size_t)atol(argv[4]) * mib);
    printf("%d\n", (int)cuMemAlloc(&x, (size_t)atol(argv[3]) * mib));
    return 0;
}
