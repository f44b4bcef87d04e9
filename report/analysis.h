/* analysis.h -- what a snapshot's numbers say, worked out once.
 *
 * Every in-process output of one snapshot (the dump, the post-mortem, the
 * exit summary) prints from one vt_analysis: the holders by stack and by
 * call site, the growing call sites, and the findings of each
 * out-of-memory failure are computed here, once per snapshot (an OOM's
 * findings once per OOM), and never again by a writer. */
#ifndef VT_ANALYSIS_H
#define VT_ANALYSIS_H

#include <stddef.h>

#include "../tracker/tracker.h"
#include "findings.h"
#include "growth.h"
#include "symbolize.h"

/* The findings of the first VT_ANALYSED_OOMS failures are computed (the
 * tracker keeps holders for as many). */
#define VT_ANALYSED_OOMS 64

struct vt_oom_findings {
    struct vt_finding f[VT_MAX_FINDINGS];
    int n;
    struct vt_growth growth;   /* the growing_site finding's site (allocs 0: none) */
};

struct vt_analysis {
    const struct vt_holder *holders; /* live device memory by stack, largest
                                        first: the snapshot's own (which
                                        outlives the analysis), not a copy */
    size_t nholders;
    struct vt_holder *by_site;       /* by call site: at a failure (growth_until
                                        0) the failure's holders (they are
                                        kept for the first 64), less the
                                        handles its request took; else the
                                        snapshot's, merged */
    size_t nby_site;
    int per_device;                  /* at a failure of a process that holds
                                        memory on other devices too: */
    int device;                      /* the failing device, */
    struct vt_holder *device_holders; /* its memory's holders by stack, from the
                                        snapshot where the failure kept none
                                        (NULL: none, or the failure's own) */
    size_t ndevice_holders;
    struct vt_holder *device_by_site; /* and by call site, of the failure as by_site */
    size_t ndevice_by_site;
    int sites_then;                  /* at a failure: by_site and device_by_site
                                        are of the failure's moment (its own
                                        holders, or the snapshot's where
                                        live_then) */
    int live_then;                   /* at a failure: the snapshot's live list is
                                        what was live at it (nothing was
                                        allocated or freed in between) */
    int host;                        /* the failure is of pinned host memory:
                                        per_device is set, device_holders
                                        and device_by_site are the host's */
    struct vt_growth *growth;        /* growing sites over the whole run, or NULL */
    size_t ngrowth;
    struct vt_oom_findings *findings; /* findings[i] for OOM i < nfindings */
    size_t nfindings;
    const struct vt_oom_findings *latest; /* the latest OOM's (the post-mortem's), or NULL */
    uint64_t oom_survived;           /* failures the same request later got past (survived.h) */
    int last_oom_survived;           /* the last failure of all is one of them */
    struct vt_oom_findings latest_beyond; /* where the latest is past the first VT_ANALYSED_OOMS */
};

/* Analyse snapshot s with its symbols (sym may be NULL). Growth over the
 * whole run up to `growth_until` (a time of vt_now_ns, at or before the
 * snapshot's) is worked out when it is set (an exit or on-demand dump,
 * up to the moment it was asked for; at an out-of-memory failure, 0: the
 * findings speak of growth up to each failure instead). Findings are worked out for every OOM of s, up to
 * VT_ANALYSED_OOMS, and for the latest; those of the first
 * VT_ANALYSED_OOMS once in the process's life, at the first analysis
 * after each (later ones reuse them). Never NULL: what memory did not allow is left empty.
 * It reads s's holder table in place: free it before s. */
struct vt_analysis *vt_analyse(const struct vt_snapshot *s, const struct vt_symbols *sym, uint64_t growth_until);
void vt_analysis_free(struct vt_analysis *a);

/* After fork, in the child: forget the parent's failures' findings. */
void vt_analysis_reset_child(void);

#endif
