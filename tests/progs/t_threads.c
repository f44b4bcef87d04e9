/* t_threads.c -- many threads allocating and freeing at once. */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define THREADS 8
#define ROUNDS 1000

static int ndev = 1;

static void *worker(void *arg) {
    long id = (long)arg;
    if (cudaSetDevice((int)(id % ndev)) != cudaSuccess) abort();
    for (int i = 0; i < ROUNDS; i++) {
        void *p;
        if (cudaMalloc(&p, 256 + (size_t)(i % 7) * 512) != cudaSuccess) abort();
        if (cudaFree(p) != cudaSuccess) abort();
    }
    void *keep;
    if (cudaMalloc(&keep, (size_t)(id + 1) * 4096) != cudaSuccess) abort();
    return NULL;
}

int main(void) {
    pthread_t t[THREADS];
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) return 1;
    for (long i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    printf("done\n");
    return 0;
}
