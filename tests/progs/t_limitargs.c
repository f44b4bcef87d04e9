/* t_limitargs.c -- what a program sees of an allocation refused for want
 * of memory, and of allocations with arguments the API refuses, each call
 * followed by the runtime's last error: run on a GPU of 1 MiB and under
 * VRAMTRACE_LIMIT=1M on a larger one, the two outputs must be the same
 * (tests/integration/test_options.py). */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdio.h>

#define R(x)                                                                          \
    do {                                                                              \
        int r_ = (int)(x);                                                            \
        int e_ = (int)cudaPeekAtLastError();                                          \
        printf("%s -> %d, last error %d\n", #x, r_, e_);                              \
        (void)cudaGetLastError();                                                     \
    } while (0)

int main(void) {
    void *p = NULL;
    size_t pitch = 0;
    CUdeviceptr d = 0;
    cudaFree(NULL); /* the context */
    /* Too big for 1 MiB. */
    R(cudaMalloc(&p, 2 << 20));
    R(cudaMallocPitch(&p, &pitch, 4096, 1024));
    R(cudaMallocManaged(&p, 2 << 20, cudaMemAttachGlobal));
    R(cudaMallocAsync(&p, 2 << 20, 0));
    struct cudaChannelFormatDesc cd = {32, 0, 0, 0, cudaChannelFormatKindFloat};
    cudaArray_t arr = NULL;
    R(cudaMallocArray(&arr, &cd, 1024, 1024, 0));
    R(cuMemAlloc(&d, 2 << 20));
    /* Arguments the API refuses, whatever the memory. */
    R(cudaMalloc(NULL, 2 << 20));
    R(cudaMallocPitch(&p, NULL, 4096, 1024));
    R(cudaMallocManaged(NULL, 2 << 20, cudaMemAttachGlobal));
    R(cudaMallocAsync(NULL, 2 << 20, 0));
    R(cuMemAlloc(NULL, 2 << 20));
    R(cuMemAllocPitch(&d, &pitch, 4096, 1024, 3));
    R(cuMemAllocPitch(&d, NULL, 4096, 1024, 4));
    R(cuMemAllocFromPoolAsync(&d, 2 << 20, NULL, 0));
    CUmemAllocationProp pr = {0};
    pr.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    pr.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    pr.location.id = 7;
    CUmemGenericAllocationHandle h = 0;
    R(cuMemCreate(&h, 2 << 20, &pr, 0));
    pr.location.id = 0;
    R(cuMemCreate(NULL, 2 << 20, &pr, 0));
    CUarray a = NULL;
    CUDA_ARRAY_DESCRIPTOR ad = {1024, 1024, CU_AD_FORMAT_FLOAT, 1};
    R(cuArrayCreate(NULL, &ad));
    R(cuArrayCreate(&a, &ad));
    return 0;
}
