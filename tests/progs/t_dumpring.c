/* t_dumpring.c -- named dumps written while another thread allocates and
 * frees without pause, for tests/integration/test_dumpmem.py.
 *
 *   t_dumpring NDUMPS
 *
 * The recording thread makes pair k = 0, 1, ...: cudaMalloc of 4096 + k
 * bytes, then cudaFree of it, until the main thread has written NDUMPS
 * named dumps ("ring0", "ring1", ...); then it stops after at least 20,000 pairs in all.
 * Prints "pairs P dumps D" and each dump's path, one a line. */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

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

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 3;
    struct vramtrace_api vt;
    vramtrace_load(&vt);
    void *warm = NULL;
    cudaMalloc(&warm, 1 << 20); /* the process uses the GPU before the thread starts */
    pthread_t t;
    pthread_create(&t, NULL, recorder, NULL);
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
