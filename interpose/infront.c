/* infront.c -- whether vramtrace stands in front of the C library.
 *
 * vramtrace sees what it wraps only from in front: its exported CUDA names
 * and its dlsym and dlopen are found before the CUDA libraries' and the C
 * library's when it is loaded at start-up ahead of them (LD_PRELOAD,
 * `vramtrace run`, or linked into the program, whose C library comes last).
 * A copy loaded by dlopen later (ctypes.CDLL, a plugin linked with it)
 * comes after the C library, which every dynamically linked process loads
 * at start-up: its dlsym and dlopen are never found, and an API that
 * answered as if it tracked would pass every leak check. Its CUDA names
 * would still be found, by a CUDA library loaded after it (RTLD_GLOBAL
 * puts it ahead of those in the global scope): such a copy withdraws them
 * (exports.c) and writes nothing at exit (init.c), so that it stands
 * behind the driver too and changes nothing in the process. The link map
 * lists the objects in the order the global scope searches them (those of
 * start-up first, later ones appended), so one walk from its head tells
 * which comes first: this library, or a libc.so*. It runs once, while the
 * library is relocated (exports.c's at_load, before any object can bind
 * one of its names): a few short names compared.
 *
 * Behind, the warning says what was found and what to do, which depends
 * on how it came there: another copy of vramtrace in front already tracks
 * the process (a second one loaded by path: use the first); the program
 * (or a library it needs) lists the C library before it, so that it was
 * loaded at start-up yet behind (link it first); or it was loaded by
 * dlopen (preload it). Only the warning reads these: they cost nothing
 * in front. */
#define _GNU_SOURCE
#include <link.h>
#include <stdint.h>
#include <string.h>

#include "../common/warn.h"
#include "infront.h"
#include "startpage.h"

extern ElfW(Dyn) _DYNAMIC[] __attribute__((visibility("hidden")));

/* Code that runs while the dynamic linker relocates this library: it may
 * call nothing (the PLT is not ready) and must not be instrumented. */
#define VT_EARLY __attribute__((no_sanitize("address", "undefined", "thread"), noinline, section(".text.startup")))

/* Where vramtrace was found, kept in vt_start_page.front (startpage.h; 0
 * until looked for). */
enum { FOUND_IN_FRONT = 1, FOUND_BEHIND };

static const char *base_name(const char *path) {
    const char *base = strrchr(path, '/');
    return base ? base + 1 : path;
}

/* Whether path names a libc.so*, compared without a call. The name is
 * built on the stack, not read from constant data. */
VT_EARLY static int is_libc(const char *path) {
    const char libc[] = {'l', 'i', 'b', 'c', '.', 's', 'o', 0};
    const char *base = path;
    for (const char *p = path; *p; p++)
        if (*p == '/') base = p + 1;
    for (int i = 0; libc[i]; i++)
        if (base[i] != libc[i]) return 0;
    return 1;
}

/* An object's string table and dynamic section, as the loader left them
 * (it may have made the addresses absolute already). */
static const char *strtab_of(const struct link_map *l) {
    for (const ElfW(Dyn) *d = l->l_ld; d && d->d_tag != DT_NULL; d++)
        if (d->d_tag == DT_STRTAB)
            return (const char *)(d->d_un.d_ptr < l->l_addr ? l->l_addr + d->d_un.d_ptr : d->d_un.d_ptr);
    return NULL;
}

/* An object's DT_SONAME, or NULL. */
static const char *soname_of(const struct link_map *l) {
    const char *strtab = strtab_of(l);
    if (!strtab) return NULL;
    for (const ElfW(Dyn) *d = l->l_ld; d->d_tag != DT_NULL; d++)
        if (d->d_tag == DT_SONAME) return strtab + d->d_un.d_val;
    return NULL;
}

static const struct link_map *self(void) {
    for (const struct link_map *l = _r_debug.r_map; l; l = l->l_next)
        if (l->l_ld == _DYNAMIC) return l;
    return NULL;
}

/* Another copy of vramtrace (its soname is this one's) in front of the C
 * library, or NULL. */
static const struct link_map *copy_in_front(const char *ours) {
    for (const struct link_map *l = _r_debug.r_map; l; l = l->l_next) {
        if (l->l_name && is_libc(l->l_name)) return NULL;
        const char *theirs = l->l_ld == _DYNAMIC ? NULL : soname_of(l);
        if (theirs && strcmp(theirs, ours) == 0) return l;
    }
    return NULL;
}

/* Whether object l goes by a name of `names` (a DT_NEEDED entry): its
 * soname, its path, or its file name. */
static int named(const struct link_map *l, const char *const *names, size_t n) {
    const char *so = soname_of(l), *path = l->l_name ? l->l_name : "";
    for (size_t i = 0; i < n; i++)
        if ((so && strcmp(names[i], so) == 0) || strcmp(names[i], path) == 0 ||
            strcmp(names[i], base_name(path)) == 0)
            return 1;
    return 0;
}

/* Whether this library was loaded at start-up as a dependency: the
 * executable needs it, or an object it needs does. The start-up objects
 * come first in the link map, each after one that needs it, so one walk
 * gathers the names needed so far. A chain too long to keep answers no. */
static int needed_at_start(const struct link_map *me) {
    const char *names[512];
    size_t n = 0;
    for (const struct link_map *l = _r_debug.r_map; l; l = l->l_next) {
        if (l != _r_debug.r_map && !named(l, names, n)) continue;
        if (l == me) return 1;
        const char *strtab = strtab_of(l);
        if (!strtab) continue;
        for (const ElfW(Dyn) *d = l->l_ld; d->d_tag != DT_NULL; d++)
            if (d->d_tag == DT_NEEDED && n < sizeof names / sizeof *names) names[n++] = strtab + d->d_un.d_val;
    }
    return 0;
}

static void say_behind(void) {
    const struct link_map *me = self();
    const char *ours = me ? soname_of(me) : NULL;
    const struct link_map *other = ours ? copy_in_front(ours) : NULL;
    if (other) {
        vt_warn("%s stays inactive: another copy of libvramtrace.so, %s, is preloaded and tracks this process; "
                "use that one (ctypes.CDLL(None), or dlsym(RTLD_DEFAULT, ...), finds its API)",
                me->l_name, other->l_name);
    } else if (me && needed_at_start(me)) {
        vt_warn("libvramtrace.so was loaded at start-up behind the C library (linked after it: -lc ahead of "
                "-lvramtrace): it tracks nothing here; link it before the C library, or preload it (LD_PRELOAD, "
                "or `vramtrace run`)");
    } else {
        vt_warn("libvramtrace.so was loaded after the process started (by dlopen): it tracks nothing here; "
                "it must be preloaded (LD_PRELOAD, or `vramtrace run`)");
    }
}

VT_EARLY int vt_front_find(void) {
    /* Read by a write (one that changes nothing): this is the first touch
     * of the start's page, and a read first would map the shared zero page
     * that the start's first write then replaces, two page faults. */
    int was = __atomic_fetch_add(&vt_start_page.front, 0, __ATOMIC_ACQ_REL);
    if (was) return was == FOUND_BEHIND;
    int now = FOUND_BEHIND;
    for (const struct link_map *l = _r_debug.r_map; l; l = l->l_next) {
        if (l->l_ld == _DYNAMIC) {
            now = FOUND_IN_FRONT;
            break;
        }
        if (l->l_name && is_libc(l->l_name)) break;
    }
    __atomic_store_n(&vt_start_page.front, now, __ATOMIC_RELEASE);
    return now == FOUND_BEHIND;
}

void vt_front_check(void) {
    if (vt_front_find()) say_behind();
}

VT_EARLY int vt_behind(void) { return __atomic_load_n(&vt_start_page.front, __ATOMIC_ACQUIRE) == FOUND_BEHIND; }
