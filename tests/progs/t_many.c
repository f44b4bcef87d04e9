/* t_many.c -- argv[1] allocations of 4 KiB kept, "ready" on stdout, then
 * up to argv[2] seconds of sleep: a process whose dump takes a while to
 * write, to be killed while it writes (tests/integration/test_files.py). */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int n = atoi(argv[1]);
    for (int i = 0; i < n; i++) {
        void *p;
        if (cudaMalloc(&p, 4096) != cudaSuccess) return 1;
    }
    printf("ready\n");
    fflush(stdout);
    for (int s = 0; s < atoi(argv[2]) * 10; s++) usleep(100000);
    return 0;
}
