/* resolve.c -- real functions, the dlsym filter and cuGetProcAddress swaps. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

#include "../tracker/stack.h"
#include "resolve.h"

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

/* The wrappers, by address only; their prototypes live in driver.c and
 * runtime.c. */
#define VT_DRIVER(sym, base, ver, ptsz) extern void vt_w_##sym(void) __asm__(#sym);
#define VT_RUNTIME(sym) extern void vt_w_##sym(void) __asm__(#sym);
#include "hooks.def"
#undef VT_DRIVER
#undef VT_RUNTIME

static const struct {
    const char *name;
    const char *base;   /* NULL for runtime entries */
    int version;
    int ptsz;
    void (*wrapper)(void);
} hooks[VT_ID_COUNT] = {
#define VT_DRIVER(sym, base, ver, ptsz) {#sym, #base, ver, ptsz, vt_w_##sym},
#define VT_RUNTIME(sym) {#sym, NULL, 0, 0, vt_w_##sym},
#include "hooks.def"
#undef VT_DRIVER
#undef VT_RUNTIME
};

VT_HIDDEN void *vt_real_fn[VT_ID_COUNT]; /* what each wrapper calls */
static void *driver_export[VT_ID_COUNT]; /* the driver's own export, or VT_ABSENT */
static void *driver_handle;

typedef void *(*dlsym_fn)(void *, const char *);
VT_HIDDEN dlsym_fn vt_real_dlsym;

VT_EARLY void vt_resolve_init(void) {
    if (__atomic_load_n(&vt_real_dlsym, __ATOMIC_ACQUIRE)) return;
    dlsym_fn f = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (!f) f = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    __atomic_store_n(&vt_real_dlsym, f, __ATOMIC_RELEASE);
}

static void *wrapper_of(int id) { return (void *)hooks[id].wrapper; }

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
            (void)dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
            return;
        }
    }
}

static void set_real(int id, void *fn) {
    if (fn == NULL || fn == wrapper_of(id)) return;
    pin_library(fn);
    void *expected = NULL;
    __atomic_compare_exchange_n(&vt_real_fn[id], &expected, fn, 0, __ATOMIC_ACQ_REL,
                                __ATOMIC_ACQUIRE);
}

/* The loaded driver library, found without loading anything. */
static void *get_driver_handle(void) {
    void *h = __atomic_load_n(&driver_handle, __ATOMIC_ACQUIRE);
    if (h) return h;
    h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (h) __atomic_store_n(&driver_handle, h, __ATOMIC_RELEASE);
    return h;
}

/* Learn the driver's handle from one of its functions (it may have been
 * loaded by path rather than by soname). */
static void learn_driver(void *fn) {
    if (__atomic_load_n(&driver_handle, __ATOMIC_ACQUIRE)) return;
    Dl_info info;
    if (!dladdr(fn, &info) || !info.dli_fname) return;
    void *h = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
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

void *vt_global_symbol(const char *name) {
    vt_resolve_init();
    return vt_real_dlsym ? vt_real_dlsym(RTLD_DEFAULT, name) : NULL;
}

void *vt_real_slow(int id) {
    void *p = __atomic_load_n(&vt_real_fn[id], __ATOMIC_ACQUIRE);
    if (p) return p;
    vt_resolve_init();
    if (!vt_real_dlsym) return NULL;
    p = vt_real_dlsym(RTLD_NEXT, hooks[id].name);
    if (!p && hooks[id].base) {
        void *h = get_driver_handle();
        if (h) p = vt_real_dlsym(h, hooks[id].name);
    }
    set_real(id, p);
    return __atomic_load_n(&vt_real_fn[id], __ATOMIC_ACQUIRE);
}

VT_EARLY static int hook_by_name(const char *name) {
    if (name == NULL || name[0] != 'c' || name[1] != 'u') return -1;
    for (int i = 0; i < VT_ID_COUNT; i++)
        if (strcmp(hooks[i].name, name) == 0) return i;
    return -1;
}

/* Decide what dlsym(handle, name) returns. VT_DLSYM_PASS means "let the
 * real dlsym answer", which the assembly stub does by jumping to it with
 * the caller's return address intact, so that RTLD_NEXT and RTLD_DEFAULT
 * keep resolving relative to the caller's object. Only hooked names on an
 * explicit handle or RTLD_DEFAULT are answered here. */
VT_EARLY VT_HIDDEN void *vt_dlsym_filter(void *handle, const char *name) {
    vt_resolve_init();
    int id = hook_by_name(name);
    if (id < 0 || handle == RTLD_NEXT || !vt_real_dlsym) return VT_DLSYM_PASS;
    if (handle == RTLD_DEFAULT) {
        /* Our export would be found first; answer with it only when the
         * real function exists, as the lookup would without vramtrace. */
        void *r = vt_real_dlsym(RTLD_NEXT, name);
        if (!r) return NULL;
        set_real(id, r);
        return wrapper_of(id);
    }
    void *r = vt_real_dlsym(handle, name);
    if (!r) return VT_DLSYM_PASS; /* the real dlsym sets dlerror() */
    if (r == wrapper_of(id)) return r;
    if (hooks[id].base) learn_driver(r);
    set_real(id, r);
    return wrapper_of(id);
}

static void *export_of(int id) {
    void *e = __atomic_load_n(&driver_export[id], __ATOMIC_ACQUIRE);
    if (e) return e == VT_ABSENT ? NULL : e;
    void *h = get_driver_handle();
    if (!h) return NULL;
    e = vt_real_dlsym(h, hooks[id].name);
    __atomic_store_n(&driver_export[id], e ? e : VT_ABSENT, __ATOMIC_RELEASE);
    return e;
}

void *vt_swap_proc(const char *symbol, void *fn, int version,
                   unsigned long long flags) {
    if (fn == NULL || symbol == NULL || symbol[0] != 'c' || symbol[1] != 'u')
        return fn;
    learn_driver(fn);
    /* First, an exact match: the pointer is the driver's own export of one
     * of the variants we hook. */
    int any = 0;
    for (int i = 0; i < VT_ID_COUNT; i++) {
        if (!hooks[i].base || strcmp(hooks[i].base, symbol) != 0) continue;
        any = 1;
        if (fn == wrapper_of(i)) return fn;
        if (export_of(i) == fn) {
            set_real(i, fn);
            return wrapper_of(i);
        }
    }
    if (!any) return fn;
    /* Otherwise the driver answered with an internal pointer: choose the
     * variant by the rules the driver itself uses (newest version not above
     * the one asked for; _ptsz when per-thread streams are asked for). */
    int want_ptsz = (flags & VT_PROC_PTDS) != 0;
    int best = -1;
    for (int i = 0; i < VT_ID_COUNT; i++) {
        if (!hooks[i].base || strcmp(hooks[i].base, symbol) != 0) continue;
        if (hooks[i].version > version || hooks[i].ptsz != want_ptsz) continue;
        if (best < 0 || hooks[i].version > hooks[best].version) best = i;
    }
    if (best < 0) return fn;
    set_real(best, fn);
    /* Only swap when the wrapper will call exactly this function. */
    return __atomic_load_n(&vt_real_fn[best], __ATOMIC_ACQUIRE) == fn ? wrapper_of(best) : fn;
}

/* A library going away may take code whose unwind rules the stack walker
 * has cached; a library loaded later could reuse its addresses. */
__attribute__((visibility("default"))) int dlclose(void *handle) {
    static void *real_dlclose;
    void *f = __atomic_load_n(&real_dlclose, __ATOMIC_ACQUIRE);
    if (!f) {
        vt_resolve_init();
        if (vt_real_dlsym) f = vt_real_dlsym(RTLD_NEXT, "dlclose");
        if (!f) return -1;
        __atomic_store_n(&real_dlclose, f, __ATOMIC_RELEASE);
    }
    int r = ((int (*)(void *))f)(handle);
    vt_stack_forget();
    return r;
}
