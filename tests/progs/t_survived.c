/* t_survived.c -- N failures of N distinct requests from one call site
 * and one of a pitched allocation, while 600 MiB are held; then the 600
 * MiB freed and each request asked again, succeeding (the exit summary's
 * count of failures got past; tests/integration/test_host.py). Run on a
 * GPU of 1 GiB. Prints ok, or exits with the step that went otherwise. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
static cudaError_t ask(void **p, size_t n) { return cudaMalloc(p, n); }
static cudaError_t askp(void **p, size_t *pitch, size_t w, size_t h) { return cudaMallocPitch(p, pitch, w, h); }
int main(int argc, char **argv) {
    int n = atoi(argv[1]);
    void *hold, *p; size_t pitch;
    cudaMalloc(&hold, (size_t)600 << 20);
    for (int i = 0; i < n; i++) if (ask(&p, ((size_t)500 << 20) + (size_t)i * 4096) == cudaSuccess) return 1;
    if (askp(&p, &pitch, 1000, (size_t)500 << 10) == cudaSuccess) return 2;
    cudaFree(hold);
    for (int i = 0; i < n; i++) { if (ask(&p, ((size_t)500 << 20) + (size_t)i * 4096) != cudaSuccess) return 3; cudaFree(p); }
    if (askp(&p, &pitch, 1000, (size_t)500 << 10) != cudaSuccess) return 4;
    printf("ok\n");
    return 0;
}
