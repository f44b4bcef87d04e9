/* sigview.c -- the program's view of its signals' actions (sigview.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <string.h>

#include "ondemand.h"
#include "onterm.h"
#include "resolve.h"
#include "sigview.h"

int vt_real_sigaction(int sig, const struct sigaction *act, struct sigaction *old) {
    static void *slot;
    int (*real)(int, const struct sigaction *, struct sigaction *);
#ifdef VT_TSAN_BUILD
    /* The ThreadSanitizer build installs its handlers through the
     * runtime's own sigaction (preloaded first; this build defines none),
     * which runs a handler only where the thread's state is set up: put in
     * past it (the next definition, the C library's), a dump signal that
     * reached a thread still starting ran the instrumented handler before
     * the runtime knew the thread, and crashed in the runtime. */
    *(void **)&real = vt_fn_kept(&slot, vt_global_symbol, "sigaction");
#else
    *(void **)&real = vt_next_fn_kept(&slot, "sigaction");
#endif
    if (!real) {
        errno = ENOSYS;
        return -1;
    }
    return real(sig, act, old);
}

int vt_sig_set_default(int sig) {
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    return vt_real_sigaction(sig, &dfl, NULL);
}

int vt_sig_install(int sig, void (*fn)(int), void (*info_fn)(int, siginfo_t *, void *)) {
    struct sigaction old, sa;
    if (vt_real_sigaction(sig, NULL, &old) != 0 || old.sa_handler != SIG_DFL || (old.sa_flags & SA_SIGINFO)) return 0;
    memset(&sa, 0, sizeof sa);
    if (info_fn) {
        sa.sa_sigaction = info_fn;
        sa.sa_flags = SA_RESTART | SA_SIGINFO | SA_NODEFER;
    } else {
        sa.sa_handler = fn;
        sa.sa_flags = SA_RESTART;
    }
    sigemptyset(&sa.sa_mask);
    return vt_real_sigaction(sig, &sa, NULL) == 0;
}

#ifndef VT_TSAN_BUILD
/* (Not in the ThreadSanitizer build: its runtime intercepts these itself
 * and calls them before it can run instrumented code.) */

/* A handler of vramtrace's is shown to the program as the default it
 * stands for: a program asking what SIGTERM does before it puts its own
 * handler in (CPython's signal module, a runtime that installs one only
 * over the default) sees what it would see without vramtrace. */
__attribute__((visibility("default"))) int sigaction(int sig, const struct sigaction *act, struct sigaction *old) {
    int r = vt_real_sigaction(sig, act, old);
    /* Its default asked for: what the program was shown it had. */
    if (r == 0 && sig == SIGTERM && act && !(act->sa_flags & SA_SIGINFO) && act->sa_handler == SIG_DFL)
        vt_onterm_default_set();
    if (r == 0 && old &&
        ((sig == SIGTERM && vt_onterm_is_ours(old)) ||
         (!(old->sa_flags & SA_SIGINFO) && vt_ondemand_handler_is_ours(sig, old->sa_handler)))) {
        old->sa_handler = SIG_DFL;
        old->sa_flags = 0;
        sigemptyset(&old->sa_mask);
    }
    return r;
}

/* The same for the doors that set a plain handler and return the old one
 * (signal() and its kin, whose C library code asks its own sigaction): a
 * program that keeps the old handler to restore it, or to call it as
 * old(sig), gets the default, not vramtrace's handler (called so, its
 * signal details were garbage: a crash; restored so, it stayed installed
 * without them). */
static sighandler_t shown(int sig, sighandler_t h) {
    if ((sig == SIGTERM && vt_onterm_handler_is_ours(h)) || vt_ondemand_handler_is_ours(sig, h)) return SIG_DFL;
    return h;
}

#define SIGNAL_DOOR(cname, sym)                                                                              \
    sighandler_t cname(int sig, sighandler_t h) __asm__(sym) __attribute__((visibility("default")));         \
    sighandler_t cname(int sig, sighandler_t h) {                                                            \
        static void *slot;                                                                                   \
        sighandler_t (*real)(int, sighandler_t);                                                             \
        *(void **)&real = vt_next_fn_kept(&slot, sym);                                                       \
        if (!real) {                                                                                         \
            errno = ENOSYS;                                                                                  \
            return SIG_ERR;                                                                                  \
        }                                                                                                    \
        sighandler_t was = real(sig, h);                                                                     \
        if (was != SIG_ERR && sig == SIGTERM && h == SIG_DFL) vt_onterm_default_set();                      \
        return shown(sig, was);                                                                              \
    }
SIGNAL_DOOR(vt_signal_door, "signal")
SIGNAL_DOOR(vt_sysv_signal_door, "sysv_signal")
SIGNAL_DOOR(vt_bsd_signal_door, "bsd_signal")
SIGNAL_DOOR(vt_sigset_door, "sigset")
#endif
