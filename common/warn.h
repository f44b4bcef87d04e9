/* warn.h -- vramtrace's own warnings, capped, and what was lost.
 *
 * Never take the host down: where a part of vramtrace fails it says so in
 * one line and that part stops. vt_warn prints the first VT_WARN_MAX
 * warnings of a process on stderr (with vt_warn_as's other lines) and
 * counts the rest; vt_warn_summary
 * says how many were held back. vt_records_lost counts what vramtrace
 * dropped for lack of memory (a record, an analysis); the dump carries the
 * count as totals.records_lost. Thread-safe. */
#ifndef VT_WARN_H
#define VT_WARN_H

#include <stdint.h>

#define VT_WARN_MAX 10

/* One line of vramtrace's own on stderr (its reports aside): "vramtrace:
 * KIND: " and the formatted text (which ends without a newline). Every
 * such line of the library goes through here, the warnings ("warning")
 * and the forecast ("forecast"), and together they are capped: printed for
 * the first VT_WARN_MAX calls, counted after. */
void vt_warn_as(const char *kind, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* vt_warn_as("warning", ...). */
void vt_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* "vramtrace: N more warnings not shown" once, when any were held back;
 * nothing otherwise. */
void vt_warn_summary(void);

/* Count one thing dropped for lack of memory, and warn (capped) naming
 * what it was. */
void vt_records_lost(const char *what);

/* Count n things of one kind dropped (not for lack of memory alone: kept
 * back past a bound), and warn once (capped) naming them. */
void vt_records_lost_n(uint64_t n, const char *what);

/* How many things were dropped for lack of memory so far. */
uint64_t vt_records_lost_count(void);

/* After fork, in the child: its own counts start at 0. */
void vt_warn_reset_child(void);

#endif
