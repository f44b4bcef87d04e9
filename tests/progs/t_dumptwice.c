/* t_dumptwice.c -- a process that writes two dumps at one name: after
 * argv[1] ms an out-of-memory failure (its dump), then after argv[2] ms
 * more its exit (tests/integration/test_files.py). */
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv) {
    void *p;
    usleep(atoi(argv[1]) * 1000);
    cudaMalloc(&p, (size_t)1 << 40);   /* out of memory: a dump */
    cudaMalloc(&p, 1 << 20);
    usleep(atoi(argv[2]) * 1000);
    return 0;
}
