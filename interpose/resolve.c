/* resolve.c -- real functions, the dlsym filter and cuGetProcAddress swaps. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <stdint.h>
#include <string.h>

#include "../tracker/stack.h"
#include "exports.h"
#include "hooklist.h"
#include "infront.h"
#include "resolve.h"
#include "unload.h"

#define VT_HIDDEN __attribute__((visibility("hidden")))
/* The dlsym path runs before anything else in the process, a sanitizer's
 * own start-up included (it looks up the functions it intercepts): in a
 * sanitized build of vramtrace it must not be instrumented. */
#define VT_EARLY __attribute__((no_sanitize("address", "undefined", "thread")))
/* cuGetProcAddress flag asking for the per-thread default stream variant
 * (CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM in cuda.h). */
#define VT_PROC_PTDS 2ull
#define VT_DLSYM_PASS ((void *)-1)
#define VT_ABSENT ((void *)1)

/* Names under which cuGetProcAddress hands out a hooked function from a
 * version on (hooks.def's VT_ALIAS): at CUDA 12.0 "cuGraphInstantiate" is
 * cuGraphInstantiateWithFlags, whose arguments differ from the older
 * cuGraphInstantiate's. */
static const struct { const char *base; int version; int ptsz; int id; } aliases[] = {
#define VT_DRIVER(sym, base, ver, ptsz)
#define VT_RUNTIME(sym)
#define VT_ALIAS(base, ver, ptsz, sym) {#base, ver, ptsz, VT_ID_##sym},
#include "hooks.def"
#undef VT_DRIVER
#undef VT_RUNTIME
#undef VT_ALIAS
};
#define VT_NALIASES (sizeof aliases / sizeof aliases[0])

VT_HIDDEN void *vt_real_fn[VT_ID_COUNT]; /* what each wrapper calls */
static void *driver_export[VT_ID_COUNT]; /* the driver's own export, or VT_ABSENT */
static void *driver_handle;

/* A hook whose name more than one library defines (two drivers loaded
 * RTLD_LOCAL, say) is shared: its vt_real_fn slot stays NULL, so that its
 * wrapper always asks vt_real_slow, which takes the function a trampoline
 * left in vt_redirect, else the primary one (the first found). */
static void *primary[VT_ID_COUNT];
static int shared[VT_ID_COUNT];
VT_HIDDEN __thread void *vt_redirect __attribute__((tls_model("initial-exec")));

/* Trampoline k (trampoline_x86_64.S, 32 bytes each) sets vt_redirect to
 * vt_tramp_target[k] and jumps to the wrapper vt_tramp_wrapper[k]. */
#define VT_TRAMPOLINES 64
extern char vt_trampolines[] VT_HIDDEN;
VT_HIDDEN void *vt_tramp_target[VT_TRAMPOLINES];
VT_HIDDEN void *vt_tramp_wrapper[VT_TRAMPOLINES];
static int tramp_id[VT_TRAMPOLINES];
static int tramp_count;

/* Guards the real-function slots, the shared marks and the trampolines
 * (a spin lock: this runs before a sanitizer's interceptors are ready). */
static char slot_lock;
static void lock_slots(void) { while (__atomic_test_and_set(&slot_lock, __ATOMIC_ACQUIRE)) __builtin_ia32_pause(); }
static void unlock_slots(void) { __atomic_clear(&slot_lock, __ATOMIC_RELEASE); }

typedef void *(*dlsym_fn)(void *, const char *);
typedef void *(*dlopen_fn)(const char *, int);
VT_HIDDEN dlsym_fn vt_real_dlsym;
VT_HIDDEN dlopen_fn vt_real_dlopen;

VT_EARLY void vt_resolve_init(void) {
    if (__atomic_load_n(&vt_real_dlsym, __ATOMIC_ACQUIRE)) return;
    dlopen_fn o = (dlopen_fn)dlvsym(RTLD_NEXT, "dlopen", "GLIBC_2.34");
    if (!o) o = (dlopen_fn)dlvsym(RTLD_NEXT, "dlopen", "GLIBC_2.2.5");
    __atomic_store_n(&vt_real_dlopen, o, __ATOMIC_RELEASE);
    dlsym_fn f = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (!f) f = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    __atomic_store_n(&vt_real_dlsym, f, __ATOMIC_RELEASE);
}

/* Called by the dlopen override before it jumps to the real dlopen. */
VT_EARLY VT_HIDDEN void vt_dlopen_before(void) {
    vt_resolve_init();
    vt_exports_before_dlopen();
}

/* An already loaded library's handle, taken with the real dlopen (the
 * override's work is for the program's own loads). */
static void *loaded(const char *path) {
    return vt_real_dlopen ? vt_real_dlopen(path, RTLD_LAZY | RTLD_NOLOAD) : NULL;
}

static int real_dlclose(void *handle);

static void *wrapper_of(int id) { return vt_hook_wrapper(id); }

/* Keep the library that holds fn loaded: a program's dlclose must not
 * unload code vramtrace will call (one extra reference, taken once per
 * library). */
static void pin_library(void *fn) {
    static void *pinned[16];
    Dl_info info;
    if (!dladdr(fn, &info) || !info.dli_fname || !info.dli_fbase) return;
    for (int i = 0; i < 16; i++) {
        void *b = __atomic_load_n(&pinned[i], __ATOMIC_ACQUIRE);
        if (b == info.dli_fbase) return;
        if (b == NULL) {
            void *expected = NULL;
            if (!__atomic_compare_exchange_n(&pinned[i], &expected, info.dli_fbase, 0, __ATOMIC_ACQ_REL,
                                             __ATOMIC_ACQUIRE))
                continue;
            (void)loaded(info.dli_fname);
            return;
        }
    }
}

static void set_real(int id, void *fn) {
    if (fn == NULL || fn == wrapper_of(id)) return;
    pin_library(fn);
    lock_slots();
    if (!shared[id] && !vt_real_fn[id]) __atomic_store_n(&vt_real_fn[id], fn, __ATOMIC_RELEASE);
    unlock_slots();
}

/* The function hook `id`'s wrapper calls when no trampoline sent it. */
static void *current_real(int id) {
    if (__atomic_load_n(&shared[id], __ATOMIC_ACQUIRE)) return __atomic_load_n(&primary[id], __ATOMIC_ACQUIRE);
    return __atomic_load_n(&vt_real_fn[id], __ATOMIC_ACQUIRE);
}

/* A trampoline to hook `id`'s wrapper calling `fn`; NULL when all are
 * taken (the caller then hands out fn itself, untracked but right). */
static void *trampoline_for(int id, void *fn) {
    void *t = NULL;
    lock_slots();
    for (int k = 0; k < tramp_count && !t; k++)
        if (tramp_id[k] == id && vt_tramp_target[k] == fn) t = vt_trampolines + 32 * k;
    if (!t && tramp_count < VT_TRAMPOLINES) {
        int k = tramp_count++;
        tramp_id[k] = id;
        vt_tramp_target[k] = fn;
        vt_tramp_wrapper[k] = wrapper_of(id);
        if (!shared[id]) {
            __atomic_store_n(&primary[id], vt_real_fn[id], __ATOMIC_RELEASE);
            __atomic_store_n(&shared[id], 1, __ATOMIC_RELEASE);
            __atomic_store_n(&vt_real_fn[id], NULL, __ATOMIC_RELEASE);
        }
        t = vt_trampolines + 32 * k;
    }
    unlock_slots();
    return t;
}

static void resolve_global(int id);

/* What to hand out for `fn`, one library's definition of hook `id`: the
 * wrapper when its real function is fn (or it has none yet), else a
 * trampoline that makes the wrapper call fn. */
static void *wrapper_for(int id, void *fn) {
    if (!current_real(id)) resolve_global(id);
    if (!current_real(id)) set_real(id, fn);
    if (current_real(id) == fn) return wrapper_of(id);
    pin_library(fn);
    void *t = trampoline_for(id, fn);
    return t ? t : fn;
}

/* The loaded driver library, found without loading anything. */
static void *get_driver_handle(void) {
    void *h = __atomic_load_n(&driver_handle, __ATOMIC_ACQUIRE);
    if (h) return h;
    h = loaded("libcuda.so.1");
    if (h) __atomic_store_n(&driver_handle, h, __ATOMIC_RELEASE);
    return h;
}

static int find_runtime(struct dl_phdr_info *info, size_t size, void *data) {
    const char *base = strrchr(info->dlpi_name, '/');
    base = base ? base + 1 : info->dlpi_name;
    if (strncmp(base, "libcudart", 9) != 0) return 0;
    *(void **)data = loaded(info->dlpi_name);
    return *(void **)data != NULL;
}

/* A loaded shared runtime (libcudart*), for a library that loaded it
 * RTLD_LOCAL: its functions are in no global scope. */
static void *get_runtime_handle(void) {
    static void *runtime_handle;
    void *h = __atomic_load_n(&runtime_handle, __ATOMIC_ACQUIRE);
    if (h) return h;
    dl_iterate_phdr(find_runtime, &h);
    if (h) __atomic_store_n(&runtime_handle, h, __ATOMIC_RELEASE);
    return h;
}

/* Learn the driver's handle from one of its functions (it may have been
 * loaded by path rather than by soname). */
static void learn_driver(void *fn) {
    if (__atomic_load_n(&driver_handle, __ATOMIC_ACQUIRE)) return;
    Dl_info info;
    if (!dladdr(fn, &info) || !info.dli_fname) return;
    void *h = loaded(info.dli_fname);
    if (h) __atomic_store_n(&driver_handle, h, __ATOMIC_RELEASE);
}

void *vt_driver_fn(const char *name) {
    vt_resolve_init();
    if (!vt_real_dlsym) return NULL;
    void *p = vt_real_dlsym(RTLD_NEXT, name);
    if (!p) {
        void *h = get_driver_handle();
        if (h) p = vt_real_dlsym(h, name);
    }
    return p;
}

void *vt_next_fn(const char *name) {
    vt_resolve_init();
    return vt_real_dlsym ? vt_real_dlsym(RTLD_NEXT, name) : NULL;
}

void *vt_global_symbol(const char *name) {
    vt_resolve_init();
    return vt_real_dlsym ? vt_real_dlsym(RTLD_DEFAULT, name) : NULL;
}

/* The real function behind an exported wrapper: the next definition in the
 * global scope, else the loaded driver's. */
static void resolve_global(int id) {
    vt_resolve_init();
    if (!vt_real_dlsym) return;
    void *p = vt_real_dlsym(RTLD_NEXT, vt_hook_name(id));
    if (!p) {
        void *h = vt_hook_base(id) ? get_driver_handle() : get_runtime_handle();
        if (h) p = vt_real_dlsym(h, vt_hook_name(id));
    }
    set_real(id, p);
}

void *vt_real_slow(int id) {
    if (__atomic_load_n(&shared[id], __ATOMIC_ACQUIRE)) {
        void *t = vt_redirect;
        if (t) {
            vt_redirect = NULL;
            return t;
        }
        return __atomic_load_n(&primary[id], __ATOMIC_ACQUIRE);
    }
    void *p = __atomic_load_n(&vt_real_fn[id], __ATOMIC_ACQUIRE);
    if (p) return p;
    resolve_global(id);
    return current_real(id);
}

VT_EARLY int vt_hook_by_name(const char *name) {
    if (name == NULL || name[0] != 'c' || name[1] != 'u') return -1;
    for (int i = 0; i < VT_ID_COUNT; i++)
        if (strcmp(vt_hook_name(i), name) == 0) return i;
    return -1;
}

/* The definition of `name` that the object holding `caller` sees in its
 * own scope (itself and its dependencies, as dlopen loaded them), skipping
 * the object itself when `after` (RTLD_NEXT). NULL for the executable,
 * whose scope is the global one (*exe set then). */
static void *in_caller(void *caller, const char *name, int after, int *exe, struct link_map **at) {
    Dl_info info;
    struct link_map *map = NULL;
    *exe = 0;
    *at = NULL;
    if (!dladdr1(caller, &info, (void **)&map, RTLD_DL_LINKMAP) || !map) return NULL;
    *at = map;
    if (!map->l_name || !map->l_name[0]) {
        *exe = 1;
        return NULL;
    }
    void *h = loaded(map->l_name);
    if (!h) return NULL;
    void *r = vt_real_dlsym(h, name);
    real_dlclose(h);
    Dl_info def;
    if (r && after && dladdr(r, &def) && def.dli_fbase == info.dli_fbase) return NULL;
    return r;
}

/* Whether the object that defines `p` comes after `map` in the list of
 * loaded objects (the order of the global scope). */
static int loaded_after(struct link_map *map, void *p) {
    Dl_info info;
    struct link_map *def = NULL;
    if (!dladdr1(p, &info, (void **)&def, RTLD_DL_LINKMAP) || !def) return 0;
    for (struct link_map *x = map->l_next; x; x = x->l_next)
        if (x == def) return 1;
    return 0;
}

/* Decide what dlsym(handle, name) returns for the object holding
 * `caller`. VT_DLSYM_PASS means "let the real dlsym answer", which the
 * assembly stub does by jumping to it with the caller's return address
 * intact, so that RTLD_NEXT and RTLD_DEFAULT keep resolving relative to the
 * caller's object. Only hooked names are answered here: with the wrapper
 * (or a trampoline to it) for the definition the caller would have found
 * without vramtrace, in the global scope or in its own (a library loaded
 * RTLD_LOCAL with its driver); when there is none, as without vramtrace.
 * Behind the C library (infront.h) this dlsym is reached only by name on
 * vramtrace's own handle, and answers as the real one. */
VT_EARLY VT_HIDDEN void *vt_dlsym_filter(void *handle, const char *name, void *caller) {
    vt_resolve_init();
    int id = vt_hook_by_name(name);
    if (id < 0 || !vt_real_dlsym || vt_behind()) return VT_DLSYM_PASS;
    /* While no CUDA library is loaded our exports are invisible and the
     * real dlsym answers a name nobody else defines exactly (dlerror too). */
    int hidden = vt_exports_hidden();
    void *r;
    int exe;
    struct link_map *at;
    if (handle == RTLD_DEFAULT) {
        r = vt_real_dlsym(RTLD_NEXT, name); /* the global scope after vramtrace */
        if (!r) r = in_caller(caller, name, 0, &exe, &at);
    } else if (handle == RTLD_NEXT) {
        r = in_caller(caller, name, 1, &exe, &at);
        if (!r) {
            /* The global scope after the caller. From the executable it
             * holds vramtrace, and the real dlsym would find our export:
             * what it finds past vramtrace is the answer; none, NULL (with
             * the error that look-up left), as without vramtrace. From a
             * library (loaded after vramtrace), the first definition past
             * vramtrace is the caller's too when it comes after the
             * caller; else the real dlsym answers, unwrapped. */
            void *g = vt_real_dlsym(RTLD_NEXT, name);
            if (exe && !g) return NULL;
            if (exe || (g && at && loaded_after(at, g))) r = g;
        }
    } else {
        r = vt_real_dlsym(handle, name);
        if (r == wrapper_of(id)) return r;
    }
    if (!r || r == wrapper_of(id)) {
        /* Our export would be found first: answer NULL, as the look-up
         * would without vramtrace. */
        if (handle == RTLD_DEFAULT && !hidden) return NULL;
        return VT_DLSYM_PASS; /* the real dlsym sets dlerror() */
    }
    if (vt_hook_base(id)) learn_driver(r);
    void *w = wrapper_for(id, r);
    (void)dlerror(); /* a found symbol leaves no error, whatever our own look-ups left */
    return w;
}

void *vt_wrapper_for_def(int id, void *def) {
    if (def == wrapper_of(id)) return def;
    if (vt_hook_base(id)) learn_driver(def);
    return wrapper_for(id, def);
}

static void *export_of(int id) {
    void *e = __atomic_load_n(&driver_export[id], __ATOMIC_ACQUIRE);
    if (e) return e == VT_ABSENT ? NULL : e;
    void *h = get_driver_handle();
    if (!h) return NULL;
    e = vt_real_dlsym(h, vt_hook_name(id));
    __atomic_store_n(&driver_export[id], e ? e : VT_ABSENT, __ATOMIC_RELEASE);
    return e;
}

void *vt_swap_proc(const char *symbol, void *fn, int version,
                   unsigned long long flags) {
    if (fn == NULL || symbol == NULL || symbol[0] != 'c' || symbol[1] != 'u' || vt_behind())
        return fn;
    learn_driver(fn);
    /* First, an exact match: the pointer is the driver's own export of one
     * of the variants we hook. */
    int any = 0;
    for (int i = 0; i < VT_ID_COUNT; i++) {
        if (!vt_hook_base(i) || strcmp(vt_hook_base(i), symbol) != 0) continue;
        any = 1;
        if (fn == wrapper_of(i)) return fn;
        if (export_of(i) == fn) {
            set_real(i, fn);
            return wrapper_of(i);
        }
    }
    for (size_t k = 0; k < VT_NALIASES; k++)
        if (strcmp(aliases[k].base, symbol) == 0) any = 1;
    if (!any) return fn;
    /* Otherwise the driver answered with an internal pointer: choose the
     * variant by the rules the driver itself uses (newest version not above
     * the one asked for; _ptsz when per-thread streams are asked for), an
     * alias's function from its version on. */
    int want_ptsz = (flags & VT_PROC_PTDS) != 0;
    int best = -1, best_version = -1;
    for (int i = 0; i < VT_ID_COUNT; i++) {
        if (!vt_hook_base(i) || strcmp(vt_hook_base(i), symbol) != 0) continue;
        if (vt_hook_version(i) > version || vt_hook_ptsz(i) != want_ptsz) continue;
        if (best < 0 || vt_hook_version(i) > best_version) best = i, best_version = vt_hook_version(i);
    }
    for (size_t k = 0; k < VT_NALIASES; k++) {
        if (strcmp(aliases[k].base, symbol) != 0 || aliases[k].version > version || aliases[k].ptsz != want_ptsz)
            continue;
        if (best < 0 || aliases[k].version > best_version) best = aliases[k].id, best_version = aliases[k].version;
    }
    if (best < 0) return fn;
    set_real(best, fn);
    /* Only swap when the wrapper will call exactly this function. */
    return __atomic_load_n(&vt_real_fn[best], __ATOMIC_ACQUIRE) == fn ? wrapper_of(best) : fn;
}

static void *real_dlclose_fn(void) {
    static void *real;
    void *f = __atomic_load_n(&real, __ATOMIC_ACQUIRE);
    if (!f) {
        vt_resolve_init();
        if (vt_real_dlsym) f = vt_real_dlsym(RTLD_NEXT, "dlclose");
        if (f) __atomic_store_n(&real, f, __ATOMIC_RELEASE);
    }
    return f;
}

void *vt_real_dlclose(void) { return real_dlclose_fn(); }

static int real_dlclose(void *handle) {
    void *f = real_dlclose_fn();
    return f ? ((int (*)(void *))f)(handle) : -1;
}

/* A library going away may take code whose unwind rules the stack walker
 * has cached; a library loaded later could reuse its addresses. And the
 * stacks walked through it must still be named after it (unload.h). */
__attribute__((visibility("default"))) int dlclose(void *handle) {
    void *f = real_dlclose_fn();
    if (!f) return -1;
    int saved = errno;
    struct vt_loaded *before = vt_unload_before(handle);
    errno = saved;
    int r = ((int (*)(void *))f)(handle);
    saved = errno;
    vt_stack_forget();
    vt_unload_after(before);
    errno = saved;
    return r;
}
/* The override under a name of the library's own, which no other
 * definition of dlclose can take (deepbind.c binds a library to it). */
VT_HIDDEN __typeof__(dlclose) vt_dlclose_entry __attribute__((alias("dlclose"), nothrow));
