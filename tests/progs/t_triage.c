/* t_triage.c -- builds the situations the OOM findings are about, from
 * its arguments, one step at a time:
 *
 *   keep SIZE      keep_buffer: allocate and keep
 *   big SIZE       big_buffer: allocate and keep (another call site)
 *   other SIZE     other_buffer: allocate and keep (a third call site)
 *   cache SIZE     cached_block: allocate and keep in "the cache"
 *   grow N SIZE    grow_step: N allocations kept, a little apart in time
 *   temp N SIZE    temp_step: N allocations each freed at once
 *   fail SIZE      failing_request: one request, kept if it succeeds
 *   retry SIZE     as a caching allocator does: request; on failure free
 *                  the cache (release_cache) and request again
 *
 * SIZE takes K, M, G. Prints each step's result; always exits 0. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX 256
static void *cache[MAX];
static int ncache;

static size_t size_of(const char *s) {
    char *end;
    size_t v = strtoull(s, &end, 10);
    if (*end == 'K') v <<= 10;
    else if (*end == 'M') v <<= 20;
    else if (*end == 'G') v <<= 30;
    return v;
}

static cudaError_t keep_buffer(size_t n) { void *p; return cudaMalloc(&p, n); }
static cudaError_t big_buffer(size_t n) { void *p; return cudaMalloc(&p, n); }
static cudaError_t other_buffer(size_t n) { void *p; return cudaMalloc(&p, n); }
static cudaError_t grow_step(size_t n) { void *p; return cudaMalloc(&p, n); }
static cudaError_t failing_request(size_t n) { void *p; return cudaMalloc(&p, n); }

static cudaError_t cached_block(size_t n) {
    void *p;
    cudaError_t r = cudaMalloc(&p, n);
    if (r == cudaSuccess && ncache < MAX) cache[ncache++] = p;
    return r;
}

static cudaError_t temp_step(size_t n) {
    void *p;
    cudaError_t r = cudaMalloc(&p, n);
    if (r == cudaSuccess) cudaFree(p);
    return r;
}

static void release_cache(void) {
    while (ncache > 0) cudaFree(cache[--ncache]);
}

static cudaError_t retry_request(size_t n) {
    void *p;
    cudaError_t r = cudaMalloc(&p, n);
    if (r != cudaErrorMemoryAllocation) return r;
    release_cache();
    return cudaMalloc(&p, n);
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        const char *op = argv[i];
        cudaError_t r = cudaSuccess;
        if (strcmp(op, "grow") == 0 || strcmp(op, "temp") == 0) {
            int n = atoi(argv[i + 1]);
            size_t sz = size_of(argv[i + 2]);
            for (int k = 0; k < n && r == cudaSuccess; k++) {
                r = op[0] == 'g' ? grow_step(sz) : temp_step(sz);
                usleep(3000);
            }
            i += 2;
        } else {
            size_t sz = size_of(argv[i + 1]);
            if (strcmp(op, "keep") == 0) r = keep_buffer(sz);
            else if (strcmp(op, "big") == 0) r = big_buffer(sz);
            else if (strcmp(op, "other") == 0) r = other_buffer(sz);
            else if (strcmp(op, "cache") == 0) r = cached_block(sz);
            else if (strcmp(op, "fail") == 0) r = failing_request(sz);
            else if (strcmp(op, "retry") == 0) r = retry_request(sz);
            else { fprintf(stderr, "t_triage: unknown step %s\n", op); return 2; }
            i += 1;
        }
        printf("%s -> %d\n", op, (int)r);
    }
    return 0;
}
