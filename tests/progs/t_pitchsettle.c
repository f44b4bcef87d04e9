/* t_pitchsettle.c -- pitched allocations whose rows the driver pads past a
 * 1 MiB budget (513 bytes wide: a pitch of 1024, 2,048,000 bytes for 2,000
 * rows where 1,026,000 were asked), each followed by the runtime's last
 * error and what the call left in the pointer and pitch; then one that fits.
 * Run on a GPU of 1 MiB and under VRAMTRACE_LIMIT=1M on a larger one, the
 * two outputs must be the same (tests/integration/test_options.py). */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdio.h>

int main(void) {
    void *p = NULL;
    size_t pitch = 0;
    CUdeviceptr d = 0;
    cudaFree(NULL); /* the context */
    int r = (int)cudaMallocPitch(&p, &pitch, 513, 2000);
    int last = (int)cudaGetLastError();
    printf("cudaMallocPitch 513x2000 -> %d, last error %d, pointer %p, pitch %zu\n", r, last, p, pitch);
    r = (int)cuMemAllocPitch(&d, &pitch, 513, 2000, 4);
    last = (int)cudaGetLastError();
    printf("cuMemAllocPitch 513x2000 -> %d, last error %d, pointer %#llx, pitch %zu\n", r, last,
           (unsigned long long)d, pitch);
    r = (int)cudaMallocPitch(&p, &pitch, 512, 2000);
    last = (int)cudaGetLastError();
    printf("cudaMallocPitch 512x2000 -> %d, last error %d, pitch %zu\n", r, last, pitch);
    return 0;
}
