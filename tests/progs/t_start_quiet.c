/* t_start_quiet.c -- a program that names no CUDA symbol: its look-ups of
 * CUDA names (dlsym on RTLD_DEFAULT and on its own handle) must answer as
 * without vramtrace, and so must a library it loads with weak references to
 * them (libt_start_weak.so). */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv) {
    void *p = dlsym(RTLD_DEFAULT, "cuMemAlloc_v2");
    const char *e = dlerror();
    printf("dlsym(RTLD_DEFAULT, cuMemAlloc_v2) %s, dlerror %s\n", p ? "found" : "NULL", e ? e : "(none)");
    void *self = dlopen(NULL, RTLD_NOW);
    p = dlsym(self, "cudaMalloc");
    e = dlerror();
    printf("dlsym(self, cudaMalloc) %s, dlerror %s\n", p ? "found" : "NULL", e ? e : "(none)");
    if (argc < 2) return 0;
    void *lib = dlopen(argv[1], RTLD_NOW);
    if (!lib) { printf("dlopen: %s\n", dlerror()); return 2; }
    const char *(*paths)(void) = (const char *(*)(void))dlsym(lib, "weak_paths");
    printf("%s\n", paths());
    return 0;
}
