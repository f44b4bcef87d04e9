/* t_start_env.c -- a program that changes its environment before its first
 * GPU call: VRAMTRACE_OUT set to another path, VRAMTRACE_DEPTH unset, and
 * the VRAMTRACE_REPORT string it started with written over in place (as a
 * process-title library does). vramtrace must use the options it started
 * with. Then one 1 MiB allocation through the driver, left live. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda.h>

extern char **environ;

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    setenv("VRAMTRACE_OUT", argv[1], 1);
    unsetenv("VRAMTRACE_DEPTH");
    for (char **e = environ; *e; e++)
        if (strncmp(*e, "VRAMTRACE_REPORT=", 17) == 0) memset(*e + 17, 'x', strlen(*e + 17));
    CUdeviceptr p;
    if (cuInit(0) != CUDA_SUCCESS || cuMemAlloc(&p, 1 << 20) != CUDA_SUCCESS) return 1;
    printf("allocated\n");
    return 0;
}
