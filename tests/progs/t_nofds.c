/* t_nofds.c -- a program that has used every descriptor when an
 * allocation fails (tests/integration/test_files.py).
 *
 * Allocates 1 MiB at one line, lowers its descriptor limit to 64, opens
 * /dev/null until no descriptor is left, fails a 1 TiB allocation at
 * another line (the post-mortem, written with no descriptor to open a
 * file by), then closes what it opened and exits with the 1 MiB live
 * (the exit's report, written with descriptors again). Prints how many it
 * opened, then each allocation's status. */
#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/resource.h>
#include <unistd.h>

static int opened[64];

/* Named in the exit report: exported (the program is linked -rdynamic),
 * so the post-mortem names it from the loader's memory as well. */
__attribute__((noinline)) void *hold_one_mib(void) {
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, 1 << 20);
    printf("hold %d\n", (int)e);
    return p;
}

__attribute__((noinline)) void ask_one_tib(void) {
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, (size_t)1 << 40);
    printf("ask %d\n", (int)e);
}

int main(int argc, char **argv) {
    hold_one_mib();
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = 64;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) return 2;
    int n = 0;
    while (n < 64 && (opened[n] = open("/dev/null", O_RDONLY)) >= 0) n++;
    printf("opened up to the limit: %s\n", n < 64 ? "yes" : "no");
    if (argc > 1 && n > 0) close(opened[--n]);
    fflush(stdout);
    ask_one_tib();
    for (int i = 0; i < n; i++) close(opened[i]);
    return 0;
}
