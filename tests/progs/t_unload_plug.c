/* t_unload_plug.c -- a plugin that allocates device memory, built twice
 * (libt_unload_a.so, libt_unload_b.so) with the same layout, so that the
 * second loads where the first was when the first has been unloaded.
 * PLUG is a or b. */
#include <cuda.h>

#define CAT_(x, y) x##y
#define CAT(x, y) CAT_(x, y)
#define NAME(f) CAT(CAT(plug_, PLUG), CAT(_, f))

__attribute__((noinline)) static CUdeviceptr NAME(inner)(size_t n) {
    CUdeviceptr p = 0;
    cuMemAlloc(&p, n); /* LINE:alloc */
    return p;
}

CUdeviceptr NAME(alloc)(size_t n) {
    CUdeviceptr p = NAME(inner)(n); /* LINE:inner */
    __asm__ volatile("" ::: "memory");
    return p;
}
