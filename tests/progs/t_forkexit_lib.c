/* t_forkexit_lib.c -- preloaded after libvramtrace.so (so initialised
 * before it and finalised after it): a fork handler registered before
 * vramtrace's, whose prepare step, armed by t_forkexit, says it is running
 * and then waits until this library's destructor has run. The C library
 * runs the prepare steps last-registered first (vramtrace's, then this
 * one) and each without its fork-handler lock; the exiting thread runs
 * vramtrace's finalizer, then this destructor, meanwhile. */
#include <pthread.h>
#include <time.h>

volatile int forkexit_armed, forkexit_in_prepare, forkexit_finalized;

static void prepare(void) {
    if (!__atomic_load_n(&forkexit_armed, __ATOMIC_ACQUIRE)) return;
    __atomic_store_n(&forkexit_in_prepare, 1, __ATOMIC_RELEASE);
    /* Ten seconds at most: the exit's destructors reach this library's
     * within a few milliseconds. */
    for (int i = 0; i < 10000 && !__atomic_load_n(&forkexit_finalized, __ATOMIC_ACQUIRE); i++) {
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
}

__attribute__((constructor)) static void start(void) { pthread_atfork(prepare, NULL, NULL); }

__attribute__((destructor)) static void end(void) { __atomic_store_n(&forkexit_finalized, 1, __ATOMIC_RELEASE); }
