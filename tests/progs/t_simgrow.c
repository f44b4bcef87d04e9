/* t_simgrow.c -- a buffer that grows by 1 MiB every step, each step's
 * larger copy made before the smaller one is freed (as torch.cat onto a
 * buffer does): run on a simulated GPU of 1 GiB, it must grow until the
 * two copies no longer fit in the device's capacity, never fail earlier
 * for the simulator's address space, which the sizes, all different,
 * walk through many times over (tests/integration/test_simgpu.py). Then
 * the whole capacity in one allocation fits, and a byte more does not. */
#include <cuda.h>
#include <stdio.h>

#include "primary_ctx.h"

#define MiB ((size_t)1 << 20)

int main(void) {
    use_primary_context(0);
    CUdeviceptr prev = 0, next = 0;
    size_t prev_size = 0, overlaps = 0, steps = 0, walked = 0;
    CUresult r;
    for (;;) {
        size_t size = prev_size + MiB;
        r = cuMemAlloc(&next, size);
        if (r != CUDA_SUCCESS) break;
        /* The new copy must not lie over the live one it copies. */
        if (prev && next < prev + prev_size && prev < next + size) overlaps++;
        cuMemsetD8(next + size - 1, 1, 1);
        if (prev) cuMemFree(prev);
        prev = next, prev_size = size, steps++, walked += size;
    }
    size_t free_bytes = 0, total = 0;
    cuMemGetInfo(&free_bytes, &total);
    printf("grew to %zu bytes in %zu steps (%zu bytes asked for in all), %zu overlaps\n",
           prev_size, steps, walked, overlaps);
    printf("%zu bytes -> %d with %zu of %zu bytes free\n", prev_size + MiB, (int)r,
           free_bytes, total);
    cuMemFree(prev);
    r = cuMemAlloc(&next, total);
    printf("whole device: %zu bytes -> %d\n", total, (int)r);
    if (r == CUDA_SUCCESS) cuMemFree(next);
    printf("one byte more: %zu bytes -> %d\n", total + 1, (int)cuMemAlloc(&next, total + 1));
    return 0;
}
