/* t_nextlib.c -- a library that looks a name up with dlsym(RTLD_NEXT), as
 * an interposing library does (t_dlnext links it). */
#define _GNU_SOURCE
#include <dlfcn.h>

void *t_lib_next(const char *name) { return dlsym(RTLD_NEXT, name); }
