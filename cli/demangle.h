/* demangle.h -- C++ names demangled for the CLI's reports.
 *
 * A process without a C++ runtime leaves the names in its dump mangled;
 * the CLI demangles them as it reads the dump (model.c), with the same
 * demangler the library asks when the process has one, so a name reads the
 * same either way. */
#ifndef VT_DEMANGLE_H
#define VT_DEMANGLE_H

#include <stddef.h>

/* The demangled form of the mangled C++ name name[0..len) (Itanium ABI,
 * "_Z..."), in malloc'd memory, or NULL when it is not one. */
char *vm_demangle(const char *name, size_t len);

/* Text s with every mangled C++ name in it demangled, as c++filt does with
 * the words of a line, in malloc'd memory; NULL when nothing changed (or
 * memory ran out). */
char *vm_demangle_words(const char *s);

#endif
