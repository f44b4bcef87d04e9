/* t_sitefirst.c -- a program calling a library (libt_chain.so: chain_entry
 * -> chain_inner -> cudaMalloc) and the runtime directly, and leaking both:
 * the call site is main's line; beside the chained one, the library's entry
 * point it called (tests/integration/test_sitefirst.py).
 *
 *   t_sitefirst      leaks 1 MiB from main, 3 MiB through chain_entry,
 *                    twice (the same call site) */
#include <cuda_runtime_api.h>
#include <stddef.h>

int chain_entry(void **p, size_t bytes);

int main(void) {
    void *direct = NULL, *kept[2] = {NULL, NULL};
    cudaMalloc(&direct, 1 << 20);        /* SITE:direct */
    for (int i = 0; i < 2; i++)
        chain_entry(&kept[i], 3 << 20);  /* SITE:chain */
    return 0;
}
