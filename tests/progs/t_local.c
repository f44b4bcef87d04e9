/* t_local.c -- a library loaded RTLD_LOCAL that resolves its own symbols
 * and its dependency's through dlsym(RTLD_DEFAULT/RTLD_NEXT). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>

int dep_symbol(void);
int local_only_symbol(void) { return 42; }

int local_check(void) {
    int (*own)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "local_only_symbol");
    int (*next)(void) = (int (*)(void))dlsym(RTLD_NEXT, "dep_symbol");
    printf("RTLD_DEFAULT own symbol: %s -> %d\n", own ? "found" : "missing", own ? own() : -1);
    printf("RTLD_NEXT dependency: %s -> %d\n", next ? "found" : "missing", next ? next() : -1);
    return own && next && dep_symbol() == 7 ? 0 : 1;
}
