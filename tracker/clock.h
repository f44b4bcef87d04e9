/* clock.h -- the tracker's time stamps: ticks in the hot path, nanoseconds
 * in a snapshot.
 *
 * A tick is the TSC where it is invariant (constant_tsc and nonstop_tsc:
 * the same rate on every core, in every power state), else nanoseconds of
 * CLOCK_MONOTONIC; either way ticks only grow, across threads, from the
 * tracker's start. A snapshot converts ticks to nanoseconds with the rate
 * measured over the whole run. Internal to tracker/. */
#ifndef VT_CLOCK_H
#define VT_CLOCK_H

#include <stdint.h>
#include <time.h>

#include "internal.h"

/* Read by every hooked call and written once, at the start: a cache line
 * of its own, away from what the applier writes. */
struct vt_clock {
    uint64_t tsc0;          /* the TSC at the start */
    uint64_t start_mono_ns; /* CLOCK_MONOTONIC at the start; 0 before it */
    uint64_t start_unix_ns; /* CLOCK_REALTIME at the start */
    int use_tsc;
} __attribute__((aligned(64)));
extern struct vt_clock vt_clock VT_HIDDEN;

static inline uint64_t vt_mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Ticks since the start. */
static inline uint64_t vt_ticks(void) {
#if defined(__x86_64__)
    if (vt_clock.use_tsc) return __builtin_ia32_rdtsc() - vt_clock.tsc0;
#endif
    return vt_mono_ns() - vt_clock.start_mono_ns;
}

/* Start the clock, once (later calls keep the first start). Called under
 * the tracker's lock. */
/* vt_clock_mark takes the start's readings into c (by system calls, at the library's
 * start, into memory of the caller's, so that the start touches no page of
 * the tracker's); vt_clock_adopt makes them the clock's start unless it has
 * one. vt_clock_start, when the tracker starts, takes them now if none were
 * adopted and decides whether ticks are the TSC's. No tick is read before
 * it. */
void vt_clock_mark(struct vt_clock *c) VT_HIDDEN;
void vt_clock_adopt(const struct vt_clock *c) VT_HIDDEN;
void vt_clock_start(void) VT_HIDDEN;

/* Nanoseconds per tick: measured over the run so far (the clock and the
 * TSC read back to back, the closest of three tries), until `fix` asks for
 * the rate to stay; then that rate, from every call after. A snapshot asks
 * once the run has had an out-of-memory failure: every later snapshot
 * (the dump at exit, and so the CLI's report of it) then gives each time
 * stamp the nanoseconds the failure's post-mortem gave it, and a growth's
 * span and rate are the post-mortem's to the digit. (Measured at each
 * snapshot, the rate moved by about 1e-5 between the post-mortem and the
 * exit of a run of a second or two.) The error so fixed is the reads' gap
 * over the run's length before the failure. Under the global lock when
 * `fix` is set. */
double vt_tick_scale(int fix) VT_HIDDEN;

static inline uint64_t vt_ticks_to_ns(uint64_t t, double scale) { return (uint64_t)((double)t * scale); }

#endif
