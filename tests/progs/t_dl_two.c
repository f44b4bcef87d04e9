/* t_dl_two.c -- two stand-in drivers loaded RTLD_LOCAL, each defining
 * cuMemAlloc_v2 and cuMemFree_v2, looked up by handle: each pointer must
 * reach its own library. */
#include <dlfcn.h>
#include <stdio.h>

typedef int (*alloc_fn)(unsigned long long *, size_t);
typedef int (*free_fn)(unsigned long long);
typedef int (*calls_fn)(void);

struct drv {
    void *h;
    alloc_fn alloc;
    free_fn free;
    calls_fn calls;
};

static int open_drv(struct drv *d, const char *dir, const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    d->h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!d->h) { printf("dlopen: %s\n", dlerror()); return 0; }
    d->alloc = (alloc_fn)dlsym(d->h, "cuMemAlloc_v2");
    d->free = (free_fn)dlsym(d->h, "cuMemFree_v2");
    d->calls = (calls_fn)dlsym(d->h, "drv_calls");
    return d->alloc && d->free && d->calls;
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : ".";
    struct drv a, b;
    if (!open_drv(&a, dir, "libt_dl_drva.so") || !open_drv(&b, dir, "libt_dl_drvb.so")) return 2;
    unsigned long long p = 0, q = 0, r = 0;
    int ra = a.alloc(&p, 4096);
    int rb = b.alloc(&q, 8192);
    int rc = b.alloc(&r, 16384);
    printf("A alloc -> %d %#llx\n", ra, p);
    printf("B alloc -> %d %#llx\n", rb, q);
    printf("B alloc -> %d %#llx\n", rc, r);
    printf("B free -> %d\n", b.free(q));
    printf("A free of B's pointer -> %d\n", a.free(r));
    printf("calls: A %d, B %d\n", a.calls(), b.calls());
    return 0;
}
