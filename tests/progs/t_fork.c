/* t_fork.c -- a forked child must not report its parent's records.
 * `t_fork clean`: the parent frees its 1 MiB before it exits, so that the
 * child's 4 KiB is the only leak (the child's status goes to the parent,
 * which exits 0 all the same). */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* The parent's 1 MiB and the child's 4 KiB, each its own call site;
 * NULL where the allocation failed. */
static void *parent_buffer(void) {
    void *p = NULL;
    return cudaMalloc(&p, 1 << 20) == cudaSuccess ? p : NULL;
}

static void *child_buffer(void) {
    void *p = NULL;
    return cudaMalloc(&p, 4096) == cudaSuccess ? p : NULL;
}

int main(int argc, char **argv) {
    int clean = argc > 1 && strcmp(argv[1], "clean") == 0;
    void *p = parent_buffer();
    fflush(stdout);
    pid_t quiet = fork();
    if (quiet == 0) exit(0);            /* allocates nothing: no dump, no output */
    pid_t busy = fork();
    if (busy == 0) {                    /* allocates: its own dump, its own bytes only */
        child_buffer();
        exit(0);
    }
    int st1, st2;
    waitpid(quiet, &st1, 0);
    waitpid(busy, &st2, 0);
    printf("children exited %d %d\n", WEXITSTATUS(st1), WEXITSTATUS(st2));
    printf("parent %p\n", p);
    if (clean) cudaFree(p);
    return 0;
}
