/* t_stress.c -- threads come and go (WAVES waves of PER threads, each
 * ROUNDS rounds), allocate in every way (device memory, stream-ordered,
 * pinned host, virtual-memory handles mapped and released), on the
 * devices in turn (SIMGPU_DEVICES), and free each other's memory through a
 * shared table, while one thread asks for a dump by signal every 30 ms
 * and another forks every 50 ms (the child mallocs and ends); with EXIT_AT,
 * worker 1 calls exit(0) at that round while the rest go on.
 *
 *   t_stress WAVES PER ROUNDS [EXIT_AT]
 *
 * Each thread draws from its own seed, so without EXIT_AT the counts are
 * the same at every run; prints what was still in the table at the end. */
#define _GNU_SOURCE
#include <cuda.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define SLOTS 4096
static CUdeviceptr shared[SLOTS];
static pthread_mutex_t sl = PTHREAD_MUTEX_INITIALIZER;
static CUcontext ctx, ctxs[8];
static int ndev = 1;
static volatile int stop;
static long rounds;
static int exit_at = -1; /* a worker calls exit(0) at this round */

static unsigned rnd(unsigned *s) { *s = *s * 1103515245u + 12345u; return *s >> 8; }

static void *worker(void *arg) {
    unsigned s = (unsigned)(long)arg * 7919u + 1;
    cuCtxSetCurrent(ctxs[(long)arg % ndev]);
    CUstream st; cuStreamCreate(&st, 0);
    for (long i = 0; i < rounds; i++) {
        if (exit_at >= 0 && (long)arg == 1 && i == exit_at) exit(0);
        unsigned r = rnd(&s) % 100;
        CUdeviceptr p = 0;
        if (r < 40) {
            if (cuMemAlloc(&p, 256 + rnd(&s) % 65536) != CUDA_SUCCESS) continue;
            /* swap into the shared table: free what another thread left */
            unsigned k = rnd(&s) % SLOTS;
            pthread_mutex_lock(&sl);
            CUdeviceptr old = shared[k]; shared[k] = p;
            pthread_mutex_unlock(&sl);
            if (old) cuMemFree(old);
        } else if (r < 60) {
            if (cuMemAllocAsync(&p, 4096, st) == CUDA_SUCCESS) cuMemFreeAsync(p, st);
        } else if (r < 70) {
            void *h = NULL;
            if (cuMemAllocHost(&h, 8192) == CUDA_SUCCESS) cuMemFreeHost(h);
        } else if (r < 75) {
            CUmemGenericAllocationHandle hd;
            CUmemAllocationProp prop; memset(&prop, 0, sizeof prop);
            prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
            prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE; prop.location.id = 0;
            size_t g = 0; cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
            if (!g) g = 2 << 20;
            CUdeviceptr va;
            if (cuMemAddressReserve(&va, g, 0, 0, 0) != CUDA_SUCCESS) continue;
            if (cuMemCreate(&hd, g, &prop, 0) == CUDA_SUCCESS) {
                if (cuMemMap(va, g, 0, hd, 0) == CUDA_SUCCESS) cuMemUnmap(va, g);
                cuMemRelease(hd);
            }
            cuMemAddressFree(va, g);
        } else {
            if (cuMemAlloc(&p, 512) == CUDA_SUCCESS) cuMemFree(p);
        }
    }
    cuStreamSynchronize(st);
    cuStreamDestroy(st);
    return NULL;
}

static void *signaller(void *arg) {
    (void)arg;
    while (!stop) { kill(getpid(), SIGUSR2); usleep(30000); }
    return NULL;
}

static void *forker(void *arg) {
    (void)arg;
    while (!stop) {
        pid_t c = fork();
        if (c == 0) {
            void *m = malloc(100); free(m);
            _exit(0);
        }
        if (c > 0) waitpid(c, NULL, 0);
        usleep(50000);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int waves = argc > 1 ? atoi(argv[1]) : 4, per = argc > 2 ? atoi(argv[2]) : 8;
    rounds = argc > 3 ? atol(argv[3]) : 2000;
    exit_at = argc > 4 ? atoi(argv[4]) : -1;
    cuInit(0);
    CUdevice d; cuDeviceGet(&d, 0);
    cuDevicePrimaryCtxRetain(&ctx, d);
    if (getenv("SIMGPU_DEVICES")) ndev = atoi(getenv("SIMGPU_DEVICES"));
    if (ndev > 8) ndev = 8;
    for (int k = 0; k < ndev; k++) { CUdevice dk; cuDeviceGet(&dk, k); cuDevicePrimaryCtxRetain(&ctxs[k], dk); }
    { CUdeviceptr q; cuCtxSetCurrent(ctx); cuMemAlloc(&q, 64); cuMemFree(q); }
    pthread_t sg, fk;
    pthread_create(&sg, NULL, signaller, NULL);
    pthread_create(&fk, NULL, forker, NULL);
    for (int w = 0; w < waves; w++) {
        pthread_t t[64];
        for (int i = 0; i < per; i++) pthread_create(&t[i], NULL, worker, (void *)(long)(w * 100 + i));
        for (int i = 0; i < per; i++) pthread_join(t[i], NULL);
    }
    stop = 1;
    pthread_join(sg, NULL);
    pthread_join(fk, NULL);
    long live = 0;
    for (int k = 0; k < SLOTS; k++) if (shared[k]) { cuMemFree(shared[k]); live++; }
    printf("done, freed %ld at the end\n", live);
    return 0;
}
