/* clock.c -- starting the tracker's clock and reading it as nanoseconds.
 *
 * See clock.h for what a tick is. vt_now_ns and vt_deadline are the
 * tracker's public clock (tracker.h). */
#define _GNU_SOURCE
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <string.h>
#include <sys/syscall.h>

#include "../common/rawsys.h"
#include "clock.h"

struct vt_clock vt_clock;

/* The invariant-TSC bit (CPUID 0x80000007, EDX bit 8): the one from which
 * Linux sets both the constant_tsc and nonstop_tsc flags that
 * /proc/cpuinfo shows, asked of the CPU directly (reading /proc/cpuinfo
 * cost 40 to 150 us at every process start). */
static int tsc_is_invariant(void) {
#if defined(__x86_64__)
    unsigned a, b, c, d;
    if (!__get_cpuid(0x80000000u, &a, &b, &c, &d) || a < 0x80000007u) return 0;
    if (!__get_cpuid(0x80000007u, &a, &b, &c, &d)) return 0;
    return (d >> 8) & 1;
#else
    return 0;
#endif
}

/* A clock read by the system call, not through the vDSO: the start of a
 * process that never reads a clock otherwise (/bin/true) took two page
 * faults for the vDSO's first read (the clock's data page, the C
 * library's function) and bound clock_gettime lazily, some 14,000 cycles
 * on the 2-vCPU machine the figures come from, against 3,300 for the two
 * system calls. In .text.startup, as vt_clock_mark, beside the library's
 * other start-up code: one page fault maps them all. */
__attribute__((section(".text.startup"))) static uint64_t raw_clock_ns(clockid_t id) {
    struct timespec ts;
#if defined(__x86_64__)
    /* errno untouched (the start keeps the program's); 0 where it fails,
     * a mark vt_clock_adopt refuses (the tracker's start reads again). */
    if (vt_sys3(SYS_clock_gettime, id, (long)&ts, 0) != 0) return 0;
#else
    clock_gettime(id, &ts);
#endif
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The readings into c, by the system call (`raw`) or through the vDSO.
 * The TSC is taken at the middle of the clock's read, as vt_tick_scale
 * reads them (read before it, the start lagged the clock by the read's
 * length: an error in the rate of that length over the run's). A system
 * call's read is longer and its middle less sure (some hundreds of ns,
 * against 40 through the vDSO): the library's start takes it, ahead of
 * any GPU call by the program's whole start-up; the tracker's own start,
 * which a failure may follow within microseconds (the rate is fixed at
 * the first one), reads through the vDSO. */
static uint64_t real_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

__attribute__((section(".text.startup"))) static void mark(struct vt_clock *c, int raw) {
    c->start_unix_ns = raw ? raw_clock_ns(CLOCK_REALTIME) : real_ns();
#if defined(__x86_64__)
    uint64_t a = __builtin_ia32_rdtsc();
    c->start_mono_ns = raw ? raw_clock_ns(CLOCK_MONOTONIC) : vt_mono_ns();
    uint64_t b = __builtin_ia32_rdtsc();
    c->tsc0 = a + (b - a) / 2;
#else
    c->start_mono_ns = raw ? raw_clock_ns(CLOCK_MONOTONIC) : vt_mono_ns();
#endif
}

__attribute__((section(".text.startup"))) void vt_clock_mark(struct vt_clock *c) { mark(c, 1); }

void vt_clock_adopt(const struct vt_clock *c) {
    if (vt_clock.start_mono_ns != 0 || c->start_mono_ns == 0) return;
    vt_clock.start_unix_ns = c->start_unix_ns;
    vt_clock.tsc0 = c->tsc0;
    vt_clock.start_mono_ns = c->start_mono_ns;
}

/* CPUID traps to the hypervisor in a virtual machine (3 us each on the
 * 2-vCPU machine the figures come from): it is asked here, when the
 * tracker starts, not when the start's readings are taken. */
void vt_clock_start(void) {
    static int started;
    if (vt_clock.start_mono_ns == 0) mark(&vt_clock, 0);
    if (started) return;
    vt_clock.use_tsc = tsc_is_invariant();
    started = 1;
}

uint64_t vt_now_ns(void) { return vt_mono_ns() - vt_clock.start_mono_ns; }

/* The fixed rate's bits (vt_tick_scale), 0 while none is fixed. */
static uint64_t fixed;

double vt_tick_scale(int fix) {
    if (!vt_clock.use_tsc) return 1.0;
    uint64_t bits = __atomic_load_n(&fixed, __ATOMIC_RELAXED);
    double scale;
    if (bits) {
        memcpy(&scale, &bits, sizeof scale);
        return scale;
    }
    /* The clock between two reads of the TSC, against their middle; of
     * three tries, the one whose reads lie closest (a preemption between
     * them would skew the rate by its length over the run's). */
    uint64_t best_gap = UINT64_MAX, t = 0, now = 0;
    for (int i = 0; i < 3; i++) {
        uint64_t a = vt_ticks(), n = vt_now_ns(), b = vt_ticks();
        if (b - a < best_gap) {
            best_gap = b - a;
            t = a + (b - a) / 2;
            now = n;
        }
    }
    scale = t ? (double)now / (double)t : 1.0;
    if (fix && t) {
        memcpy(&bits, &scale, sizeof bits);
        __atomic_store_n(&fixed, bits, __ATOMIC_RELAXED);
    }
    return scale;
}

void vt_deadline(struct timespec *until, uint64_t ns) {
    clock_gettime(CLOCK_REALTIME, until);
    uint64_t t = (uint64_t)until->tv_nsec + ns % 1000000000ull;
    until->tv_sec += (time_t)(ns / 1000000000ull + t / 1000000000ull);
    until->tv_nsec = (long)(t % 1000000000ull);
}
