/* t_asan.c -- a program built with -fsanitize=address, as CUDA libraries'
 * test binaries often are: its leak check (LeakSanitizer's, at exit)
 * must find none of vramtrace's own memory, and vramtrace's must still
 * find the GPU memory it leaks.
 *
 * Every mode first makes 2,048 distinct stacks (the list of stacks grows
 * and moves), allocates from three threads, and holds 70,000 allocations
 * at once (the live table's arrays are then mapped), freeing them all.
 *
 *   t_asan clean      nothing more: no leak of any kind
 *   t_asan gpuleak    cudaMalloc of 12345 bytes in gpu_leak, never freed
 *   t_asan hostleak   malloc of 4321 bytes in host_leak, never freed
 *   t_asan keep       the 70,000 allocations of 64 bytes kept to the end
 *   t_asan oom        a cudaMalloc that fails (the post-mortem), then clean
 *
 * It prints "done MODE" on stdout, buffered, at the end. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HELD 70000

static void *held[HELD];

/* A stack for each value of bits's low n bits: a path of calls through
 * left and right. */
__attribute__((noinline)) static void *right(unsigned bits, int n);
__attribute__((noinline)) static void *left(unsigned bits, int n) {
    void *p = NULL;
    if (n == 0) cudaMalloc(&p, 256);
    else p = bits & 1 ? left(bits >> 1, n - 1) : right(bits >> 1, n - 1);
    __asm__ volatile("" ::: "memory"); /* not a tail call */
    return p;
}
__attribute__((noinline)) static void *right(unsigned bits, int n) {
    void *p = NULL;
    if (n == 0) cudaMalloc(&p, 512);
    else p = bits & 1 ? left(bits >> 1, n - 1) : right(bits >> 1, n - 1);
    __asm__ volatile("" ::: "memory");
    return p;
}

static void *worker(void *arg) {
    unsigned from = (unsigned)(long)arg * 500;
    for (unsigned i = from; i < from + 500; i++) cudaFree(left(i, 11));
    return NULL;
}

__attribute__((noinline)) static void gpu_leak(void) {
    void *p = NULL;
    cudaMalloc(&p, 12345);
}

__attribute__((noinline)) static void host_leak(void) {
    char *volatile h = malloc(4321);
    memset(h, 1, 4321);
    h = NULL;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "clean";
    cudaFree(0);
    for (unsigned i = 0; i < 2048; i++) cudaFree(left(i, 11));
    CUdeviceptr d = 0; /* the driver's entry points too */
    cuMemAlloc(&d, 4096);
    cuMemFree(d);
    pthread_t t[3];
    for (long k = 0; k < 3; k++) pthread_create(&t[k], NULL, worker, (void *)k);
    for (int k = 0; k < 3; k++) pthread_join(t[k], NULL);
    for (int i = 0; i < HELD; i++) cudaMalloc(&held[i], 64);
    if (strcmp(mode, "keep") != 0)
        for (int i = 0; i < HELD; i++) cudaFree(held[i]);
    if (strcmp(mode, "gpuleak") == 0) gpu_leak();
    if (strcmp(mode, "hostleak") == 0) host_leak();
    if (strcmp(mode, "oom") == 0) {
        void *p = NULL;
        printf("oom %d\n", (int)cudaMalloc(&p, (size_t)1 << 40));
    }
    printf("done %s\n", mode);
    return 0;
}
