/* t_simlimits.c -- what the simulated GPU answers to sizes no device holds
 * and to a memory pool destroyed with an allocation out, as a GPU does.
 *
 * A size is a product or a rounding of the program's arguments, which can
 * pass 2^64: the driver answers out of memory, never an allocation of the
 * wrapped-around remainder. A pool destroyed while it has an allocation
 * out is "released automatically once there are no more outstanding
 * allocations" (cuda.h, cuMemPoolDestroy): its reserved memory goes back
 * to the device at that allocation's free. Each line it prints is checked
 * exactly; the device's used bytes are cuMemGetInfo's. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>

#define MiB ((size_t)1 << 20)

static size_t used_bytes(void) {
    size_t f = 0, t = 0;
    cuMemGetInfo(&f, &t);
    return t - f;
}

static size_t used_mib(void) { return used_bytes() / MiB; }

static void too_big(void) {
    void *p = NULL;
    size_t pitch = 0, dp = 0;
    CUdeviceptr d = 0;
    struct cudaChannelFormatDesc u8 = {8, 0, 0, 0, cudaChannelFormatKindUnsigned};
    cudaArray_t a = NULL;
    CUarray ca = NULL;
    CUmipmappedArray m = NULL;
    printf("cudaMallocPitch 2^33 x 2^33 -> %d\n", (int)cudaMallocPitch(&p, &pitch, (size_t)1 << 33, (size_t)1 << 33));
    printf("cudaMallocPitch SIZE_MAX x 2 -> %d\n", (int)cudaMallocPitch(&p, &pitch, SIZE_MAX, 2));
    printf("cuMemAllocPitch 2^40 x 2^30 -> %d\n", (int)cuMemAllocPitch(&d, &dp, (size_t)1 << 40, (size_t)1 << 30, 4));
    printf("cudaMallocAsync SIZE_MAX -> %d\n", (int)cudaMallocAsync(&p, SIZE_MAX, 0));
    printf("cuMemAllocAsync SIZE_MAX - 100 -> %d\n", (int)cuMemAllocAsync(&d, SIZE_MAX - 100, 0));
    struct cudaExtent e = {(size_t)1 << 22, (size_t)1 << 22, (size_t)1 << 22};
    printf("cudaMalloc3DArray 2^22 x 2^22 x 2^22 -> %d\n", (int)cudaMalloc3DArray(&a, &u8, e, 0));
    CUDA_ARRAY_DESCRIPTOR ad = {(size_t)1 << 40, (size_t)1 << 30, CU_AD_FORMAT_FLOAT, 4};
    printf("cuArrayCreate 2^40 x 2^30 x 16 bytes -> %d\n", (int)cuArrayCreate(&ca, &ad));
    CUDA_ARRAY3D_DESCRIPTOR md = {(size_t)1 << 32, (size_t)1 << 32, 0, CU_AD_FORMAT_FLOAT, 1, 0};
    printf("cuMipmappedArrayCreate 2^32 x 2^32 x 4 bytes -> %d\n", (int)cuMipmappedArrayCreate(&m, &md, 2));
    printf("cuMemAddressReserve 2^63 -> %d\n", (int)cuMemAddressReserve(&d, (size_t)1 << 63, 0, 0, 0));
    cudaMemPool_t host;
    struct cudaMemPoolProps hp = {0};
    hp.allocType = cudaMemAllocationTypePinned;
    hp.location.type = cudaMemLocationTypeHost;
    cudaMemPoolCreate(&host, &hp);
    printf("cudaMallocFromPoolAsync SIZE_MAX from a host pool -> %d\n",
           (int)cudaMallocFromPoolAsync(&p, SIZE_MAX, host, 0));
    cudaMemPoolDestroy(host);
    cudaGetLastError();
    printf("pitched 1000 x 1000 -> %d", (int)cudaMallocPitch(&p, &pitch, 1000, 1000));
    printf(" pitch %zu; used %zu bytes\n", pitch, used_bytes());
    cudaFree(p);
    printf("after the refusals: used %zu bytes\n", used_bytes());
}

/* 200 MiB out and 100 MiB cached of a pool that keeps what it gets back;
 * destroyed, then its allocation freed: through the runtime or the
 * driver. */
static void destroyed_pool(int driver) {
    CUmemoryPool pool;
    CUmemPoolProps pp = {0};
    pp.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    pp.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    pp.location.id = 0;
    cuMemPoolCreate(&pool, &pp);
    cuuint64_t keep = UINT64_MAX;
    cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep);
    CUdeviceptr q1 = 0, q2 = 0;
    cuMemAllocFromPoolAsync(&q1, 200 * MiB, pool, 0);
    cuMemAllocFromPoolAsync(&q2, 100 * MiB, pool, 0);
    cuMemFreeAsync(q2, 0);
    cuStreamSynchronize(0);
    const char *how = driver ? "cuMemPoolDestroy" : "cudaMemPoolDestroy";
    printf("%s: pool reserves 300 MiB: used %zu MiB\n", how, used_mib());
    int r = driver ? (int)cuMemPoolDestroy(pool) : (int)cudaMemPoolDestroy((cudaMemPool_t)pool);
    printf("%s with 200 MiB out -> %d; used %zu MiB\n", how, r, used_mib());
    r = driver ? (int)cuMemFreeAsync(q1, 0) : (int)cudaFree((void *)q1);
    cuStreamSynchronize(0);
    printf("its last allocation freed -> %d; used %zu MiB\n", r, used_mib());
    void *big = NULL;
    printf("1000 MiB -> %d\n", (int)cudaMalloc(&big, 1000 * MiB));
    cudaFree(big);
}

int main(void) {
    cudaFree(0);
    too_big();
    destroyed_pool(0);
    destroyed_pool(1);
    return 0;
}
