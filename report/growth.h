/* growth.h -- call sites whose live bytes keep rising through the run.
 *
 * From the event history: for each call site with at least four
 * allocations, the site's events up to the end are cut into four windows
 * of equal counts, in the history's order (never by wall time, which a
 * busy machine stretches), and the least the site held in each (its floor: what it kept, not
 * what it used for a moment) is taken. The site is growing when every floor
 * is above the one before and it still holds memory at the end: a
 * staircase, not one big allocation and not a loop that gives back what it
 * takes. And when it is still rising: its allocations reach into the later
 * half of the program's work since its first event, counted in the
 * program's step boundaries where it marked any since then (a caching
 * allocator serves its later steps without an event), else, in a run
 * that marked steps before then, in the history's events (all sites': an
 * evaluation pass after training makes events but no step), else, in a
 * run that marks none, in time up to the end (t_end: at exit, the moment
 * the outputs were asked for, before vramtrace symbolizes, or the
 * snapshot's newest event or boundary where the program went on after
 * it: vt_growth_end); a model
 * loaded, or a cache filled in the first step, and kept is a phase. The
 * history's events were the measure of runs without steps too, and a
 * caching allocator's warm-up, the last events of a healthy run whose
 * steps it then served, read as still rising. In a run without steps, a
 * site whose growth lasted less than what the program did after it
 * without allocating, its own exit included, is a phase too.
 *
 * What a report says of a growing site is vt_growth_rate's, and nothing
 * else's: the rise (end minus first floor), over how many units of work,
 * in how long (the site's first event to its last allocation, so that the
 * figures at an out-of-memory failure and at exit agree when the site did
 * not allocate in between), and the rise per unit.
 *
 * Per step, only when the steps show it. The program's steps (tracker/steps.h)
 * count for a site when they are complete (closed by a boundary at or
 * before the end): its growth is counted over the complete steps from the
 * step of its first event to the step of its last allocation, both
 * counted (a step still under way at the end is not one). The growth is
 * said per step when those are at least VT_GROWTH_MIN_STEPS and the site
 * gained most of its rise in them (its live bytes at the boundary closing
 * the last of them, less its first floor, are more than half the rise);
 * the figures are then theirs: that gain, per step, from the site's first
 * event to its last allocation before that boundary. Otherwise, in a run
 * with steps, it is said per second over the whole growth (the site's
 * first event to its last allocation), and in a run without any, per
 * allocation. A run that steps a few times and then grows without a step
 * (an evaluation loop that keeps its outputs) is per second: its growth
 * happened in no step.
 *
 * Beyond the history. The ring keeps the newest events; the live table
 * keeps every live allocation with its time. Where the ring overwrote
 * events of a site that held memory at the oldest event kept, the site's
 * figures are of what is known (the verdict is still the events kept's):
 * it begins at its earliest live allocation when that is older than the
 * events kept, those live allocations count among its allocations (and
 * place its first step by their times), its first floor is the least it
 * held in its first kept window less them (they were made after that
 * beginning), and history_from_ns says from when the events are kept, so
 * that every report says its figures are of the history kept. Steps
 * counted from the oldest kept boundary (boundaries dropped) start where
 * it is, with what the site held there (its live allocations older than
 * it, where the ring no longer has it), and say of how many steps of the
 * run (run_steps). */
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
    uint64_t steps;            /* the complete steps its growth is said
                                  per (see above), 0 when it is not said
                                  per step */
    uint64_t step_rise;        /* with steps: what it gained over them */
    uint64_t t_step_first_ns;  /* where they are counted from: its first
                                  event, or the oldest kept boundary */
    uint64_t t_step_last_ns;   /* with steps: its last allocation in them */
    uint64_t run_steps;        /* with steps counted from the oldest kept
                                  boundary (the site began before it): the
                                  run's steps; else 0 */
    uint64_t history_from_ns;  /* where the ring had overwritten events of
                                  the site (it held memory at the oldest
                                  event kept): that event's time, from
                                  which its figures are known; else 0 */
    int marked;                /* the run marked a step boundary up to the end */
    char holder[VT_GROWTH_HOLDER];  /* the Python object holding most of
                                  the site's listed tensors in PyTorch's
                                  record (report/torch_growth.c), "" when
                                  no record names one */
    uint64_t holder_bytes;     /* and their bytes, 0 for none */
    int holder_device;         /* their device, -1 for none */
    int holder_grew;           /* the holder is a buffer or parameter that
                                  grew step after step (torch_growth.c):
                                  the leak, whatever cache it left */
    uint64_t cache_bytes;      /* at exit or on request, the bytes of
                                  its live allocations that PyTorch's
                                  record lists as segments of its cache
                                  holding no tensor, which empty_cache()
                                  gives back (report/torch_growth.c); 0
                                  when the record cannot say */
};

/* The figures of one growing site, in the unit of work the rule above
 * picks: the program's own step ("step": g->steps), else the second in a
 * run with steps ("second": the whole growth took time), else the
 * allocation. vt_growth_rate is the one place that chooses, and every
 * output (post-mortem, exit summary, PyTorch's breakdown, dump, CLI
 * through the dump) follows. */
#define VT_GROWTH_MIN_STEPS 3

struct vt_growth_rate {
    uint64_t rise;             /* per step: step_rise; else end_bytes - first_floor */
    uint64_t units;            /* steps, or allocations ("second" and "allocation") */
    const char *unit;          /* "step", "second" or "allocation" */
    uint64_t per_unit;         /* rise / steps, bytes a second, or rise / allocations; rounded down */
    uint64_t span_ns;          /* the time the rise took: its first event (or the oldest kept
                                  boundary its steps are counted from) to its last allocation counted */
    uint64_t run_steps;        /* the run's steps, where units are only its newest kept; else 0 */
    uint64_t history_from_ns;  /* the oldest event kept, where the ring cut the site's history; else 0 */
    double bytes_per_second;   /* end_bytes - first_floor over t_last_ns - t_first_ns; 0 when that is 0 */
};

struct vt_growth_rate vt_growth_rate(const struct vt_growth *g);

/* "+3.00 GiB over 6 allocations in 0.100 s, 512.00 MiB per allocation",
 * per second "+3.00 GiB over 6 allocations in 0.100 s, 30.00 GiB per
 * second", or per step "+512.00 MiB per step over the last 6 steps (+3.00
 * GiB in 0.100 s)", then ", held by `history`" where g names its holder,
 * and where the ring cut its history "; figures of the history kept
 * (...)": vt_growth_rate's figures as every in-process report prints them
 * (see vt_fmt_growth, vt_fmt_held, vt_fmt_kept). Writes into buf and
 * returns it. */
const char *vt_growth_text(const struct vt_growth *g, char *buf, size_t size);

/* Growing call sites of snapshot s over the run up to t_end (s->now_ns for
 * the whole run, an OOM's time for the run up to that failure), largest
 * rise first, no holder named; NULL and *n = 0 when none. Device memory only. In a
 * PyTorch program that steps an optimizer (vt_torch_stepping) and has not
 * completed its second step by t_end, sites whose first event came in
 * its first step are left out: made once (gradients, the optimizer's
 * state), which one step cannot tell from a leak. Stacks with
 * the same call site (vt_site_groups of sym; sym NULL: each stack alone)
 * are one site, whose `stack` is the lowest of them: a Python line reached
 * through many native stacks grows as one. */
struct vt_growth *vt_find_growth(const struct vt_snapshot *s, const struct vt_symbols *sym, uint64_t t_end,
                                 size_t *n);

/* The end of the program's work that an exit's or an on-demand dump's
 * growth counts: `asked`, the moment its outputs were asked for, or the
 * snapshot's newest event or step boundary where the program went on
 * after it. A dump written on SIGTERM is written while the program's
 * threads still run (its symbols take time before the snapshot): the
 * events and steps they made meanwhile are in the snapshot's holders and
 * totals, and were left out of its growth ("0 B -> 352 MiB" where the
 * site held 368 MiB, the last step one short). */
uint64_t vt_growth_end(const struct vt_snapshot *s, uint64_t asked);

/* The same of device `device`'s memory alone (-1: every device's): what
 * a failure of one device among several grew from. */
struct vt_growth *vt_find_growth_on(const struct vt_snapshot *s, const struct vt_symbols *sym, uint64_t t_end,
                                    int device, size_t *n);

#endif
