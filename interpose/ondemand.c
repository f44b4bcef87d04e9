/* ondemand.c -- the signals that write dumps: the dump signal, SIGTERM, and
 * their watcher thread. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../common/fdkeep.h"
#include "../common/thread.h"
#include "../common/warn.h"
#include "../report/output.h"
#include "../tracker/options.h"
#include "hook.h"
#include "ondemand.h"
#include "resolve.h"

/* What the handlers write to the pipe. */
enum { BYTE_DUMP = 1, BYTE_TERM = 2 };

/* The pipe from the handlers to the watcher, kept out of the program's way
 * (fdkeep.h): a program that closes every descriptor and opens its own
 * files at those numbers must not get the handler's byte in them. */
static struct vt_fd rd = VT_FD_NONE, wr = VT_FD_NONE;
static int started;
static int installed_signal; /* the dump signal, while on_signal was installed by this process */
static int installed_term;   /* 1 while on_term was installed by this process */
static int watching;         /* 1 while the watcher reads the pipe */
static int term_seen;        /* a SIGTERM reached on_term */
static int term_from;        /* its sender's pid, 0 when unknown */
/* The process that installed the handlers: a forked child runs them with
 * the parent's pipe until its own reset (fork handlers run after fork
 * returns), and a signal it gets then is not the parent's. */
static pid_t owner;

static int not_mine(void) { return (pid_t)syscall(SYS_getpid) != __atomic_load_n(&owner, __ATOMIC_RELAXED); }
static int signal_refused;   /* the program held the dump signal: said once, not again in a child */
static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;

/* The C library's sigaction: this file's own look at a signal's action is
 * never the view the program gets (see sigaction below). */
static int real_sigaction(int sig, const struct sigaction *act, struct sigaction *old) {
    static void *slot;
    int (*real)(int, const struct sigaction *, struct sigaction *);
    *(void **)&real = vt_next_fn_kept(&slot, "sigaction");
    if (!real) {
        errno = ENOSYS;
        return -1;
    }
    return real(sig, act, old);
}

static int set_default(int sig) {
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    return real_sigaction(sig, &dfl, NULL);
}

/* A byte to the watcher; 0 when it is there to read it. */
static int tell_watcher(char c) {
    if (!__atomic_load_n(&watching, __ATOMIC_ACQUIRE) || !vt_fd_mine(&wr)) return -1;
    return write(wr.fd, &c, 1) == 1 ? 0 : -1;
}

static void on_signal(int sig) {
    (void)sig;
    int saved = errno;
    if (!not_mine()) tell_watcher(BYTE_DUMP);
    errno = saved;
}

/* SIGTERM's default action, now: the signal is blocked while its handler
 * runs, so the process dies of it as the handler returns. */
static void die_of_term(void) {
    set_default(SIGTERM);
    syscall(SYS_kill, (pid_t)getpid(), SIGTERM);
}

/* SIGTERM left to its default by the program: the watcher writes the
 * exit's outputs, then the process dies of SIGTERM. A second SIGTERM (or
 * one the watcher cannot hear) ends it at once. */
static void on_term(int sig, siginfo_t *info, void *context) {
    (void)sig;
    (void)context;
    int saved = errno;
    if (not_mine() || __atomic_exchange_n(&term_seen, 1, __ATOMIC_ACQ_REL)) {
        die_of_term();
    } else {
        /* kill, sigqueue, tgkill: the sender's pid; the kernel's own: none */
        int from = info && (info->si_code == SI_USER || info->si_code == SI_QUEUE || info->si_code == SI_TKILL)
                       ? (int)info->si_pid : 0;
        __atomic_store_n(&term_from, from, __ATOMIC_RELEASE);
        if (tell_watcher(BYTE_TERM) != 0) die_of_term();
    }
    errno = saved;
}

static int is_on_term(const struct sigaction *a) { return (a->sa_flags & SA_SIGINFO) && a->sa_sigaction == on_term; }

static void *watcher(void *arg) {
    (void)arg;
    for (;;) {
        char buf[64];
        if (!vt_fd_mine(&rd)) break; /* the number is the program's now: never read its file */
        ssize_t n = read(rd.fd, buf, sizeof buf);
        if (n > 0) {
            if (memchr(buf, BYTE_TERM, (size_t)n)) {
                vt_output_ended_by(SIGTERM, __atomic_load_n(&term_from, __ATOMIC_ACQUIRE));
                vt_exit_before_signal();
                /* In place of the handler the signal found, SIGTERM's
                 * default: whoever called on_term (the kernel, or a
                 * handler of the program's that passes the signal on to
                 * the one it replaced) asked for the process's end. */
                die_of_term();
                break;
            }
            vt_output_signal();
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else {
            break; /* the program closed the pipe (or its end): dumps on demand end */
        }
    }
    __atomic_store_n(&watching, 0, __ATOMIC_RELEASE);
    return NULL;
}

/* Install `fn`, or `info_fn` (SA_SIGINFO), for `sig` when the program left
 * it at its default. */
static int install(int sig, void (*fn)(int), void (*info_fn)(int, siginfo_t *, void *)) {
    struct sigaction old, sa;
    if (real_sigaction(sig, NULL, &old) != 0 || old.sa_handler != SIG_DFL || (old.sa_flags & SA_SIGINFO)) return 0;
    memset(&sa, 0, sizeof sa);
    if (info_fn) {
        sa.sa_sigaction = info_fn;
        sa.sa_flags = SA_RESTART | SA_SIGINFO;
    } else {
        sa.sa_handler = fn;
        sa.sa_flags = SA_RESTART;
    }
    sigemptyset(&sa.sa_mask);
    return real_sigaction(sig, &sa, NULL) == 0;
}

void vt_ondemand_start(void) {
    if (__atomic_load_n(&started, __ATOMIC_ACQUIRE) || (vt_opt.signal <= 0 && !vt_opt.on_term)) return;
    pthread_mutex_lock(&start_lock);
    if (__atomic_load_n(&started, __ATOMIC_RELAXED)) goto out;
    __atomic_store_n(&started, 1, __ATOMIC_RELEASE);
    struct sigaction old;
    int dump_signal = vt_opt.signal > 0;
    if (dump_signal && (real_sigaction(vt_opt.signal, NULL, &old) != 0 || old.sa_handler != SIG_DFL ||
                        (old.sa_flags & SA_SIGINFO))) {
        if (!signal_refused)
            vt_warn("signal %d has a handler of the program's; on-demand dumps are off "
                    "(set VRAMTRACE_SIGNAL to another signal)", vt_opt.signal);
        signal_refused = 1;
        dump_signal = 0;
    }
    if (!dump_signal && !vt_opt.on_term) goto out;
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) goto out;
    if (vt_fd_keep(p[0], &rd) != 0) {
        close(p[1]);
        goto out;
    }
    if (vt_fd_keep(p[1], &wr) != 0) {
        vt_fd_drop(&rd);
        goto out;
    }
    fcntl(wr.fd, F_SETFL, O_NONBLOCK);
    __atomic_store_n(&watching, 1, __ATOMIC_RELEASE);
    if (vt_thread_start_quiet(watcher, NULL) != 0) {
        __atomic_store_n(&watching, 0, __ATOMIC_RELEASE);
        vt_fd_drop(&rd);
        vt_fd_drop(&wr);
        goto out;
    }
    owner = getpid();
    if (dump_signal && install(vt_opt.signal, on_signal, NULL)) installed_signal = vt_opt.signal;
    if (vt_opt.on_term && install(SIGTERM, NULL, on_term)) installed_term = 1;
out:
    pthread_mutex_unlock(&start_lock);
}

/* A handler of vramtrace's is shown to the program as the default it
 * stands for: a program asking what SIGTERM does before it puts its own
 * handler in (CPython's signal module, a runtime that installs one only
 * over the default) sees what it would see without vramtrace. */
__attribute__((visibility("default"))) int sigaction(int sig, const struct sigaction *act, struct sigaction *old) {
    int r = real_sigaction(sig, act, old);
    if (r == 0 && old &&
        ((sig == SIGTERM && is_on_term(old)) ||
         (sig == installed_signal && !(old->sa_flags & SA_SIGINFO) && old->sa_handler == on_signal))) {
        old->sa_handler = SIG_DFL;
        old->sa_flags = 0;
        sigemptyset(&old->sa_mask);
    }
    return r;
}

/* Only what is still vramtrace's is undone: a handler the program put in
 * place of on_signal or on_term after it was installed stays. The child
 * starts its own watcher when it uses a GPU only where the parent's was
 * working or was never started: where the program holds the dump signal
 * (it had a handler first, or replaced ours) the child leaves it alone and
 * does not warn again. */
void vt_ondemand_reset_child(void) {
    int saved = errno;
    pthread_mutex_init(&start_lock, NULL);
    int restart = !started;
    struct sigaction cur;
    if (installed_signal) {
        if (real_sigaction(installed_signal, NULL, &cur) == 0 && !(cur.sa_flags & SA_SIGINFO) &&
            cur.sa_handler == on_signal) {
            set_default(installed_signal);
            restart = 1;
        }
        installed_signal = 0;
    }
    if (installed_term) {
        if (real_sigaction(SIGTERM, NULL, &cur) == 0 && is_on_term(&cur)) {
            set_default(SIGTERM);
            restart = 1;
        }
        installed_term = 0;
    }
    term_seen = 0;
    term_from = 0;
    watching = 0;
    vt_fd_drop(&rd); /* only where still the pipe: the number may be the program's now */
    vt_fd_drop(&wr);
    started = !restart;
    errno = saved;
}
