/* owntime.h -- the stretches of time vramtrace spent writing its own
 * outputs (a dump, a post-mortem, the exit report: symbolizing, analysing,
 * writing), so that what measures a program's work in time (growth.h, in
 * a run that marks no step) does not count them as the program's.
 *
 * Kept for the newest VT_OWN_SPANS stretches; an older one is forgotten
 * (its time then counts as the program's, as all of it did before). Each
 * output (report/output.c) is one, and the exit's own work before its
 * outputs (the live view's last round waited for, interpose/init.c),
 * and a failure's handling whole (asking the device and NVML, the
 * holders, the post-mortem: interpose/hook.c), so that a few milliseconds
 * of it are not counted against a growth that took fewer. */
#ifndef VT_OWNTIME_H
#define VT_OWNTIME_H

#include <stdint.h>

#define VT_OWN_SPANS 256

/* vramtrace's own work took [from, to) (vt_now_ns times, from <= to). */
void vt_own_time_add(uint64_t from, uint64_t to);

/* How much of [from, to) the kept outputs took. */
uint64_t vt_own_time_within(uint64_t from, uint64_t to);

/* Forget every output (a forked child's outputs are its own). */
void vt_own_time_reset(void);

#endif
