/* t_cancel.c -- a worker thread that asks too much under the program's
 * own lock, again and again, and checks for cancellation only at
 * pthread_testcancel (deferred cancellation, the default); the main thread
 * cancels it during its first failure, joins it and takes the lock. A
 * failing cudaMalloc is no cancellation point: the worker is cancelled at
 * pthread_testcancel, with the lock let go. */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int asking;

static void *worker(void *arg) {
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&lock);
        __atomic_store_n(&asking, 1, __ATOMIC_RELEASE);
        void *p;
        if (cudaMalloc(&p, (size_t)1 << 40) == cudaSuccess) cudaFree(p);
        cudaGetLastError();
        pthread_mutex_unlock(&lock);
        pthread_testcancel();
    }
    return NULL;
}

int main(void) {
    void *kept;
    cudaMalloc(&kept, 1 << 20);
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    while (!__atomic_load_n(&asking, __ATOMIC_ACQUIRE)) usleep(100);
    usleep(2000); /* inside its first failure, whose post-mortem is being written */
    pthread_cancel(t);
    void *how;
    pthread_join(t, &how);
    pthread_mutex_lock(&lock);
    printf("joined, %s; main got the lock\n", how == PTHREAD_CANCELED ? "cancelled" : "not cancelled");
    pthread_mutex_unlock(&lock);
    cudaFree(kept);
    return 0;
}
