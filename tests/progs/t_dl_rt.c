/* t_dl_rt.c -- a library linked with the CUDA runtime, loaded late. */
#include <cuda_runtime_api.h>

int rt_alloc(size_t n) {
    void *p = NULL;
    return cudaMalloc(&p, n);
}
