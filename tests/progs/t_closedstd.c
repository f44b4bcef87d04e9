/* t_closedstd.c -- a program that closed its stdout and stderr and keeps
 * writing to them, as a daemon does (tests/integration/test_files.py).
 *
 * t_closedstd N M: keeps a copy of stdout at 3, closes 1 and 2, allocates
 * M x 4 KiB (a dump of some length: it takes a while to write), starts a
 * thread that writes a line to 1 and to 2 over and over, asks for 1 TiB
 * N times 1.1 s apart (out of memory: a post-mortem and a dump each
 * time), stops the thread and prints to 3 how many of its writes were
 * taken: none without vramtrace (EBADF), and none with it (its own files
 * never take 1 or 2). */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static volatile int stop;
static long taken, tried;

static void *writer(void *arg) {
    (void)arg;
    static const char line[] = "PROGRAM-LINE\n";
    while (!stop) {
        taken += (write(1, line, sizeof line - 1) > 0) + (write(2, line, sizeof line - 1) > 0);
        tried += 2;
    }
    return NULL;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 1, m = argc > 2 ? atoi(argv[2]) : 3;
    int out = dup(1);
    close(1);
    close(2);
    for (int i = 0; i < m; i++) {
        void *p = NULL;
        if (cudaMalloc(&p, 4096) != cudaSuccess) return 2;
    }
    pthread_t t;
    if (pthread_create(&t, NULL, writer, NULL) != 0) return 2;
    int failed = 0;
    for (int i = 0; i < n; i++) {
        void *big = NULL;
        failed += cudaMalloc(&big, (size_t)1 << 40) == cudaErrorMemoryAllocation;
        usleep(1100 * 1000);
    }
    stop = 1;
    pthread_join(t, NULL);
    dprintf(out, "out of memory %d of %d; writes to 1 and 2 taken: %ld%s\n", failed, n, taken,
            tried > 1000 ? "" : " (the writer hardly ran)");
    return 0;
}
