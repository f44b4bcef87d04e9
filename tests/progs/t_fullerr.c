/* t_fullerr.c -- a program whose stderr is a pipe nobody reads until it
 * ends (a launcher that reads it after wait()) (tests/integration/test_files.py).
 *
 * t_fullerr N [nonblock]: writes N bytes to stderr in lines of 100
 * (without blocking: as much as the pipe takes), leaves stderr blocking
 * unless "nonblock", allocates 3 x 16 MiB, asks for 32 MiB (out of memory
 * on a 64 MiB device), prints the result to stdout and ends with status 7. */
#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int want = argc > 1 ? atoi(argv[1]) : 0, nonblock = argc > 2 && strcmp(argv[2], "nonblock") == 0;
    int fl = fcntl(2, F_GETFL);
    fcntl(2, F_SETFL, fl | O_NONBLOCK);
    char line[100];
    memset(line, 'x', sizeof line - 1);
    line[sizeof line - 1] = '\n';
    for (int done = 0; done < want;) {
        ssize_t w = write(2, line, sizeof line);
        if (w <= 0) break;
        done += (int)w;
    }
    if (!nonblock) fcntl(2, F_SETFL, fl & ~O_NONBLOCK);
    void *keep[3], *big = NULL;
    for (int i = 0; i < 3; i++)
        if (cudaMalloc(&keep[i], 16 << 20) != cudaSuccess) return 2;
    printf("big request -> %d\n", (int)cudaMalloc(&big, 32 << 20));
    return 7;
}
