/* t_poolkeep.c -- a stream-ordered pool that keeps what it was given back:
 * the device's default pool, its release threshold set to keep all, takes
 * 4 x 1 GiB (cudaMallocAsync) and gets them back (cudaFreeAsync); then a
 * cudaMalloc of 5 GiB fails on an 8 GiB device, the pool's 4 GiB reserved
 * and none of it in use. Prints the request's status.
 *
 * With "held": it takes 5 x 1 GiB and gets 4 back, so that the one it
 * keeps (1 GiB, all the tracked memory) freed would leave too little for
 * the 5 GiB while the pool's 4 GiB unused trimmed would not. */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static cudaError_t too_big(void **p, size_t n) {
    return cudaMalloc(p, n);
}

static cudaError_t keep_one(void **p, size_t n, cudaStream_t s) {
    return cudaMallocAsync(p, n, s);
}

int main(int argc, char **argv) {
    int held = argc > 1 && strcmp(argv[1], "held") == 0;
    cudaMemPool_t pool;
    if (cudaDeviceGetDefaultMemPool(&pool, 0) != cudaSuccess) return 2;
    uint64_t keep = UINT64_MAX;
    if (cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep) != cudaSuccess) return 2;
    void *p[4], *kept = NULL;
    for (int i = 0; i < 4; i++)
        if (cudaMallocAsync(&p[i], (size_t)1 << 30, 0) != cudaSuccess) return 2;
    if (held && keep_one(&kept, (size_t)1 << 30, 0) != cudaSuccess) return 2;
    for (int i = 0; i < 4; i++) cudaFreeAsync(p[i], 0);
    cudaStreamSynchronize(0);
    void *big = NULL;
    printf("5 GiB: %d\n", (int)too_big(&big, (size_t)5 << 30));
    return 0;
}
