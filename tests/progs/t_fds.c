/* t_fds.c -- a program that takes the descriptor table for itself
 * (tests/integration/test_files.py).
 *
 * t_fds closefrom DIR: after its first allocation (vramtrace has opened
 * its live segment by then), closes 3 to 1023 as a daemon does,
 * opens DIR/f0 .. DIR/f9 (the lowest numbers free), writes "a\n" to each,
 * raises the dump signal (SIGUSR2, when a handler, vramtrace's, holds it),
 * writes "b\n", then forks a child that
 * writes "c\n" to each and exits; prints each file's number and whether
 * every write wrote its bytes.
 * t_fds stdin: run with descriptor 0 closed: after an allocation and a
 * pause, prints whether 0 is open (the program's own first open would get
 * it, and a read of it must say it is closed). */
#include <cuda_runtime_api.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void pause_ms(long ms) {
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000};
    while (nanosleep(&t, &t) != 0 && errno == EINTR) continue;
}

int main(int argc, char **argv) {
    void *p = NULL;
    if (argc < 2 || cudaMalloc(&p, 4096) != cudaSuccess) return 2;
    pause_ms(300); /* the helper threads started, the segment placed */
    if (strcmp(argv[1], "stdin") == 0) {
        printf("fd 0 %s\n", fcntl(0, F_GETFD) == -1 && errno == EBADF ? "closed" : "open");
        return cudaFree(p) == cudaSuccess ? 0 : 1;
    }
    if (argc < 3) return 2;
    for (int fd = 3; fd < 1024; fd++) close(fd);
    int fds[10], ok = 1;
    for (int i = 0; i < 10; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/f%d", argv[2], i);
        fds[i] = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        ok &= write(fds[i], "a\n", 2) == 2;
    }
    struct sigaction now;
    if (sigaction(SIGUSR2, NULL, &now) == 0 && now.sa_handler != SIG_DFL) raise(SIGUSR2); /* vramtrace's */
    pause_ms(100);
    for (int i = 0; i < 10; i++) ok &= write(fds[i], "b\n", 2) == 2;
    pid_t child = fork();
    if (child == 0) {
        int cok = 1;
        for (int i = 0; i < 10; i++) cok &= write(fds[i], "c\n", 2) == 2;
        _exit(cok ? 0 : 1);
    }
    int st = 0;
    waitpid(child, &st, 0);
    printf("fds %d..%d writes %s child %s\n", fds[0], fds[9], ok ? "ok" : "failed",
           WIFEXITED(st) && WEXITSTATUS(st) == 0 ? "ok" : "failed");
    return cudaFree(p) == cudaSuccess ? 0 : 1;
}
