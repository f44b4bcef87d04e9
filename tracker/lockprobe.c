/* lockprobe.c -- the lock-hold probe's counts (lockprobe.h); empty unless
 * built with -DVT_LOCK_PROBE. */
#define _GNU_SOURCE
#include "lockprobe.h"

#ifdef VT_LOCK_PROBE
#include <stdio.h>
#include <sys/resource.h>
#include <time.h>

static const char *const kind_name[VT_PROBE_KINDS] = {"a slot's lock", "the global lock", "a slot's hand-over"};
static uint64_t longest[VT_PROBE_KINDS], holds[VT_PROBE_KINDS], over_1ms[VT_PROBE_KINDS], total_ns[VT_PROBE_KINDS];
static const char *longest_at[VT_PROBE_KINDS];
/* The slow path's waits, by the wall clock: the longest, where its
 * holder had taken the lock, and how many passed 1 ms. */
static uint64_t wait_longest[VT_PROBE_KINDS], waits_over_1ms[VT_PROBE_KINDS];
static const char *wait_holder[VT_PROBE_KINDS];
__thread const char *vt_probe_site;
__thread uint64_t vt_probe_n[VT_PC_COUNTS];
static __thread uint64_t at_take[VT_PROBE_KINDS][VT_PC_COUNTS];
/* What the longest hold of each kind counted (written by its holder when
 * it becomes the longest; read at exit or by a benchmark after the run). */
static uint64_t longest_did[VT_PROBE_KINDS][VT_PC_COUNTS];
/* The most of each count any one hold of a kind did (work, not time: what
 * the machine's stalls, charged to a thread as its CPU time, cannot move). */
static uint64_t most_did[VT_PROBE_KINDS][VT_PC_COUNTS];
static const char *const count_name[VT_PC_COUNTS] = {
    "chunks", "records", "keep_us", "keep_waits", "moves", "reserves", "fresh_stages", "sync_writes", "unmaps",
    "minflt", "majflt", "nvcsw", "nivcsw"};

/* The thread's page faults and context switches into its counts. */
static void usage_now(void) {
    struct rusage r;
    if (getrusage(RUSAGE_THREAD, &r) != 0) return;
    vt_probe_n[VT_PC_MINFLT] = (uint64_t)r.ru_minflt;
    vt_probe_n[VT_PC_MAJFLT] = (uint64_t)r.ru_majflt;
    vt_probe_n[VT_PC_NVCSW] = (uint64_t)r.ru_nvcsw;
    vt_probe_n[VT_PC_NIVCSW] = (uint64_t)r.ru_nivcsw;
}

uint64_t vt_probe_cpu_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

uint64_t vt_probe_wall_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

void vt_probe_waited(int kind, uint64_t since, const char *holder) {
    uint64_t ns = vt_probe_wall_ns() - since;
    if (ns > 1000000) __atomic_add_fetch(&waits_over_1ms[kind], 1, __ATOMIC_RELAXED);
    uint64_t was = __atomic_load_n(&wait_longest[kind], __ATOMIC_RELAXED);
    while (ns > was && !__atomic_compare_exchange_n(&wait_longest[kind], &was, ns, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        continue;
    if (ns > was) __atomic_store_n(&wait_holder[kind], holder, __ATOMIC_RELAXED);
}

uint64_t vt_probe_taken(int kind) {
    usage_now();
    for (int c = 0; c < VT_PC_COUNTS; c++) at_take[kind][c] = vt_probe_n[c];
    return vt_probe_cpu_ns();
}

static void atomic_max(uint64_t *at, uint64_t v) {
    uint64_t was = __atomic_load_n(at, __ATOMIC_RELAXED);
    while (v > was && !__atomic_compare_exchange_n(at, &was, v, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) continue;
}

void vt_probe_held(int kind, uint64_t since, const char *where) {
    uint64_t ns = vt_probe_cpu_ns() - since;
    for (int c = 0; c < VT_PC_MINFLT; c++) atomic_max(&most_did[kind][c], vt_probe_n[c] - at_take[kind][c]);
    __atomic_add_fetch(&holds[kind], 1, __ATOMIC_RELAXED);
    if (ns > 1000000) __atomic_add_fetch(&over_1ms[kind], 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&total_ns[kind], ns, __ATOMIC_RELAXED);
    uint64_t was = __atomic_load_n(&longest[kind], __ATOMIC_RELAXED);
    while (ns > was && !__atomic_compare_exchange_n(&longest[kind], &was, ns, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        continue;
    if (ns > was) {
        __atomic_store_n(&longest_at[kind], where, __ATOMIC_RELAXED);
        usage_now();
        for (int c = 0; c < VT_PC_COUNTS; c++)
            __atomic_store_n(&longest_did[kind][c], vt_probe_n[c] - at_take[kind][c], __ATOMIC_RELAXED);
    }
}

/* What the longest hold of `kind` did, as "name value ..." into buf. */
static void did_text(int kind, char *buf, size_t size) {
    const char *holder = __atomic_load_n(&wait_holder[kind], __ATOMIC_RELAXED);
    int at = snprintf(buf, size, "over_1ms %llu total_us %llu wait_max_us %.1f waits_over_1ms %llu wait_holder %s",
                      (unsigned long long)__atomic_load_n(&over_1ms[kind], __ATOMIC_RELAXED),
                      (unsigned long long)__atomic_load_n(&total_ns[kind], __ATOMIC_RELAXED) / 1000,
                      (double)__atomic_load_n(&wait_longest[kind], __ATOMIC_RELAXED) / 1e3,
                      (unsigned long long)__atomic_load_n(&waits_over_1ms[kind], __ATOMIC_RELAXED), holder ? holder : "-");
    if (at < 0) return;
    for (int c = 0; c < VT_PC_COUNTS && (size_t)at < size; c++) {
        int k = snprintf(buf + at, size - at, " %s %llu", count_name[c],
                         (unsigned long long)__atomic_load_n(&longest_did[kind][c], __ATOMIC_RELAXED));
        if (k < 0) break;
        at += k;
    }
    for (int c = 0; c < VT_PC_MINFLT && (size_t)at < size; c++) {
        int k = snprintf(buf + at, size - at, " most_%s %llu", count_name[c],
                         (unsigned long long)__atomic_load_n(&most_did[kind][c], __ATOMIC_RELAXED));
        if (k < 0) break;
        at += k;
    }
}

/* The probe's figures to a benchmark, found with dlsym (exported from a
 * probe build only): vramtrace_probe_reset starts a window, and
 * vramtrace_probe_longest gives a kind's longest hold since, in us of its
 * holder's CPU time, the holds counted and where the longest was taken. */
__attribute__((visibility("default"))) void vramtrace_probe_reset(void) {
    for (int k = 0; k < VT_PROBE_KINDS; k++) {
        __atomic_store_n(&longest[k], 0, __ATOMIC_RELAXED);
        __atomic_store_n(&holds[k], 0, __ATOMIC_RELAXED);
        __atomic_store_n(&over_1ms[k], 0, __ATOMIC_RELAXED);
        __atomic_store_n(&total_ns[k], 0, __ATOMIC_RELAXED);
        __atomic_store_n(&wait_longest[k], 0, __ATOMIC_RELAXED);
        __atomic_store_n(&waits_over_1ms[k], 0, __ATOMIC_RELAXED);
        __atomic_store_n(&wait_holder[k], NULL, __ATOMIC_RELAXED);
        __atomic_store_n(&longest_at[k], NULL, __ATOMIC_RELAXED);
        for (int c = 0; c < VT_PC_COUNTS; c++) {
            __atomic_store_n(&longest_did[k][c], 0, __ATOMIC_RELAXED);
            __atomic_store_n(&most_did[k][c], 0, __ATOMIC_RELAXED);
        }
    }
}

/* What the longest hold of `kind` since the reset did (the counts of
 * lockprobe.h, "name value" pairs), or NULL. Valid until the next call. */
__attribute__((visibility("default"))) const char *vramtrace_probe_did(int kind) {
    static char buf[1024];
    if (kind < 0 || kind >= VT_PROBE_KINDS) return NULL;
    did_text(kind, buf, sizeof buf);
    return buf;
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
    for (int k = 0; k < VT_PROBE_KINDS; k++) {
        char did[1024];
        did_text(k, did, sizeof did);
        fprintf(stderr, "vramtrace-probe: %s held %llu times, at most %.1f us of its holder's CPU time (taken at %s; %s)\n",
                kind_name[k], (unsigned long long)holds[k], (double)longest[k] / 1e3, longest_at[k] ? longest_at[k] : "-",
                did);
    }
}
#else
typedef int vt_lockprobe_empty; /* ISO C wants a declaration in every file */
#endif
