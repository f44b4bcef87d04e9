/* lazy_unwind.c -- libunwind, loaded at its first use.
 *
 * The library is not linked against libunwind: a process that never
 * allocates GPU memory (a shell, a version-manager shim that LD_PRELOAD
 * reaches too) would pay to load it and its dependencies at start. These
 * are the few libunwind functions stack.c calls, under their own names and
 * hidden (so they stand in only for vramtrace's own calls, never for a
 * program's libunwind): the first one called loads libunwind.so.8 and finds
 * the real ones. Without libunwind, a capture it would take is empty (0
 * frames) and the caching calls do nothing. */
#define _GNU_SOURCE
#define UNW_LOCAL_ONLY
#include <dlfcn.h>
#include <libunwind.h>
#include <pthread.h>

#include "../common/dlagain.h"

#define VT_HIDDEN __attribute__((visibility("hidden")))

/* What stack.c passes as unw_local_addr_space: only a stand-in, replaced
 * by the real address space when a call is forwarded. */
VT_HIDDEN unw_addr_space_t unw_local_addr_space;

static struct {
    unw_addr_space_t *space;
    int (*set_caching_policy)(unw_addr_space_t, unw_caching_policy_t);
    void (*flush_cache)(unw_addr_space_t, unw_word_t, unw_word_t);
    int (*backtrace)(void **, int);
} real;
static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static int loaded; /* set, with release, once `real` is filled in */

static void load(void) {
    void *h = vt_dlopen_again("libunwind.so.8", RTLD_LAZY | RTLD_LOCAL, NULL, 0);
    if (!h) return;
    *(void **)&real.space = dlsym(h, "_ULx86_64_local_addr_space");
    *(void **)&real.set_caching_policy = dlsym(h, "_ULx86_64_set_caching_policy");
    *(void **)&real.flush_cache = dlsym(h, "_Ux86_64_flush_cache");
    *(void **)&real.backtrace = dlsym(h, "unw_backtrace");
    if (!real.space) real.set_caching_policy = NULL, real.flush_cache = NULL;
    __atomic_store_n(&loaded, 1, __ATOMIC_RELEASE);
}

VT_HIDDEN int unw_set_caching_policy(unw_addr_space_t as, unw_caching_policy_t policy) {
    (void)as;
    pthread_once(&load_once, load);
    return real.set_caching_policy ? real.set_caching_policy(*real.space, policy) : -UNW_EUNSPEC;
}

/* A flush before libunwind was ever loaded has nothing to flush. */
VT_HIDDEN void unw_flush_cache(unw_addr_space_t as, unw_word_t lo, unw_word_t hi) {
    (void)as;
    if (__atomic_load_n(&loaded, __ATOMIC_ACQUIRE) && real.flush_cache) real.flush_cache(*real.space, lo, hi);
}

VT_HIDDEN int unw_backtrace(void **buf, int size) {
    pthread_once(&load_once, load);
    return real.backtrace ? real.backtrace(buf, size) : 0;
}
