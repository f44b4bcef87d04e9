/* livefile.h -- reading the live segments (common/live.h) of this user's
 * traced processes, for `vramtrace top` and `vramtrace metrics`. */
#ifndef VT_LIVEFILE_H
#define VT_LIVEFILE_H

#include "../common/live.h"

/* A consistent copy of each live segment in the live directory that this
 * user owns (pid > 0: only that process's), sorted by pid. Segments left
 * by processes that are gone (pid not running, another start time, or no
 * process holding the segment's lock) are removed on the way. Returns a
 * malloc'd array and its length in *n; NULL with *n 0 when there are
 * none. */
struct vt_live_segment *vt_live_scan(int pid, size_t *n);

/* 1 when process `pid` cannot run now, so that its segment holds what was
 * true when it stopped, not now: stopped by a signal (SIGSTOP, SIGTSTP,
 * Slurm's suspend) or a debugger (state T or t in /proc/PID/stat), or in
 * a frozen cgroup (docker pause, a freezer: cgroup v2's cgroup.events
 * "frozen 1", v1's freezer.state FROZEN). Its publisher does not run
 * either, and the segment's time stamp cannot tell: it is rewritten only
 * when something changed. 0 otherwise, or when it cannot be told. */
int vt_live_stopped(int pid);

#endif
