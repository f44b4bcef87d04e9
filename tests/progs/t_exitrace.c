/* t_exitrace.c -- N threads each keep 1 MiB and call exit(CODE) at the
 * same moment (a barrier), while main keeps 1 MiB and sleeps: the exit
 * handlers run on one of them while the others call exit too. */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

static pthread_barrier_t together;
static int code;

static void *ender(void *arg) {
    (void)arg;
    void *p;
    cudaMalloc(&p, 1 << 20);
    pthread_barrier_wait(&together);
    exit(code);
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 2;
    code = argc > 2 ? atoi(argv[2]) : 0;
    if (n < 1 || n > 64) return 2;
    void *p;
    cudaMalloc(&p, 1 << 20);
    pthread_barrier_init(&together, NULL, (unsigned)n);
    pthread_t t[64];
    for (int i = 0; i < n; i++) pthread_create(&t[i], NULL, ender, NULL);
    sleep(10);
    return 3;
}
