/* t_pastsite.c -- a pitched allocation or an array that fails, then
 * another of a different size from another function that succeeds, and
 * the program ends of the first failure (status 1): nothing got past
 * (tests/integration/test_host.py, test_cli.py). Run on a GPU of 1 GiB.
 *
 *   t_pastsite pitched   4 GiB of rows refused, then 64 x 16 made
 *   t_pastsite array     a 2 GiB array refused, then one of 16 x 16 made
 *   t_pastsite late      0.2 s later, 4 GiB of rows refused (a second
 *                        rank that fails after the first) */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const struct cudaChannelFormatDesc u8 = {8, 0, 0, 0, cudaChannelFormatKindUnsigned};

static cudaError_t big_rows(void) {
    void *p;
    size_t pitch;
    return cudaMallocPitch(&p, &pitch, 4096, (size_t)1 << 20);
}

static cudaError_t small_rows(void) {
    void *p;
    size_t pitch;
    return cudaMallocPitch(&p, &pitch, 64, 16);
}

static cudaError_t big_array(void) {
    cudaArray_t a;
    return cudaMallocArray(&a, &u8, 65536, 32768, 0);
}

static cudaError_t small_array(void) {
    cudaArray_t a;
    return cudaMallocArray(&a, &u8, 16, 16, 0);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    if (strcmp(mode, "late") == 0) {
        usleep(200000);
        printf("big rows -> %d\n", (int)big_rows());
        return 1;
    }
    int array = strcmp(mode, "array") == 0;
    printf("big -> %d\n", (int)(array ? big_array() : big_rows()));
    printf("small -> %d\n", (int)(array ? small_array() : small_rows()));
    return 1;
}
