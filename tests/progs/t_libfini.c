/* t_libfini.c -- uses t_libfini_lib.cc's library, which frees its GPU
 * memory in its destructors, after main returns; with "leak" it also
 * keeps 1 MiB of its own that nothing frees; with "quick" it keeps it and
 * ends by quick_exit(0), which runs no destructor. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void libfini_use(void);

int main(int argc, char **argv) {
    libfini_use();
    if (argc > 1 && (strcmp(argv[1], "leak") == 0 || strcmp(argv[1], "quick") == 0)) {
        void *p = NULL;
        cudaMalloc(&p, 1 << 20);
    }
    if (argc > 1 && strcmp(argv[1], "quick") == 0) {
        printf("quick_exit\n");
        fflush(stdout);
        quick_exit(0);
    }
    printf("main returns\n");
    fflush(stdout);
    return 0;
}
