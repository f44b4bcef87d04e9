/* t_dlsym.c -- route 2: dlopen("libcuda.so.1") + dlsym on the handle, and
 * cuGetProcAddress_v2 taken that way, for the v1 and _ptsz variants. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef int (*init_fn)(unsigned int);
typedef int (*alloc_fn)(unsigned long long *, size_t);
typedef int (*alloc_v1_fn)(unsigned int *, unsigned int);
typedef int (*free_fn)(unsigned long long);
typedef int (*async_fn)(unsigned long long *, size_t, void *);
typedef int (*gpa_fn)(const char *, void **, int, unsigned long long, int *);
typedef int (*calls_fn)(const char *);

static void *h;

static void *need(const char *name) {
    void *p = dlsym(h, name);
    if (!p) { printf("dlsym %s: %s\n", name, dlerror()); exit(1); }
    return p;
}

static unsigned long long grab_v2(alloc_fn f, size_t n) {
    unsigned long long p = 0;
    int r = f(&p, n);
    printf("cuMemAlloc_v2(%zu) -> %d\n", n, r);
    return p;
}

static unsigned int grab_v1(alloc_v1_fn f, unsigned int n) {
    unsigned int p = 0;
    int r = f(&p, n);
    printf("cuMemAlloc v1(%u) -> %d\n", n, r);
    return p;
}

static unsigned long long grab_ptsz(async_fn f, size_t n) {
    unsigned long long p = 0;
    int r = f(&p, n, NULL);
    printf("cuMemAllocAsync_ptsz(%zu) -> %d\n", n, r);
    return p;
}

int main(void) {
    h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) { printf("dlopen: %s\n", dlerror()); return 1; }
    ((init_fn)need("cuInit"))(0);
    alloc_fn alloc = (alloc_fn)need("cuMemAlloc_v2");
    free_fn fr = (free_fn)need("cuMemFree_v2");
    gpa_fn gpa = (gpa_fn)need("cuGetProcAddress_v2");
    calls_fn calls = (calls_fn)need("simgpu_calls");

    unsigned long long a = grab_v2(alloc, 1 << 20);
    unsigned long long b = grab_v2(alloc, 1 << 20);
    printf("free -> %d\n", fr(a));

    void *v1 = NULL, *ptsz = NULL;
    printf("gpa v1 -> %d\n", gpa("cuMemAlloc", &v1, 2000, 0, NULL));
    printf("gpa ptsz -> %d\n", gpa("cuMemAllocAsync", &ptsz, 12000, 2, NULL));
    unsigned int c = grab_v1((alloc_v1_fn)v1, 4096);
    unsigned long long d = grab_ptsz((async_fn)ptsz, 8192);
    printf("driver calls: cuMemAlloc=%d cuMemAlloc_v2=%d cuMemAllocAsync_ptsz=%d cuMemAllocAsync=%d\n",
           calls("cuMemAlloc"), calls("cuMemAlloc_v2"), calls("cuMemAllocAsync_ptsz"),
           calls("cuMemAllocAsync"));
    void *missing = dlsym(h, "cuNoSuchFunction");
    printf("missing symbol -> %s\n", missing ? "found" : "NULL");
    printf("live %llx %x %llx\n", b, c, d);
    return 0;
}
