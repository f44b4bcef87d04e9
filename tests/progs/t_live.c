/* t_live.c -- a program that allocates on command, for the live view's
 * tests: reads lines from stdin and answers each with "ok" on stdout.
 *   a BYTES           cudaMalloc BYTES (kept)
 *   m BYTES           cudaMallocManaged BYTES (kept, like a)
 *   h BYTES           cudaMallocHost BYTES (kept apart)
 *   f                 cudaFree the last one kept
 *   fh                cudaFreeHost the last host block kept
 *   o                 a request the device refuses (cudaMalloc of 1 PiB)
 *   leak N BYTES MS   N times: BYTES kept, then MS milliseconds
 *   loop N BYTES MS   N times: BYTES allocated, freed, then MS ms
 *   steps N BYTES MS  N times: BYTES kept, a step (vramtrace_step), MS ms
 *   steady N BYTES MS N times: BYTES allocated, a step, freed, MS ms
 *   sparse N K BYTES MS  N times: BYTES kept at every Kth, a step, MS ms
 *   dsteps N B0 B1 MS N times: B0 kept on device 0, B1 on device 1, a
 *                     step, MS ms (then device 0 is current)
 *   flat N MS         N times: a step, MS ms (nothing allocated)
 *   saw N K BYTES MS  N steps, each: BYTES kept, but at every Kth all
 *                     that saw kept freed instead; a step, MS ms
 *   drop              every allocation kept freed, then a step
 *   mixed N BIG K SMALL MS  N steps, each: BIG kept at site1 at once, then
 *                     K times SMALL kept at fanned0 and MS ms, then a step
 *   fork BYTES MS     a child keeps BYTES for MS milliseconds, then exits;
 *                     "child PID" first, "ok" once it has exited
 *   sites BYTES       k * BYTES kept at each of five call sites, site1 to
 *                     site5 (each its own function and line), at once
 *   fan N BYTES S     N times BYTES kept at one call site, fanned0 (S 0) or
 *                     fanned1 (S 1), each through its own stack (fan_in's
 *                     recursion 1 to N deep)
 *   q                 exit (what is kept stays live) */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../include/vramtrace.h"

static void *kept[100000], *hosts[64];
static int nkept, nhosts;

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void keep(unsigned long long bytes) {
    void *p = NULL;
    if (cudaMalloc(&p, bytes) == cudaSuccess && nkept < 100000) kept[nkept++] = p;
}

/* Five call sites, each a function of its own with its cudaMalloc on a
 * line of its own. */
#define SITE(k)                                                                                  \
    __attribute__((noinline)) static void site##k(unsigned long long b) {                        \
        void *p = NULL;                                                                          \
        if (cudaMalloc(&p, k * b) == cudaSuccess && nkept < 100000) kept[nkept++] = p;           \
    }
SITE(1)
SITE(2)
SITE(3)
SITE(4)
SITE(5)

/* One call site reached through many stacks (a line of Python reaches
 * its allocation through many native paths). */
#define FANNED(k)                                                                                \
    __attribute__((noinline)) static void fanned##k(unsigned long long b) {                      \
        void *p = NULL;                                                                          \
        if (cudaMalloc(&p, b) == cudaSuccess && nkept < 100000) kept[nkept++] = p;               \
    }
FANNED(0)
FANNED(1)

__attribute__((noinline)) static void fan_in(long depth, unsigned long long b, int site) {
    if (depth > 0) fan_in(depth - 1, b, site);
    else if (site) fanned1(b);
    else fanned0(b);
    __asm__ volatile("" ::: "memory"); /* not a tail call: each depth its own stack */
}

int main(void) {
    char line[256];
    struct vramtrace_api vt;
    vramtrace_load(&vt);
    setvbuf(stdout, NULL, _IOLBF, 0);
    while (fgets(line, sizeof line, stdin)) {
        unsigned long long bytes = 0, small = 0;
        long n = 0, ms = 0, every = 1;
        if (sscanf(line, "a %llu", &bytes) == 1) {
            keep(bytes);
        } else if (sscanf(line, "dev %ld", &n) == 1) {
            cudaSetDevice((int)n);
        } else if (sscanf(line, "sites %llu", &bytes) == 1) {
            site1(bytes);
            site2(bytes);
            site3(bytes);
            site4(bytes);
            site5(bytes);
        } else if (sscanf(line, "fan %ld %llu %ld", &n, &bytes, &ms) == 3) {
            for (long i = 0; i < n && i < 58; i++) fan_in(i, bytes, ms != 0);
        } else if (sscanf(line, "m %llu", &bytes) == 1) {
            void *p = NULL;
            if (cudaMallocManaged(&p, bytes, cudaMemAttachGlobal) == cudaSuccess && nkept < 100000) kept[nkept++] = p;
        } else if (sscanf(line, "h %llu", &bytes) == 1) {
            void *p = NULL;
            if (cudaMallocHost(&p, bytes) == cudaSuccess && nhosts < 64) hosts[nhosts++] = p;
        } else if (strcmp(line, "fh\n") == 0 && nhosts > 0) {
            cudaFreeHost(hosts[--nhosts]);
        } else if (strcmp(line, "f\n") == 0 && nkept > 0) {
            cudaFree(kept[--nkept]);
        } else if (strcmp(line, "o\n") == 0) {
            void *p;
            cudaMalloc(&p, 1ull << 50);
        } else if (sscanf(line, "leak %ld %llu %ld", &n, &bytes, &ms) == 3) {
            for (long i = 0; i < n; i++) {
                keep(bytes);
                sleep_ms(ms);
            }
        } else if (sscanf(line, "steps %ld %llu %ld", &n, &bytes, &ms) == 3) {
            for (long i = 0; i < n; i++) {
                keep(bytes);
                vt.step();
                sleep_ms(ms);
            }
        } else if (sscanf(line, "mixed %ld %llu %ld %llu %ld", &n, &bytes, &every, &small, &ms) == 5) {
            for (long i = 0; i < n; i++) {
                site1(bytes);
                for (long k = 0; k < every; k++) {
                    fanned0(small);
                    sleep_ms(ms);
                }
                vt.step();
            }
        } else if (sscanf(line, "dsteps %ld %llu %llu %ld", &n, &bytes, &small, &ms) == 4) {
            for (long i = 0; i < n; i++) {
                cudaSetDevice(0);
                keep(bytes);
                cudaSetDevice(1);
                keep(small);
                vt.step();
                sleep_ms(ms);
            }
            cudaSetDevice(0);
        } else if (sscanf(line, "flat %ld %ld", &n, &ms) == 2) {
            for (long i = 0; i < n; i++) {
                vt.step();
                sleep_ms(ms);
            }
        } else if (sscanf(line, "saw %ld %ld %llu %ld", &n, &every, &bytes, &ms) == 4) {
            int first = nkept;
            for (long i = 0; i < n; i++) {
                if (i % every == every - 1) {
                    while (nkept > first) cudaFree(kept[--nkept]);
                } else {
                    keep(bytes);
                }
                vt.step();
                sleep_ms(ms);
            }
        } else if (strcmp(line, "drop\n") == 0) {
            while (nkept > 0) cudaFree(kept[--nkept]);
            vt.step();
        } else if (sscanf(line, "sparse %ld %ld %llu %ld", &n, &every, &bytes, &ms) == 4) {
            for (long i = 0; i < n; i++) {
                if (i % every == 0) keep(bytes);
                vt.step();
                sleep_ms(ms);
            }
        } else if (sscanf(line, "steady %ld %llu %ld", &n, &bytes, &ms) == 3) {
            for (long i = 0; i < n; i++) {
                void *p = NULL;
                cudaMalloc(&p, bytes);
                vt.step();
                cudaFree(p);
                sleep_ms(ms);
            }
        } else if (sscanf(line, "loop %ld %llu %ld", &n, &bytes, &ms) == 3) {
            for (long i = 0; i < n; i++) {
                void *p = NULL;
                cudaMalloc(&p, bytes);
                cudaFree(p);
                sleep_ms(ms);
            }
        } else if (sscanf(line, "fork %llu %ld", &bytes, &ms) == 2) {
            pid_t c = fork();
            if (c == 0) {
                keep(bytes);
                sleep_ms(ms);
                exit(0);
            }
            printf("child %d\n", (int)c);
            int st;
            waitpid(c, &st, 0);
        } else if (strcmp(line, "q\n") == 0) {
            break;
        }
        printf("ok\n");
    }
    return 0;
}
