/* t_dl_weak.c -- a program without CUDA that tests for it the usual ways:
 * weak references, dlsym on its own handle and on RTLD_DEFAULT. With an
 * argument it then loads libt_dl_rt.so (which links the CUDA runtime) with
 * dlopen and allocates through it. */
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>

typedef int cudaError_t;
extern cudaError_t cudaMalloc(void **p, size_t n) __attribute__((weak));
extern int cuMemAlloc_v2(unsigned long long *p, size_t n) __attribute__((weak));

static void lookups(const char *when) {
    void *self = dlopen(NULL, RTLD_NOW);
    void *p = dlsym(self, "cudaMalloc");
    const char *e = dlerror();
    printf("%s: dlsym(self, cudaMalloc) %s, dlerror %s\n", when, p ? "found" : "NULL", e ? e : "(none)");
    p = dlsym(RTLD_DEFAULT, "cuMemAlloc_v2");
    e = dlerror();
    printf("%s: dlsym(RTLD_DEFAULT, cuMemAlloc_v2) %s, dlerror %s\n", when, p ? "found" : "NULL", e ? e : "(none)");
}

int main(int argc, char **argv) {
    printf("cudaMalloc: %s\n", cudaMalloc ? "GPU path" : "CPU path");
    printf("cuMemAlloc_v2: %s\n", cuMemAlloc_v2 ? "GPU path" : "CPU path");
    lookups("start");
    void *z = dlopen("libm.so.6", RTLD_NOW);
    lookups(z ? "after libm" : "no libm");
    if (argc < 2) return 0;
    void *rt = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!rt) { printf("dlopen: %s\n", dlerror()); return 2; }
    int (*alloc)(size_t) = (int (*)(size_t))dlsym(rt, "rt_alloc");
    printf("rt_alloc(3 MiB) -> %d\n", alloc(3 << 20));
    return 0;
}
