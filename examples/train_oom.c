/* train_oom.c -- a toy training loop that runs out of GPU memory.
 *
 * It loads weights, makes optimizer state, then each step allocates
 * activations and a workspace. A "bug" keeps every step's activations alive
 * (as a Python list of losses that still hold their graphs would), so the
 * job dies a few steps in. `make demo` runs it under vramtrace. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define MiB ((size_t)1 << 20)
#define MAX_STEPS 100

static void fail(const char *what, cudaError_t r, int step) {
    fprintf(stderr, "train_oom: step %d: %s failed: %s\n", step, what, cudaGetErrorString(r));
    exit(1);
}

static void *load_weights(void) {
    void *p;
    cudaError_t r = cudaMalloc(&p, 1536 * MiB);
    if (r != cudaSuccess) fail("load_weights", r, 0);
    return p;
}

static void *init_optimizer_state(void) {
    void *p;
    cudaError_t r = cudaMalloc(&p, 3072 * MiB); /* Adam: two moments */
    if (r != cudaSuccess) fail("init_optimizer_state", r, 0);
    return p;
}

static void *forward_activations(int step) {
    void *p;
    cudaError_t r = cudaMalloc(&p, 512 * MiB);
    if (r != cudaSuccess) fail("forward_activations", r, step);
    return p;
}

static void backward_step(int step) {
    void *workspace;
    cudaError_t r = cudaMalloc(&workspace, 256 * MiB);
    if (r != cudaSuccess) fail("backward_step workspace", r, step);
    cudaFree(workspace);
}

int main(void) {
    void *history[MAX_STEPS];
    load_weights();
    init_optimizer_state();
    for (int step = 1; step <= MAX_STEPS; step++) {
        history[step - 1] = forward_activations(step); /* never freed: the bug */
        backward_step(step);
        usleep(20000); /* the step's compute */
        printf("step %d done\n", step);
        fflush(stdout);
    }
    /* A device large enough for every step gets its memory back here. */
    for (int step = 0; step < MAX_STEPS; step++) cudaFree(history[step]);
    return 0;
}
