/* dlagain.h -- a library the library loads when first needed (libdw,
 * libunwind), loaded again when a program's descriptor work broke the
 * load. */
#ifndef VT_DLAGAIN_H
#define VT_DLAGAIN_H

#include <stddef.h>

/* dlopen(name, flags), tried again (three times in all) while it fails
 * for a descriptor closed under the loader: a program that closes every
 * descriptor from 3 up in another thread (a daemon's close_range at its
 * start) closed the loader's descriptor of the library between its open
 * and its reads, and the load failed with "cannot stat shared object: Bad
 * file descriptor" (seen in CI, where the live view's first naming loads
 * libdw as the program starts). NULL as dlopen's, with dlerror()'s text
 * copied into why (size bytes; not touched on success). */
void *vt_dlopen_again(const char *name, int flags, char *why, size_t size);

#endif
