/* deepbind.c -- libraries loaded with RTLD_DEEPBIND, bound to the wrappers.
 * See deepbind.h.
 *
 * The real dlopen runs from here (not as a tail jump from the stub) so that
 * vramtrace sees it return: that is safe only where the caller's place
 * does not change what the dynamic linker loads. glibc uses the caller for
 * three things: the namespace (the caller of vramtrace's dlopen is in
 * vramtrace's), dynamic string tokens (`$ORIGIN`...) and, for a name
 * without a slash, the search path (the caller's RPATH chain, RUNPATH and
 * whether default directories are searched), which RTLD_DI_SERINFO lists
 * for any object: a bare name is opened here when the caller's list and
 * vramtrace's are the same. Otherwise the stub jumps to the real dlopen as
 * for any other mode, and a warning says the library is not followed.
 *
 * After the real dlopen, the objects it loaded (those not loaded before)
 * have their relocations read: each GOT slot (R_X86_64_JUMP_SLOT,
 * R_X86_64_GLOB_DAT, R_X86_64_64 with no addend) of a hooked name, or of
 * dlopen, dlsym or dlclose, that holds the definition the object's own
 * scope gives (or, for a lazy slot, still its PLT) is pointed at what the
 * dlsym override hands out for that definition: the wrapper, or a
 * trampoline when it is a second library's function; libc's dl functions
 * become vramtrace's. A slot holding anything else (a definition from
 * elsewhere: an object another thread loaded meanwhile, bound in the
 * global scope to vramtrace's own) is left alone. The slots in the read-only part after
 * relocation (PT_GNU_RELRO) are written between two mprotect calls, as
 * the dynamic linker writes them. The constructors of the objects loaded
 * ran inside the real dlopen, before this: what they allocate is not seen
 * (README, Limits). x86_64 and glibc only, like dlsym_x86_64.S. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../common/warn.h"
#include "deepbind.h"
#include "infront.h"
#include "resolve.h"

#define VT_HIDDEN __attribute__((visibility("hidden")))

typedef void *(*dlsym_fn)(void *, const char *);
typedef void *(*dlopen_fn)(const char *, int);
extern dlsym_fn vt_real_dlsym VT_HIDDEN;
extern dlopen_fn vt_real_dlopen VT_HIDDEN;
void vt_dlopen_before(void) VT_HIDDEN;
/* vramtrace's own dl functions (dlsym_x86_64.S, resolve.c). */
extern char vt_dlsym_entry[] VT_HIDDEN, vt_dlopen_entry[] VT_HIDDEN;
extern __typeof__(dlclose) vt_dlclose_entry VT_HIDDEN;

/* Objects being bound: one thread at a time, so that two dlopens of one
 * library never interleave their mprotect calls on a page. */
static pthread_mutex_t bind_lock = PTHREAD_MUTEX_INITIALIZER;

/* The search path glibc would walk for a bare name opened by `handle`'s
 * object, as one string ("dir\0dir\0..."); NULL when it cannot say. */
static char *search_path(void *handle, size_t *len) {
    Dl_serinfo size;
    if (dlinfo(handle, RTLD_DI_SERINFOSIZE, &size) != 0) return NULL;
    Dl_serinfo *si = malloc(size.dls_size);
    if (!si) return NULL;
    si->dls_size = size.dls_size;
    si->dls_cnt = size.dls_cnt;
    char *out = NULL;
    if (dlinfo(handle, RTLD_DI_SERINFO, si) == 0) {
        size_t n = 0;
        for (unsigned i = 0; i < si->dls_cnt; i++) n += strlen(si->dls_serpath[i].dls_name) + 1;
        out = malloc(n + 1);
        if (out) {
            char *p = out;
            for (unsigned i = 0; i < si->dls_cnt; i++) p = stpcpy(p, si->dls_serpath[i].dls_name) + 1;
            *len = n;
        }
    }
    free(si);
    return out;
}

/* Whether the object at `caller` and vramtrace search the same
 * directories for a bare name. A glibc handle is the object's link_map. */
static int same_search(void *caller) {
    Dl_info info;
    struct link_map *theirs = NULL, *ours = NULL;
    if (!dladdr1(caller, &info, (void **)&theirs, RTLD_DL_LINKMAP) || !theirs) return 0;
    if (!dladdr1((void *)same_search, &info, (void **)&ours, RTLD_DL_LINKMAP) || !ours) return 0;
    if (theirs == ours) return 1;
    size_t a = 0, b = 0;
    char *p = search_path(theirs, &a), *q = search_path(ours, &b);
    int same = p && q && a == b && memcmp(p, q, a) == 0;
    free(p);
    free(q);
    return same;
}

/* The objects loaded at one moment, as dl_iterate_phdr told them (the
 * program headers and names stay while the objects are loaded: these are
 * read while the caller's dlopen holds them). Bound outside the loader's
 * lock that dl_iterate_phdr holds: binding looks symbols up. */
struct object {
    uintptr_t addr;
    const char *name;
    const ElfW(Phdr) *phdr;
    ElfW(Half) phnum;
};

struct objects {
    struct object *at;
    size_t n, cap;
    const struct objects *before; /* when set, note only those not in it */
    int failed;
};

static int was_loaded(const struct objects *o, const struct object *info) {
    for (size_t i = 0; i < o->n; i++)
        if (o->at[i].addr == info->addr && o->at[i].phdr == info->phdr) return 1;
    return 0;
}

static int note_object(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    struct objects *o = data;
    struct object it = {info->dlpi_addr, info->dlpi_name, info->dlpi_phdr, info->dlpi_phnum};
    if (o->before && was_loaded(o->before, &it)) return 0;
    if (o->n == o->cap) {
        size_t cap = o->cap ? 2 * o->cap : 256;
        void *at = realloc(o->at, cap * sizeof *o->at);
        if (!at) {
            o->failed = 1;
            return 1;
        }
        o->at = at;
        o->cap = cap;
    }
    o->at[o->n++] = it;
    return 0;
}

/* The handle whose scope the new objects search first, and whether a slot
 * of the object at hand could not be written. */
struct binding {
    void *handle;
    int failed;
};

static uintptr_t page_down(uintptr_t a) { return a & ~((uintptr_t)sysconf(_SC_PAGESIZE) - 1); }

/* Whether addr is in one of the object's segments of type PT_LOAD with
 * flag `flag` (PF_X, PF_W). */
static int in_load(const struct object *info, uintptr_t addr, unsigned flag) {
    for (int i = 0; i < info->phnum; i++) {
        const ElfW(Phdr) *ph = &info->phdr[i];
        uintptr_t lo = info->addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && (ph->p_flags & flag) && addr >= lo && addr < lo + ph->p_memsz) return 1;
    }
    return 0;
}

/* What vramtrace hands out in place of `def`, the definition of `name`:
 * NULL when it is not a name vramtrace answers for, or def is already its
 * own. */
static void *replacement(const char *name, void *def) {
    int id = vt_hook_by_name(name);
    if (id >= 0) {
        void *w = vt_wrapper_for_def(id, def);
        return w == def ? NULL : w;
    }
    if (strcmp(name, "dlsym") == 0 && def == (void *)vt_real_dlsym) return vt_dlsym_entry;
    if (strcmp(name, "dlopen") == 0 && def == (void *)vt_real_dlopen) return vt_dlopen_entry;
    if (strcmp(name, "dlclose") == 0 && def == vt_real_dlclose()) return (void *)vt_dlclose_entry;
    return NULL;
}

/* Point one slot at `to`: in place, or, in the part the dynamic linker
 * made read-only after relocating, between two mprotect calls. */
static int write_slot(const struct object *info, void **slot, void *to) {
    uintptr_t a = (uintptr_t)slot;
    if (!in_load(info, a, PF_W)) return -1;
    for (int i = 0; i < info->phnum; i++) {
        const ElfW(Phdr) *ph = &info->phdr[i];
        if (ph->p_type != PT_GNU_RELRO) continue;
        uintptr_t lo = page_down(info->addr + ph->p_vaddr);
        uintptr_t hi = page_down(info->addr + ph->p_vaddr + ph->p_memsz);
        if (a < lo || a >= hi) break;
        void *page = (void *)page_down(a); /* a slot is aligned: one page */
        size_t len = (size_t)sysconf(_SC_PAGESIZE);
        if (mprotect(page, len, PROT_READ | PROT_WRITE) != 0) return -1;
        __atomic_store_n(slot, to, __ATOMIC_RELEASE);
        mprotect(page, len, PROT_READ);
        return 0;
    }
    __atomic_store_n(slot, to, __ATOMIC_RELEASE);
    return 0;
}

/* One relocation of an object: its slot pointed at vramtrace's answer
 * when it holds the definition its scope gives the name. */
static void bind_slot(const struct object *info, const ElfW(Rela) *r, const ElfW(Sym) *symtab,
                      const char *strtab, struct binding *b) {
    unsigned type = ELF64_R_TYPE(r->r_info), sym = ELF64_R_SYM(r->r_info);
    if (sym == 0 || (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT && type != R_X86_64_64)) return;
    if (type == R_X86_64_64 && r->r_addend != 0) return;
    const char *name = strtab + symtab[sym].st_name;
    if (vt_hook_by_name(name) < 0 && strcmp(name, "dlsym") != 0 && strcmp(name, "dlopen") != 0 &&
        strcmp(name, "dlclose") != 0)
        return;
    /* The dl functions and the CUDA libraries carry no symbol versions
     * that differ: libc's dlsym@GLIBC_2.2.5 is its dlsym@@GLIBC_2.34. */
    void *def = vt_real_dlsym(b->handle, name);
    if (!def) return; /* bound in the global scope, where vramtrace stands */
    void **slot = (void **)(info->addr + r->r_offset);
    void *now = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    /* A lazy slot (RTLD_LAZY) still holds the address of its PLT entry's
     * second half, in the object's own code; a bound one, def. */
    int lazy = type == R_X86_64_JUMP_SLOT && now != def && in_load(info, (uintptr_t)now, PF_X);
    if (now != def && !lazy) return;
    void *to = replacement(name, def);
    if (to && write_slot(info, slot, to) != 0) b->failed = 1;
}

/* The relocations of one object loaded by the deep dlopen. */
static void bind_object(const struct object *info, struct binding *b) {
    const ElfW(Dyn) *dyn = NULL;
    for (int i = 0; i < info->phnum; i++)
        if (info->phdr[i].p_type == PT_DYNAMIC) dyn = (const ElfW(Dyn) *)(info->addr + info->phdr[i].p_vaddr);
    if (!dyn) return;
    const ElfW(Sym) *symtab = NULL;
    const char *strtab = NULL;
    const ElfW(Rela) *rela = NULL, *jmprel = NULL;
    size_t relasz = 0, pltrelsz = 0;
    int plt_is_rela = 1;
    /* glibc has made the dynamic section's addresses absolute. */
    for (const ElfW(Dyn) *d = dyn; d->d_tag != DT_NULL; d++) {
        switch (d->d_tag) {
        case DT_SYMTAB: symtab = (const ElfW(Sym) *)d->d_un.d_ptr; break;
        case DT_STRTAB: strtab = (const char *)d->d_un.d_ptr; break;
        case DT_RELA: rela = (const ElfW(Rela) *)d->d_un.d_ptr; break;
        case DT_RELASZ: relasz = d->d_un.d_val; break;
        case DT_JMPREL: jmprel = (const ElfW(Rela) *)d->d_un.d_ptr; break;
        case DT_PLTRELSZ: pltrelsz = d->d_un.d_val; break;
        case DT_PLTREL: plt_is_rela = d->d_un.d_val == DT_RELA; break;
        }
    }
    if (!symtab || !strtab) return;
    if (rela)
        for (size_t i = 0; i < relasz / sizeof *rela; i++) bind_slot(info, &rela[i], symtab, strtab, b);
    if (jmprel && plt_is_rela)
        for (size_t i = 0; i < pltrelsz / sizeof *jmprel; i++) bind_slot(info, &jmprel[i], symtab, strtab, b);
    if (b->failed) {
        vt_warn("%s: loaded with RTLD_DEEPBIND: some of its CUDA calls bypass vramtrace and are not recorded "
                "(its GOT could not be written)",
                info->name);
        b->failed = 0;
    }
}

/* Whether an object loaded now has `file` (a bare name) as its file name:
 * glibc then opens that one again and loads nothing. */
static int loaded_by_name(struct dl_phdr_info *info, size_t size, void *file) {
    (void)size;
    const char *base = strrchr(info->dlpi_name, '/');
    return base && strcmp(base + 1, file) == 0;
}

/* The names already said not to be followed (a hash each): a program that
 * opens a plugin again, or probes it with RTLD_NOLOAD, reads the warning
 * once. Past the table's end a name may be said again. */
static uint64_t unfollowed[64];
static size_t n_unfollowed;
static pthread_mutex_t unfollowed_lock = PTHREAD_MUTEX_INITIALIZER;

/* Whether a name that begins with $ORIGIN (or ${ORIGIN}) names no file
 * from the caller's folder: the real dlopen fails, and loads nothing to
 * say anything of. Other names are taken to be there. */
static int origin_names_nothing(const char *file, void *caller) {
    const char *rest = strncmp(file, "$ORIGIN/", 8) == 0 ? file + 7
                       : strncmp(file, "${ORIGIN}/", 10) == 0 ? file + 9 : NULL;
    Dl_info info;
    if (!rest || strchr(rest, '$') || !dladdr(caller, &info) || !info.dli_fname) return 0;
    const char *slash = strrchr(info.dli_fname, '/');
    char path[4096];
    if (!slash || snprintf(path, sizeof path, "%.*s%s", (int)(slash - info.dli_fname), info.dli_fname, rest) >=
                      (int)sizeof path)
        return 0;
    return access(path, F_OK) != 0;
}

/* Say, once per name, that a deep dlopen by a name that depends on its
 * caller is not followed; only a call that may load it says so (not an
 * RTLD_NOLOAD probe, not a bare name already loaded, not a $ORIGIN name
 * of no file: a plugin host probing for plugins that are not there). */
static void say_unfollowed(const char *file, int mode, void *caller) {
    if (mode & RTLD_NOLOAD) return;
    if (!strchr(file, '/') && dl_iterate_phdr(loaded_by_name, (void *)file)) return;
    if (origin_names_nothing(file, caller)) return;
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (const char *c = file; *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ull;
    pthread_mutex_lock(&unfollowed_lock);
    int said = 0;
    for (size_t i = 0; i < n_unfollowed && !said; i++) said = unfollowed[i] == h;
    if (!said && n_unfollowed < sizeof unfollowed / sizeof *unfollowed) unfollowed[n_unfollowed++] = h;
    pthread_mutex_unlock(&unfollowed_lock);
    if (said) return;
    vt_warn("%s: loaded with RTLD_DEEPBIND by a name that depends on its caller: its CUDA calls may bypass vramtrace "
            "and go unrecorded (those that reach a CUDA library loaded before it are recorded)",
            file);
}

void *vt_dlopen_deep(const char *file, int mode, void *caller) {
    vt_dlopen_before();
    if (!vt_real_dlopen || !vt_real_dlsym || !file || vt_behind()) return VT_DLOPEN_PASS;
    int e = errno;
    if (strchr(file, '$') || (!strchr(file, '/') && !same_search(caller))) {
        say_unfollowed(file, mode, caller);
        (void)dlerror();
        errno = e;
        return VT_DLOPEN_PASS;
    }
    struct objects before = {0};
    dl_iterate_phdr(note_object, &before);
    (void)dlerror(); /* the look-ups above leave no error of theirs */
    errno = e;
    void *h = vt_real_dlopen(file, mode);
    if (!h) {
        free(before.at);
        return NULL; /* dlerror() and errno are the real dlopen's */
    }
    e = errno;
    struct objects loaded = {.before = &before};
    if (!before.failed) dl_iterate_phdr(note_object, &loaded);
    if (!before.failed && !loaded.failed) {
        struct binding b = {h, 0};
        pthread_mutex_lock(&bind_lock);
        for (size_t i = 0; i < loaded.n; i++) bind_object(&loaded.at[i], &b);
        pthread_mutex_unlock(&bind_lock);
    } else {
        vt_warn("%s: loaded with RTLD_DEEPBIND: its CUDA calls bypass vramtrace and are not recorded (out of memory)",
                file);
    }
    free(before.at);
    free(loaded.at);
    (void)dlerror(); /* a dlopen that succeeded leaves none */
    errno = e;
    return h;
}
