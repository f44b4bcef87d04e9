/* t_arrays.c -- CUDA arrays and memory opened from another process (IPC):
 * arrays count as this process's device memory, IPC mappings apart.
 *
 *   t_arrays             arrays made and one freed, an IPC mapping opened
 *   t_arrays ipc-twice   one handle opened twice (one mapping, the same
 *                        pointer) and closed twice (gone: a third close
 *                        fails); opened twice again and closed once: one
 *                        mapping left open */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call) do { cudaError_t r_ = (call); if (r_ != cudaSuccess) { \
    printf("%s failed: %d\n", #call, (int)r_); exit(1); } } while (0)

static cudaArray_t image_array(void) {
    struct cudaChannelFormatDesc f = {32, 0, 0, 0, cudaChannelFormatKindFloat};
    cudaArray_t a;
    CHECK(cudaMallocArray(&a, &f, 256, 64, 0));             /* 256 x 64 x 4 bytes */
    return a;
}

static cudaArray_t volume_array(void) {
    struct cudaChannelFormatDesc u = {8, 8, 8, 8, cudaChannelFormatKindUnsigned};
    struct cudaExtent e = {16, 16, 4};
    cudaArray_t a;
    CHECK(cudaMalloc3DArray(&a, &u, e, 0));                 /* 16 x 16 x 4 x 4 bytes */
    return a;
}

static cudaMipmappedArray_t texture_pyramid(void) {
    struct cudaChannelFormatDesc f = {32, 0, 0, 0, cudaChannelFormatKindFloat};
    struct cudaExtent e = {64, 64, 0};
    cudaMipmappedArray_t m;
    CHECK(cudaMallocMipmappedArray(&m, &f, e, 3, 0));       /* (64*64 + 32*32 + 16*16) x 4 bytes */
    return m;
}

static void *open_peer_buffer(cudaIpcMemHandle_t h) {
    void *p = NULL;
    CHECK(cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess));
    return p;
}

static int ipc_twice(void) {
    void *shared;
    CHECK(cudaMalloc(&shared, 1 << 20));
    cudaIpcMemHandle_t h;
    CHECK(cudaIpcGetMemHandle(&h, shared));
    void *a = open_peer_buffer(h), *b = open_peer_buffer(h);
    printf("the same pointer %d\n", a == b);
    CHECK(cudaIpcCloseMemHandle(a));
    CHECK(cudaIpcCloseMemHandle(b));
    printf("a third close -> %d\n", (int)cudaIpcCloseMemHandle(a));
    void *c = open_peer_buffer(h), *d = open_peer_buffer(h);
    printf("the same pointer %d\n", c == d);
    CHECK(cudaIpcCloseMemHandle(d));   /* c stays open */
    CHECK(cudaFree(shared));
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "ipc-twice") == 0) return ipc_twice();
    image_array();
    cudaArray_t v = volume_array();
    texture_pyramid();
    CHECK(cudaFreeArray(v));
    void *shared;
    CHECK(cudaMalloc(&shared, 1 << 20));
    cudaIpcMemHandle_t h;
    CHECK(cudaIpcGetMemHandle(&h, shared));
    void *peer = open_peer_buffer(h);
    printf("opened %s\n", peer ? "yes" : "no");
    printf("bad array free -> %d\n", (int)cudaFreeArray((cudaArray_t)0x1234));
    return 0;
}
