/* t_driver.c -- route 1: a program linked with -lcuda calls the driver's
 * exports directly. Known answers are checked by tests/run_tests.py. */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(call) do { CUresult r_ = (call); if (r_ != CUDA_SUCCESS) { \
    printf("%s failed: %d\n", #call, (int)r_); exit(1); } } while (0)

static CUdeviceptr alloc_weights(size_t n) {
    CUdeviceptr p;
    CHECK(cuMemAlloc(&p, n));
    return p;
}

static CUdeviceptr alloc_activations(size_t n) {
    CUdeviceptr p;
    CHECK(cuMemAlloc(&p, n));
    return p;
}

static CUdeviceptr alloc_image(size_t *pitch) {
    CUdeviceptr p;
    CHECK(cuMemAllocPitch(&p, pitch, 1000, 10, 4));
    return p;
}

static CUdeviceptr alloc_shared(void) {
    CUdeviceptr p;
    CHECK(cuMemAllocManaged(&p, 4096, CU_MEM_ATTACH_GLOBAL));
    return p;
}

static CUdeviceptr alloc_stream(size_t n) {
    CUdeviceptr p;
    CHECK(cuMemAllocAsync(&p, n, 0));
    return p;
}

static void *alloc_staging(size_t n) {
    void *p;
    CHECK(cuMemAllocHost(&p, n));
    return p;
}

int main(void) {
    CUcontext ctx;
    CHECK(cuInit(0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, 0));
    CHECK(cuCtxSetCurrent(ctx));
    CUdeviceptr w = alloc_weights(3 << 20);
    CUdeviceptr a1 = alloc_activations(1 << 20);
    CUdeviceptr a2 = alloc_activations(1 << 20);
    CHECK(cuMemFree(a1));
    size_t pitch = 0;
    CUdeviceptr img = alloc_image(&pitch);
    CUdeviceptr m = alloc_shared();
    CUdeviceptr s1 = alloc_stream(65536);
    CUdeviceptr s2 = alloc_stream(65536);
    CHECK(cuMemFreeAsync(s2, 0));
    void *h1 = alloc_staging(8192);
    void *h2;
    CHECK(cuMemHostAlloc(&h2, 4096, 0));
    CHECK(cuMemFreeHost(h2));
    /* A free of a pointer the driver never handed out: its error must come
     * back unchanged. */
    CUresult bad = cuMemFree((CUdeviceptr)0xdead000);
    printf("pitch %zu\n", pitch);
    printf("bad free -> %d\n", (int)bad);
    printf("addresses %llx %llx %llx %llx %llx %s\n", (unsigned long long)w,
           (unsigned long long)a2, (unsigned long long)img, (unsigned long long)m,
           (unsigned long long)s1, h1 ? "host" : "none");
    return 0;
}
