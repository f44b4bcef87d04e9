/* thread.c -- the library's own helper threads (thread.h). */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <time.h>

#include "thread.h"

/* Helper threads created and not yet in their start routine: until then
 * the thread runs the C library's and a sanitizer's own start-up, which
 * allocates (ASan's allocator takes a lock of its own that it does not
 * hold across fork). */
static int starting;

/* The start routine, carried through pthread_create's one pointer. */
union vt_start {
    void *(*fn)(void *);
    void *arg;
};

static void *trampoline(void *arg) {
    union vt_start s = {.arg = arg};
    __atomic_sub_fetch(&starting, 1, __ATOMIC_RELEASE);
    return s.fn(NULL);
}

int vt_thread_start_quiet(void *(*fn)(void *), const char *name) {
    sigset_t all, prev;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &prev);
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    union vt_start s = {.fn = fn};
    __atomic_add_fetch(&starting, 1, __ATOMIC_ACQUIRE);
    int rc = pthread_create(&t, &attr, trampoline, s.arg);
    if (rc != 0) __atomic_sub_fetch(&starting, 1, __ATOMIC_RELEASE);
    pthread_attr_destroy(&attr);
    if (rc == 0 && name) pthread_setname_np(t, name);
    pthread_sigmask(SIG_SETMASK, &prev, NULL);
    return rc;
}

#define VT_THREAD_START_WAIT_NS 2000000000ull

void vt_thread_fork_prepare(void) {
    struct timespec tick = {0, 50000};
    for (uint64_t waited = 0; __atomic_load_n(&starting, __ATOMIC_ACQUIRE) > 0 && waited < VT_THREAD_START_WAIT_NS;
         waited += (uint64_t)tick.tv_nsec)
        nanosleep(&tick, NULL);
}

void vt_thread_reset_child(void) { starting = 0; }
