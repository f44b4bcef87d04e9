/* counters.h -- the counters a device and the process's totals both keep,
 * named once.
 *
 * VT_COUNTERS(X) calls X(name) for each: the tracker's struct vt_device and
 * struct vt_totals hold them as uint64_t fields of these names, the dump
 * writes them under these names (in "devices" and "totals"), and the CLI's
 * model reads them back into fields of the same names. A new counter is
 * one name here, counted in tracker/account.h and written in
 * report/dump.c. */
#ifndef VT_COMMON_COUNTERS_H
#define VT_COMMON_COUNTERS_H

#include <stdint.h>

#define VT_COUNTERS(X) \
    X(live_bytes)      \
    X(live_count)      \
    X(peak_bytes)      \
    X(peak_time_ns)    \
    X(alloc_count)     \
    X(free_count)      \
    X(failed_count)    \
    X(oom_count)

/* A counter as a struct field. */
#define VT_COUNTER_FIELD(name) uint64_t name;

#endif
