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
 * place (at once when an object relocated after this library names a "cu"
 * symbol, else at the first dlsym or dlopen, before the real one runs), in
 * one of two states:
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
#include <sys/syscall.h>

#include "../common/rawsys.h"
#include "dynsyms.h"
#include "exports.h"
#include "hooklist.h"
#include "infront.h"
#include "resolve.h"

#define VT_HIDDEN __attribute__((visibility("hidden")))
/* Code that runs while the dynamic linker relocates this library: it may
 * call nothing (the PLT is not ready) and must not be instrumented. */
#define VT_EARLY __attribute__((no_sanitize("address", "undefined", "thread"), noinline, section(".text.startup")))

extern const ElfW(Ehdr) __ehdr_start VT_HIDDEN;
extern ElfW(Dyn) _DYNAMIC[] VT_HIDDEN;

/* Each export's resolver (an indirect symbol's: it gets no argument, so
 * one a hook), and where each is, as hooklist.h keeps the wrappers: by its
 * distance from its entry in pick_at, which no relocation writes. */
static void *vt_exports_pick(int id);
#define VT_PICK(sym) \
    __attribute__((used, visibility("hidden"))) VT_EARLY void *vt_pick_##sym(void) { return vt_exports_pick(VT_ID_##sym); }
#define VT_DRIVER(sym, base, ver, ptsz) VT_PICK(sym)
#define VT_RUNTIME(sym) VT_PICK(sym)
#include "hooks.def"
#undef VT_DRIVER
#undef VT_RUNTIME

extern const int32_t pick_at[VT_ID_COUNT] __asm__("vt_exports_pick_at") VT_HIDDEN;
__asm__(".pushsection .rodata\n"
        ".balign 4\n"
        ".globl vt_exports_pick_at\n"
        ".hidden vt_exports_pick_at\n"
        ".type vt_exports_pick_at, @object\n"
        "vt_exports_pick_at:\n"
#define VT_DRIVER(sym, base, ver, ptsz) ".long vt_pick_" #sym " - .\n"
#define VT_RUNTIME(sym) ".long vt_pick_" #sym " - .\n"
#include "hooks.def"
#undef VT_DRIVER
#undef VT_RUNTIME
        ".size vt_exports_pick_at, . - vt_exports_pick_at\n"
        ".popsection\n");

VT_EARLY static uintptr_t pick_of(int id) { return (uintptr_t)&pick_at[id] + (uintptr_t)(intptr_t)pick_at[id]; }

enum { EXPORTS_PLAIN, EXPORTS_HIDDEN, EXPORTS_INDIRECT };

static ElfW(Sym) *sym_of[VT_ID_COUNT]; /* this library's dynamic symbols */
static int state = EXPORTS_PLAIN;      /* written under the lock after start-up */
static int cuda_seen;                  /* a CUDA library was loaded once */
static char lock; /* a spin lock: the dlsym path may run before a sanitizer's interceptors work */

static void lock_state(void) { while (__atomic_test_and_set(&lock, __ATOMIC_ACQUIRE)) __builtin_ia32_pause(); }
static void unlock_state(void) { __atomic_clear(&lock, __ATOMIC_RELEASE); }

VT_EARLY static int starts(const char *s, const char *prefix) {
    while (*prefix && *s == *prefix) s++, prefix++;
    return *prefix == '\0';
}

/* Whether libcuda.so* or libcudart* is in the link map. The list is read
 * without a lock: objects are linked in before they are relocated and a
 * CUDA library, once seen, is remembered. The names are built on the stack,
 * not read from constant data: at load, each page read is a page fault. */
VT_EARLY static int cuda_mapped(void) {
    const char driver[] = {'l', 'i', 'b', 'c', 'u', 'd', 'a', '.', 's', 'o', 0};
    const char runtime[] = {'l', 'i', 'b', 'c', 'u', 'd', 'a', 'r', 't', 0};
    for (struct link_map *l = _r_debug.r_map; l; l = l->l_next) {
        const char *base = l->l_name;
        if (!base) continue;
        for (const char *p = base; *p; p++)
            if (*p == '/') base = p + 1;
        if (starts(base, driver) || starts(base, runtime)) {
            __atomic_store_n(&cuda_seen, 1, __ATOMIC_RELEASE);
            return 1;
        }
    }
    return 0;
}

VT_EARLY static int cuda_loaded(void) {
    return __atomic_load_n(&cuda_seen, __ATOMIC_ACQUIRE) || cuda_mapped();
}

VT_EARLY static void *vt_exports_pick(int id) { return cuda_loaded() ? vt_hook_wrapper(id) : NULL; }

/* mprotect without libc (the PLT may not be ready: rawsys.h). */
VT_EARLY static long sys_mprotect(uintptr_t addr, size_t len, long prot) {
    return vt_sys3(SYS_mprotect, (long)addr, (long)len, prot);
}

/* The pages holding this library's dynamic symbols, and their protection. */
static uintptr_t page_lo, page_hi;
static long page_prot;

/* A slot of `by_value` for a symbol value (a wrapper's offset in the
 * library): 256 slots for VT_ID_COUNT wrappers. */
#define VT_VALUE_SLOTS 256
_Static_assert(VT_ID_COUNT < VT_VALUE_SLOTS / 2 && VT_ID_COUNT < 255, "the value table must stay sparse");
VT_EARLY static unsigned value_slot(uintptr_t v) {
    return (unsigned)(((uint64_t)v * 0x9E3779B97F4A7C15ull) >> 56);
}

/* Find the dynamic symbols of the exports. Returns 0 when the table is not
 * as expected; the exports then stay plain. Each export is the defined
 * function whose value is its wrapper's address: the defined symbols are
 * scanned once and each value looked up in a small table of the wrappers'
 * offsets (hashing and comparing every export's name cost some 16,000
 * instructions at every process start, a scan of every symbol against every
 * name some 100,000). The export's own symbol has its wrapper's value by
 * definition; another of the same value (an alias) is told apart by name. */
VT_EARLY static int find_symbols(void) {
    uintptr_t base = (uintptr_t)&__ehdr_start;
    ElfW(Sym) *symtab = NULL;
    const char *strtab = NULL;
    const uint32_t *gnu = NULL;
    for (ElfW(Dyn) *d = _DYNAMIC; d->d_tag != DT_NULL; d++) {
        if (d->d_tag == DT_SYMTAB) symtab = (ElfW(Sym) *)vt_dyn_addr(base, d->d_un.d_ptr);
        if (d->d_tag == DT_STRTAB) strtab = (const char *)vt_dyn_addr(base, d->d_un.d_ptr);
        if (d->d_tag == DT_GNU_HASH) gnu = (const uint32_t *)vt_dyn_addr(base, d->d_un.d_ptr);
    }
    if (!symtab || !strtab || !gnu) return 0;
    uint32_t nbuckets = gnu[0], symoffset = gnu[1], bloom = gnu[2];
    const uint32_t *buckets = gnu + 4 + bloom * (sizeof(ElfW(Addr)) / 4);
    const uint32_t *chain = buckets + nbuckets;
    if (nbuckets == 0) return 0;
    /* Static, so that no loop here becomes a call to memset: this runs once,
     * before anything else can run in the process. */
    static uint8_t by_value[VT_VALUE_SLOTS]; /* export id + 1, 0 for none */
    for (int id = 0; id < VT_ID_COUNT; id++) {
        unsigned k = value_slot((uintptr_t)vt_hook_wrapper(id) - base);
        while (by_value[k]) k = (k + 1) % VT_VALUE_SLOTS;
        by_value[k] = (uint8_t)(id + 1);
    }
    uint32_t nsyms = vt_gnu_symbols(buckets, nbuckets, chain, symoffset);
    for (uint32_t i = symoffset; i < nsyms; i++) {
        ElfW(Sym) *s = &symtab[i];
        if (s->st_shndx == SHN_UNDEF || ELF64_ST_TYPE(s->st_info) != STT_FUNC) continue;
        for (unsigned k = value_slot(s->st_value); by_value[k]; k = (k + 1) % VT_VALUE_SLOTS) {
            int id = by_value[k] - 1;
            if ((uintptr_t)vt_hook_wrapper(id) - base != s->st_value) continue;
            /* An alias of the wrapper: keep the one of the export's name. */
            if (!sym_of[id] || (!vt_dyn_same(strtab + sym_of[id]->st_name, vt_hook_name(id)) &&
                                vt_dyn_same(strtab + s->st_name, vt_hook_name(id))))
                sym_of[id] = s;
            break;
        }
    }
    for (int id = 0; id < VT_ID_COUNT; id++) {
        if (!sym_of[id]) return 0;
        uintptr_t a = (uintptr_t)sym_of[id], e = a + sizeof *sym_of[id];
        if (!page_lo || a < page_lo) page_lo = a;
        if (e > page_hi) page_hi = e;
    }
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

/* Whether the exports' symbols were found, looking for them the first time
 * (under the lock, or while this library is relocated). */
static int symbols_state; /* 0: not looked for; 1: found; -1: not as expected */
VT_EARLY static int have_symbols(void) {
    if (symbols_state == 0) symbols_state = find_symbols() ? 1 : -1;
    return symbols_state > 0;
}

/* Whether object l has an undefined symbol beginning "cu" (every hooked
 * name does), or may have: any doubt answers yes. */
VT_EARLY static int names_cuda(const struct link_map *l) {
    const ElfW(Sym) *symtab;
    const char *strtab;
    uint32_t n;
    if (vt_dyn_symbols(l, &symtab, &strtab, &n) != 0) return 1;
    /* Undefined symbols are not all first: an executable's import whose
     * address it takes is hashed with its definitions. */
    for (uint32_t i = 1; i < n; i++) {
        if (symtab[i].st_shndx != SHN_UNDEF) continue;
        const char *name = strtab + symtab[i].st_name;
        if (name[0] == 'c' && name[1] == 'u') return 1;
    }
    return 0;
}

/* Whether an object relocated after this library names a hooked name: the
 * objects before it in the link map (the executable, earlier preloads),
 * whose relocations are made right after this library's. */
VT_EARLY static int named_after_us(void) {
    for (const struct link_map *l = _r_debug.r_map; l; l = l->l_next) {
        if (l->l_ld == _DYNAMIC) return 0;
        if (names_cuda(l)) return 1;
    }
    return 1;
}

/* Whether an object other than this library defines `name`. */
VT_EARLY static int defined_elsewhere(const char *name) {
    for (const struct link_map *l = _r_debug.r_map; l; l = l->l_next) {
        if (l->l_ld == _DYNAMIC) continue;
        const ElfW(Sym) *symtab;
        const char *strtab;
        uint32_t n;
        if (vt_dyn_symbols(l, &symtab, &strtab, &n) != 0) return 1; /* in doubt, yes */
        for (uint32_t i = 1; i < n; i++)
            if (symtab[i].st_shndx != SHN_UNDEF && vt_dyn_same(strtab + symtab[i].st_name, name)) return 1;
    }
    return 0;
}

/* When the exports are hidden at load, an object relocated after this
 * library (the executable) that needs one of their names which nothing
 * else defines cannot start: the link editor bound it to the export and,
 * linking --as-needed, dropped the CUDA library the program was linked
 * with (-lvramtrace ahead of it). The dynamic linker then says only
 * "undefined symbol"; one line before it says why and what to do. This
 * runs while the library is relocated: written with the system call. */
VT_EARLY static void say_unlinked(void) {
    for (const struct link_map *l = _r_debug.r_map; l && l->l_ld != _DYNAMIC; l = l->l_next) {
        const ElfW(Sym) *symtab;
        const char *strtab;
        uint32_t n;
        if (vt_dyn_symbols(l, &symtab, &strtab, &n) != 0) continue;
        for (uint32_t i = 1; i < n; i++) {
            const ElfW(Sym) *s = &symtab[i];
            const char *name = strtab + s->st_name;
            if (s->st_shndx != SHN_UNDEF || ELF64_ST_BIND(s->st_info) != STB_GLOBAL || name[0] != 'c' || name[1] != 'u')
                continue;
            int id = 0;
            while (id < VT_ID_COUNT && !vt_dyn_same(vt_hook_name(id), name)) id++;
            if (id == VT_ID_COUNT || defined_elsewhere(name)) continue;
            static const char head[] = "vramtrace: error: the program needs ";
            static const char tail[] =
                ", which no library loaded here defines: it was linked against libvramtrace.so's CUDA names, not "
                "its CUDA library (-lvramtrace ahead of it, linked --as-needed); put -Wl,--no-as-needed before "
                "-lvramtrace (after the CUDA library, --as-needed drops it unless the program calls its API)\n";
            size_t len = 0;
            while (name[len]) { /* the barrier keeps the loop from becoming a call to strlen */
                __asm__("" : "+r"(len));
                len++;
            }
            struct { const void *base; size_t len; } iov[3] = {
                {head, sizeof head - 1}, {name, len}, {tail, sizeof tail - 1}};
            long r;
            __asm__ volatile("syscall" : "=a"(r) : "0"(20L), "D"(2L), "S"(iov), "d"(3L) : "rcx", "r11", "memory");
            (void)r;
            return;
        }
    }
}

/* Rewrite every export's symbol for `to`. Symbol types are single bytes,
 * written one at a time, and an indirect symbol's value (its resolver) is
 * set while it is still hidden: a concurrent lookup sees one state or the
 * other for each symbol, never a mix. */
VT_EARLY static void set_state(int to) {
    if (state == to || !have_symbols()) return;
    if (sys_mprotect(page_lo, page_hi - page_lo, page_prot | PROT_WRITE) != 0) return;
    uintptr_t base = (uintptr_t)&__ehdr_start;
    for (int id = 0; id < VT_ID_COUNT; id++) {
        ElfW(Sym) *s = sym_of[id];
        int bind = ELF64_ST_BIND(s->st_info);
        if (state == EXPORTS_PLAIN) {
            __atomic_store_n(&s->st_info, ELF64_ST_INFO(bind, STT_SECTION), __ATOMIC_RELEASE);
            __atomic_store_n(&s->st_value, pick_of(id) - base, __ATOMIC_RELEASE);
        }
        __atomic_store_n(&s->st_info, ELF64_ST_INFO(bind, to == EXPORTS_HIDDEN ? STT_SECTION : STT_GNU_IFUNC),
                         __ATOMIC_RELEASE);
    }
    sys_mprotect(page_lo, page_hi - page_lo, page_prot);
    state = to;
}

/* Runs once, while the dynamic linker relocates this library. A library
 * behind the C library (infront.h: loaded by dlopen, or linked after it)
 * tracks nothing: its exports are hidden now and for good, before any
 * object can bind one (a CUDA library loaded after an RTLD_GLOBAL dlopen
 * of vramtrace found the wrappers first, its own calls to its own names
 * included). In front, the exports are hidden now only when an object
 * relocated after it (the executable, mostly) has an undefined "cu" name:
 * rewriting the symbols costs two mprotect calls and a copied page, some
 * 15 us, at the start of every process an LD_PRELOAD reaches. Otherwise
 * they stay plain, which no look-up can tell apart until the first dlsym
 * or dlopen, and those switch the state before the real ones run. */
VT_EARLY static void at_load_done(void) {}
VT_EARLY static void (*at_load(void))(void) {
    if (vt_front_find()) {
        set_state(EXPORTS_HIDDEN);
    } else if (!cuda_mapped() && named_after_us()) {
        set_state(EXPORTS_HIDDEN);
        say_unlinked();
    }
    return at_load_done;
}
static void at_load_hook(void) __attribute__((ifunc("at_load")));
__attribute__((used)) static void (*const at_load_ref)(void) = at_load_hook;

VT_EARLY int vt_exports_cuda_mapped(void) { return cuda_mapped(); }

VT_EARLY void vt_exports_before_dlopen(void) {
    if (__atomic_load_n(&cuda_seen, __ATOMIC_ACQUIRE) || vt_behind()) return;
    lock_state();
    set_state(EXPORTS_INDIRECT);
    unlock_state();
}

VT_EARLY int vt_exports_hidden(void) {
    if (vt_behind()) return __atomic_load_n(&state, __ATOMIC_ACQUIRE) == EXPORTS_HIDDEN;
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
