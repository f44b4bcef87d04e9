/* onterm.h -- a process ended by SIGTERM writes its exit outputs.
 *
 * A job that a scheduler ends at its time limit (SIGTERM, then SIGKILL), a
 * stopped container, the other ranks of a failed job: from the process's
 * first GPU call, where the program left SIGTERM at its default, the
 * handler tells the dump signal's watcher thread (ondemand.h), which
 * writes the exit dump, report and leak check, with who sent the signal,
 * and then the process dies of SIGTERM, its status kept. VRAMTRACE_ON_TERM
 * (default 1). */
#ifndef VT_ONTERM_H
#define VT_ONTERM_H

#include <signal.h>

/* The handler installed over SIGTERM's default, once the watcher hears
 * what the handlers ask (ondemand.h). */
void vt_onterm_install(void);

/* The program set SIGTERM's action to its default (a handler of its own
 * undone, the old one it was shown put back): vramtrace's handler stands
 * for the default again, where this process installed it once. */
void vt_onterm_default_set(void);

/* On the watcher's thread, when the handler asked for it: the exit's
 * outputs written, then the process's end. Does not return in practice
 * (the process dies of SIGTERM as the handler returns). */
void vt_onterm_heard(void);

/* Whether the action a (of SIGTERM) is vramtrace's handler. */
int vt_onterm_is_ours(const struct sigaction *a);
int vt_onterm_handler_is_ours(void (*h)(int));

/* In a forked child: SIGTERM's default back where vramtrace's handler is
 * still installed (1 then: the child installs it again at its own first
 * GPU call), its state forgotten. */
int vt_onterm_reset_child(void);

#endif
