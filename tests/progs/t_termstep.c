/* t_termstep.c -- a program whose steps go on while the exit's outputs
 * of a SIGTERM are written, as a job's worker threads do when its
 * scheduler ends it: a worker keeps 4 MiB a step (vramtrace_step) for 10
 * steps, sends the process SIGTERM (the main thread, waiting for it, takes
 * the signal: the worker blocks it), then goes on keeping 4 MiB a step,
 * a step every 2 ms, until the process dies of the signal. Exits 3 if it
 * never does (2000 steps). */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "../../include/vramtrace.h"

static struct vramtrace_api vt;

__attribute__((noinline)) static void keep_step(void) {
    void *p = NULL;
    cudaMalloc(&p, 4 << 20);
    vt.step();
}

static void *worker(void *arg) {
    (void)arg;
    for (int i = 0; i < 10; i++) keep_step();
    kill(getpid(), SIGTERM);
    for (int i = 0; i < 2000; i++) {
        keep_step();
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    _exit(3);
}

int main(void) {
    vramtrace_load(&vt);
    void *p = NULL;
    cudaMalloc(&p, 4096); /* the first GPU call: SIGTERM's handler is in place before the worker runs */
    cudaFree(p);
    sigset_t term, old;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &term, &old);
    pthread_t t;
    if (pthread_create(&t, NULL, worker, NULL) != 0) return 2;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_join(t, NULL);
    return 0;
}
