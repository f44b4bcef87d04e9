/* lockprobe.c -- the lock-hold probe's counts (lockprobe.h); empty unless
 * built with -DVT_LOCK_PROBE. */
#include "lockprobe.h"

#ifdef VT_LOCK_PROBE
#include <stdio.h>
#include <time.h>

static const char *const kind_name[VT_PROBE_KINDS] = {"a slot's lock", "the global lock"};
static uint64_t longest[VT_PROBE_KINDS], holds[VT_PROBE_KINDS];
static const char *longest_at[VT_PROBE_KINDS];
__thread const char *vt_probe_site;

uint64_t vt_probe_cpu_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

void vt_probe_held(int kind, uint64_t since, const char *where) {
    uint64_t ns = vt_probe_cpu_ns() - since;
    __atomic_add_fetch(&holds[kind], 1, __ATOMIC_RELAXED);
    uint64_t was = __atomic_load_n(&longest[kind], __ATOMIC_RELAXED);
    while (ns > was && !__atomic_compare_exchange_n(&longest[kind], &was, ns, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        continue;
    if (ns > was) __atomic_store_n(&longest_at[kind], where, __ATOMIC_RELAXED);
}

/* The probe's figures to a benchmark, found with dlsym (exported from a
 * probe build only): vramtrace_probe_reset starts a window, and
 * vramtrace_probe_longest gives a kind's longest hold since, in us of its
 * holder's CPU time, the holds counted and where the longest was taken. */
__attribute__((visibility("default"))) void vramtrace_probe_reset(void) {
    for (int k = 0; k < VT_PROBE_KINDS; k++) {
        __atomic_store_n(&longest[k], 0, __ATOMIC_RELAXED);
        __atomic_store_n(&holds[k], 0, __ATOMIC_RELAXED);
        __atomic_store_n(&longest_at[k], NULL, __ATOMIC_RELAXED);
    }
}

__attribute__((visibility("default"))) double vramtrace_probe_longest(int kind, unsigned long long *nholds,
                                                                      const char **where) {
    if (kind < 0 || kind >= VT_PROBE_KINDS) return -1;
    if (nholds) *nholds = __atomic_load_n(&holds[kind], __ATOMIC_RELAXED);
    if (where) *where = __atomic_load_n(&longest_at[kind], __ATOMIC_RELAXED);
    return (double)__atomic_load_n(&longest[kind], __ATOMIC_RELAXED) / 1e3;
}

/* At exit, the whole run's: each kind's count and longest hold, and where
 * that lock was taken. */
__attribute__((destructor)) static void probe_report(void) {
    for (int k = 0; k < VT_PROBE_KINDS; k++)
        fprintf(stderr, "vramtrace-probe: %s held %llu times, at most %.1f us of its holder's CPU time (taken at %s)\n",
                kind_name[k], (unsigned long long)holds[k], (double)longest[k] / 1e3, longest_at[k] ? longest_at[k] : "-");
}
#else
typedef int vt_lockprobe_empty; /* ISO C wants a declaration in every file */
#endif
