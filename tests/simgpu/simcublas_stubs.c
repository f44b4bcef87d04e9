/* simcublas_stubs.c -- the cuBLAS entry points PyTorch and cuSOLVER import
 * but a training step never calls. Each answers CUBLAS_STATUS_NOT_SUPPORTED
 * (15 in cublas_api.h; simcublas.c checks the number) without reading its
 * arguments, which is why this file declares them without parameters and
 * does not include the header. The names are in cublas_stubs.def. */
#define BLAS_STUB_EXPORT __attribute__((visibility("default")))
#define S(name) BLAS_STUB_EXPORT int name(void) { return 15; }
#include "cublas_stubs.def"
