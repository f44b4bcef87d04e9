/* t_dl_local.c -- loads libt_dl_cu.so RTLD_LOCAL (it links the driver, as a
 * Python extension would) and lets it look up the driver's functions. */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv) {
    char path[4096];
    snprintf(path, sizeof path, "%s/libt_dl_cu.so", argc > 1 ? argv[1] : ".");
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) { printf("dlopen: %s\n", dlerror()); return 2; }
    int (*run)(void) = (int (*)(void))dlsym(h, "cu_lookups");
    return run ? run() : 2;
}
