/* loadername.c -- the loader's names, read unseen by a thread sanitizer
 * (loadername.h). */
#include <stdlib.h>

#include "loadername.h"

#define VT_LOADER_READ __attribute__((no_sanitize("thread")))

VT_LOADER_READ char *vt_loader_name_dup(const char *name) {
    size_t n = 0;
    while (name[n]) n++;
    char *c = malloc(n + 1);
    if (c)
        for (size_t i = 0; i <= n; i++) c[i] = name[i];
    return c;
}

VT_LOADER_READ long vt_loader_name_copy(const char *name, char *out, size_t size) {
    for (size_t i = 0; i < size; i++)
        if ((out[i] = name[i]) == '\0') return (long)i;
    return -1;
}

VT_LOADER_READ int vt_loader_name_is(const char *kept, const char *name) {
    size_t i = 0;
    for (; kept[i] && kept[i] == name[i]; i++) {}
    return kept[i] == name[i];
}
