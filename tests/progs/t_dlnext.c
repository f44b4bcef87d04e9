/* t_dlnext.c -- dlsym(RTLD_NEXT) from the executable, which links no CUDA
 * library, and from a library it links (libt_nextlib.so): libcuda is
 * dlopened RTLD_LOCAL (argv[1] "local") or RTLD_GLOBAL ("global"). The
 * next objects are the global scope after the caller; a name only
 * vramtrace defines there (cudaMalloc, and cuMemAlloc_v2 while libcuda is
 * local) must not be found, and one libcuda defines is found (and, under
 * vramtrace, tracked: its calls below are recorded). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

void *t_lib_next(const char *name);

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
    for (int i = 0; i < 3; i++) {
        void *n = t_lib_next(names[i]);
        const char *e = dlerror();
        printf("library's RTLD_NEXT %s: %s, %s\n", names[i], n ? "found" : "NULL", e ? "an error" : "no error");
    }
    typedef int (*alloc_fn)(unsigned long long *, size_t);
    alloc_fn a = (alloc_fn)dlsym(RTLD_NEXT, "cuMemAlloc_v2"), b = (alloc_fn)t_lib_next("cuMemAlloc_v2");
    unsigned long long p = 0;
    if (a) printf("cuMemAlloc_v2 4096 -> %d\n", a(&p, 4096));
    if (b) printf("library's cuMemAlloc_v2 8192 -> %d\n", b(&p, 8192));
    return 0;
}
