/* live.c -- where live segments lie (live.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "live.h"

const char *vt_live_dir(char *out, size_t size) {
    const char *x = getenv("XDG_RUNTIME_DIR");
    struct stat st;
    /* One longer than VT_LIVE_DIR_MAX is passed over on both sides (the
     * writer's room was shorter than the readers': it cut the path, and
     * the cut path may name another folder). */
    if (x && x[0] == '/' && strlen(x) <= VT_LIVE_DIR_MAX && strlen(x) < size && stat(x, &st) == 0 &&
        S_ISDIR(st.st_mode))
        snprintf(out, size, "%s", x);
    else snprintf(out, size, "/dev/shm");
    return out;
}
