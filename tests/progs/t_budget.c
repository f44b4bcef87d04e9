/* t_budget.c -- threads that race for the last bytes of a budget
 * (VRAMTRACE_LIMIT; tests/integration/test_options.py).
 *
 * t_budget T N: T threads start together and each asks N times for 4096
 * bytes, keeping what it gets; the main thread then frees all of it and
 * the threads each allocate and free 4096 bytes 1,000 times (never more
 * than T * 4096 live). Prints how many of the first allocations succeeded
 * and how many of the second failed. */
#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static CUcontext ctx;
static int n;
static pthread_barrier_t gate;
static int got[64], failed_after[64];
static CUdeviceptr *kept[64];

static void *worker(void *arg) {
    long i = (long)arg;
    cuCtxSetCurrent(ctx);
    kept[i] = calloc((size_t)n, sizeof *kept[i]);
    pthread_barrier_wait(&gate);
    for (int k = 0; k < n; k++)
        if (cuMemAlloc(&kept[i][got[i]], 4096) == CUDA_SUCCESS) got[i]++;
    pthread_barrier_wait(&gate);
    pthread_barrier_wait(&gate); /* the main thread frees them */
    for (int k = 0; k < 1000; k++) {
        CUdeviceptr p;
        if (cuMemAlloc(&p, 4096) != CUDA_SUCCESS) failed_after[i]++;
        else cuMemFree(p);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int threads = argc > 2 ? atoi(argv[1]) : 0;
    n = argc > 2 ? atoi(argv[2]) : 0;
    if (threads < 1 || threads > 64 || n < 1) return 2;
    cuInit(0);
    cuDevicePrimaryCtxRetain(&ctx, 0);
    cuCtxSetCurrent(ctx);
    pthread_barrier_init(&gate, NULL, (unsigned)threads + 1);
    pthread_t t[64];
    for (long i = 0; i < threads; i++) pthread_create(&t[i], NULL, worker, (void *)i);
    pthread_barrier_wait(&gate);
    pthread_barrier_wait(&gate);
    int total = 0, failed = 0;
    for (int i = 0; i < threads; i++) {
        total += got[i];
        for (int k = 0; k < got[i]; k++) cuMemFree(kept[i][k]);
    }
    pthread_barrier_wait(&gate);
    for (int i = 0; i < threads; i++) {
        pthread_join(t[i], NULL);
        failed += failed_after[i];
        free(kept[i]);
    }
    printf("first %d failed after %d\n", total, failed);
    return 0;
}
