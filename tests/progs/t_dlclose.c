/* t_dlclose.c -- the driver opened, used, closed and opened again. */
#include <dlfcn.h>
#include <stdio.h>

typedef int (*alloc_fn)(unsigned long long *, size_t);

static unsigned long long grab(const char *when) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) { printf("dlopen: %s\n", dlerror()); return 0; }
    ((int (*)(unsigned))dlsym(h, "cuInit"))(0);
    alloc_fn a = (alloc_fn)dlsym(h, "cuMemAlloc_v2");
    unsigned long long p = 0;
    int r = a(&p, 65536);
    printf("%s: cuMemAlloc_v2 -> %d\n", when, r);
    dlclose(h);
    return p;
}

int main(void) {
    grab("first open");
    grab("second open");
    return 0;
}
