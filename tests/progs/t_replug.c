/* t_replug.c -- plugin 1 allocates and is unloaded; plugin 2, other code,
 * is loaded (most often where plugin 1 was) and allocates. Each stack must
 * name its own plugin's functions: code unloaded must not leave its
 * unwind rules behind. usage: t_replug PLUGIN1.so PLUGIN2.so */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>

static void *base;

/* Plugin 2 stays loaded, so that the report can name its functions. */
static int run(const char *path, size_t n, int unload) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) { printf("dlopen: %s\n", dlerror()); return 1; }
    int (*f)(size_t) = (int (*)(size_t))dlsym(h, "plug_alloc");
    Dl_info info;
    int same = dladdr((void *)f, &info) && info.dli_fbase == base;
    if (!base) base = info.dli_fbase;
    int r = f(n);
    r |= f(n + 1);
    printf("plugin %d: %d%s\n", unload ? 1 : 2, r, unload ? "" : same ? " (where plugin 1 was)" : " (elsewhere)");
    if (unload) dlclose(h);
    return r;
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    cuInit(0);
    return run(argv[1], 1 << 20, 1) | run(argv[2], 2 << 20, 0);
}
