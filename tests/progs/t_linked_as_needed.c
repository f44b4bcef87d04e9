/* t_linked_as_needed.c -- a program linked --as-needed with -lvramtrace
 * ahead of the CUDA runtime: the link editor binds cudaMalloc to
 * libvramtrace.so's export and drops the runtime, so the program cannot
 * start; vramtrace says why before the dynamic linker's "undefined
 * symbol". */
#include <cuda_runtime_api.h>
#include <stdio.h>

int main(void) {
    void *p = NULL;
    printf("cudaMalloc %d\n", (int)cudaMalloc(&p, 8 << 20));
    return 0;
}
