/* leak_oom.c -- for tests/gpu/run.sh: a CUDA program (nvcc's default static
 * runtime on the GPU machine; the simulated runtime elsewhere) that leaks
 * known buffers and then asks for more than the device has.
 * Prints what it did, for the checks to compare with the dump. */
#include <cuda_runtime_api.h>
#include <stdio.h>

#define MiB ((size_t)1 << 20)

static void *weights(void) { void *p = NULL; cudaMalloc(&p, 1024 * MiB); return p; }
static void *scratch(void) { void *p = NULL; cudaMalloc(&p, 512 * MiB); return p; }
static void *leaked_cache(void) { void *p = NULL; cudaMalloc(&p, 256 * MiB); return p; }

static cudaError_t too_big(size_t n) {
    void *p = NULL;
    return cudaMalloc(&p, n);
}

int main(void) {
    size_t free_b = 0, total = 0;
    weights();
    void *s = scratch();
    leaked_cache();
    cudaFree(s);
    cudaMemGetInfo(&free_b, &total);
    size_t ask = total + 1024 * MiB; /* more than the whole device */
    cudaError_t r = too_big(ask);
    printf("leaked %zu\nrequested %zu\nfree %zu\ntotal %zu\nresult %d\n", (size_t)1280 * MiB, ask, free_b,
           total, (int)r);
    return 0;
}
