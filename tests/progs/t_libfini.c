/* t_libfini.c -- uses t_libfini_lib.cc's library, which frees its GPU
 * memory in its destructors, after main returns; with "leak" it also
 * keeps 1 MiB of its own that nothing frees. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <string.h>

void libfini_use(void);

int main(int argc, char **argv) {
    libfini_use();
    if (argc > 1 && strcmp(argv[1], "leak") == 0) {
        void *p = NULL;
        cudaMalloc(&p, 1 << 20);
    }
    printf("main returns\n");
    fflush(stdout);
    return 0;
}
