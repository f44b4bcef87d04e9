/* t_phases.c -- a run whose peak, OOM and exit hold different things:
 * warm-up buffers make the peak and are freed; steady-state buffers stay;
 * then one request fails. With RANK=1 it also keeps an extra buffer. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MiB ((size_t)1 << 20)

static void *warmup_buffer(void) {
    void *p = NULL;
    cudaMalloc(&p, 4 * MiB);
    return p;
}

static void *steady_state(void) {
    void *p = NULL;
    cudaMalloc(&p, 2 * MiB);
    return p;
}

static void *rank_extra(void) {
    void *p = NULL;
    cudaMalloc(&p, 1 * MiB);
    return p;
}

static cudaError_t huge_request(void) {
    void *p = NULL;
    return cudaMalloc(&p, 14 * MiB);
}

int main(void) {
    void *w[3];
    for (int i = 0; i < 3; i++) w[i] = warmup_buffer();
    usleep(2000);
    for (int i = 0; i < 3; i++) cudaFree(w[i]);
    steady_state();
    steady_state();
    const char *rank = getenv("RANK");
    if (rank && strcmp(rank, "1") == 0) rank_extra();
    usleep(2000);
    cudaError_t r = huge_request();
    printf("huge request -> %d\n", (int)r);
    return 0;
}
