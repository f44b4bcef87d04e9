/* t_pexit.c -- a main thread that ends by pthread_exit.
 *
 *   t_pexit        main starts a worker and ends by pthread_exit; the
 *                  worker keeps 1 MiB (a leak) and frees 2 MiB, waits
 *                  0.2 s and returns: the process ends then, status 0
 *   t_pexit late   the same, but the worker first waits for the main
 *                  thread to be gone (its first GPU call comes after)
 *
 * Prints "worker done" as the worker returns. */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static int late;

static void nap(long ms) {
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

static void *worker(void *arg) {
    (void)arg;
    if (late) nap(300);
    void *kept = NULL, *p = NULL;
    if (cudaMalloc(&kept, 1 << 20) != cudaSuccess || cudaMalloc(&p, 2 << 20) != cudaSuccess) return NULL;
    cudaFree(p);
    nap(200);
    puts("worker done");
    fflush(stdout);
    return NULL;
}

int main(int argc, char **argv) {
    late = argc > 1 && strcmp(argv[1], "late") == 0;
    pthread_t t;
    if (pthread_create(&t, NULL, worker, NULL) != 0) return 2;
    pthread_exit(NULL);
}
