/* t_rtld_local.c -- loads libt_local.so RTLD_LOCAL and lets it look itself up. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    char path[4096];
    const char *dir = argc > 1 ? argv[1] : ".";
    snprintf(path, sizeof path, "%s/libt_local.so", dir);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) { printf("dlopen: %s\n", dlerror()); return 2; }
    int (*check)(void) = (int (*)(void))dlsym(h, "local_check");
    if (!check) { printf("no local_check\n"); return 2; }
    int r = check();
    void *global = dlsym(RTLD_DEFAULT, "local_only_symbol");
    printf("main RTLD_DEFAULT sees the local symbol: %s\n", global ? "yes" : "no");
    return r;
}
