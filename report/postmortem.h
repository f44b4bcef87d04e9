/* postmortem.h -- the human report: at an out-of-memory failure, and the
 * short summary at exit. */
#ifndef VT_POSTMORTEM_H
#define VT_POSTMORTEM_H

#include <stdio.h>

#include "../tracker/tracker.h"
#include "analysis.h"
#include "dump.h"
#include "symbolize.h"

/* What the post-mortems written so far told: how many there were, and
 * the failures counted when the last was written; that failure's request
 * (`last`: its request, API, kind, device and stack; its record may be
 * one the history no longer keeps), and each request's count then
 * (counts[i] of the snapshot's oom_requests[i], ncounts of them; `other`
 * its oom_requests_other), so that the failures after it are counted
 * exactly however many there were. counts is malloc'd (NULL: none). */
struct vt_oom_told {
    uint64_t postmortems, failures;
    int have_last;
    struct vt_oom last;
    uint64_t *counts;
    size_t ncounts;
    uint64_t other;
};

/* The post-mortem of s's latest failure was written: *t tells of it
 * (one more post-mortem, the failures and counts of s). */
void vt_postmortem_told_now(struct vt_oom_told *t, const struct vt_snapshot *s);

/* Forget what was told (a forked child's start), freeing its counts. */
void vt_postmortem_told_reset(struct vt_oom_told *t);

/* Snapshot s taken at failure `number` (vt_thread_oom_seq) as if taken
 * just after it: the later failures of other threads left out of its
 * records and of its requests' counts, when they are all kept (the
 * newest are); 0, s unchanged, otherwise. */
int vt_postmortem_upto(struct vt_snapshot *s, uint64_t number);

/* Both print from `an`, the analysis of s with sym (vt_analyse), and
 * compute nothing of their own.
 *
 * The post-mortem of the snapshot's latest OOM: the request, the device
 * state, live and peak bytes, the largest holders by call site, the
 * largest live allocations, what to try next, and where the dump went
 * (dump_path may be NULL); and, in one line each, the failures before it
 * that no post-mortem told (after `told`'s; another thread's, while this
 * one's was being recorded, or one the pace of post-mortems left out).
 * Live allocations must be sorted largest first. */
void vt_postmortem_oom(FILE *f, const struct vt_snapshot *s, const struct vt_symbols *sym,
                       const struct vt_analysis *an, const struct vt_dump_meta *meta, const char *dump_path,
                       int top, const struct vt_oom_told *told);

/* Whether the snapshot's latest failure was told: the one the last
 * post-mortem was written for, or a retry of it (its request, device and
 * call site). */
int vt_postmortem_told(const struct vt_snapshot *s, const struct vt_symbols *sym, const struct vt_oom_told *told);

/* The exit summary: what is still live, the peak, failures, the dump; and
 * when the last failure got no post-mortem (told->failures is fewer than
 * all) and is no retry of the one reported (its request and call site),
 * its request, the device then and its findings. */
void vt_postmortem_exit(FILE *f, const struct vt_snapshot *s, const struct vt_symbols *sym,
                        const struct vt_analysis *an, const struct vt_dump_meta *meta, const char *dump_path,
                        int top, const struct vt_oom_told *told);

/* With the leak check, whose report stands in for the exit summary: the
 * summary's first line when a signal ends the process (who sent it), and
 * the last failure's lines when it got no post-mortem of its own (as in
 * vt_postmortem_exit); nothing otherwise. */
void vt_postmortem_exit_brief(FILE *f, const struct vt_snapshot *s, const struct vt_symbols *sym,
                              const struct vt_analysis *an, const struct vt_dump_meta *meta,
                              const struct vt_oom_told *told);

#endif
