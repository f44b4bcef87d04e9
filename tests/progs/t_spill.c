/* t_spill.c -- a live list long enough to spill, for
 * tests/integration/test_dumpmem.py.
 *
 *   t_spill N
 *
 * Two threads, one after the other (the same run after run, each with a
 * table of its own), each make N allocations of (1 + (i * 7919) % 7) x 512
 * bytes (sizes that tie: the list's order rests on its tie-breaks) and free
 * every fifth; then one named dump ("spill"). Prints "path P" and "spill_fds F":
 * the descriptors the process holds on files that have no name (a
 * temporary file left open) after the dump. */
#include <cuda_runtime_api.h>
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../include/vramtrace.h"

static long n;

static void *allocate(void *arg) {
    (void)arg;
    for (long i = 0; i < n; i++) {
        void *p = NULL;
        if (cudaMalloc(&p, (size_t)(1 + (i * 7919) % 7) * 512) != cudaSuccess) break;
        if (i % 5 == 4) cudaFree(p);
    }
    return NULL;
}

/* Descriptors on files without a name: O_TMPFILE's ("/dir/#123 (deleted)")
 * and unlinked ones ("... (deleted)"). */
static int nameless_fds(void) {
    int k = 0;
    DIR *d = opendir("/proc/self/fd");
    for (struct dirent *e; d && (e = readdir(d));) {
        char link[4096 + 64], target[4096];
        snprintf(link, sizeof link, "/proc/self/fd/%s", e->d_name);
        ssize_t len = readlink(link, target, sizeof target - 1);
        if (len <= 0) continue;
        target[len] = '\0';
        k += strstr(target, "(deleted)") != NULL;
    }
    if (d) closedir(d);
    return k;
}

int main(int argc, char **argv) {
    n = argc > 1 ? atol(argv[1]) : 1000;
    struct vramtrace_api vt;
    vramtrace_load(&vt);
    void *warm = NULL;
    cudaMalloc(&warm, 1 << 20);
    pthread_t t;
    pthread_create(&t, NULL, allocate, NULL);
    pthread_join(t, NULL);
    allocate(NULL);
    char path[4096] = "";
    int rc = vt.dump ? vt.dump("spill", path, sizeof path) : -1;
    printf("path %s rc %d\nspill_fds %d\n", path, rc, nameless_fds());
    return 0;
}
