/* warn.c -- the capped warning and the lost-records count. */
#include <stdarg.h>
#include <stdio.h>

#include "warn.h"

static uint64_t warnings;   /* atomic: vt_warn calls */
static uint64_t lost;       /* atomic: vt_records_lost calls */

static void say(const char *kind, const char *fmt, va_list ap) {
    if (__atomic_fetch_add(&warnings, 1, __ATOMIC_RELAXED) >= VT_WARN_MAX) return;
    char line[1024];
    vsnprintf(line, sizeof line, fmt, ap);
    fprintf(stderr, "vramtrace: %s: %s\n", kind, line);
}

void vt_warn_as(const char *kind, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    say(kind, fmt, ap);
    va_end(ap);
}

void vt_warn(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    say("warning", fmt, ap);
    va_end(ap);
}

void vt_warn_summary(void) {
    uint64_t n = __atomic_load_n(&warnings, __ATOMIC_RELAXED);
    while (n > VT_WARN_MAX &&
           !__atomic_compare_exchange_n(&warnings, &n, VT_WARN_MAX, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
    if (n > VT_WARN_MAX)
        fprintf(stderr, "vramtrace: %llu more warning%s not shown\n", (unsigned long long)(n - VT_WARN_MAX),
                n - VT_WARN_MAX == 1 ? "" : "s");
}

void vt_records_lost(const char *what) {
    __atomic_add_fetch(&lost, 1, __ATOMIC_RELAXED);
    vt_warn("out of memory: %s dropped", what);
}

void vt_records_lost_n(uint64_t n, const char *what) {
    __atomic_add_fetch(&lost, n, __ATOMIC_RELAXED);
    vt_warn("%llu %s dropped", (unsigned long long)n, what);
}

uint64_t vt_records_lost_count(void) { return __atomic_load_n(&lost, __ATOMIC_RELAXED); }

void vt_warn_reset_child(void) {
    __atomic_store_n(&warnings, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&lost, 0, __ATOMIC_RELAXED);
}
