/* canload.c -- whether this process can load a library after its start
 * (canload.h). */
#define _GNU_SOURCE
#include <link.h>

#include "canload.h"
#include "dynsyms.h"

extern ElfW(Dyn) _DYNAMIC[] __attribute__((visibility("hidden")));

/* Start-up code: beside the rest of it (one page fault maps them all),
 * calling no C library function (each first call binds a symbol, a look-up
 * of a thousand instructions). */
#define VT_AT_START __attribute__((section(".text.startup")))

/* The names a library is loaded by, or reached through (dlsym finds
 * dlopen). Built on the stack where they are used, not read from constant
 * data: a page of it read at the start is a page fault. */
#define VT_LOADER_NAMES                                                                           \
    const char open[] = {'d', 'l', 'o', 'p', 'e', 'n', 0}, mopen[] = {'d', 'l', 'm', 'o', 'p', 'e', 'n', 0}; \
    const char sym[] = {'d', 'l', 's', 'y', 'm', 0}, vsym[] = {'d', 'l', 'v', 's', 'y', 'm', 0};           \
    const char *const names[4] = {open, mopen, sym, vsym}

/* Whether object l imports one of `names`: its unhashed symbols read (the
 * imports), its hashed ones looked up by name (an executable hashes an
 * import whose address it takes), not all its symbols read: the C
 * library's 3,000 cost 30,000 instructions at every start. */
VT_AT_START static int imports_loader(const struct link_map *l, const char *const names[4], const uint32_t hash[4]) {
    struct vt_dyn_tables t;
    if (vt_dyn_tables(l, &t) != 0 || (!t.gnu && !t.sysv)) return 1;
    uint32_t unhashed = t.gnu ? t.gnu[1] : t.sysv[1];
    for (uint32_t i = 1; i < unhashed; i++) {
        if (t.symtab[i].st_shndx != SHN_UNDEF) continue;
        const char *name = t.strtab + t.symtab[i].st_name;
        if (name[0] != 'd' || name[1] != 'l') continue;
        for (int k = 0; k < 4; k++)
            if (vt_dyn_same(name, names[k])) return 1;
    }
    for (int k = 0; t.gnu && k < 4; k++) {
        const ElfW(Sym) *s = vt_dyn_find(&t, names[k], hash[k]);
        if (s && s->st_shndx == SHN_UNDEF) return 1;
    }
    return 0;
}

VT_AT_START int vt_start_can_load(void) {
    VT_LOADER_NAMES;
    uint32_t hash[4];
    for (int k = 0; k < 4; k++) hash[k] = vt_dyn_gnu_hash(names[k]);
    for (const struct link_map *l = _r_debug.r_map; l; l = l->l_next)
        if (l->l_ld != _DYNAMIC && imports_loader(l, names, hash)) return 1;
    return 0;
}
