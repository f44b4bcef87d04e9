/* dlagain.c -- a lazy library's load, tried again (dlagain.h). */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "dlagain.h"
#include "fdkeep.h"

void *vt_dlopen_again(const char *name, int flags, char *why, size_t size) {
    for (int tries = 0; tries < VT_FD_TRIES; tries++) {
        void *h = dlopen(name, flags);
        if (h) return h;
        const char *e = dlerror();
        if (why && size && e) snprintf(why, size, "%s", e);
        else if (why && size) snprintf(why, size, "%s: not loaded", name);
        if (!e || !strstr(e, strerror(EBADF))) break;
    }
    return NULL;
}
