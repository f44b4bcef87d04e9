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
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "../common/thread.h"
#include "mainexit.h"
#include "resolve.h"

__attribute__((visibility("default"), noreturn)) void pthread_exit(void *value) {
    if ((pid_t)syscall(SYS_gettid) == getpid()) vt_thread_main_exits();
    static void *slot;
    void (*real)(void *);
    *(void **)&real = vt_next_fn_kept(&slot, "pthread_exit");
    if (real) real(value);
    for (;;) syscall(SYS_exit, 0);
}

/* exit called by a thread while another is in exit: the C library ran the
 * exit handlers left and ended the process from the second thread while
 * the first wrote vramtrace's exit outputs, mid-way: no report, no dump,
 * and a leak check that passed, status 0, with leaks. The second thread
 * waits for the first to end the process, as the C library's exit does
 * from glibc 2.41 on (a handler of the first's that calls exit again on
 * its own thread goes on, as before). The thread that is in exit, by
 * thread id; 0: none. */
static pid_t exiting;

void vt_exit_reset_child(void) { __atomic_store_n(&exiting, 0, __ATOMIC_RELAXED); }

__attribute__((visibility("default"), noreturn)) void exit(int status) {
    pid_t me = (pid_t)syscall(SYS_gettid), was = 0;
    /* Waits while the thread in exit is one of this process's: a vfork
     * child that called exit (it shares this memory) is not, once it is
     * gone. */
    while (!__atomic_compare_exchange_n(&exiting, &was, me, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE) && was != me) {
        if (syscall(SYS_tgkill, getpid(), was, 0) != 0 && errno == ESRCH) continue; /* take its place */
        struct timespec ms10 = {0, 10000000};
        nanosleep(&ms10, NULL);
        was = 0;
    }
    static void *slot;
    void (*real)(int);
    *(void **)&real = vt_next_fn_kept(&slot, "exit");
    if (real) real(status);
    for (;;) syscall(SYS_exit_group, status);
}
