/* t_spawn.c -- posix_spawn and vfork from a traced process. */
#include <cuda_runtime_api.h>
#include <spawn.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

int main(void) {
    void *p = NULL;
    cudaMalloc(&p, 8192);
    fflush(stdout);
    pid_t pid;
    char *args[] = {"echo", "spawned", NULL};
    int st = -1;
    if (posix_spawnp(&pid, "echo", NULL, NULL, args, environ) == 0) waitpid(pid, &st, 0);
    printf("posix_spawn status %d\n", WEXITSTATUS(st));
    fflush(stdout);
    pid_t v = vfork();
    if (v == 0) {
        execlp("echo", "echo", "vforked", (char *)NULL);
        _exit(127);
    }
    waitpid(v, &st, 0);
    printf("vfork status %d\n", WEXITSTATUS(st));
    return 0;
}
