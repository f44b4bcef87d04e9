/* sigview.h -- the program's view of its signals' actions.
 *
 * vramtrace's handlers (the dump signal's, SIGTERM's: ondemand.h,
 * onterm.h) are installed only over a signal's default, and the program is
 * shown that default where it asks (sigaction, signal and its kin): what
 * it sees is what it would see without vramtrace. vramtrace's own code
 * asks the C library itself. */
#ifndef VT_SIGVIEW_H
#define VT_SIGVIEW_H

#include <signal.h>

/* The C library's sigaction, not the program's view of it (vramtrace's
 * handlers shown as the default they stand for). */
int vt_real_sigaction(int sig, const struct sigaction *act, struct sigaction *old);

/* Set sig's action to its default (through the C library). */
int vt_sig_set_default(int sig);

/* Install `fn`, or `info_fn` (SA_SIGINFO, SA_NODEFER), for sig when the
 * program left it at its default: 1 when installed. */
int vt_sig_install(int sig, void (*fn)(int), void (*info_fn)(int, siginfo_t *, void *));

#endif
