/* t_pyborrow_lib.c -- a C library whose thread, started from Python, has no
 * Python thread state and allocates while the caller waits with the GIL
 * released (what PyTorch's autograd thread does during backward()), after
 * a delay long enough for the other Python threads to settle. */
#include <cuda.h>
#include <pthread.h>
#include <stdint.h>
#include <time.h>

struct job { size_t bytes; int delay_ms; CUdeviceptr p; };

static void *worker(void *arg) {
    struct job *j = arg;
    struct timespec t = {j->delay_ms / 1000, (long)(j->delay_ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
    cuMemAlloc(&j->p, j->bytes);
    return NULL;
}

int alloc_after(size_t bytes, int delay_ms) {
    struct job j = {bytes, delay_ms, 0};
    pthread_t t;
    cuInit(0);
    if (pthread_create(&t, NULL, worker, &j) != 0) return -1;
    pthread_join(t, NULL);
    return j.p ? 0 : -1;
}
