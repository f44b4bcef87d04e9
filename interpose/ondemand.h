/* ondemand.h -- a dump of the running process on a signal, and the thread
 * that writes what signals ask for.
 *
 * `kill -USR2 PID` (VRAMTRACE_SIGNAL) writes a dump without stopping the
 * process. The handler only writes a byte to a pipe (async-signal-safe); a
 * watcher thread reads it and writes the dump outside the handler; it
 * also hears SIGTERM's handler (onterm.h). Both are set up when the
 * process first uses a GPU, and a handler only where the program left the
 * signal at its default: a program's own handler is never replaced. */
#ifndef VT_ONDEMAND_H
#define VT_ONDEMAND_H

/* Install the handlers and start the watcher (once; later calls return). */
void vt_ondemand_start(void);

/* In a forked child: the watcher thread did not come along; give the
 * signals back their default where vramtrace's handler is still the one
 * installed (a handler the program put in its place stays) and let the
 * child start its own when it uses a GPU. */
void vt_ondemand_reset_child(void);

/* The bytes a handler writes to the watcher. */
enum { VT_BYTE_DUMP = 1, VT_BYTE_TERM = 2, VT_BYTE_QUIT = 3 };

/* From a signal handler: byte c to the watcher; 0 when it is there to read
 * it. */
int vt_ondemand_tell(char c);

/* Whether this process is the one that installed the handlers: a forked
 * child runs them with its parent's pipe until its own reset (fork
 * handlers run after fork returns), and a signal it gets then is not the
 * parent's. */
int vt_ondemand_mine(void);

/* Whether h, the plain handler of signal sig, is the dump signal's. */
int vt_ondemand_handler_is_ours(int sig, void (*h)(int));

#endif
