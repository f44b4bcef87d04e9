/* t_forkstorm.c -- fork right after a process's first GPU allocation, over
 * and over: the moment vramtrace's helper threads start. Each round forks a
 * child that allocates (its helper threads start) and at once forks four
 * grandchildren one after the other, each of which allocates on the GPU
 * (its own helper threads start) and host memory of every size class, and
 * exits. A child whose family has not exited after 20 seconds is hung: its
 * process group is killed and the rounds stop there. Prints "rounds N hung
 * H failed F" (F: families that exited with a failure). */
#include <cuda_runtime_api.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define GRANDCHILDREN 4

/* Every malloc size class up to 128 KiB, 64 blocks of each small one at
 * once (more than a thread's cache holds, so that the allocator's own
 * locks are taken), touched and freed. */
static void malloc_every_class(void) {
    for (size_t n = 8; n <= 128 << 10; n += n / 8 + 8) {
        char *p[64];
        int k = n <= 16 << 10 ? 64 : 4;
        for (int i = 0; i < k; i++)
            if ((p[i] = malloc(n))) p[i][n - 1] = 1;
        for (int i = 0; i < k; i++) free(p[i]);
    }
}

static int child_round(void) {
    void *p = NULL;
    if (cudaMalloc(&p, 4096) != cudaSuccess) return 2;
    pid_t g[GRANDCHILDREN];
    for (int i = 0; i < GRANDCHILDREN; i++) {
        g[i] = fork();
        if (g[i] < 0) return 3;
        if (g[i] == 0) {
            void *q = NULL;
            cudaMalloc(&q, 8192);
            malloc_every_class();
            exit(0);
        }
    }
    int bad = 0;
    for (int i = 0; i < GRANDCHILDREN; i++) {
        int st;
        if (waitpid(g[i], &st, 0) != g[i] || !WIFEXITED(st) || WEXITSTATUS(st) != 0) bad = 1;
    }
    cudaFree(p);
    return bad ? 4 : 0;
}

/* 1 when pid exited within the deadline (its status in *st), 0 when not. */
static int wait_for(pid_t pid, int *st, int seconds) {
    struct timespec tick = {0, 2000000};
    for (long i = 0; i < seconds * 500L; i++) {
        if (waitpid(pid, st, WNOHANG) == pid) return 1;
        nanosleep(&tick, NULL);
    }
    return 0;
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 100, hung = 0, failed = 0;
    for (int i = 0; i < rounds; i++) {
        fflush(stdout);
        pid_t c = fork();
        if (c < 0) return 1;
        if (c == 0) {
            setpgid(0, 0);
            exit(child_round());
        }
        setpgid(c, c);
        int st = 0;
        if (!wait_for(c, &st, 20)) {
            hung++;
            kill(-c, SIGKILL);
            kill(c, SIGKILL);
            waitpid(c, &st, 0);
            rounds = i + 1;
            break;
        } else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            failed++;
        }
    }
    printf("rounds %d hung %d failed %d\n", rounds, hung, failed);
    return hung || failed;
}
