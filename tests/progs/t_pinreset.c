/* t_pinreset.c -- pinned host memory left unfreed, with or without a
 * device reset that destroys it.
 *
 *   t_pinreset        takes and frees 4 KiB of device memory
 *   t_pinreset leak   the same, then pinned_cache keeps 4 MiB of pinned
 *                     host memory (cudaMallocHost) to the exit
 *   t_pinreset reset  the same as leak, then cudaDeviceReset(), which
 *                     destroys the pinned memory unfreed
 * Prints nothing; exits 0. */
#include <cuda_runtime_api.h>
#include <string.h>

static void *pinned_cache(size_t n) {
    void *p = NULL;
    if (cudaMallocHost(&p, n) != cudaSuccess) return NULL;   /* kept */
    return p;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "none";
    void *q = NULL;
    if (cudaMalloc(&q, 4096) != cudaSuccess || cudaFree(q) != cudaSuccess) return 1;
    if (strcmp(mode, "none") != 0 && !pinned_cache(4 << 20)) return 1;
    if (strcmp(mode, "reset") == 0 && cudaDeviceReset() != cudaSuccess) return 1;
    return 0;
}
