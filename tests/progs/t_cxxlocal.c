/* t_cxxlocal.c -- a C program without a C++ runtime of its own that loads,
 * RTLD_LOCAL as Python loads an extension, a C++ library that allocates:
 * the C++ runtime is then in the process but not in its global scope. */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv) {
    const char *lib = argc > 1 ? argv[1] : "libt_cxxlocal.so";
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        printf("dlopen: %s\n", dlerror());
        return 1;
    }
    int (*run)(void) = (int (*)(void))dlsym(h, "cxxlocal_run");
    int rc = run ? run() : 2;
    printf("run -> %d\n", rc);
    return rc;
}
