/* thread.c -- the library's own helper threads (thread.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "procself.h"
#include "thread.h"

/* Helper threads created and not yet in their start routine: until then
 * the thread runs the C library's and a sanitizer's own start-up, which
 * allocates (ASan's allocator takes a lock of its own that it does not
 * hold across fork). */
static int starting;
/* Helper threads in their start routine. */
static int running;

/* The helpers' stops, and whether the main thread has ended by
 * pthread_exit and the reaper was started. */
#define MAX_STOPS 4
static void (*stops[MAX_STOPS])(void);
static int main_gone, reaper_started;

static void reap_if_needed(void);

/* The start routine, carried through pthread_create's one pointer. */
union vt_start {
    void *(*fn)(void *);
    void *arg;
};

static void *trampoline(void *arg) {
    union vt_start s = {.arg = arg};
    __atomic_add_fetch(&running, 1, __ATOMIC_ACQ_REL);
    __atomic_sub_fetch(&starting, 1, __ATOMIC_RELEASE);
    void *r = s.fn(NULL);
    __atomic_sub_fetch(&running, 1, __ATOMIC_RELEASE);
    return r;
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
    if (rc == 0) reap_if_needed();
    return rc;
}

void vt_thread_stop_with(void (*stop)(void)) {
    for (int i = 0; i < MAX_STOPS; i++) {
        void (*expected)(void) = NULL;
        if (__atomic_load_n(&stops[i], __ATOMIC_ACQUIRE) == stop) return;
        if (__atomic_compare_exchange_n(&stops[i], &expected, stop, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) return;
        if (expected == stop) return;
    }
}

/* The process's threads now (/proc/self/stat's num_threads, which counts
 * a main thread that ended by pthread_exit until the process ends), or -1. */
static int threads_now(void) {
    char buf[1024];
    const char *p = vt_self_stat_field(buf, sizeof buf, 20);
    return p ? atoi(p) : -1;
}

static void *reaper(void *arg) {
    (void)arg;
    for (;;) {
        struct timespec tick = {0, 20000000};
        while (nanosleep(&tick, &tick) != 0 && errno == EINTR) {}
        int n = threads_now();
        if (n < 0) return NULL; /* cannot tell: the helpers go on */
        /* The ended main thread, and the helpers (this one among them):
         * no thread of the program's is left. */
        if (n <= 1 + __atomic_load_n(&running, __ATOMIC_ACQUIRE) + __atomic_load_n(&starting, __ATOMIC_ACQUIRE))
            break;
    }
    for (int i = 0; i < MAX_STOPS; i++) {
        void (*stop)(void) = __atomic_load_n(&stops[i], __ATOMIC_ACQUIRE);
        if (stop) stop();
    }
    return NULL;
}

/* A helper runs after the main thread ended: the reaper, once. */
static void reap_if_needed(void) {
    if (!__atomic_load_n(&main_gone, __ATOMIC_ACQUIRE) || __atomic_exchange_n(&reaper_started, 1, __ATOMIC_ACQ_REL))
        return;
    if (vt_thread_start_quiet(reaper, "vramtrace-end") != 0) __atomic_store_n(&reaper_started, 0, __ATOMIC_RELEASE);
}

void vt_thread_main_exits(void) {
    __atomic_store_n(&main_gone, 1, __ATOMIC_RELEASE);
    if (__atomic_load_n(&running, __ATOMIC_ACQUIRE) + __atomic_load_n(&starting, __ATOMIC_ACQUIRE) > 0)
        reap_if_needed();
}

#define VT_THREAD_START_WAIT_NS 2000000000ull

void vt_thread_fork_prepare(void) {
    struct timespec tick = {0, 50000};
    for (uint64_t waited = 0; __atomic_load_n(&starting, __ATOMIC_ACQUIRE) > 0 && waited < VT_THREAD_START_WAIT_NS;
         waited += (uint64_t)tick.tv_nsec)
        nanosleep(&tick, NULL);
}

void vt_thread_reset_child(void) {
    starting = running = 0;
    main_gone = reaper_started = 0;
}
