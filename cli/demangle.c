/* demangle.c -- C++ names in a dump read as people write them (demangle.h). */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "demangle.h"

/* libstdc++'s demangler (extern "C" in <cxxabi.h>): the one the library
 * itself asks in a process that has a C++ runtime, so a name reads the same
 * whether the process or the CLI demangled it. libstdc++ is loaded at the
 * first mangled name, not linked: most dumps have none, and the runtime
 * (with libm and libgcc_s) would add over a megabyte to every report's
 * resident memory. NULL when it cannot be loaded: names stay mangled. */
typedef char *demangle_fn(const char *mangled, char *buf, size_t *len, int *status);

static demangle_fn *demangler(void) {
    static demangle_fn *fn;
    static int tried;
    if (!tried) {
        tried = 1;
        void *h = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL);
        void *sym = h ? dlsym(h, "__cxa_demangle") : NULL;
        memcpy(&fn, &sym, sizeof fn);
    }
    return fn;
}

#define DEMANGLE_MAX 16384 /* longer names are left as they are */

/* The demangled form of a mangled C++ name (Itanium ABI, "_Z..."), in
 * malloc'd memory, or NULL when name is not one. Only "_Z" names are tried:
 * given a plain word the demangler reads it as a type ("i" is "int"). */
char *vm_demangle(const char *name, size_t len) {
    if (len < 3 || len > DEMANGLE_MAX || name[0] != '_' || name[1] != 'Z' || !demangler()) return NULL;
    char *tmp = strndup(name, len);
    if (!tmp) return NULL;
    int status = -1;
    char *out = demangler()(tmp, NULL, NULL, &status);
    free(tmp);
    if (status != 0) { free(out); return NULL; }
    return out;
}

static int ident_char(char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' ||
           ch == '.' || ch == '$';
}

/* A text with every mangled C++ name in it demangled, as c++filt does with
 * the words of a line: the findings quote call sites by name. NULL when
 * nothing changed (or memory ran out: the text stays as it was). */
char *vm_demangle_words(const char *s) {
    char *out = NULL;
    size_t len = 0, cap = 0;
    int changed = 0;
    for (const char *p = s; *p;) {
        const char *w = p;
        size_t n = 1;
        char *dm = NULL;
        if ((p == s || !ident_char(p[-1])) && p[0] == '_' && p[1] == 'Z') {
            while (ident_char(p[n])) n++;
            dm = vm_demangle(p, n);
        }
        if (dm) { w = dm; changed = 1; }
        size_t wn = dm ? strlen(dm) : n;
        if (len + wn + 1 > cap) {
            size_t nc = (cap + wn + 1) * 2;
            char *b = realloc(out, nc);
            if (!b) { free(dm); free(out); return NULL; }
            out = b;
            cap = nc;
        }
        memcpy(out + len, w, wn);
        len += wn;
        out[len] = '\0';
        free(dm);
        p += n;
    }
    if (!changed) { free(out); return NULL; }
    return out;
}

