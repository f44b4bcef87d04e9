/* ondemand.c -- the signals that write dumps: the dump signal, SIGTERM, and
 * their watcher thread. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <poll.h>
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
/* The watcher's word back to a SIGTERM handler waiting for the exit's
 * outputs (a byte once they are written and the process's end is sent). */
static struct vt_fd done_rd = VT_FD_NONE, done_wr = VT_FD_NONE;
static int started;
static int installed_signal; /* the dump signal, while on_signal was installed by this process */
static int installed_term;   /* 1 while on_term was installed by this process */
static int watching;         /* 1 while the watcher reads the pipe */
static int term_seen;        /* a SIGTERM reached on_term */
static int term_from;        /* its sender's pid, 0 when unknown */
static int term_for;         /* with SI_QUEUE, the pid it carried (vramtrace run passes its sender's on) */
/* The process that installed the handlers: a forked child runs them with
 * the parent's pipe until its own reset (fork handlers run after fork
 * returns), and a signal it gets then is not the parent's. */
static pid_t owner;

static int not_mine(void) { return (pid_t)syscall(SYS_getpid) != __atomic_load_n(&owner, __ATOMIC_RELAXED); }
static int signal_refused;   /* the program held the dump signal: said once, not again in a child */
static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;

/* The C library's sigaction: vramtrace's own look at a signal's action is
 * never the view the program gets (see sigaction below). */
int vt_real_sigaction(int sig, const struct sigaction *act, struct sigaction *old) {
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
    return vt_real_sigaction(sig, &dfl, NULL);
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

static void on_term(int sig, siginfo_t *info, void *context);
static int is_on_term(const struct sigaction *a) { return (a->sa_flags & SA_SIGINFO) && a->sa_sigaction == on_term; }

/* A SIGTERM within this long of the first is the same request delivered
 * twice (a scheduler's TERM to the process group reaches the command, and
 * `vramtrace run` passes its own on), not a second one. */
#define TERM_TWICE_NS 1000000000ull
/* How long the thread the signal interrupted waits for the exit's
 * outputs before it goes on (then its interrupted call may return early):
 * longer than most outputs take, short enough when the thread holds a
 * lock of the C library's that they need (interrupted in malloc, in the
 * loader, in stdio: held by a thread kept here, it stalled them for as
 * long as the wait). */
#define TERM_WAIT_MS 2000
/* The longest the exit's outputs may take after a SIGTERM before the
 * process dies of it anyway (a report to a stderr pipe nobody reads waits
 * for ever). */
#define TERM_BOUND_NS 20000000000ull
static uint64_t term_at; /* CLOCK_MONOTONIC of the first SIGTERM */

static uint64_t mono_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t); /* async-signal-safe */
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* SIGTERM left to its default by the program: the watcher writes the
 * exit's outputs, then the process dies of SIGTERM. The interrupted thread
 * waits here meanwhile (TERM_WAIT_MS at most), so that its call (a sleep,
 * a poll) does not return early and the program does not go on as if it
 * had not been signalled: it dies as the handler returns. A second
 * SIGTERM (a second after the first or later), or one the watcher cannot
 * hear, ends the process at once: the handler is installed SA_NODEFER, so
 * that a second one reaches it even on the thread waiting here. */
static void on_term(int sig, siginfo_t *info, void *context) {
    (void)sig;
    (void)context;
    int saved = errno;
    if (not_mine()) {
        die_of_term();
    } else if (__atomic_exchange_n(&term_seen, 1, __ATOMIC_ACQ_REL)) {
        if (mono_ns() - __atomic_load_n(&term_at, __ATOMIC_ACQUIRE) >= TERM_TWICE_NS) die_of_term();
    } else {
        __atomic_store_n(&term_at, mono_ns(), __ATOMIC_RELEASE);
        /* kill, sigqueue, tgkill: the sender's pid; the kernel's own: none.
         * Only when this is the handler the kernel called with the signal's
         * details: a program that kept the old handler from signal() and
         * calls it as old(sig) passes none. */
        struct sigaction now;
        int details = vt_real_sigaction(SIGTERM, NULL, &now) == 0 && is_on_term(&now);
        int from = details && info &&
                           (info->si_code == SI_USER || info->si_code == SI_QUEUE || info->si_code == SI_TKILL)
                       ? (int)info->si_pid : 0;
        __atomic_store_n(&term_for, details && info && info->si_code == SI_QUEUE ? info->si_value.sival_int : 0,
                         __ATOMIC_RELEASE);
        __atomic_store_n(&term_from, from, __ATOMIC_RELEASE);
        if (tell_watcher(BYTE_TERM) != 0) {
            die_of_term();
        } else if (vt_busy <= 0 && vt_fd_mine(&done_rd)) {
            /* Not inside vramtrace's own work (its locks, which the
             * outputs need, are then this thread's to let go: it goes on). */
            struct pollfd p = {done_rd.fd, POLLIN, 0};
            while (poll(&p, 1, TERM_WAIT_MS) < 0 && errno == EINTR) {}
        }
    }
    errno = saved;
}

/* The SIGTERM's sender: the pid a `vramtrace run` that passed it on
 * carried with it (the sender is then this process's parent, named
 * vramtrace), else the sending process. */
static int sender(void) {
    int from = __atomic_load_n(&term_from, __ATOMIC_ACQUIRE), was = __atomic_load_n(&term_for, __ATOMIC_ACQUIRE);
    if (from <= 0 || was <= 0 || from != (int)getppid()) return from;
    char p[64], comm[32] = "";
    snprintf(p, sizeof p, "/proc/%d/comm", from);
    FILE *f = fopen(p, "re");
    if (f) {
        if (!fgets(comm, sizeof comm, f)) comm[0] = 0;
        fclose(f);
    }
    return strcmp(comm, "vramtrace\n") == 0 ? was : from;
}

/* The bound on a SIGTERM's outputs (TERM_BOUND_NS). */
static void *term_watchdog(void *arg) {
    (void)arg;
    struct timespec t = {(time_t)(TERM_BOUND_NS / 1000000000ull), 0};
    while (nanosleep(&t, &t) != 0 && errno == EINTR) {}
    die_of_term();
    return NULL;
}

static void *watcher(void *arg) {
    (void)arg;
    for (;;) {
        char buf[64];
        if (!vt_fd_mine(&rd)) break; /* the number is the program's now: never read its file */
        ssize_t n = read(rd.fd, buf, sizeof buf);
        if (n > 0) {
            if (memchr(buf, BYTE_TERM, (size_t)n)) {
                vt_thread_start_quiet(term_watchdog, NULL);
                vt_output_ended_by(SIGTERM, sender());
                /* Written here, or by the program's own exit if that
                 * began first: either way finished before the end. */
                vt_exit_before_signal_wait(TERM_BOUND_NS);
                /* In place of the handler the signal found, SIGTERM's
                 * default: whoever called on_term (the kernel, or a
                 * handler of the program's that passes the signal on to
                 * the one it replaced) asked for the process's end. The
                 * end is sent before the waiting handler is let go, so
                 * that it is pending as the handler returns. */
                die_of_term();
                if (vt_fd_mine(&done_wr)) {
                    char c = 1;
                    ssize_t w = write(done_wr.fd, &c, 1);
                    (void)w;
                }
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

void vt_ondemand_start(void) {
    if (__atomic_load_n(&started, __ATOMIC_ACQUIRE) || (vt_opt.signal <= 0 && !vt_opt.on_term)) return;
    pthread_mutex_lock(&start_lock);
    if (__atomic_load_n(&started, __ATOMIC_RELAXED)) goto out;
    __atomic_store_n(&started, 1, __ATOMIC_RELEASE);
    struct sigaction old;
    int dump_signal = vt_opt.signal > 0;
    if (dump_signal && (vt_real_sigaction(vt_opt.signal, NULL, &old) != 0 || old.sa_handler != SIG_DFL ||
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
    int q[2];
    if (vt_opt.on_term && pipe2(q, O_CLOEXEC) == 0) {
        if (vt_fd_keep(q[0], &done_rd) != 0) close(q[1]);
        else if (vt_fd_keep(q[1], &done_wr) != 0) vt_fd_drop(&done_rd);
    }
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

#ifndef VT_TSAN_BUILD
/* (Not in the ThreadSanitizer build: its runtime intercepts these itself
 * and calls them before it can run instrumented code.) */

/* A handler of vramtrace's is shown to the program as the default it
 * stands for: a program asking what SIGTERM does before it puts its own
 * handler in (CPython's signal module, a runtime that installs one only
 * over the default) sees what it would see without vramtrace. */
__attribute__((visibility("default"))) int sigaction(int sig, const struct sigaction *act, struct sigaction *old) {
    int r = vt_real_sigaction(sig, act, old);
    if (r == 0 && old &&
        ((sig == SIGTERM && is_on_term(old)) ||
         (sig == installed_signal && !(old->sa_flags & SA_SIGINFO) && old->sa_handler == on_signal))) {
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
    if ((sig == SIGTERM && h == (sighandler_t)(void *)on_term) || (sig == installed_signal && sig > 0 && h == on_signal))
        return SIG_DFL;
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
        return shown(sig, real(sig, h));                                                                     \
    }
SIGNAL_DOOR(vt_signal_door, "signal")
SIGNAL_DOOR(vt_sysv_signal_door, "sysv_signal")
SIGNAL_DOOR(vt_bsd_signal_door, "bsd_signal")
SIGNAL_DOOR(vt_sigset_door, "sigset")
#endif

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
        if (vt_real_sigaction(installed_signal, NULL, &cur) == 0 && !(cur.sa_flags & SA_SIGINFO) &&
            cur.sa_handler == on_signal) {
            set_default(installed_signal);
            restart = 1;
        }
        installed_signal = 0;
    }
    if (installed_term) {
        if (vt_real_sigaction(SIGTERM, NULL, &cur) == 0 && is_on_term(&cur)) {
            set_default(SIGTERM);
            restart = 1;
        }
        installed_term = 0;
    }
    term_seen = 0;
    term_from = term_for = 0;
    watching = 0;
    vt_fd_drop(&rd); /* only where still the pipe: the number may be the program's now */
    vt_fd_drop(&wr);
    vt_fd_drop(&done_rd);
    vt_fd_drop(&done_wr);
    term_at = 0;
    started = !restart;
    errno = saved;
}
