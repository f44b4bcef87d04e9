/* t_pexit.c -- a main thread that ends without exit: by pthread_exit, or
 * by returning from a thread's start routine in a child forked from that
 * thread.
 *
 *   t_pexit        main starts a worker and ends by pthread_exit; the
 *                  worker keeps 1 MiB (a leak) and frees 2 MiB, waits
 *                  0.2 s and returns: the process ends then, status 0.
 *                  Prints "worker done" as the worker returns.
 *   t_pexit late   the same, but the worker first waits for the main
 *                  thread to be gone (its first GPU call comes after)
 *   t_pexit oom    main keeps 2 MiB and ends by pthread_exit; the
 *                  worker, once the main thread is gone, keeps 1 MiB and
 *                  asks for 1 TiB, which fails (a post-mortem), and returns
 *   t_pexit fork   main allocates and frees 1 MiB and starts a thread
 *                  that forks; the child keeps 3 MiB (a leak) and its
 *                  only thread returns: the child ends then, status 0.
 *                  The parent waits for it up to 20 s and prints "child:
 *                  exit N", or "child: still running" (then kills it). */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int late;

static void nap(long ms) {
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

static void *worker(void *arg) {
    (void)arg;
    if (late) nap(300);
    void *kept = NULL, *p = NULL;
    if (cudaMalloc(&kept, 1 << 20) != cudaSuccess || cudaMalloc(&p, 2 << 20) != cudaSuccess) return NULL;
    cudaFree(p);
    nap(200);
    puts("worker done");
    fflush(stdout);
    return NULL;
}

/* Every report after the main thread is gone: a failure's post-mortem,
 * then the exit's leak check. */
static void *failing_worker(void *arg) {
    (void)arg;
    nap(300);
    void *kept = NULL, *huge = NULL;
    cudaMalloc(&kept, 1 << 20);
    cudaMalloc(&huge, (size_t)1 << 40);
    return NULL;
}

/* The child's only thread is this one: its return ends the child. */
static void *forker(void *arg) {
    (void)arg;
    pid_t pid = fork();
    if (pid < 0) return NULL;
    if (pid == 0) {
        void *kept = NULL;
        cudaMalloc(&kept, 3 << 20);
        return NULL;
    }
    int status = 0;
    for (int waited = 0; waitpid(pid, &status, WNOHANG) == 0; waited += 10) {
        if (waited >= 20000) {
            puts("child: still running");
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return NULL;
        }
        nap(10);
    }
    printf("child: exit %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return NULL;
}

static int fork_from_a_thread(void) {
    void *p = NULL;
    if (cudaMalloc(&p, 1 << 20) != cudaSuccess) return 2;
    cudaFree(p);
    pthread_t t;
    if (pthread_create(&t, NULL, forker, NULL) != 0) return 2;
    pthread_join(t, NULL);
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "fork") == 0) return fork_from_a_thread();
    int oom = argc > 1 && strcmp(argv[1], "oom") == 0;
    late = argc > 1 && strcmp(argv[1], "late") == 0;
    void *kept = NULL;
    if (oom && cudaMalloc(&kept, 2 << 20) != cudaSuccess) return 2;
    pthread_t t;
    if (pthread_create(&t, NULL, oom ? failing_worker : worker, NULL) != 0) return 2;
    pthread_exit(NULL);
}
