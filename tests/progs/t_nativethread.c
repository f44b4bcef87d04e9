/* t_nativethread.c -- a C library whose thread, started from Python, has no
 * Python thread state (like PyTorch's autograd threads). */
#include <cuda.h>
#include <pthread.h>
#include <stdint.h>

static void *native_worker(void *arg) {
    CUdeviceptr p = 0;
    cuMemAlloc((CUdeviceptr *)&p, (size_t)(uintptr_t)arg);
    return (void *)(uintptr_t)p;
}

int alloc_in_native_thread(size_t n) {
    pthread_t t;
    void *r = NULL;
    if (pthread_create(&t, NULL, native_worker, (void *)(uintptr_t)n) != 0) return -1;
    pthread_join(t, &r);
    return r ? 0 : -1;
}
