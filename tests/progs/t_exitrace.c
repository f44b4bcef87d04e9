/* t_exitrace.c -- exits that race or borrow: "N CODE": N threads each keep
 * 1 MiB and call exit(CODE) at the same moment (a barrier), while main
 * keeps 1 MiB and sleeps; "join": main keeps 1 MiB and calls exit(0),
 * whose atexit handler joins a worker that calls exit(3) meanwhile (the C
 * library's exit before 2.41 ends the process from the worker: status
 * 3; "joinplain" the same without the GPU); "quick": main keeps 1 MiB and calls exit(0), a worker keeping 1 MiB
 * calls quick_exit(4) 100 ms later; "vfork": main keeps 1 MiB, a vfork
 * child calls exit(9) (not _exit), main prints the child's status and
 * calls exit(5). */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static pthread_barrier_t together;
static int code;
static pthread_t worker;

static void *ender(void *arg) {
    (void)arg;
    void *p;
    cudaMalloc(&p, 1 << 20);
    pthread_barrier_wait(&together);
    exit(code);
}

static void *fatal(void *arg) {
    (void)arg;
    usleep(200000);
    exit(3);
}

static void join_worker(void) { pthread_join(worker, NULL); }

static void *quick(void *arg) {
    (void)arg;
    void *p;
    cudaMalloc(&p, 1 << 20);
    usleep(100000);
    quick_exit(4);
}

int main(int argc, char **argv) {
    void *p;
    int plain = argc > 1 && strcmp(argv[1], "joinplain") == 0;
    if (!plain) cudaMalloc(&p, 1 << 20);
    if (plain || (argc > 1 && strcmp(argv[1], "join") == 0)) {
        atexit(join_worker);
        pthread_create(&worker, NULL, fatal, NULL);
        exit(0);
    }
    if (argc > 1 && strcmp(argv[1], "quick") == 0) {
        pthread_create(&worker, NULL, quick, NULL);
        usleep(20000);
        exit(0);
    }
    if (argc > 1 && strcmp(argv[1], "vfork") == 0) {
        pid_t c = vfork();
        if (c == 0) exit(9); /* careless: exit, not _exit, in a vfork child */
        int st;
        waitpid(c, &st, 0);
        printf("child status %d\n", WEXITSTATUS(st));
        fflush(stdout);
        exit(5);
    }
    int n = argc > 1 ? atoi(argv[1]) : 2;
    code = argc > 2 ? atoi(argv[2]) : 0;
    if (n < 1 || n > 64) return 2;
    pthread_barrier_init(&together, NULL, (unsigned)n);
    pthread_t t[64];
    for (int i = 0; i < n; i++) pthread_create(&t[i], NULL, ender, NULL);
    sleep(10);
    return 3;
}
