/* loadername.h -- the loader's names of loaded objects (dl_iterate_phdr's
 * dlpi_name, a link_map's l_name), read by the library's own code.
 *
 * The loader writes a name under a lock of its own, which a thread
 * sanitizer does not see (its interceptor clears a name's bytes for
 * dl_iterate_phdr's callback, not its terminator), so a ThreadSanitizer
 * build reported another thread's dlopen as a race with every read of a
 * name. These read a name byte by byte in code the thread sanitizer does
 * not instrument; everything else works on what they return. */
#ifndef VT_LOADERNAME_H
#define VT_LOADERNAME_H

#include <stddef.h>

/* A malloc'd copy of the name (NULL when out of memory). */
char *vt_loader_name_dup(const char *name);

/* The name into out (size bytes, its terminator included): its length,
 * or -1 when it does not fit (out then holds nothing to use). */
long vt_loader_name_copy(const char *name, char *out, size_t size);

/* Whether the name is `kept` (a copy made earlier), byte for byte. */
int vt_loader_name_is(const char *kept, const char *name);

#endif
