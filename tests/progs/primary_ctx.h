/* primary_ctx.h -- the driver set up as a program that uses the driver
 * API alone does: initialised, device `ordinal`'s primary context retained
 * and made current. For the test programs (tests/progs). */
#ifndef VT_TEST_PRIMARY_CTX_H
#define VT_TEST_PRIMARY_CTX_H

#include <cuda.h>

static inline void use_primary_context(int ordinal) {
    CUdevice d;
    CUcontext c;
    cuInit(0);
    cuDeviceGet(&d, ordinal);
    cuDevicePrimaryCtxRetain(&c, d);
    cuCtxSetCurrent(c);
}

#endif
