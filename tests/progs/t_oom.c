/* t_oom.c -- grows a cache until a request fails with out-of-memory.
 * Argument "exit" returns normally after the failure; "_exit" ends without
 * running exit handlers, as a killed job would; "abort" calls abort();
 * "repeat" fails three times
 * in a row, as a caching allocator's retries do; "later" fails twice,
 * 1.2 s apart (more than the post-mortems' pace); "probe" first asks
 * too much from another call (a batch-size search's failure, caught),
 * then fails at once in big_request; "later-probe" fails in big_request
 * twice 1.2 s apart, then at once in a probe; "twice" fails in
 * big_request called from two lines; "many N" fails N times in
 * big_request, then once in a probe. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *grow_cache(size_t n) {
    void *p = NULL;
    cudaMalloc(&p, n);
    return p;
}

static cudaError_t big_request(void **p, size_t n) {
    return cudaMalloc(p, n);
}

static cudaError_t probe(void **p, size_t n) {
    return cudaMalloc(p, n);
}

int main(int argc, char **argv) {
    void *keep[3];
    for (int i = 0; i < 3; i++) keep[i] = grow_cache(16 << 20);
    void *big = NULL;
    int later = argc > 1 && strcmp(argv[1], "later") == 0;
    int tries = argc > 1 && strcmp(argv[1], "repeat") == 0 ? 3 : later ? 2 : 1;
    cudaError_t r = cudaSuccess;
    if (argc > 1 && strcmp(argv[1], "probe") == 0) {
        printf("probe -> %d\n", (int)probe(&big, (size_t)1 << 30));
        cudaGetLastError();
    }
    if (argc > 1 && strcmp(argv[1], "later-probe") == 0) {
        big_request(&big, 32 << 20);
        usleep(1200 * 1000);
        big_request(&big, 32 << 20);
        printf("probe -> %d\n", (int)probe(&big, (size_t)1 << 30));
        return 1;
    }
    if (argc > 1 && strcmp(argv[1], "twice") == 0) {
        big_request(&big, 32 << 20);
        printf("again -> %d\n", (int)big_request(&big, 32 << 20));
        return 1;
    }
    if (argc > 2 && strcmp(argv[1], "many") == 0) {
        for (int i = atoi(argv[2]); i > 0; i--) big_request(&big, 32 << 20);
        printf("probe -> %d\n", (int)probe(&big, (size_t)1 << 30));
        return 1;
    }
    for (int i = 0; i < tries; i++) {
        if (i && later) usleep(1200 * 1000);
        r = big_request(&big, 32 << 20);
    }
    printf("big request -> %d (%s)\n", (int)r, cudaGetErrorString(r));
    printf("kept %p %p %p\n", keep[0], keep[1], keep[2]);
    fflush(stdout);
    if (argc > 1 && strcmp(argv[1], "_exit") == 0) _exit(3);
    if (argc > 1 && strcmp(argv[1], "abort") == 0) abort(); /* an OOM handler that gives up */
    return r == cudaSuccess ? 0 : 1;
}
