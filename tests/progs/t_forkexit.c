/* t_forkexit.c -- a thread forks while the main thread exits: its fork's
 * prepare steps run (vramtrace's takes every tracker lock) as the exit
 * runs vramtrace's finalizer, with libt_forkexit.so preloaded after
 * libvramtrace.so holding the fork between the two (see there). The child
 * ends at once; the parent's exit writes its dump and report, and prints
 * nothing of its own but "exiting". */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void *forker(void *arg) {
    (void)arg;
    pid_t c = fork();
    if (c == 0) _exit(0);
    if (c > 0) waitpid(c, NULL, 0);
    return NULL;
}

int main(void) {
    volatile int *armed = dlsym(RTLD_DEFAULT, "forkexit_armed");
    volatile int *in_prepare = dlsym(RTLD_DEFAULT, "forkexit_in_prepare");
    if (!armed || !in_prepare) {
        fprintf(stderr, "libt_forkexit.so is not preloaded\n");
        return 2;
    }
    void *p = NULL;
    cudaMalloc(&p, 1 << 20);
    *armed = 1;
    pthread_t t;
    pthread_create(&t, NULL, forker, NULL);
    while (!__atomic_load_n(in_prepare, __ATOMIC_ACQUIRE)) {
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    printf("exiting\n");
    exit(0);
}
