/* t_forksig.c -- a child forked after its parent's first GPU call gets the
 * dump signal or SIGTERM (test_forksig.py). The parent holds 8 MiB; the child
 * says it is ready on a pipe, the parent signals it then waits for it and
 * prints how it ended.
 *
 *   t_forksig idle      the dump signal to a child that uses no GPU
 *   t_forksig use       the same, then the child allocates 16 MiB and gets
 *                       the signal again: it waits for its dump (N.1.json
 *                       for VRAMTRACE_OUT's N.json, %p its pid)
 *   t_forksig own       the program's own handler, put in after the first
 *                       GPU call (in place of vramtrace's)
 *   t_forksig ownfirst  the program's own handler, put in before it
 *   t_forksig term      SIGTERM to a child that uses no GPU
 *   t_forksig termuse   SIGTERM to a child that allocated 16 MiB */
#define _GNU_SOURCE
#include <cuda_runtime_api.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t heard;
static void own_handler(int sig) {
    (void)sig;
    heard++;
}

static void *parent_buffer(void) {
    void *p = NULL;
    return cudaMalloc(&p, 8 << 20) == cudaSuccess ? p : NULL;
}

static void *child_buffer(void) {
    void *p = NULL;
    return cudaMalloc(&p, 16 << 20) == cudaSuccess ? p : NULL;
}

/* Wait until this process's first on-demand dump is written (another
 * thread writes it), at most 30 s: 1 when it was. */
static int wait_for_dump(void) {
    const char *out = getenv("VRAMTRACE_OUT");
    const char *p = out ? strstr(out, "%p") : NULL;
    size_t len = out ? strlen(out) : 0;
    if (!p || len < 5 || strcmp(out + len - 5, ".json") != 0) return 0;
    char path[4096];
    snprintf(path, sizeof path, "%.*s%d%.*s.1.json", (int)(p - out), out, (int)getpid(),
             (int)(len - 5 - (size_t)(p + 2 - out)), p + 2);
    struct stat st;
    for (int i = 0; i < 3000; i++) {
        if (stat(path, &st) == 0) return 1;
        usleep(10000);
    }
    return 0;
}

/* Ready on the pipe, then the dump signal awaited (blocked until then, so
 * that it comes while the child waits for it). */
static void ready_then_wait(int fd) {
    sigset_t none;
    sigemptyset(&none);
    if (write(fd, "r", 1) != 1) _exit(3);
    sigsuspend(&none);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "idle";
    int term = strncmp(mode, "term", 4) == 0, use = strcmp(mode, "use") == 0 || strcmp(mode, "termuse") == 0;
    if (strcmp(mode, "ownfirst") == 0) signal(SIGUSR2, own_handler);
    if (!parent_buffer()) return 2;
    if (strcmp(mode, "own") == 0) signal(SIGUSR2, own_handler);
    int fds[2];
    if (pipe(fds) != 0) return 2;
    fflush(stdout);
    pid_t c = fork();
    if (c == 0) {
        close(fds[0]);
        if (term) {
            if (use && !child_buffer()) _exit(4);
            if (write(fds[1], "r", 1) != 1) _exit(3);
            for (;;) pause();
        }
        sigset_t usr2;
        sigemptyset(&usr2);
        sigaddset(&usr2, SIGUSR2);
        sigprocmask(SIG_BLOCK, &usr2, NULL);
        ready_then_wait(fds[1]);
        printf("child: went on, own handler %d\n", (int)heard);
        if (use) {
            if (!child_buffer()) _exit(4);
            ready_then_wait(fds[1]);
            printf("child: dumped %d\n", wait_for_dump());
        }
        exit(0);
    }
    close(fds[1]);
    char b;
    for (int i = 0; i < (use && !term ? 2 : 1); i++) {
        if (read(fds[0], &b, 1) != 1) break;
        kill(c, term ? SIGTERM : SIGUSR2);
    }
    int st;
    waitpid(c, &st, 0);
    printf("child status %s %d\n", WIFSIGNALED(st) ? "sig" : "exit", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
    return 0;
}
