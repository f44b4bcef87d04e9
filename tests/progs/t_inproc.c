/* t_inproc.c -- what the in-process reports group and measure.
 *
 *   t_inproc STEP...   steps in order, each a word and a number:
 *
 *   routes N    site_alloc keeps 1 MiB N times, each time reached through
 *               a different stack (route's two call lines, nine levels
 *               deep: up to 512 stacks, one call site)
 *   other MIB   other_alloc keeps MIB MiB once
 *   grow N      grow_step keeps 4 MiB N times
 *   gap MS      later routes and grow steps sleep MS ms after each one
 *   fail MIB    failing_request asks for MIB MiB once
 *   failb N     failing_request asks for N bytes once
 *
 * Prints "done"; always exits 0. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MiB ((size_t)1 << 20)

static void site_alloc(size_t n) {
    void *p = NULL;
    cudaMalloc(&p, n);
}

/* The bits of `path` choose one of two call lines at each level, so that
 * every path is a stack of its own. */
static void route(unsigned path, int levels, size_t n) {
    if (levels == 0) {
        site_alloc(n);
        return;
    }
    if (path & 1)
        route(path >> 1, levels - 1, n);
    else
        route(path >> 1, levels - 1, n);
}

static void other_alloc(size_t n) {
    void *p = NULL;
    cudaMalloc(&p, n);
}

static void grow_step(size_t n) {
    void *p = NULL;
    cudaMalloc(&p, n);
}

static void failing_request(size_t n) {
    void *p = NULL;
    cudaMalloc(&p, n);
}

int main(int argc, char **argv) {
    useconds_t gap = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        int n = atoi(argv[i + 1]);
        if (strcmp(argv[i], "gap") == 0) {
            gap = (useconds_t)n * 1000;
        } else if (strcmp(argv[i], "routes") == 0) {
            for (int k = 0; k < n; k++) {
                route((unsigned)k, 9, MiB);
                if (gap) usleep(gap);
            }
        } else if (strcmp(argv[i], "other") == 0) {
            other_alloc((size_t)n * MiB);
        } else if (strcmp(argv[i], "grow") == 0) {
            for (int k = 0; k < n; k++) {
                grow_step(4 * MiB);
                if (gap) usleep(gap);
            }
        } else if (strcmp(argv[i], "fail") == 0) {
            failing_request((size_t)n * MiB);
        } else if (strcmp(argv[i], "failb") == 0) {
            failing_request((size_t)n);
        }
    }
    printf("done\n");
    return 0;
}
