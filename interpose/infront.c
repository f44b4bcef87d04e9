/* infront.c -- whether vramtrace stands in front of the C library.
 *
 * vramtrace sees what it wraps only from in front: its exported CUDA names
 * and its dlsym and dlopen are found before the CUDA libraries' and the C
 * library's when it is loaded at start-up ahead of them (LD_PRELOAD,
 * `vramtrace run`, or linked into the program, whose C library comes last).
 * A copy loaded by dlopen later (ctypes.CDLL, a plugin linked with it)
 * comes after the C library, which every dynamically linked process loads
 * at start-up: nothing reaches its wrappers, and an API that answered as
 * if it tracked would pass every leak check. The link map lists the
 * objects in the order the global scope searches them (those of start-up
 * first, later ones appended), so one walk from its head tells which comes
 * first: this library, or a libc.so*. It runs once, in the constructor:
 * a few short names compared. */
#define _GNU_SOURCE
#include <link.h>
#include <string.h>

#include "../common/warn.h"
#include "infront.h"

extern ElfW(Dyn) _DYNAMIC[] __attribute__((visibility("hidden")));

static int behind;

static int is_libc(const char *path) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    return strncmp(base, "libc.so", 7) == 0;
}

void vt_front_check(void) {
    for (const struct link_map *l = _r_debug.r_map; l; l = l->l_next) {
        if (l->l_ld == _DYNAMIC) return;
        if (l->l_name && is_libc(l->l_name)) break;
    }
    __atomic_store_n(&behind, 1, __ATOMIC_RELEASE);
    vt_warn("libvramtrace.so was loaded after the process started (by dlopen): it tracks nothing here; "
            "it must be preloaded (LD_PRELOAD, or `vramtrace run`)");
}

int vt_behind(void) { return __atomic_load_n(&behind, __ATOMIC_ACQUIRE); }
