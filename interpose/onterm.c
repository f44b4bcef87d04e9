/* onterm.c -- SIGTERM's handler, and the process's end after the exit's
 * outputs (onterm.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "../common/fdkeep.h"
#include "../common/thread.h"
#include "../report/output.h"
#include "hook.h"
#include "ondemand.h"
#include "onterm.h"
#include "sigview.h"

/* The watcher's word back to a SIGTERM handler waiting for the exit's
 * outputs: 1 once they are written and the process's end is sent. A futex
 * in the library's memory, as the word the handler wakes the watcher with
 * (ondemand.c): no descriptor the program could have closed. */
static unsigned done;
static int installed;       /* 1 while on_term was installed by this process */
static int seen;            /* a SIGTERM reached on_term */
static int from_pid;        /* its sender's pid, 0 when unknown */
static int for_pid;         /* with SI_QUEUE, the pid it carried (vramtrace run passes its sender's on) */

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
static uint64_t first_at; /* CLOCK_MONOTONIC of the first SIGTERM */

static uint64_t mono_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t); /* async-signal-safe */
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* SIGTERM's default action, now: the signal is blocked while its handler
 * runs, so the process dies of it as the handler returns. */
static void die_of_term(void) {
    vt_sig_set_default(SIGTERM);
    syscall(SYS_kill, (pid_t)getpid(), SIGTERM);
}

static void on_term(int sig, siginfo_t *info, void *context);

/* Until the watcher says the outputs are written, TERM_WAIT_MS at most,
 * however often a signal interrupts the wait. */
static void wait_done(void) {
    uint64_t end = mono_ns() + (uint64_t)TERM_WAIT_MS * 1000000ull;
    while (!__atomic_load_n(&done, __ATOMIC_ACQUIRE)) {
        uint64_t now = mono_ns();
        if (now >= end) break;
        struct timespec left = {(time_t)((end - now) / 1000000000ull), (long)((end - now) % 1000000000ull)};
        syscall(SYS_futex, &done, FUTEX_WAIT_PRIVATE, 0, &left, NULL, 0);
    }
}

int vt_onterm_is_ours(const struct sigaction *a) { return (a->sa_flags & SA_SIGINFO) && a->sa_sigaction == on_term; }

int vt_onterm_handler_is_ours(void (*h)(int)) { return (void *)h == (void *)on_term; }

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
    if (!vt_ondemand_mine()) {
        die_of_term();
    } else if (__atomic_exchange_n(&seen, 1, __ATOMIC_ACQ_REL)) {
        if (mono_ns() - __atomic_load_n(&first_at, __ATOMIC_ACQUIRE) >= TERM_TWICE_NS) die_of_term();
    } else {
        __atomic_store_n(&first_at, mono_ns(), __ATOMIC_RELEASE);
        /* kill, sigqueue, tgkill: the sender's pid; the kernel's own: none.
         * Only when this is the handler the kernel called with the signal's
         * details: a program that kept the old handler from signal() and
         * calls it as old(sig) passes none. */
        struct sigaction now;
        int details = vt_real_sigaction(SIGTERM, NULL, &now) == 0 && vt_onterm_is_ours(&now);
        int from = details && info &&
                           (info->si_code == SI_USER || info->si_code == SI_QUEUE || info->si_code == SI_TKILL)
                       ? (int)info->si_pid : 0;
        __atomic_store_n(&for_pid, details && info && info->si_code == SI_QUEUE ? info->si_value.sival_int : 0,
                         __ATOMIC_RELEASE);
        __atomic_store_n(&from_pid, from, __ATOMIC_RELEASE);
        if (vt_ondemand_tell(VT_ASK_TERM) != 0) {
            die_of_term();
        } else if (vt_busy <= 0) {
            /* Not inside vramtrace's own work (its locks, which the
             * outputs need, are then this thread's to let go: it goes on). */
            wait_done();
        }
    }
    errno = saved;
}

/* The SIGTERM's sender: the pid a `vramtrace run` that passed it on
 * carried with it (the sender is then this process's parent, named
 * vramtrace), else the sending process. */
static int sender(void) {
    int from = __atomic_load_n(&from_pid, __ATOMIC_ACQUIRE), was = __atomic_load_n(&for_pid, __ATOMIC_ACQUIRE);
    if (from <= 0 || was <= 0 || from != (int)getppid()) return from;
    char p[64], comm[32] = "";
    snprintf(p, sizeof p, "/proc/%d/comm", from);
    FILE *f = vt_fd_fopen(p);
    if (f) {
        if (!fgets(comm, sizeof comm, f)) comm[0] = 0;
        fclose(f);
    }
    return strcmp(comm, "vramtrace\n") == 0 ? was : from;
}

/* The bound on a SIGTERM's outputs (TERM_BOUND_NS). */
static void *watchdog(void *arg) {
    (void)arg;
    struct timespec t = {(time_t)(TERM_BOUND_NS / 1000000000ull), 0};
    while (nanosleep(&t, &t) != 0 && errno == EINTR) {}
    die_of_term();
    return NULL;
}

void vt_onterm_heard(void) {
    vt_thread_start_quiet(watchdog, NULL);
    /* Written here, or by the program's own exit if that began first:
     * either way finished before the end. */
    if (vt_exit_before_signal_wait(TERM_BOUND_NS, SIGTERM, sender()) == 0)
        /* In place of the handler the signal found, SIGTERM's default:
         * whoever called on_term (the kernel, or a handler of the
         * program's that passes the signal on to the one it replaced)
         * asked for the process's end. The end is sent before the waiting
         * handler is let go, so that it is pending as the handler
         * returns. Where the program's exit began first, it ends the
         * process with its own status, as its outputs say (the watchdog
         * still bounds it). */
        die_of_term();
    __atomic_store_n(&done, 1, __ATOMIC_RELEASE);
    syscall(SYS_futex, &done, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

void vt_onterm_install(void) {
    if (vt_sig_install(SIGTERM, NULL, on_term)) installed = 1;
}

void vt_onterm_default_set(void) {
    struct sigaction cur;
    if (__atomic_load_n(&installed, __ATOMIC_ACQUIRE) && vt_ondemand_mine() &&
        vt_real_sigaction(SIGTERM, NULL, &cur) == 0 && cur.sa_handler == SIG_DFL && !(cur.sa_flags & SA_SIGINFO))
        vt_sig_install(SIGTERM, NULL, on_term);
}

int vt_onterm_reset_child(void) {
    int restart = 0;
    struct sigaction cur;
    if (installed) {
        if (vt_real_sigaction(SIGTERM, NULL, &cur) == 0 && vt_onterm_is_ours(&cur)) {
            vt_sig_set_default(SIGTERM);
            restart = 1;
        }
        installed = 0;
    }
    seen = 0;
    from_pid = for_pid = 0;
    done = 0;
    first_at = 0;
    return restart;
}
