/* growth.h -- call sites whose live bytes keep rising through the run.
 *
 * From the event history: for each call site with at least four
 * allocations, the time from its first event to the end is cut into four
 * windows and the least the site held in each (its floor: what it kept, not
 * what it used for a moment) is taken. The site is growing when every floor
 * is above the one before and it still holds memory at the end: a
 * staircase, not one big allocation and not a loop that gives back what it
 * takes. The slope is the rise of the floor per second. */
#ifndef VT_GROWTH_H
#define VT_GROWTH_H

#include <stddef.h>
#include <stdint.h>

#include "../tracker/tracker.h"

struct vt_growth {
    uint32_t stack;
    uint64_t first_floor;      /* bytes kept in the first window */
    uint64_t end_bytes;        /* live at the end */
    uint64_t allocs;           /* allocation events seen */
    uint64_t t_first_ns;       /* the site's first event */
    double slope;              /* bytes per second */
};

/* Growing sites of snapshot s over the run up to t_end (s->now_ns for the
 * whole run, an OOM's time for the run up to that failure), largest rise
 * first; NULL and *n = 0 when none. Device memory only. */
struct vt_growth *vt_find_growth(const struct vt_snapshot *s, uint64_t t_end, size_t *n);

#endif
