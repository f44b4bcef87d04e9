/* hooklist.c -- hooks.def's names, bases and wrappers, with no relocation
 * (hooklist.h). */
#include <stddef.h>

#include "hooklist.h"

const struct vt_hook_text vt_hook_text = {
#define VT_DRIVER(sym, base, ver, ptsz) #sym, #base,
#define VT_RUNTIME(sym) #sym,
#include "hooks.def"
#undef VT_DRIVER
#undef VT_RUNTIME
};

_Static_assert(sizeof(struct vt_hook_text) <= UINT16_MAX, "the offsets are 16 bits");

const struct vt_hook_entry vt_hook_entries[VT_ID_COUNT] = {
#define VT_DRIVER(sym, base, ver, ptsz) \
    {offsetof(struct vt_hook_text, name_##sym), offsetof(struct vt_hook_text, base_##sym), ver, ptsz},
#define VT_RUNTIME(sym) {offsetof(struct vt_hook_text, name_##sym), 0, 0, 0},
#include "hooks.def"
#undef VT_DRIVER
#undef VT_RUNTIME
};

/* C has no constant for the distance between two functions' addresses;
 * the assembler has, and the link editor resolves it (a wrapper is bound
 * within the library: the Makefile links with -Bsymbolic-functions). Each
 * entry is measured from itself. The wrappers are the hooked names
 * (driver.c, runtime.c). */
__asm__(".pushsection .rodata\n"
        ".balign 4\n"
        ".globl vt_hook_wrapper_at\n"
        ".hidden vt_hook_wrapper_at\n"
        ".type vt_hook_wrapper_at, @object\n"
        "vt_hook_wrapper_at:\n"
#define VT_DRIVER(sym, base, ver, ptsz) ".long " #sym " - .\n"
#define VT_RUNTIME(sym) ".long " #sym " - .\n"
#include "hooks.def"
#undef VT_DRIVER
#undef VT_RUNTIME
        ".size vt_hook_wrapper_at, . - vt_hook_wrapper_at\n"
        ".popsection\n");
