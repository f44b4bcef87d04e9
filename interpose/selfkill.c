/* selfkill.c -- a process that ends by signalling itself.
 *
 * A process killed by a signal runs no destructor, so vramtrace's exit
 * dump and summary (init.c's vt_stop) never came for one that ends by
 * sending itself a signal whose default action ends it: CPython does that
 * after an unhandled KeyboardInterrupt (its own exit handlers run, SIGINT's
 * handler is reset, then kill(getpid(), SIGINT), so that its parent sees
 * it die of SIGINT): Ctrl-C of a training run left no dump. Such a kill
 * writes them first; the signal then ends the process as it would have,
 * with its status (a leak check reports, and does not change it).
 *
 * kill, raise and pthread_kill (of this thread) are the doors. Only a kill
 * of this very process, by a signal that ends it (not a core
 * dump's, whose state a debugger wants as it is), not blocked on this
 * thread (a handler re-raising its own signal has it blocked: that kill
 * is left alone, for the handler may have interrupted anything) and left
 * to its default action. The call itself is the system call. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../report/output.h"
#include "hook.h"
#include "sigview.h"
#include "resolve.h"

static int ends_the_process(int sig) {
    switch (sig) {
    case SIGHUP: case SIGINT: case SIGTERM: case SIGALRM: case SIGUSR1: case SIGUSR2: case SIGPIPE:
    case SIGVTALRM: case SIGPROF: case SIGIO: case SIGPWR: case SIGSTKFLT:
        return 1;
    default:
        return 0;
    }
}

/* This process is about to send itself `sig` (to this thread, or to the
 * process from this thread): the exit's outputs first when it will end it. */
static void before_own_signal(int sig) {
    if (!ends_the_process(sig)) return;
    int e = errno;
    struct sigaction now;
    sigset_t mask;
    if (vt_real_sigaction(sig, NULL, &now) == 0 && !(now.sa_flags & SA_SIGINFO) && now.sa_handler == SIG_DFL &&
        pthread_sigmask(SIG_SETMASK, NULL, &mask) == 0 && !sigismember(&mask, sig)) {
        vt_output_ended_by(sig, (int)getpid());
        vt_exit_before_signal();
    }
    errno = e;
}

__attribute__((visibility("default"))) int kill(pid_t pid, int sig) {
    if (pid > 0 && pid == getpid()) before_own_signal(sig);
    return (int)syscall(SYS_kill, pid, sig);
}

/* raise() is pthread_kill(pthread_self(), sig): the C library's sends it
 * with tgkill, not through kill (Python's signal.raise_signal, a C
 * program's raise(SIGTERM) left no exit dump). Sent the same way here. */
static int to_this_thread(int sig) {
    return (int)syscall(SYS_tgkill, (pid_t)getpid(), (pid_t)syscall(SYS_gettid), sig);
}

__attribute__((visibility("default"))) int raise(int sig) {
    before_own_signal(sig);
    return to_this_thread(sig) == 0 ? 0 : -1;
}

__attribute__((visibility("default"))) int pthread_kill(pthread_t thread, int sig) {
    if (pthread_equal(thread, pthread_self())) {
        before_own_signal(sig);
        int e = errno;
        int r = to_this_thread(sig) == 0 ? 0 : errno;
        errno = e;
        return r;
    }
    static void *slot;
    int (*real)(pthread_t, int);
    *(void **)&real = vt_next_fn_kept(&slot, "pthread_kill");
    return real ? real(thread, sig) : ESRCH;
}
