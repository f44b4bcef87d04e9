/* t_runtime.c -- route 3: the CUDA runtime (shared or static stand-in)
 * reaching the driver through cuGetProcAddress. */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

cudaError_t cudaMallocAsync_ptsz(void **p, size_t n, cudaStream_t s);

#define CHECK(call) do { cudaError_t r_ = (call); if (r_ != cudaSuccess) { \
    printf("%s failed: %d\n", #call, (int)r_); exit(1); } } while (0)

static void *load_model(size_t n) {
    void *p;
    CHECK(cudaMalloc(&p, n));
    return p;
}

static void *scratch(size_t n) {
    void *p;
    CHECK(cudaMalloc(&p, n));
    return p;
}

static void *stream_buffer(size_t n, int per_thread) {
    void *p;
    if (per_thread) CHECK(cudaMallocAsync_ptsz(&p, n, 0));
    else CHECK(cudaMallocAsync(&p, n, 0));
    return p;
}

static int driver_calls(const char *name) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    int (*calls)(const char *) = h ? (int (*)(const char *))dlsym(h, "simgpu_calls") : NULL;
    return calls ? calls(name) : -1;
}

int main(void) {
    CHECK(cudaSetDevice(0));
    void *model = load_model(2 << 20);
    void *tmp = scratch(1 << 20);
    CHECK(cudaFree(tmp));
    void *s1 = stream_buffer(4096, 0);
    void *s2 = stream_buffer(8192, 1);
    void *m;
    CHECK(cudaMallocManaged(&m, 16384, cudaMemAttachGlobal));
    void *img;
    size_t pitch;
    CHECK(cudaMallocPitch(&img, &pitch, 100, 4));
    void *pinned, *pinned2;
    CHECK(cudaMallocHost(&pinned, 4096));
    CHECK(cudaHostAlloc(&pinned2, 4096, 0));
    CHECK(cudaFreeHost(pinned2));
    size_t f, t;
    CHECK(cudaMemGetInfo(&f, &t));
    printf("pitch %zu free %zu total %zu\n", pitch, f, t);
    printf("driver calls: cuMemAllocAsync=%d cuMemAllocAsync_ptsz=%d cuMemAlloc_v2=%d\n",
           driver_calls("cuMemAllocAsync"), driver_calls("cuMemAllocAsync_ptsz"),
           driver_calls("cuMemAlloc_v2"));
    printf("bad free -> %d\n", (int)cudaFree((void *)0xdead000));
    printf("null free -> %d\n", (int)cudaFree(NULL)); /* frees nothing: not an unknown pointer */
    printf("live %p %p %p %p %p %s\n", model, s1, s2, m, img, pinned ? "pinned" : "none");
    return 0;
}
