/* live.c -- where live segments lie, and reading one under its sequence
 * lock (live.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "live.h"

const char *vt_live_dir(char *out, size_t size) {
    const char *x = getenv("XDG_RUNTIME_DIR");
    struct stat st;
    if (x && x[0] == '/' && stat(x, &st) == 0 && S_ISDIR(st.st_mode)) snprintf(out, size, "%s", x);
    else snprintf(out, size, "/dev/shm");
    return out;
}

/* The reader's half of the sequence lock: the count before (even), the
 * copy, a fence so that the copy's loads are done, the count after. */
int vt_live_read_copy(const volatile struct vt_live_segment *seg, struct vt_live_segment *out, int tries) {
    for (int i = 0; i < tries; i++) {
        uint64_t before = __atomic_load_n(&seg->seq, __ATOMIC_ACQUIRE);
        if (before & 1) {
#if defined(__x86_64__)
            __builtin_ia32_pause();
#endif
            continue;
        }
        memcpy(out, (const void *)seg, sizeof *out);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&seg->seq, __ATOMIC_RELAXED) == before) {
            out->seq = before;
            return 1;
        }
    }
    return 0;
}
