/* t_sizewrap.c -- one request whose size, a product or a sum of its
 * arguments, passes 2^64 - 1, through the API named by argv[1]; prints
 * "API -> STATUS". On the simulated GPU each is out of memory (2), as on a
 * GPU; tests/integration/test_sizes.py checks what vramtrace says of it.
 *
 * The sizes wrap around to: 1 MiB (1 MiB by 2^44 + 1 rows, and 1 MiB by 17
 * by 1034834473201: 17 times 1034834473201 is 2^44 + 1), 0 (2^33 by 2^33)
 * and, for a mipmapped array of 2^32 by 2^32 - 1 bytes and a level of a
 * quarter of that, 2^62 - 2^32 - 2^31 (each level fits; their sum does
 * not). The cases ending in -70 are of 70 levels, no sum past 2^64 - 1:
 * a mipmapped array of 2^20 by 2^20 floats, whose levels past the 21st
 * are one element each. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define MiB ((size_t)1 << 20)
#define ROWS (((size_t)1 << 44) + 1)
#define DEEP ((size_t)1034834473201)

int main(int argc, char **argv) {
    const char *api = argc > 1 ? argv[1] : "";
    void *p = NULL;
    size_t pitch = 0;
    CUdeviceptr d = 0;
    struct cudaChannelFormatDesc u8 = {8, 0, 0, 0, cudaChannelFormatKindUnsigned};
    cudaArray_t a = NULL;
    cudaMipmappedArray_t ma = NULL;
    CUarray ca = NULL;
    CUmipmappedArray cm = NULL;
    int r = -1;
    cudaFree(0); /* the context */
    if (strcmp(api, "cudaMallocPitch") == 0) r = cudaMallocPitch(&p, &pitch, MiB, ROWS);
    else if (strcmp(api, "cudaMallocPitch-2^66") == 0) r = cudaMallocPitch(&p, &pitch, (size_t)1 << 33, (size_t)1 << 33);
    else if (strcmp(api, "cuMemAllocPitch") == 0) r = cuMemAllocPitch(&d, &pitch, MiB, ROWS, 4);
    else if (strcmp(api, "cudaMallocArray") == 0) r = cudaMallocArray(&a, &u8, MiB, ROWS, 0);
    else if (strcmp(api, "cudaMalloc3DArray") == 0) {
        struct cudaExtent e = {MiB, 17, DEEP};
        r = cudaMalloc3DArray(&a, &u8, e, 0);
    } else if (strcmp(api, "cudaMallocMipmappedArray") == 0) {
        struct cudaExtent e = {(size_t)1 << 32, ((size_t)1 << 32) - 1, 0};
        r = cudaMallocMipmappedArray(&ma, &u8, e, 2, 0);
    } else if (strcmp(api, "cuArrayCreate") == 0) {
        CUDA_ARRAY_DESCRIPTOR ad = {MiB, ROWS, CU_AD_FORMAT_UNSIGNED_INT8, 1};
        r = cuArrayCreate(&ca, &ad);
    } else if (strcmp(api, "cuArray3DCreate") == 0) {
        CUDA_ARRAY3D_DESCRIPTOR ad = {MiB, 17, DEEP, CU_AD_FORMAT_UNSIGNED_INT8, 1, 0};
        r = cuArray3DCreate(&ca, &ad);
    } else if (strcmp(api, "cuMipmappedArrayCreate") == 0) {
        CUDA_ARRAY3D_DESCRIPTOR ad = {(size_t)1 << 32, ((size_t)1 << 32) - 1, 0, CU_AD_FORMAT_UNSIGNED_INT8, 1, 0};
        r = cuMipmappedArrayCreate(&cm, &ad, 2);
    } else if (strcmp(api, "cuMipmappedArrayCreate-70") == 0) {
        CUDA_ARRAY3D_DESCRIPTOR ad = {MiB, MiB, 0, CU_AD_FORMAT_FLOAT, 1, 0};
        r = cuMipmappedArrayCreate(&cm, &ad, 70);
    } else if (strcmp(api, "cudaMallocMipmappedArray-70") == 0) {
        struct cudaChannelFormatDesc f32 = {32, 0, 0, 0, cudaChannelFormatKindFloat};
        struct cudaExtent e = {MiB, MiB, 0};
        r = cudaMallocMipmappedArray(&ma, &f32, e, 70, 0);
    } else {
        fprintf(stderr, "t_sizewrap: unknown API '%s'\n", api);
        return 2;
    }
    printf("%s -> %d\n", api, r);
    return 0;
}
