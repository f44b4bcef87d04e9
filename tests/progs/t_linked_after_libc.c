/* t_linked_after_libc.c -- a program whose NEEDED list names the C library
 * before libvramtrace.so (-lc ahead of -lvramtrace), and the CUDA runtime
 * after it: vramtrace is loaded at start-up, yet behind the C library. It
 * asks the API whether it is active, then leaves an allocation live: the
 * runtime's, not vramtrace's export of its name, must answer. */
#include <cuda_runtime_api.h>
#include <stdio.h>

#include "vramtrace.h"

int main(void) {
    printf("active %d\n", vramtrace_active());
    void *p;
    printf("cudaMalloc %d\n", (int)cudaMalloc(&p, 1 << 20));
    return 0;
}
