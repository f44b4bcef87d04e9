/* t_deepbind.c -- a plugin host: loads libt_deepbind_cu.so (linked with
 * -lcuda) and libt_deepbind_rt.so (linked with the runtime) from folder
 * argv[1] as argv[2] says, and calls each.
 *   deep:   RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND
 *   lazy:   RTLD_LAZY | RTLD_LOCAL | RTLD_DEEPBIND
 *   local:  RTLD_NOW | RTLD_LOCAL
 *   origin: as deep, each by "$ORIGIN/NAME" (this program's folder), after
 *           a "$ORIGIN/" name of no file (which loads nothing)
 *   again:  as origin, then each probed with RTLD_NOLOAD | RTLD_DEEPBIND
 *           and opened again as before (both load nothing) */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

static int call(const char *dir, const char *mode, const char *lib, const char *fn) {
    int flags = RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND;
    if (strcmp(mode, "lazy") == 0) flags = RTLD_LAZY | RTLD_LOCAL | RTLD_DEEPBIND;
    if (strcmp(mode, "local") == 0) flags = RTLD_NOW | RTLD_LOCAL;
    char path[4096];
    int again = strcmp(mode, "again") == 0;
    snprintf(path, sizeof path, "%s/%s", again || strcmp(mode, "origin") == 0 ? "$ORIGIN" : dir, lib);
    if (strcmp(mode, "origin") == 0 && dlopen("$ORIGIN/libt_deepbind_none.so", flags)) {
        printf("dlopen of no file: a handle\n");
        return 1;
    }
    void *h = dlopen(path, flags);
    if (!h) {
        printf("dlopen %s: %s\n", lib, dlerror());
        return 1;
    }
    if (again && (dlopen(path, RTLD_NOW | RTLD_NOLOAD | RTLD_DEEPBIND | RTLD_GLOBAL) != h || dlopen(path, flags) != h)) {
        printf("dlopen %s again: not the same handle\n", lib);
        return 1;
    }
    int (*f)(void) = (int (*)(void))dlsym(h, fn);
    return f ? f() : 1;
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    int r = call(argv[1], argv[2], "libt_deepbind_cu.so", "cu_plugin");
    r |= call(argv[1], argv[2], "libt_deepbind_rt.so", "rt_plugin");
    printf("done %d\n", r);
    return r;
}
