/* ondemand.h -- a dump of the running process on a signal.
 *
 * `kill -USR2 PID` (VRAMTRACE_SIGNAL) writes a dump without stopping the
 * process. The handler only writes a byte to a pipe (async-signal-safe); a
 * watcher thread reads it and writes the dump outside the handler. Both are
 * set up when the process first uses a GPU, and only if the program left
 * the signal at its default: a program's own handler is never replaced. */
#ifndef VT_ONDEMAND_H
#define VT_ONDEMAND_H

#include <signal.h>

/* The C library's sigaction, not the program's view of it (vramtrace's
 * handlers shown as the default they stand for). */
int vt_real_sigaction(int sig, const struct sigaction *act, struct sigaction *old);

/* Install the handler and start the watcher (once; later calls return). */
void vt_ondemand_start(void);

/* In a forked child: the watcher thread did not come along; give the signal
 * back its default if vramtrace's handler is still the one installed (a
 * handler the program put in its place stays) and let the child start its
 * own when it uses a GPU. */
void vt_ondemand_reset_child(void);

#endif
