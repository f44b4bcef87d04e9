/* thread.c -- the library's own helper threads (thread.h). */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>

#include "thread.h"

int vt_thread_start_quiet(void *(*fn)(void *), const char *name) {
    sigset_t all, prev;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &prev);
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&t, &attr, fn, NULL);
    pthread_attr_destroy(&attr);
    if (rc == 0 && name) pthread_setname_np(t, name);
    pthread_sigmask(SIG_SETMASK, &prev, NULL);
    return rc;
}
