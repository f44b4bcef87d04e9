/* t_exitwait.c -- the exit comes while a dump asked for by signal is still
 * being written: N allocations of 4 KiB kept (over 64 call sites, so that
 * the dump is some hundreds of kilobytes), the dump signal raised, then,
 * once the file GO exists (the test makes it when the dump's writing has
 * begun), "exiting" and exit(STATUS) with the allocations still live.
 * Usage: t_exitwait N GO STATUS */
#include <cuda_runtime_api.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define SITE(k) static __attribute__((noinline)) void *site##k(void) { void *p = NULL; cudaMalloc(&p, 4096); return p; }
#define SITES8(k) SITE(k##0) SITE(k##1) SITE(k##2) SITE(k##3) SITE(k##4) SITE(k##5) SITE(k##6) SITE(k##7)
SITES8(1) SITES8(2) SITES8(3) SITES8(4) SITES8(5) SITES8(6) SITES8(7) SITES8(8)
#define NAME8(k) site##k##0, site##k##1, site##k##2, site##k##3, site##k##4, site##k##5, site##k##6, site##k##7
static void *(*const sites[64])(void) = {NAME8(1), NAME8(2), NAME8(3), NAME8(4), NAME8(5), NAME8(6), NAME8(7), NAME8(8)};

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: t_exitwait N GO STATUS\n");
        return 2;
    }
    long n = atol(argv[1]);
    for (long i = 0; i < n; i++)
        if (!sites[i % 64]()) {
            fprintf(stderr, "allocation %ld failed\n", i);
            return 2;
        }
    raise(SIGUSR2);
    /* Up to a minute for the test to say the dump is being written. */
    for (int i = 0; i < 6000 && access(argv[2], F_OK) != 0; i++) {
        struct timespec ms = {0, 10 * 1000000};
        nanosleep(&ms, NULL);
    }
    printf("exiting\n");
    fflush(stdout);
    exit(atoi(argv[3]));
}
