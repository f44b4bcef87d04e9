/* dynsyms.h -- a loaded object's dynamic symbols, read as the dynamic
 * linker left them: for code that runs while this library is relocated
 * (exports.c's at_load) or at its start (canload.c), which may call no C
 * library function (the PLT is not ready) and is never instrumented. */
#ifndef VT_DYNSYMS_H
#define VT_DYNSYMS_H

#include <link.h>
#include <stdint.h>

/* A dynamic-section address: glibc may have made it absolute already. */
uintptr_t vt_dyn_addr(uintptr_t base, uintptr_t v) __attribute__((visibility("hidden")));

/* The number of dynamic symbols: one past the last chain's end in the GNU
 * hash table (the dynamic linker keeps no count). */
uint32_t vt_gnu_symbols(const uint32_t *buckets, uint32_t nbuckets, const uint32_t *chain, uint32_t symoffset)
    __attribute__((visibility("hidden")));

/* Object l's dynamic symbols: their table, their strings and how many
 * (DT_HASH's nchain, or counted from DT_GNU_HASH); -1 where they cannot be
 * read (no tables, an empty GNU hash). */
int vt_dyn_symbols(const struct link_map *l, const ElfW(Sym) **symtab, const char **strtab, uint32_t *n)
    __attribute__((visibility("hidden")));

/* Object l's dynamic tables, read from its dynamic section in one pass:
 * the symbols, their strings, the GNU hash table and the DT_HASH one (each
 * NULL where it has none); -1 without symbols or strings. A GNU hash
 * table's symbols below its second word (symoffset) are those it does not
 * hash: imports, save an executable's whose address it takes. */
struct vt_dyn_tables {
    const ElfW(Sym) *symtab;
    const char *strtab;
    const uint32_t *gnu, *sysv;
};
int vt_dyn_tables(const struct link_map *l, struct vt_dyn_tables *t) __attribute__((visibility("hidden")));

/* A name's GNU hash (the table's, and the dynamic linker's). */
uint32_t vt_dyn_gnu_hash(const char *name) __attribute__((visibility("hidden")));

/* The symbol `name`, of GNU hash h, among those t's GNU hash table hashes,
 * or NULL. */
const ElfW(Sym) *vt_dyn_find(const struct vt_dyn_tables *t, const char *name, uint32_t h)
    __attribute__((visibility("hidden")));

/* Whether a and b are the same string, compared without a call. */
int vt_dyn_same(const char *a, const char *b) __attribute__((visibility("hidden")));

#endif
