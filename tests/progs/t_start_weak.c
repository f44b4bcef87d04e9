/* t_start_weak.c -- libt_start_weak.so: weak references to CUDA names, as
 * a library that uses a GPU only when one is there. */
#include <stddef.h>

extern int cudaMalloc(void **p, size_t n) __attribute__((weak));
extern int cuMemAlloc_v2(unsigned long long *p, size_t n) __attribute__((weak));

const char *weak_paths(void) {
    if (cudaMalloc && cuMemAlloc_v2) return "cudaMalloc: GPU path, cuMemAlloc_v2: GPU path";
    if (cudaMalloc) return "cudaMalloc: GPU path, cuMemAlloc_v2: CPU path";
    if (cuMemAlloc_v2) return "cudaMalloc: CPU path, cuMemAlloc_v2: GPU path";
    return "cudaMalloc: CPU path, cuMemAlloc_v2: CPU path";
}
