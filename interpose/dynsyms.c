/* dynsyms.c -- a loaded object's dynamic symbols (dynsyms.h). */
#define _GNU_SOURCE
#include <stddef.h>

#include "dynsyms.h"

/* Beside the library's other start-up code, uninstrumented, never inlined
 * into code that a sanitizer would instrument. */
#define VT_EARLY __attribute__((no_sanitize("address", "undefined", "thread"), noinline, section(".text.startup")))

VT_EARLY uintptr_t vt_dyn_addr(uintptr_t base, uintptr_t v) { return v < base ? base + v : v; }

VT_EARLY uint32_t vt_gnu_symbols(const uint32_t *buckets, uint32_t nbuckets, const uint32_t *chain,
                                 uint32_t symoffset) {
    uint32_t last = 0;
    for (uint32_t b = 0; b < nbuckets; b++)
        if (buckets[b] > last) last = buckets[b];
    if (last < symoffset) return symoffset;
    while (!(chain[last - symoffset] & 1)) last++;
    return last + 1;
}

VT_EARLY int vt_dyn_tables(const struct link_map *l, struct vt_dyn_tables *t) {
    uintptr_t base = l->l_addr;
    *t = (struct vt_dyn_tables){0};
    for (const ElfW(Dyn) *d = l->l_ld; d && d->d_tag != DT_NULL; d++) {
        if (d->d_tag == DT_SYMTAB) t->symtab = (const ElfW(Sym) *)vt_dyn_addr(base, d->d_un.d_ptr);
        if (d->d_tag == DT_STRTAB) t->strtab = (const char *)vt_dyn_addr(base, d->d_un.d_ptr);
        if (d->d_tag == DT_GNU_HASH) t->gnu = (const uint32_t *)vt_dyn_addr(base, d->d_un.d_ptr);
        if (d->d_tag == DT_HASH) t->sysv = (const uint32_t *)vt_dyn_addr(base, d->d_un.d_ptr);
        if (t->symtab && t->strtab && t->gnu) break; /* DT_HASH then unneeded */
    }
    return t->symtab && t->strtab ? 0 : -1;
}

VT_EARLY int vt_dyn_symbols(const struct link_map *l, const ElfW(Sym) **symtab, const char **strtab, uint32_t *n) {
    struct vt_dyn_tables t;
    *symtab = NULL;
    *strtab = NULL;
    if (vt_dyn_tables(l, &t) != 0 || (!t.gnu && !t.sysv)) return -1;
    *symtab = t.symtab;
    *strtab = t.strtab;
    if (t.sysv) {
        *n = t.sysv[1]; /* nchain: the number of symbols */
        return 0;
    }
    if (t.gnu[0] == 0) return -1;
    const uint32_t *buckets = t.gnu + 4 + t.gnu[2] * (sizeof(ElfW(Addr)) / 4);
    *n = vt_gnu_symbols(buckets, t.gnu[0], buckets + t.gnu[0], t.gnu[1]);
    return 0;
}

VT_EARLY uint32_t vt_dyn_gnu_hash(const char *name) {
    uint32_t h = 5381;
    for (const char *c = name; *c; c++) h = h * 33 + (unsigned char)*c;
    return h;
}

/* The table's layout and look-up are the GNU hash section's (the dynamic
 * linker's own): a bloom filter of two bits a symbol, buckets, then one
 * word a hashed symbol, its hash with the low bit marking a chain's end. */
VT_EARLY const ElfW(Sym) *vt_dyn_find(const struct vt_dyn_tables *t, const char *name, uint32_t h) {
    const uint32_t *gnu = t->gnu;
    uint32_t nbuckets = gnu[0], symoffset = gnu[1], nbloom = gnu[2], shift = gnu[3];
    if (nbuckets == 0 || nbloom == 0) return NULL;
    const ElfW(Addr) *bloom = (const ElfW(Addr) *)(gnu + 4);
    const unsigned bits = sizeof(ElfW(Addr)) * 8;
    ElfW(Addr) word = bloom[(h / bits) % nbloom];
    if (!((word >> (h % bits)) & (word >> ((h >> shift) % bits)) & 1)) return NULL;
    const uint32_t *buckets = gnu + 4 + nbloom * (sizeof(ElfW(Addr)) / 4), *chain = buckets + nbuckets;
    uint32_t i = buckets[h % nbuckets];
    if (i < symoffset) return NULL;
    for (;; i++) {
        uint32_t ch = chain[i - symoffset];
        if ((ch | 1) == (h | 1) && vt_dyn_same(t->strtab + t->symtab[i].st_name, name)) return &t->symtab[i];
        if (ch & 1) return NULL;
    }
}

VT_EARLY int vt_dyn_same(const char *a, const char *b) {
    while (*a && *a == *b) a++, b++;
    return *a == *b;
}
