/* dump.h -- the JSON dump ("vramtrace-dump", version 2).
 *
 * The dump is the contract between the library and everything that reads
 * its output (the CLI, CI scripts, tests). Fields are documented in
 * docs/dump-format.md; new fields may be added, existing ones keep their
 * meaning. A "stack" value is an index into "stacks"; frames go innermost
 * first. */
#ifndef VT_DUMP_H
#define VT_DUMP_H

#include <stdio.h>

#include "../tracker/tracker.h"
#include "growth.h"
#include "symbolize.h"

struct vt_dump_meta {
    const char *reason;   /* "oom", "exit", "signal" */
    int pid;
    int argc;
    char **argv;
    const char *host;
    int rank, local_rank;
    int rank_unknown;   /* no launcher's variable gave the rank (it is 0) */
    /* The variable that gave the rank ("RANK", "LOCAL_RANK"...), NULL for
     * none; a local rank variable's is the rank within the node alone. */
    const char *rank_from;
    int world_size; /* WORLD_SIZE and the like; 0: not set */
    unsigned long python_version;     /* 0x030c01f0, or 0 without Python frames */
    /* What tells this process from another of the same pid (an earlier
     * container's pid 1): the boot and the start time in clock ticks since
     * boot; boot_id NULL when unknown (then both are left out). */
    const char *boot_id;
    unsigned long long process_start;
    unsigned long long pid_ns;   /* the pid namespace's inode; 0: not known */
    /* The forecast's line (report/live.c), NULL or "" for none: then the
     * dump has no "forecast". */
    const char *forecast;
    /* The signal that ends the process after this exit dump ("SIGTERM"),
     * NULL when none; its sender's pid (0 unknown) and command name (""
     * unknown). */
    const char *ended_signal;
    int ended_from_pid;
    const char *ended_from;
    /* The status exit() was given (exit dumps of a process that called it
     * or returned from main); exit_status_known 0: not known, not said. */
    int exit_status_known, exit_status;
    /* An on-demand dump's number in its process (%n: 1 for the first);
     * 0 for the others. */
    unsigned dump_number;
};

struct vt_analysis;

/* Write the dump of snapshot `s` (live allocations sorted largest first
 * by the caller), with its symbols and its analysis (vt_analyse of the
 * same s and sym), to f. Returns 0, or -1 when a write failed. */
int vt_dump_write(FILE *f, const struct vt_snapshot *s, const struct vt_symbols *sym,
                  const struct vt_analysis *an, const struct vt_dump_meta *meta);

#endif
