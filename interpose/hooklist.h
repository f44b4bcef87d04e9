/* hooklist.h -- hooks.def's entries as constant data that the dynamic
 * linker never writes: each hook's name and base at a fixed offset in one
 * block of text, each wrapper by its distance from a table of distances.
 *
 * A table of pointers (a name, a wrapper, a resolver) is relocated at
 * every start of every process an LD_PRELOAD reaches, whether it touches a
 * GPU or not: the two tables resolve.c and exports.c kept were 530 of the
 * library's 770 relocations, some 9,000 instructions and the copied pages
 * they sat on. Offsets need no relocation and stay in the file's pages.
 * Read while the library is still being relocated (exports.c's at_load) and
 * on the dlsym path before a sanitizer's start: inline, no call, never
 * instrumented. */
#ifndef VT_HOOKLIST_H
#define VT_HOOKLIST_H

#include <stdint.h>

#include "resolve.h"

#define VT_HOOKLIST_FN \
    static inline __attribute__((always_inline, no_sanitize("address", "undefined", "thread")))

/* Every name and every base, one after another, each with its 0. */
struct vt_hook_text {
#define VT_DRIVER(sym, base, ver, ptsz) char name_##sym[sizeof #sym]; char base_##sym[sizeof #base];
#define VT_RUNTIME(sym) char name_##sym[sizeof #sym];
#include "hooks.def"
#undef VT_DRIVER
#undef VT_RUNTIME
};

/* A hook: its name's and its base's offsets in vt_hook_text (base 0 for a
 * runtime entry, which has none: no base is at 0, the first name is), the
 * CUDA version from which cuGetProcAddress hands out this variant, and
 * whether it is the per-thread-default-stream one (hooks.def). */
struct vt_hook_entry {
    uint16_t name, base;
    int32_t version;
    int32_t ptsz;
};

extern const struct vt_hook_text vt_hook_text __attribute__((visibility("hidden")));
extern const struct vt_hook_entry vt_hook_entries[VT_ID_COUNT] __attribute__((visibility("hidden")));
/* Entry id: the wrapper's address less the entry's own (hooklist.c). */
extern const int32_t vt_hook_wrapper_at[VT_ID_COUNT] __attribute__((visibility("hidden")));

VT_HOOKLIST_FN const char *vt_hook_name(int id) { return (const char *)&vt_hook_text + vt_hook_entries[id].name; }

/* The name a cuGetProcAddress caller asks for; NULL for a runtime entry. */
VT_HOOKLIST_FN const char *vt_hook_base(int id) {
    unsigned at = vt_hook_entries[id].base;
    return at ? (const char *)&vt_hook_text + at : NULL;
}

VT_HOOKLIST_FN int vt_hook_version(int id) { return vt_hook_entries[id].version; }
VT_HOOKLIST_FN int vt_hook_ptsz(int id) { return vt_hook_entries[id].ptsz; }

/* The wrapper vramtrace hands out for hook id. */
VT_HOOKLIST_FN void *vt_hook_wrapper(int id) {
    return (void *)((const char *)&vt_hook_wrapper_at[id] + vt_hook_wrapper_at[id]);
}

#endif
