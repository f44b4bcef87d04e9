/* resolve.h -- finding the real functions behind the hooks.
 *
 * vramtrace has three doors: its exported hook symbols, a dlsym override
 * (dlsym_x86_64.S + vt_dlsym_filter) and the cuGetProcAddress hooks. All
 * three hand out the same wrappers; this file remembers, per hook, the real
 * function the wrapper must call, and per further library defining it, a
 * trampoline (trampoline_x86_64.S) that makes the wrapper call that one.
 * Whether the exports can be seen at all is exports.c's. */
#ifndef VT_RESOLVE_H
#define VT_RESOLVE_H

enum vt_hook_id {
#define VT_DRIVER(sym, base, ver, ptsz) VT_ID_##sym,
#define VT_RUNTIME(sym) VT_ID_##sym,
#include "hooks.def"
#undef VT_DRIVER
#undef VT_RUNTIME
    VT_ID_COUNT
};

/* Find the real dlsym; called from the constructor and lazily from the
 * dlsym override (which may run before any constructor). */
void vt_resolve_init(void);

/* The real function behind hook `id`, or NULL when it cannot be found
 * (the wrapper then fails with "not initialized"). For a hook that more
 * than one loaded library defines, it is the function of the library whose
 * pointer the caller was handed (a trampoline left it for this thread), else
 * the first one found. Wrappers call it first, before anything else. */
void *vt_real_slow(int id);
extern void *vt_real_fn[] __attribute__((visibility("hidden")));

/* The real function a wrapper calls: a load once resolved (a hook defined
 * by two libraries keeps its slot NULL and always asks vt_real_slow). */
static inline void *vt_real(int id) {
    void *p = __atomic_load_n(&vt_real_fn[id], __ATOMIC_ACQUIRE);
    return __builtin_expect(p != NULL, 1) ? p : vt_real_slow(id);
}

/* A driver function vramtrace calls itself (cuCtxGetDevice, cuMemGetInfo_v2,
 * ...), looked up in the loaded driver; NULL when there is none. */
void *vt_driver_fn(const char *name);

/* lookup(name) kept in *slot: the first caller resolves it, every thread
 * after reads it (any thread may be first). */
static inline void *vt_fn_kept(void **slot, void *(*lookup)(const char *), const char *name) {
    void *f = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (!f) {
        f = lookup(name);
        __atomic_store_n(slot, f, __ATOMIC_RELEASE);
    }
    return f;
}

static inline void *vt_driver_fn_kept(void **slot, const char *name) { return vt_fn_kept(slot, vt_driver_fn, name); }

/* The next definition of `name` after vramtrace in the global scope (the
 * C library's, for a libc function vramtrace wraps); NULL when there is
 * none. */
void *vt_next_fn(const char *name);
static inline void *vt_next_fn_kept(void **slot, const char *name) { return vt_fn_kept(slot, vt_next_fn, name); }

/* A symbol from the process's global scope (dlsym on RTLD_DEFAULT through
 * the real dlsym), for the interpreter's symbols. */
void *vt_global_symbol(const char *name);

/* The cuGetProcAddress hooks pass every answer through here: the driver's
 * pointer `fn` for `symbol` comes back as the wrapper of that exact variant
 * when it is one we hook, unchanged otherwise (always, where vramtrace
 * stands behind the C library: infront.h). */
void *vt_swap_proc(const char *symbol, void *fn, int version,
                   unsigned long long flags);

/* The hook id of a hooked name; -1 for any other name. */
int vt_hook_by_name(const char *name);

/* What the dlsym override hands out for `def`, one library's definition
 * of hook `id`: the wrapper, or a trampoline to it when the wrapper calls
 * another library's (deepbind.c binds a library's references by this). */
void *vt_wrapper_for_def(int id, void *def);

/* The C library's dlclose (vramtrace's dlclose calls it); NULL when it
 * cannot be found. */
void *vt_real_dlclose(void);

#define VT_REAL(sym) ((__typeof__(&sym))vt_real(VT_ID_##sym))

#endif
