/* t_symfds.c -- a program whose descriptors are watched while vramtrace
 * names its call sites (tests/integration/test_files.py).
 *
 * t_symfds N: after a first allocation and a first failure, a thread of
 * the program lists /proc/self/fd over and over until the main thread is
 * done, while the main thread fails N more allocations 1.1 s apart (1 TiB
 * each: each out-of-memory failure writes a post-mortem, whose frames are
 * named then). A descriptor that
 * is not the listing's own is held when it is open to the same file, at
 * the same number, in every listing over a stretch in which the main
 * thread (the one that names the frames) ran 2 ms of CPU or more: counted
 * once a stretch, when its number is below 700 (where a program's own
 * open() would have got it) and when it is not close-on-exec (a child the
 * program starts would inherit it). A descriptor opened and moved away at
 * once takes microseconds of the main thread's CPU, however long the
 * thread waits for a CPU meanwhile (counted by listings, a busy machine's
 * preemption made one held); libdwfl's files stayed open through a whole
 * session, tens of milliseconds of it. Prints the counts, then the
 * first held descriptor's number and file. */
#include <cuda_runtime_api.h>
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_FDS 64

struct open_fd {
    int fd, cloexec;
    char file[256];
    long long since; /* the main thread's CPU time when first seen, ns */
    int counted;
};

static volatile int stop;
static int rounds, held_low, held_inheritable;
static char first_held[300];
static clockid_t main_clock;

/* The main thread's CPU time, ns. */
static long long main_cpu(void) {
    struct timespec ts;
    clock_gettime(main_clock, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* The descriptors open now (3 and up) but the listing's own. */
static int list_fds(struct open_fd *out) {
    DIR *d = opendir("/proc/self/fd");
    if (!d) return 0;
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) && n < MAX_FDS;) {
        int fd = atoi(e->d_name);
        if (fd < 3 || fd == dirfd(d)) continue;
        char link[64];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t k = readlink(link, out[n].file, sizeof out[n].file - 1);
        int flags = fcntl(fd, F_GETFD);
        if (k <= 0 || flags < 0) continue; /* closed meanwhile */
        out[n].file[k] = '\0';
        out[n].fd = fd;
        out[n].cloexec = (flags & FD_CLOEXEC) != 0;
        n++;
    }
    closedir(d);
    return n;
}

static void *watch(void *arg) {
    (void)arg;
    struct open_fd prev[MAX_FDS], now[MAX_FDS];
    int nprev = 0;
    while (!stop) {
        long long before = main_cpu();
        int n = list_fds(now);
        long long after = main_cpu();
        for (int i = 0; i < n; i++) {
            now[i].since = after;
            now[i].counted = 0;
            for (int j = 0; j < nprev; j++)
                if (now[i].fd == prev[j].fd && strcmp(now[i].file, prev[j].file) == 0) {
                    now[i].since = prev[j].since;
                    now[i].counted = prev[j].counted;
                }
            /* CPU the main thread ran while this was surely open: from
             * the end of the listing it was first seen in to the start
             * of this one. */
            if (now[i].counted || before - now[i].since < 2000000) continue;
            now[i].counted = 1;
            held_low += now[i].fd < 700;
            held_inheritable += !now[i].cloexec;
            if ((now[i].fd < 700 || !now[i].cloexec) && !first_held[0])
                snprintf(first_held, sizeof first_held, "%d %s", now[i].fd, now[i].file);
        }
        memcpy(prev, now, sizeof now);
        nprev = n;
        __atomic_add_fetch(&rounds, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    void *p = NULL, *big = NULL;
    if (cudaMalloc(&p, 4096) != cudaSuccess) return 2;
    /* A first failure unwatched: its post-mortem loads libdw, whose files
     * the dynamic loader holds a while (close-on-exec, its own). */
    int failed = cudaMalloc(&big, (size_t)1 << 40) == cudaErrorMemoryAllocation;
    pthread_t t;
    if (pthread_getcpuclockid(pthread_self(), &main_clock) != 0) return 2;
    pthread_create(&t, NULL, watch, NULL);
    while (__atomic_load_n(&rounds, __ATOMIC_RELAXED) < 8) usleep(1000);
    for (int i = 0; i < atoi(argv[1]); i++) {
        usleep(1100000); /* past the post-mortems' pace of one a second */
        failed += cudaMalloc(&big, (size_t)1 << 40) == cudaErrorMemoryAllocation;
    }
    stop = 1;
    pthread_join(t, NULL);
    printf("out of memory %d; held below 700: %d; held not close-on-exec: %d\n", failed, held_low, held_inheritable);
    if (first_held[0]) printf("first held: %s\n", first_held);
    return cudaFree(p) == cudaSuccess ? 0 : 1;
}
