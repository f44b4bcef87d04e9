/* stack.c -- native stack capture: the walker first, libunwind behind it.
 *
 * A capture goes to the frame walker (walker.c), and to libunwind when the
 * walker cannot follow a frame, or when VRAMTRACE_UNWIND asks for
 * libunwind only. With VRAMTRACE_UNWIND=check every capture is taken both
 * ways and compared, and libunwind's answer is the one returned. */
#define _GNU_SOURCE
#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include <execinfo.h>
#include <pthread.h>
#include <string.h>

#include "stack.h"
#include "walker.h"

static int walker_off, walker_check;
/* VRAMTRACE_UNWIND=check: every capture taken both ways and compared. */
static uint64_t check_stacks, check_differ, check_fallbacks;

/* libunwind is set up at its first use, not at start: its set-up opens a
 * pipe (to validate the addresses it reads), two descriptors a process
 * that never allocates GPU memory must not have. */
static pthread_once_t unw_once = PTHREAD_ONCE_INIT;

static void unw_setup(void) { unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD); }

void vt_stack_init(int mode) {
    walker_off = mode == VT_STACK_LIBUNWIND;
    walker_check = mode == VT_STACK_CHECK;
    vt_walker_init(!walker_off);
}

void vt_stack_forget(void) {
    vt_walker_forget();
    /* libunwind's own caches, for the stacks it takes (its per-thread
     * fast-trace cache, in 1.6, it keeps whatever is said). */
    unw_flush_cache(unw_local_addr_space, 0, 0);
}

void vt_stack_fork_prepare(void) { vt_walker_fork_prepare(); }
void vt_stack_fork_done(void) { vt_walker_fork_done(); }

struct vt_stack_counts vt_stack_thread_counts(void) { return vt_walk_counts; }

uint64_t vt_stack_serial(void) { return vt_walk_counts.walks + vt_walk_counts.fallbacks; }

/* Keep frames past this library's own, innermost first. */
static int keep(uintptr_t *out, int max, const uintptr_t *ips, int n) {
    int i = 0;
    while (i < n && ips[i] >= vt_self_lo && ips[i] < vt_self_hi) i++;
    int depth = 0;
    for (; i < n && depth < max; i++) out[depth++] = ips[i];
    return depth;
}

static int capture_libunwind(uintptr_t *out, int max) {
    pthread_once(&unw_once, unw_setup);
    void *buf[VT_STACK_MAX + 16];
    int want = max + 16;
    if (want > (int)(sizeof buf / sizeof buf[0])) want = (int)(sizeof buf / sizeof buf[0]);
#ifdef VT_TSAN_BUILD
    /* The TSan build checks vramtrace's own locking; libunwind's per-thread
     * cache is freed by a thread-exit destructor that runs after TSan has
     * let go of the thread, so it unwinds with glibc's backtrace instead. */
    int n = backtrace(buf, want);
#else
    int n = unw_backtrace(buf, want);
#endif
    return keep(out, max, (const uintptr_t *)buf, n);
}

int vt_stack_capture(uintptr_t *out, int max) { return vt_stack_capture_since(out, max, UINT64_MAX); }

/* What a capture does away from the walker: VRAMTRACE_UNWIND=check or
 * libunwind, a frame limit out of range, and a walk the walker gave up
 * on. Kept out of the hot path (its buffers and calls would give every
 * capture a big frame to set up). */
__attribute__((noinline, cold)) static int capture_other(uintptr_t *out, int max, uint64_t since, int walked) {
    if (max > VT_STACK_MAX) max = VT_STACK_MAX;
    if (max <= 0) return 0;
    if (walker_check) {
        uintptr_t ref[VT_STACK_MAX];
        int n = vt_walk(out, max, UINT64_MAX);
        int m = capture_libunwind(ref, max);
        __atomic_add_fetch(&check_stacks, 1, __ATOMIC_RELAXED);
        if (n < 0) {
            __atomic_add_fetch(&check_fallbacks, 1, __ATOMIC_RELAXED);
            vt_walk_counts.fallbacks++;
        } else if (n != m || memcmp(out, ref, (size_t)n * sizeof *out) != 0) {
            __atomic_add_fetch(&check_differ, 1, __ATOMIC_RELAXED);
        }
        memcpy(out, ref, (size_t)m * sizeof *out);
        return m;
    }
    if (!walker_off && !walked) {
        int n = vt_walk(out, max, since);
        if (n >= 0 || n == VT_STACK_SAME) return n;
    }
    vt_walk_counts.fallbacks++;
    return capture_libunwind(out, max);
}

int vt_stack_capture_since(uintptr_t *out, int max, uint64_t since) {
    if (__builtin_expect((walker_check | walker_off) != 0 || max > VT_STACK_MAX || max <= 0, 0))
        return capture_other(out, max, since, 0);
    int n = vt_walk(out, max, since);
    if (__builtin_expect(n >= 0 || n == VT_STACK_SAME, 1)) return n;
    return capture_other(out, max, since, 1);
}

int vt_stack_check(uint64_t *stacks, uint64_t *differ, uint64_t *fallbacks) {
    *stacks = __atomic_load_n(&check_stacks, __ATOMIC_RELAXED);
    *differ = __atomic_load_n(&check_differ, __ATOMIC_RELAXED);
    *fallbacks = __atomic_load_n(&check_fallbacks, __ATOMIC_RELAXED);
    return walker_check;
}

int vt_stack_capture_libunwind(uintptr_t *out, int max) {
    if (max > VT_STACK_MAX) max = VT_STACK_MAX;
    if (max <= 0) return 0;
    return capture_libunwind(out, max);
}