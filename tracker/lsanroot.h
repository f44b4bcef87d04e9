/* lsanroot.h -- vramtrace's own mappings shown to LeakSanitizer.
 *
 * In a program built with -fsanitize=address (or =leak, =hwaddress), or
 * with such a runtime preloaded, LeakSanitizer searches at exit for heap
 * blocks nothing points to. It reads the stacks, the registers, the
 * loaded modules' data and the heap, not the anonymous mappings a library
 * makes for itself: a block of vramtrace's whose only pointer lives in one
 * (an interned stack in the list of stacks, a record in a big live table)
 * was reported as the program's leak, and the report's _exit ended the
 * program before vramtrace's own GPU leak check. Each such mapping is made
 * a root region of the search while it exists.
 *
 * Nothing here links against a sanitizer: the runtime's two functions are
 * looked up once, before the tracker maps anything (vt_lsan_find); without
 * them every call below does nothing. A library built with ASan itself
 * (the unit tests) uses its own runtime's functions from the start. */
#ifndef VT_LSANROOT_H
#define VT_LSANROOT_H

#include <stddef.h>

/* Looks up __lsan_register_root_region and __lsan_unregister_root_region
 * with `lookup` (a dlsym on the global scope); both or neither are used.
 * Called once, at the tracker's start, before any mapping below is made:
 * a region is unregistered only with the functions that registered it. */
void vt_lsan_find(void *(*lookup)(const char *name)) __attribute__((visibility("hidden")));

/* Bytes at p, a mapping of vramtrace's that holds pointers to heap blocks,
 * searched by LeakSanitizer from now on; vt_lsan_unroot, with the same p
 * and bytes, before the mapping goes or moves. */
void vt_lsan_root(const void *p, size_t bytes) __attribute__((visibility("hidden")));
void vt_lsan_unroot(const void *p, size_t bytes) __attribute__((visibility("hidden")));

#endif
