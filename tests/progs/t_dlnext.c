/* t_dlnext.c -- dlsym(RTLD_NEXT) from the executable, which links no CUDA
 * library: libcuda is dlopened RTLD_LOCAL (argv[1] "local") or RTLD_GLOBAL
 * ("global"). The executable's next objects are the global scope after it;
 * a name only vramtrace defines there (cudaMalloc, and cuMemAlloc_v2 while
 * libcuda is local) must not be found. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    int global = argc > 1 && strcmp(argv[1], "global") == 0;
    void *h = dlopen("libcuda.so.1", RTLD_NOW | (global ? RTLD_GLOBAL : RTLD_LOCAL));
    printf("libcuda %s\n", h ? "loaded" : "absent");
    const char *names[] = {"cudaMalloc", "cuMemAlloc_v2", "cuMemFree_v2"};
    for (int i = 0; i < 3; i++) {
        void *n = dlsym(RTLD_NEXT, names[i]);
        const char *e = dlerror();
        printf("RTLD_NEXT %s: %s, %s\n", names[i], n ? "found" : "NULL", e ? "an error" : "no error");
    }
    typedef int (*alloc_fn)(unsigned long long *, size_t);
    alloc_fn a = (alloc_fn)dlsym(RTLD_NEXT, "cuMemAlloc_v2");
    unsigned long long p = 0;
    if (a) printf("cuMemAlloc_v2 4096 -> %d\n", a(&p, 4096));
    return 0;
}
