/* t_torchalloc.c -- a PyTorch CUDAPluggableAllocator's two functions
 * (torch.cuda.memory.CUDAPluggableAllocator(path, "t_malloc", "t_free")):
 * each tensor its own cudaMalloc, each free a cudaFree. cudaMalloc and
 * cudaFree are left to the runtime PyTorch has loaded, as a program's own
 * allocator built against CUDA finds them. */
#include <stddef.h>

int cudaMalloc(void **p, size_t n);
int cudaFree(void *p);

void *t_malloc(size_t size, int device, void *stream) {
    void *p = NULL;
    return cudaMalloc(&p, size) == 0 ? p : NULL;
}

void t_free(void *p, size_t size, int device, void *stream) { cudaFree(p); }
