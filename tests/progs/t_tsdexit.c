/* t_tsdexit.c -- a thread whose own thread-specific data destructor
 * allocates GPU memory after vramtrace's destructors for that thread have
 * run: the program's key is made after vramtrace's (its first allocation
 * makes those), so its destructor runs later. The destructor keeps 3 MiB
 * and frees 1 MiB; the thread itself allocated and freed 2 MiB before.
 * With "twice", the destructor sets its key again, so that it runs once
 * more (the C library runs destructors again while keys are set). */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static pthread_key_t key;
static int twice, runs;

__attribute__((noinline)) static void keep_in_destructor(void) {
    void *kept = NULL, *freed = NULL;
    if (cudaMalloc(&kept, 3 << 20) != cudaSuccess || cudaMalloc(&freed, 1 << 20) != cudaSuccess)
        printf("destructor's allocation failed\n");
    cudaFree(freed);
}

static void destructor(void *v) {
    (void)v;
    keep_in_destructor();
    if (twice && ++runs == 1) pthread_setspecific(key, &key);
}

__attribute__((noinline)) static void *thread_main(void *arg) {
    (void)arg;
    pthread_setspecific(key, &key);
    void *p = NULL;
    if (cudaMalloc(&p, 2 << 20) == cudaSuccess) cudaFree(p);
    return NULL;
}

int main(int argc, char **argv) {
    twice = argc > 1 && strcmp(argv[1], "twice") == 0;
    void *p = NULL;
    if (cudaMalloc(&p, 4096) == cudaSuccess) cudaFree(p);
    pthread_key_create(&key, destructor);
    pthread_t t;
    pthread_create(&t, NULL, thread_main, NULL);
    pthread_join(t, NULL);
    printf("thread done\n");
    return 0;
}
