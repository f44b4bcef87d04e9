/* ondemand.c -- the dump signal, and the watcher thread that writes what
 * the signals ask for (ondemand.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../common/thread.h"
#include "../common/warn.h"
#include "../report/output.h"
#include "../tracker/options.h"
#include "ondemand.h"
#include "onterm.h"
#include "sigview.h"

/* What the handlers ask of the watcher (VT_ASK_* bits, or-ed in), the
 * word it sleeps on (a futex). A word of the library's own memory, not a
 * pipe: the program owns the descriptor table, and a daemon closes
 * everything from 3 up (closefrom, close_range) after its first GPU call;
 * with the pipe gone every later SIGTERM and dump signal was lost without
 * a word. A handler that writes to no descriptor never writes into a file
 * the program opened at a pipe's number either. */
static unsigned asked;
static int started;
static int installed_signal; /* the dump signal, while on_signal was installed by this process or kept from its parent */
static int watching;         /* 1 while the watcher hears what is asked */
/* The process that installed the handlers. */
static pid_t owner;
static int signal_refused;   /* the program held the dump signal: said once, not again in a child */
static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;

int vt_ondemand_mine(void) { return (pid_t)syscall(SYS_getpid) == __atomic_load_n(&owner, __ATOMIC_RELAXED); }

int vt_ondemand_tell(unsigned ask) {
    if (!__atomic_load_n(&watching, __ATOMIC_ACQUIRE)) return -1;
    __atomic_fetch_or(&asked, ask, __ATOMIC_SEQ_CST);
    syscall(SYS_futex, &asked, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    return 0;
}

/* In a forked child that has not started its own watcher (it has not used
 * a GPU), the signal is heard and does nothing: the child has no records to
 * dump, and dying of it, as the signal's default would have it, is not
 * what `kill -USR2` asks of a process under vramtrace. */
static void on_signal(int sig) {
    (void)sig;
    int saved = errno;
    if (vt_ondemand_mine()) {
        vt_output_signal_asked();
        vt_ondemand_tell(VT_ASK_DUMP);
    }
    errno = saved;
}

int vt_ondemand_handler_is_ours(int sig, void (*h)(int)) {
    return sig > 0 && sig == installed_signal && h == on_signal;
}

/* Dump signals that came while a dump was being written make one more
 * dump, not one each; SIGTERM's outputs go before any dump asked with
 * them. The watcher takes no signals (common/thread.h), so its wait ends
 * only when asked is no longer 0. */
static void *watcher(void *arg) {
    (void)arg;
    for (;;) {
        unsigned a = __atomic_exchange_n(&asked, 0, __ATOMIC_SEQ_CST);
        if (a & VT_ASK_TERM) {
            vt_onterm_heard();
            break;
        }
        if (a & VT_ASK_QUIT) break; /* the program's threads are all gone */
        if (a & VT_ASK_DUMP)
            vt_output_signal();
        else
            syscall(SYS_futex, &asked, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
    }
    __atomic_store_n(&watching, 0, __ATOMIC_RELEASE);
    return NULL;
}

/* The watcher returns (common/thread.h). */
static void quit(void) { vt_ondemand_tell(VT_ASK_QUIT); }

void vt_ondemand_start(void) {
    if (__atomic_load_n(&started, __ATOMIC_ACQUIRE) || (vt_opt.signal <= 0 && !vt_opt.on_term)) return;
    pthread_mutex_lock(&start_lock);
    if (__atomic_load_n(&started, __ATOMIC_RELAXED)) goto out;
    __atomic_store_n(&started, 1, __ATOMIC_RELEASE);
    struct sigaction old;
    int dump_signal = vt_opt.signal > 0;
    int known = dump_signal && vt_real_sigaction(vt_opt.signal, NULL, &old) == 0;
    /* A forked child's handler, kept from its parent (vt_ondemand_reset_child). */
    int kept = known && !(old.sa_flags & SA_SIGINFO) && old.sa_handler == on_signal && installed_signal == vt_opt.signal;
    if (dump_signal && !kept && (!known || old.sa_handler != SIG_DFL || (old.sa_flags & SA_SIGINFO))) {
        if (!signal_refused)
            vt_warn("signal %d has a handler of the program's; on-demand dumps are off "
                    "(set VRAMTRACE_SIGNAL to another signal)", vt_opt.signal);
        signal_refused = 1;
        dump_signal = 0;
    }
    if (!dump_signal && !vt_opt.on_term) goto out;
    __atomic_store_n(&asked, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&watching, 1, __ATOMIC_RELEASE);
    if (vt_thread_start_quiet(watcher, NULL) != 0) {
        __atomic_store_n(&watching, 0, __ATOMIC_RELEASE);
        goto out;
    }
    owner = getpid();
    vt_thread_stop_with(quit);
    if (dump_signal && !kept && vt_sig_install(vt_opt.signal, on_signal, NULL)) installed_signal = vt_opt.signal;
    if (vt_opt.on_term) vt_onterm_install();
out:
    pthread_mutex_unlock(&start_lock);
}

/* The dump signal's handler stays where it is still vramtrace's: put back
 * to its default, it killed a child that had not used a GPU yet (a
 * DataLoader or multiprocessing worker forked after the model was on the
 * GPU) at a `kill -USR2` meant for the job, or its process group. The
 * child does nothing on it until it uses a GPU, and from then on writes
 * its own dump, as its parent does; an exec gives the signal its default
 * back, as the kernel does for every handler. SIGTERM's goes back to its
 * default (onterm.h): the child then ends of it as without vramtrace. A
 * handler the program put in place of either stays, and one it had
 * before vramtrace's (which then installed none) too. The child starts
 * its own watcher when it uses a GPU only where the parent's was working
 * or was never started: where the program holds the dump signal (it had a
 * handler first, or replaced ours) the child leaves it alone and does not
 * warn again. */
void vt_ondemand_reset_child(void) {
    int saved = errno;
    pthread_mutex_init(&start_lock, NULL);
    int restart = !started;
    struct sigaction cur;
    if (installed_signal) {
        if (vt_real_sigaction(installed_signal, NULL, &cur) == 0 && !(cur.sa_flags & SA_SIGINFO) &&
            cur.sa_handler == on_signal)
            restart = 1;
        else
            installed_signal = 0;
    }
    if (vt_onterm_reset_child()) restart = 1;
    owner = 0;
    watching = 0;
    asked = 0;
    started = !restart;
    errno = saved;
}
