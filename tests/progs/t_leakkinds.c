/* t_leakkinds.c -- memory of each kind left at exit, for the leak check's
 * entries, which name the kind (tests/integration/test_leaklines.py).
 *
 *   t_leakkinds all     leaves 1 MiB of cudaMalloc, 512 KiB of
 *                       cudaMallocManaged, 256 KiB of cudaMallocHost,
 *                       128 KiB registered by cudaHostRegister, and an IPC
 *                       mapping of 64 KiB open (the memory it maps freed
 *                       by its owner, as another process frees its own)
 *   t_leakkinds ipc     frees all but the IPC mapping
 *   t_leakkinds reset   frees all, then cudaDeviceReset unmaps the mapping
 *                       left open */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call) do { cudaError_t r_ = (call); if (r_ != cudaSuccess) { \
    printf("%s failed: %d\n", #call, (int)r_); exit(1); } } while (0)

/* Opens an IPC handle of 64 KiB of "another process's" memory and frees
 * that memory, as its owner would: the mapping stays. */
static void *open_peer_buffer(void) {
    void *theirs, *p = NULL;
    CHECK(cudaMalloc(&theirs, 64 << 10));
    cudaIpcMemHandle_t h;
    CHECK(cudaIpcGetMemHandle(&h, theirs));
    CHECK(cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess)); /* LINE:ipc */
    CHECK(cudaFree(theirs));
    return p;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "all";
    void *dev, *managed, *pinned, *mine = malloc(128 << 10);
    CHECK(cudaMalloc(&dev, 1 << 20));                              /* LINE:device */
    CHECK(cudaMallocManaged(&managed, 512 << 10, cudaMemAttachGlobal)); /* LINE:managed */
    CHECK(cudaMallocHost(&pinned, 256 << 10));                      /* LINE:pinned */
    CHECK(cudaHostRegister(mine, 128 << 10, cudaHostRegisterDefault)); /* LINE:registered */
    open_peer_buffer();
    if (strcmp(mode, "all") != 0) {
        CHECK(cudaFree(dev));
        CHECK(cudaFree(managed));
        CHECK(cudaFreeHost(pinned));
        CHECK(cudaHostUnregister(mine));
    }
    if (strcmp(mode, "reset") == 0) CHECK(cudaDeviceReset());
    printf("%s done\n", mode);
    return 0;
}
