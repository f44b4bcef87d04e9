/* growth.h -- call sites whose live bytes keep rising through the run.
 *
 * From the event history: for each call site with at least four
 * allocations, the site's events up to the end are cut into four windows
 * of equal counts, in the history's order (never by wall time, which a
 * busy machine stretches), and the least the site held in each (its floor: what it kept, not
 * what it used for a moment) is taken. The site is growing when every floor
 * is above the one before and it still holds memory at the end: a
 * staircase, not one big allocation and not a loop that gives back what it
 * takes.
 *
 * What a report says of a growing site is vt_growth_rate's, and nothing
 * else's: the rise (end minus first floor), over how many units of work,
 * in how long (the site's first event to its last allocation, so that the
 * figures at an out-of-memory failure and at exit agree when the site did
 * not allocate in between), and the rise per unit. */
#ifndef VT_GROWTH_H
#define VT_GROWTH_H

#include <stddef.h>
#include <stdint.h>

#include "../tracker/tracker.h"
#include "symbolize.h"

#define VT_GROWTH_HOLDER 201   /* a holder's text (VT_TORCH_TEXT) and its NUL */

struct vt_growth {
    uint32_t stack;
    uint64_t first_floor;      /* bytes kept in the first window */
    uint64_t end_bytes;        /* live at the end */
    uint64_t allocs;           /* allocation events seen */
    uint64_t t_first_ns;       /* the site's first event */
    uint64_t t_last_ns;        /* its last allocation up to the end */
    uint64_t steps;            /* the program's steps (tracker/steps.h) the
                                  site's events span up to the end: from the
                                  step of its first event to that of its last
                                  allocation, both counted; 0 when the run
                                  marked no step boundary up to the end */
    char holder[VT_GROWTH_HOLDER];  /* the Python object holding most of
                                  the site's listed tensors in PyTorch's
                                  record (report/torch_growth.c), "" when
                                  no record names one */
    uint64_t holder_bytes;     /* and their bytes, 0 for none */
    int holder_device;         /* their device, -1 for none */
};

/* The figures of one growing site, in the unit of work the run is known
 * by: the program's own step ("step", per step) when it marked any
 * (g->steps), else the allocation. vt_growth_rate is the one place that
 * chooses, and every output (post-mortem, exit summary, dump, CLI through
 * the dump) follows. */
struct vt_growth_rate {
    uint64_t rise;             /* end_bytes - first_floor */
    uint64_t units;            /* steps, or allocations */
    const char *unit;          /* "step" or "allocation" */
    uint64_t per_unit;         /* rise / units, rounded down */
    uint64_t span_ns;          /* t_last_ns - t_first_ns */
    double bytes_per_second;   /* rise / span; 0 when the span is 0 */
};

struct vt_growth_rate vt_growth_rate(const struct vt_growth *g);

/* "+3.00 GiB over 6 allocations in 0.100 s, 512.00 MiB per allocation",
 * or with steps "+512.00 MiB per step over the last 6 steps (+3.00 GiB in
 * 0.100 s)", then ", held by `history`" where g names its holder:
 * vt_growth_rate's figures as every in-process report prints them (see
 * vt_fmt_growth). Writes into buf and returns it. */
const char *vt_growth_text(const struct vt_growth *g, char *buf, size_t size);

/* Growing call sites of snapshot s over the run up to t_end (s->now_ns for
 * the whole run, an OOM's time for the run up to that failure), largest
 * rise first, no holder named; NULL and *n = 0 when none. Device memory only. Stacks with
 * the same call site (vt_site_groups of sym; sym NULL: each stack alone)
 * are one site, whose `stack` is the lowest of them: a Python line reached
 * through many native stacks grows as one. */
struct vt_growth *vt_find_growth(const struct vt_snapshot *s, const struct vt_symbols *sym, uint64_t t_end,
                                 size_t *n);

#endif
