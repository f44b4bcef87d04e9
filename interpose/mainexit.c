/* mainexit.c -- a main thread that ends by pthread_exit.
 *
 * The process then lives while any thread does and ends, as by exit(0),
 * when the last one returns: vramtrace's helper threads (the dump signal's
 * watcher, the live publisher), which take no signal, kept it alive for
 * ever, a SIGTERM pending and never taken. pthread_exit of the main thread
 * tells common/thread.c, whose reaper stops the helpers once no thread of
 * the program's is left; the exit's outputs and leak check then come from
 * the C library's exit(0), as without vramtrace. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../common/thread.h"
#include "resolve.h"

__attribute__((visibility("default"), noreturn)) void pthread_exit(void *value) {
    if ((pid_t)syscall(SYS_gettid) == getpid()) vt_thread_main_exits();
    static void *slot;
    void (*real)(void *);
    *(void **)&real = vt_next_fn_kept(&slot, "pthread_exit");
    if (real) real(value);
    for (;;) syscall(SYS_exit, 0);
}
