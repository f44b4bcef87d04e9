/* t_real_cudart.c -- the toolkit's real runtime with no driver: every call
 * must answer exactly as it does without vramtrace. */
#include <cuda_runtime_api.h>
#include <stdio.h>

int main(void) {
    int n = -1;
    cudaError_t r = cudaGetDeviceCount(&n);
    printf("cudaGetDeviceCount -> %d (%s) n=%d\n", (int)r, cudaGetErrorString(r), n);
    void *p = (void *)0x1;
    r = cudaMalloc(&p, 1 << 20);
    printf("cudaMalloc -> %d (%s) p=%p\n", (int)r, cudaGetErrorString(r), p);
    r = cudaFree(NULL);
    printf("cudaFree(NULL) -> %d\n", (int)r);
    r = cudaMallocHost(&p, 4096);
    printf("cudaMallocHost -> %d\n", (int)r);
    size_t f = 0, t = 0;
    r = cudaMemGetInfo(&f, &t);
    printf("cudaMemGetInfo -> %d free=%zu total=%zu\n", (int)r, f, t);
    r = cudaMallocAsync(&p, 4096, 0);
    printf("cudaMallocAsync -> %d\n", (int)r);
    return r == cudaSuccess ? 0 : 4;
}
