/* t_dumpring.c -- named dumps written while another thread allocates and
 * frees without pause, for tests/integration/test_dumpmem.py.
 *
 *   t_dumpring NDUMPS [window]
 *
 * The recording thread makes pair k = 0, 1, ...: cudaMalloc of 4096 + k
 * bytes, then cudaFree of it, until the main thread has written NDUMPS
 * named dumps ("ring0", "ring1", ...); then it stops after at least 20,000 pairs in all.
 * Prints "pairs P dumps D" and each dump's path, one a line.
 *
 * With "window" the thread keeps a window of live allocations instead:
 * allocation i is of 256 + i % 65536 bytes, and the window, 10,000 long
 * before the first dump, grows by 40,000 and shrinks back, over and over,
 * while the dumps are written; each dump must hold one window. */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../include/vramtrace.h"

static volatile int stop;
static long pairs;

static void *recorder(void *arg) {
    (void)arg;
    for (long k = 0; !__atomic_load_n(&stop, __ATOMIC_ACQUIRE) || k < 20000; k++) {
        void *p = NULL;
        if (cudaMalloc(&p, 4096 + (size_t)k) != cudaSuccess) break;
        cudaFree(p);
        pairs = k + 1;
    }
    return NULL;
}

#define WCAP 65536
static void *win[WCAP];
static long lo, hi;
static pthread_barrier_t ready;

static int win_add(void) {
    if (cudaMalloc(&win[hi % WCAP], 256 + (size_t)(hi % WCAP)) != cudaSuccess) return 0;
    hi++;
    return 1;
}

static void *windower(void *arg) {
    (void)arg;
    while (hi < 10000 && win_add()) continue;
    pthread_barrier_wait(&ready);
    while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
        for (int k = 0; k < 40000; k++)
            if (!win_add()) return NULL;
        for (int k = 0; k < 40000; k++) cudaFree(win[lo++ % WCAP]);
    }
    pairs = hi;
    return NULL;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 3;
    int window = argc > 2 && strcmp(argv[2], "window") == 0;
    pthread_barrier_init(&ready, NULL, 2);
    struct vramtrace_api vt;
    vramtrace_load(&vt);
    void *warm = NULL;
    cudaMalloc(&warm, 1 << 20); /* the process uses the GPU before the thread starts */
    pthread_t t;
    pthread_create(&t, NULL, window ? windower : recorder, NULL);
    if (window) pthread_barrier_wait(&ready);
    char paths[16][4096];
    int dumps = 0;
    for (int i = 0; i < n && i < 16; i++) {
        char name[16];
        snprintf(name, sizeof name, "ring%d", i);
        if (vt.dump(name, paths[dumps], sizeof paths[dumps]) == 0) dumps++;
    }
    __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
    pthread_join(t, NULL);
    cudaFree(warm);
    printf("pairs %ld dumps %d\n", pairs, dumps);
    for (int i = 0; i < dumps; i++) printf("%s\n", paths[i]);
    return 0;
}
