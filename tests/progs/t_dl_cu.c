/* t_dl_cu.c -- a library linked with the driver that finds the driver's
 * functions through dlsym(RTLD_DEFAULT) and dlsym(RTLD_NEXT), as code in a
 * library loaded RTLD_LOCAL does. */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>

typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*free_fn)(CUdeviceptr);

static void *need(void *handle, const char *how, const char *name) {
    void *p = dlsym(handle, name);
    printf("dlsym(%s, %s): %s\n", how, name, p ? "found" : "missing");
    return p;
}

int cu_lookups(void) {
    cuInit(0);
    alloc_fn by_default = (alloc_fn)need(RTLD_DEFAULT, "RTLD_DEFAULT", "cuMemAlloc_v2");
    alloc_fn by_next = (alloc_fn)need(RTLD_NEXT, "RTLD_NEXT", "cuMemAlloc_v2");
    free_fn free_default = (free_fn)need(RTLD_DEFAULT, "RTLD_DEFAULT", "cuMemFree_v2");
    free_fn free_next = (free_fn)need(RTLD_NEXT, "RTLD_NEXT", "cuMemFree_v2");
    if (!by_default || !by_next || !free_default || !free_next) return 1;
    CUdeviceptr a = 0, b = 0, c = 0;
    printf("alloc by RTLD_DEFAULT -> %d\n", by_default(&a, 1 << 20));
    printf("alloc by RTLD_NEXT -> %d\n", by_next(&b, 2 << 20));
    printf("alloc by RTLD_NEXT -> %d\n", by_next(&c, 4096));
    printf("free by RTLD_DEFAULT -> %d\n", free_default(c));
    printf("free by RTLD_NEXT of an unknown pointer -> %d\n", free_next(12345));
    return a && b ? 0 : 1;
}
