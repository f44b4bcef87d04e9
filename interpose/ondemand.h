/* ondemand.h -- a dump of the running process on a signal, and the thread
 * that writes what signals ask for.
 *
 * `kill -USR2 PID` (VRAMTRACE_SIGNAL) writes a dump without stopping the
 * process. The handler only sets a bit in a word and wakes the thread
 * waiting on it (a futex: async-signal-safe, and no descriptor the
 * program could close); that watcher thread writes the dump outside the
 * handler; it also hears SIGTERM's handler (onterm.h). Both are set up when the
 * process first uses a GPU, and a handler only where the program left the
 * signal at its default: a program's own handler is never replaced. */
#ifndef VT_ONDEMAND_H
#define VT_ONDEMAND_H

/* Install the handlers and start the watcher (once; later calls return). */
void vt_ondemand_start(void);

/* In a forked child: the watcher thread did not come along. The dump
 * signal's handler stays where it is still vramtrace's, and does nothing
 * until the child starts its own watcher when it uses a GPU (the child
 * does not die of the signal); SIGTERM gets its default back where
 * vramtrace's handler is still the one installed. A handler the program
 * put in place of either stays. */
void vt_ondemand_reset_child(void);

/* What a handler asks of the watcher. */
enum { VT_ASK_DUMP = 1, VT_ASK_TERM = 2, VT_ASK_QUIT = 4 };

/* From a signal handler: ask (VT_ASK_*) of the watcher; 0 when it is
 * there to hear it. */
int vt_ondemand_tell(unsigned ask);

/* Whether this process is the one that installed the handlers: a forked
 * child runs them with its parent's state until its own reset (fork
 * handlers run after fork returns), and a signal it gets then is not the
 * parent's. */
int vt_ondemand_mine(void);

/* Whether h, the plain handler of signal sig, is the dump signal's. */
int vt_ondemand_handler_is_ours(int sig, void (*h)(int));

#endif
