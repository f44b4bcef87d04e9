/* t_threadreuse.c -- THREADS threads (argument 1), two at a time, each
 * joined before the next two start, so that each takes a walker's cache
 * and a slot that an ended thread left; each makes 50 allocate+free pairs
 * from stacks of three shapes and depths (one with alloca's frames). */
#include <alloca.h>
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) static void leaf(int k) {
    void *p = NULL;
    if (cudaMalloc(&p, 256 + (size_t)k) == cudaSuccess) cudaFree(p);
    __asm__ volatile("");
}

__attribute__((noinline)) static void plain(int d, int k) {
    if (d) plain(d - 1, k);
    else leaf(k);
    __asm__ volatile("");
}

__attribute__((noinline)) static void sized(int d, int k) {
    if (d) {
        volatile char *buf = alloca(64 + (size_t)d * 16);
        buf[0] = (char)d;
        sized(d - 1, k);
    } else {
        leaf(k);
    }
    __asm__ volatile("");
}

static void *thread_main(void *arg) {
    long i = (long)arg;
    for (int j = 0; j < 50; j++) {
        if ((i + j) % 3 == 0) plain(j % 9, j);
        else if ((i + j) % 3 == 1) sized(j % 7, j);
        else leaf(j);
    }
    return NULL;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 40;
    for (long i = 0; i < n; i += 2) {
        pthread_t a, b;
        pthread_create(&a, NULL, thread_main, (void *)i);
        pthread_create(&b, NULL, thread_main, (void *)(i + 1));
        pthread_join(a, NULL);
        pthread_join(b, NULL);
    }
    printf("threads %ld\n", n);
    return 0;
}
