/* t_deepbind_cu.c -- a plugin linked with -lcuda that t_deepbind loads
 * with and without RTLD_DEEPBIND. Its references reach the driver through
 * each kind of slot: a call (a PLT slot), a pointer taken in code (a GOT
 * slot) and one kept in read-only data (an absolute relocation). 3 MiB and
 * 2 MiB stay, 1 MiB is freed. */
#include <cuda.h>
#include <stdio.h>

static CUresult (*const alloc_kept)(CUdeviceptr *, size_t) = cuMemAlloc;

int cu_plugin(void) {
    CUcontext ctx;
    CUdeviceptr a, b, c;
    if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0) || cuCtxSetCurrent(ctx)) return 1;
    CUresult (*volatile release)(CUdeviceptr) = cuMemFree;
    int r1 = cuMemAlloc(&a, 3 << 20); /* the call */
    int r2 = cuMemAlloc(&b, 1 << 20);
    int r3 = release(b);              /* the pointer taken in code */
    int r4 = alloc_kept(&c, 2 << 20); /* the pointer kept in data */
    printf("cu_plugin: %d %d %d %d\n", r1, r2, r3, r4);
    return r1 || r2 || r3 || r4;
}
