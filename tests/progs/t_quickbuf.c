/* t_quickbuf.c -- stdout left in its buffer at quick_exit, which does not
 * write it (C11 7.22.4.7), and at exit, which does. main keeps 1 MiB (a
 * leak) and prints "main" without flushing, then:
 *
 *   t_quickbuf          quick_exit(7)
 *   t_quickbuf atexit   returns 0; an atexit handler prints "handler"
 *                       without flushing and calls quick_exit(7)
 *   t_quickbuf exit     exit(7): "main" is written */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void handler(void) {
    printf("handler\n");
    quick_exit(7);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    void *kept = NULL;
    if (cudaMalloc(&kept, 1 << 20) != cudaSuccess) return 2;
    if (strcmp(mode, "atexit") == 0) atexit(handler);
    printf("main\n");
    if (strcmp(mode, "atexit") == 0) return 0;
    if (strcmp(mode, "exit") == 0) exit(7);
    quick_exit(7);
}
