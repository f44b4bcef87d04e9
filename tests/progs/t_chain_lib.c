/* t_chain_lib.c -- libt_chain.so, a library whose entry point allocates
 * through an inner function of its own (tests/progs/t_sitefirst.c). */
#include <cuda_runtime_api.h>
#include <stddef.h>

__attribute__((noinline)) int chain_inner(void **p, size_t bytes) {
    int rc = (int)cudaMalloc(p, bytes);   /* SITE:inner */
    return rc;
}

int chain_entry(void **p, size_t bytes) {
    int rc = chain_inner(p, bytes);       /* SITE:entry */
    return rc;
}
