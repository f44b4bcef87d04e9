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
 * Only a kill of this very process, by a signal that ends it (not a core
 * dump's, whose state a debugger wants as it is), not blocked on this
 * thread (a handler re-raising its own signal has it blocked: that kill
 * is left alone, for the handler may have interrupted anything) and left
 * to its default action. The call itself is the system call. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "hook.h"

static int ends_the_process(int sig) {
    switch (sig) {
    case SIGHUP: case SIGINT: case SIGTERM: case SIGALRM: case SIGUSR1: case SIGUSR2: case SIGPIPE:
    case SIGVTALRM: case SIGPROF: case SIGIO: case SIGPWR: case SIGSTKFLT:
        return 1;
    default:
        return 0;
    }
}

__attribute__((visibility("default"))) int kill(pid_t pid, int sig) {
    if (pid > 0 && ends_the_process(sig) && pid == getpid()) {
        int e = errno;
        struct sigaction now;
        sigset_t mask;
        if (sigaction(sig, NULL, &now) == 0 && !(now.sa_flags & SA_SIGINFO) && now.sa_handler == SIG_DFL &&
            pthread_sigmask(SIG_SETMASK, NULL, &mask) == 0 && !sigismember(&mask, sig))
            vt_exit_before_signal();
        errno = e;
    }
    return (int)syscall(SYS_kill, pid, sig);
}
