/* t_limitinvalid.c -- allocations of 4 MiB with an argument the API
 * refuses whatever the memory (a size off the driver's granularity,
 * properties without a type, a NULL pool, managed flags other than the
 * attach flags, arrays of 0 or 8 channels), each followed by the
 * runtime's last error; then the same allocations with good arguments,
 * too big for 1 MiB. Run on a GPU of 1 MiB and under VRAMTRACE_LIMIT=1M on
 * a larger one, the two outputs must be the same
 * (tests/integration/test_options.py). */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdio.h>

#define MB (1u << 20)

#define R(x)                                                                          \
    do {                                                                              \
        int r_ = (int)(x);                                                            \
        int e_ = (int)cudaPeekAtLastError();                                          \
        printf("%s -> %d, last error %d\n", #x, r_, e_);                              \
        (void)cudaGetLastError();                                                     \
    } while (0)

int main(void) {
    void *p = NULL;
    CUdeviceptr d = 0;
    CUmemGenericAllocationHandle h = 0;
    CUarray a = NULL;
    CUmipmappedArray m = NULL;
    cudaMemPool_t pool = NULL;
    cudaFree(NULL); /* the context */
    cudaDeviceGetDefaultMemPool(&pool, 0);
    CUmemAllocationProp pr = {0};
    pr.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    pr.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    CUmemAllocationProp untyped = pr;
    untyped.type = CU_MEM_ALLOCATION_TYPE_INVALID;
    CUDA_ARRAY_DESCRIPTOR none = {4096, 1024, CU_AD_FORMAT_UNSIGNED_INT8, 0};
    CUDA_ARRAY_DESCRIPTOR eight = {4096, 1024, CU_AD_FORMAT_UNSIGNED_INT8, 8};
    CUDA_ARRAY3D_DESCRIPTOR none3 = {4096, 1024, 0, CU_AD_FORMAT_UNSIGNED_INT8, 0, 0};
    /* Refused for the argument. */
    R(cuMemCreate(&h, 4 * MB + 1, &pr, 0));
    R(cuMemCreate(&h, 4 * MB, &untyped, 0));
    R(cudaMallocFromPoolAsync(&p, 4 * MB, NULL, 0));
    R(cudaMallocManaged(&p, 4 * MB, 0x55));
    R(cuMemAllocManaged(&d, 4 * MB, 0x55));
    R(cuArrayCreate(&a, &none));
    R(cuArrayCreate(&a, &eight));
    R(cuArray3DCreate(&a, &none3));
    R(cuMipmappedArrayCreate(&m, &none3, 2));
    /* Too big for 1 MiB. */
    R(cuMemCreate(&h, 4 * MB, &pr, 0));
    R(cudaMallocFromPoolAsync(&p, 4 * MB, pool, 0));
    R(cudaMallocManaged(&p, 4 * MB, cudaMemAttachHost));
    R(cuMemAllocManaged(&d, 4 * MB, CU_MEM_ATTACH_GLOBAL));
    none.NumChannels = 4;
    R(cuArrayCreate(&a, &none));
    return 0;
}
