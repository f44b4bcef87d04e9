/* mainexit.c -- how the program's threads end: a main thread that ends by
 * pthread_exit, and exit called by two threads at once.
 *
 * The process then lives while any thread does and ends, as by exit(0),
 * when the last one returns: vramtrace's helper threads (the dump signal's
 * watcher, the live publisher), which take no signal, kept it alive for
 * ever, a SIGTERM pending and never taken. pthread_exit of the main thread
 * tells common/thread.c, whose reaper stops the helpers once no thread of
 * the program's is left; the exit's outputs and leak check then come from
 * the C library's exit(0), as without vramtrace. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "../common/thread.h"
#include "../tracker/tracker.h"
#include "mainexit.h"
#include "resolve.h"

/* A child forked from a thread other than the main one has that thread as
 * its main thread, and it ends by returning from its start routine: no
 * exit, no pthread_exit of the program's to see. The C library ends the
 * process when its last thread returns, and vramtrace's helpers, started
 * again in the child, were threads left: the child lived for ever, a
 * zombie main thread and its parent's waitpid waiting. A thread's keys'
 * destructors run whichever way it ends but exit (which ends them all):
 * one set on the child's only thread tells common/thread.c, as
 * pthread_exit does. */
static pthread_key_t main_key;
static int main_key_made; /* 1: made; -1: could not be */

static void main_thread_ended(void *value) {
    (void)value;
    vt_thread_main_exits();
}

void vt_exit_watch_child_main(void) {
    if (!main_key_made) main_key_made = pthread_key_create(&main_key, main_thread_ended) == 0 ? 1 : -1;
    if (main_key_made > 0) pthread_setspecific(main_key, &main_key);
}

__attribute__((visibility("default"), noreturn)) void pthread_exit(void *value) {
    if ((pid_t)syscall(SYS_gettid) == getpid()) vt_thread_main_exits();
    static void *slot;
    void (*real)(void *);
    *(void **)&real = vt_next_fn_kept(&slot, "pthread_exit");
    if (real) real(value);
    for (;;) syscall(SYS_exit, 0);
}

/* exit (or quick_exit) called by a thread while another is in exit: the
 * C library ran the exit handlers left and ended the process from the
 * second thread while the first wrote vramtrace's exit outputs, mid-way:
 * no report, no dump, and a leak check that passed, status 0, with leaks.
 * The second caller waits while those outputs may come: up to 2 s for the
 * first to begin them (it may be running the program's own handlers, one
 * of which may wait for this very thread: then this one goes on, as the C
 * library's exit does, after those 2 s), up to 30 s while they are being
 * written; once written, or in a process that never used a GPU, it goes
 * on at once. A handler of the first's that calls exit again on its own
 * thread goes on, as before. The thread that is in exit, by thread id; 0:
 * none. */
static pid_t exiting;

void vt_exit_reset_child(void) { __atomic_store_n(&exiting, 0, __ATOMIC_RELAXED); }

static void wait_for_exit_outputs(void) {
    if (!vt_tracker_touched() || vt_exit_in_borrowed_memory()) return;
    pid_t me = (pid_t)syscall(SYS_gettid), was = 0;
    uint64_t waited = 0;
    while (!__atomic_compare_exchange_n(&exiting, &was, me, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE) && was != me) {
        /* A vfork child that called exit shares this memory: once gone,
         * it is no thread of this process's. */
        if (syscall(SYS_tgkill, getpid(), was, 0) != 0 && errno == ESRCH) continue; /* take its place */
        int state = vt_exit_outputs_state();
        if (state == 2 || waited >= (state == 1 ? 30000000000ull : 2000000000ull)) return;
        struct timespec ms10 = {0, 10000000};
        nanosleep(&ms10, NULL);
        waited += 10000000;
        was = 0;
    }
}

__attribute__((visibility("default"), noreturn)) void exit(int status) {
    wait_for_exit_outputs();
    vt_exit_outputs_if_lost();
    static void *slot;
    void (*real)(int);
    *(void **)&real = vt_next_fn_kept(&slot, "exit");
    if (real) real(status);
    for (;;) syscall(SYS_exit_group, status);
}

__attribute__((visibility("default"), noreturn)) void quick_exit(int status) {
    wait_for_exit_outputs();
    static void *slot;
    void (*real)(int);
    *(void **)&real = vt_next_fn_kept(&slot, "quick_exit");
    if (real) real(status);
    for (;;) syscall(SYS_exit_group, status);
}
