/* exports.c -- vramtrace's CUDA names, seen only where CUDA is.
 *
 * The library exports the hooked CUDA names (route 1). In a process that has
 * no CUDA library those exports must not exist: a program's weak reference
 * to cudaMalloc must read 0, dlsym and ctypes must find nothing, as without
 * vramtrace. The exports are plain functions in the file. When the library
 * itself is relocated (every object loaded at start-up is mapped and, except
 * the executable, relocated by then), a local indirect function's resolver
 * looks for a CUDA library in the link map. When one is there nothing
 * changes. Otherwise each CUDA export's dynamic symbol is rewritten in
 * place, in one of two states:
 *   - hidden: typed STT_SECTION, which no symbol lookup accepts, so the
 *     executable's relocations and every dlsym answer as without vramtrace
 *     (dlerror() included);
 *   - indirect: STT_GNU_IFUNC with this file's resolver as its value, which
 *     the dynamic linker runs for each reference it binds, and which returns
 *     the wrapper when a CUDA library is loaded by then, NULL otherwise.
 * A dlopen switches to indirect before the real dlopen runs (the objects it
 * loads are relocated while it runs: one that brings libcudart or links it
 * binds to the wrappers; one without CUDA gets NULL for its weak
 * references). The dlsym override switches back to hidden before it answers
 * a CUDA name while no CUDA library is loaded. Once one has been seen the
 * symbols stay indirect for good and the resolver returns the wrappers.
 *
 * Why not make the exports indirect functions in the file: the objects
 * loaded at start-up are relocated before this library (only the
 * executable after it), and glibc prints "Relink `libX' with
 * `libvramtrace.so' for IFUNC symbol" for each such object that binds one
 * of them early (LD_BIND_NOW, -z now, a function pointer), then runs the
 * resolver of a library not yet relocated. A plain export at start-up and
 * the rewrite when this library is relocated avoid both.
 *
 * Wrappers are called through the caller's GOT as before: this costs
 * nothing per call. x86_64 and glibc only, like dlsym_x86_64.S. */
#define _GNU_SOURCE
#include <elf.h>
#include <link.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>

#include "exports.h"
#include "resolve.h"

#define VT_HIDDEN __attribute__((visibility("hidden")))
/* Code that runs while the dynamic linker relocates this library: it may
 * call nothing (the PLT is not ready) and must not be instrumented. */
#define VT_EARLY __attribute__((no_sanitize("address", "undefined", "thread"), noinline))

extern const ElfW(Ehdr) __ehdr_start VT_HIDDEN;
extern ElfW(Dyn) _DYNAMIC[] VT_HIDDEN;

/* The exported wrappers (by address only) and, for each, its resolver. */
#define VT_PICK(sym)                                                          \
    extern void vt_e_##sym(void) __asm__(#sym);                               \
    VT_EARLY static void *vt_pick_##sym(void) { return vt_exports_pick((void *)vt_e_##sym); }
#define VT_DRIVER(sym, base, ver, ptsz) VT_PICK(sym)
#define VT_RUNTIME(sym) VT_PICK(sym)
static void *vt_exports_pick(void *wrapper);
#include "hooks.def"
#undef VT_DRIVER
#undef VT_RUNTIME

static const struct {
    const char *name;
    void *(*pick)(void);
} exports[VT_ID_COUNT] = {
#define VT_DRIVER(sym, base, ver, ptsz) {#sym, vt_pick_##sym},
#define VT_RUNTIME(sym) {#sym, vt_pick_##sym},
#include "hooks.def"
#undef VT_DRIVER
#undef VT_RUNTIME
};

enum { EXPORTS_PLAIN, EXPORTS_HIDDEN, EXPORTS_INDIRECT };

static ElfW(Sym) *sym_of[VT_ID_COUNT]; /* this library's dynamic symbols */
static int state = EXPORTS_PLAIN;      /* written under the lock after start-up */
static int cuda_seen;                  /* a CUDA library was loaded once */
static char lock; /* a spin lock: the dlsym path may run before a sanitizer's interceptors work */

static void lock_state(void) { while (__atomic_test_and_set(&lock, __ATOMIC_ACQUIRE)) __builtin_ia32_pause(); }
static void unlock_state(void) { __atomic_clear(&lock, __ATOMIC_RELEASE); }

VT_EARLY static int same(const char *a, const char *b) {
    while (*a && *a == *b) a++, b++;
    return *a == *b;
}

VT_EARLY static int starts(const char *s, const char *prefix) {
    while (*prefix && *s == *prefix) s++, prefix++;
    return *prefix == '\0';
}

/* Whether libcuda.so* or libcudart* is in the link map. The list is read
 * without a lock: objects are linked in before they are relocated and a
 * CUDA library, once seen, is remembered. */
VT_EARLY static int cuda_loaded(void) {
    if (__atomic_load_n(&cuda_seen, __ATOMIC_ACQUIRE)) return 1;
    for (struct link_map *l = _r_debug.r_map; l; l = l->l_next) {
        const char *base = l->l_name ? l->l_name : "";
        for (const char *p = base; *p; p++)
            if (*p == '/') base = p + 1;
        if (starts(base, "libcuda.so") || starts(base, "libcudart")) {
            __atomic_store_n(&cuda_seen, 1, __ATOMIC_RELEASE);
            return 1;
        }
    }
    return 0;
}

VT_EARLY static void *vt_exports_pick(void *wrapper) { return cuda_loaded() ? wrapper : NULL; }

/* A dynamic-section address: glibc may have made it absolute already. */
VT_EARLY static uintptr_t dyn_addr(uintptr_t base, uintptr_t v) { return v < base ? base + v : v; }

/* mprotect without libc (the PLT may not be ready). */
VT_EARLY static long sys_mprotect(uintptr_t addr, size_t len, long prot) {
    long r;
    __asm__ volatile("syscall" : "=a"(r) : "0"(10L), "D"(addr), "S"(len), "d"(prot) : "rcx", "r11", "memory");
    return r;
}

/* The pages holding this library's dynamic symbols, and their protection. */
static uintptr_t page_lo, page_hi;
static long page_prot;

/* The GNU hash of a symbol name (the dynamic linker's dl_new_hash). */
VT_EARLY static uint32_t gnu_hash(const char *name) {
    uint32_t h = 5381;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) h = h * 33 + *p;
    return h;
}

/* Find the dynamic symbols of the exports in the GNU hash table. Returns 0
 * when the table is not as expected; the exports then stay plain. */
VT_EARLY static int find_symbols(void) {
    uintptr_t base = (uintptr_t)&__ehdr_start;
    ElfW(Sym) *symtab = NULL;
    const char *strtab = NULL;
    const uint32_t *gnu = NULL;
    for (ElfW(Dyn) *d = _DYNAMIC; d->d_tag != DT_NULL; d++) {
        if (d->d_tag == DT_SYMTAB) symtab = (ElfW(Sym) *)dyn_addr(base, d->d_un.d_ptr);
        if (d->d_tag == DT_STRTAB) strtab = (const char *)dyn_addr(base, d->d_un.d_ptr);
        if (d->d_tag == DT_GNU_HASH) gnu = (const uint32_t *)dyn_addr(base, d->d_un.d_ptr);
    }
    if (!symtab || !strtab || !gnu) return 0;
    uint32_t nbuckets = gnu[0], symoffset = gnu[1], bloom = gnu[2];
    const uint32_t *buckets = gnu + 4 + bloom * (sizeof(ElfW(Addr)) / 4);
    const uint32_t *chain = buckets + nbuckets;
    if (nbuckets == 0) return 0;
    /* Each export looked up by its GNU hash, as the dynamic linker does (a
     * scan of every symbol against every name cost some 100,000
     * instructions at every process start): the first defined function of
     * that name in its bucket's chain, the lowest index, as a scan finds. */
    int found = 0;
    for (int id = 0; id < VT_ID_COUNT; id++) {
        uint32_t h = gnu_hash(exports[id].name);
        uint32_t i = buckets[h % nbuckets];
        if (i < symoffset) continue;
        for (;; i++) {
            uint32_t c = chain[i - symoffset];
            ElfW(Sym) *s = &symtab[i];
            if ((c | 1) == (h | 1) && s->st_shndx != SHN_UNDEF && ELF64_ST_TYPE(s->st_info) == STT_FUNC &&
                same(strtab + s->st_name, exports[id].name)) {
                sym_of[id] = s;
                found++;
                uintptr_t a = (uintptr_t)s, e = a + sizeof *s;
                if (!page_lo || a < page_lo) page_lo = a;
                if (e > page_hi) page_hi = e;
                break;
            }
            if (c & 1) break;
        }
    }
    if (found != VT_ID_COUNT) return 0;
    page_lo &= ~(uintptr_t)4095;
    page_hi = (page_hi + 4095) & ~(uintptr_t)4095;
    const ElfW(Phdr) *ph = (const ElfW(Phdr) *)(base + __ehdr_start.e_phoff);
    for (int i = 0; i < __ehdr_start.e_phnum; i++) {
        if (ph[i].p_type != PT_LOAD) continue;
        uintptr_t lo = base + ph[i].p_vaddr, hi = lo + ph[i].p_memsz;
        if (page_lo >= (lo & ~(uintptr_t)4095) && page_hi <= ((hi + 4095) & ~(uintptr_t)4095)) {
            if (ph[i].p_flags & PF_W) return 0; /* not expected: leave it */
            page_prot = (ph[i].p_flags & PF_R ? PROT_READ : 0) | (ph[i].p_flags & PF_X ? PROT_EXEC : 0);
            return 1;
        }
    }
    return 0;
}

/* Rewrite every export's symbol for `to`. Symbol types are single bytes,
 * written one at a time, and an indirect symbol's value (its resolver) is
 * set while it is still hidden: a concurrent lookup sees one state or the
 * other for each symbol, never a mix. */
VT_EARLY static void set_state(int to) {
    if (state == to || !page_lo) return;
    if (sys_mprotect(page_lo, page_hi - page_lo, page_prot | PROT_WRITE) != 0) return;
    uintptr_t base = (uintptr_t)&__ehdr_start;
    for (int id = 0; id < VT_ID_COUNT; id++) {
        ElfW(Sym) *s = sym_of[id];
        int bind = ELF64_ST_BIND(s->st_info);
        if (state == EXPORTS_PLAIN) {
            __atomic_store_n(&s->st_info, ELF64_ST_INFO(bind, STT_SECTION), __ATOMIC_RELEASE);
            __atomic_store_n(&s->st_value, (uintptr_t)exports[id].pick - base, __ATOMIC_RELEASE);
        }
        __atomic_store_n(&s->st_info, ELF64_ST_INFO(bind, to == EXPORTS_HIDDEN ? STT_SECTION : STT_GNU_IFUNC),
                         __ATOMIC_RELEASE);
    }
    sys_mprotect(page_lo, page_hi - page_lo, page_prot);
    state = to;
}

/* Runs once, while the dynamic linker relocates this library. */
VT_EARLY static void at_load_done(void) {}
VT_EARLY static void (*at_load(void))(void) {
    if (!cuda_loaded() && find_symbols()) set_state(EXPORTS_HIDDEN);
    return at_load_done;
}
static void at_load_hook(void) __attribute__((ifunc("at_load")));
__attribute__((used)) static void (*const at_load_ref)(void) = at_load_hook;

VT_EARLY void vt_exports_before_dlopen(void) {
    if (__atomic_load_n(&cuda_seen, __ATOMIC_ACQUIRE)) return;
    lock_state();
    set_state(EXPORTS_INDIRECT);
    unlock_state();
}

VT_EARLY int vt_exports_hidden(void) {
    if (cuda_loaded()) {
        if (__atomic_load_n(&state, __ATOMIC_ACQUIRE) == EXPORTS_HIDDEN) {
            lock_state();
            set_state(EXPORTS_INDIRECT);
            unlock_state();
        }
        return 0;
    }
    lock_state();
    set_state(EXPORTS_HIDDEN);
    int hidden = state == EXPORTS_HIDDEN;
    unlock_state();
    return hidden;
}
