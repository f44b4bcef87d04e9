/* t_leaks.c -- known leaks for the leak check, growth detection and the
 * dump signal.
 *
 *   t_leaks          leaks: load_once 1 MiB, leaky_step 8 x 64 KiB (a
 *                    staircase), third_party_init 4 KiB; steady_step frees
 *                    what it takes
 *   t_leaks clean    frees everything
 *   t_leaks signal   also raises the dump signal twice mid-run */
#include <cuda_runtime_api.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void *load_once(void) {
    void *p = NULL;
    cudaMalloc(&p, 1 << 20);
    return p;
}

static void *leaky_step(void) {
    void *p = NULL;
    cudaMalloc(&p, 64 << 10);
    return p;
}

static void steady_step(void) {
    void *p = NULL;
    cudaMalloc(&p, 256 << 10);
    cudaFree(p);
}

static void *third_party_init(void) {
    void *p = NULL;
    cudaMalloc(&p, 4096);
    return p;
}

int main(int argc, char **argv) {
    int clean = argc > 1 && strcmp(argv[1], "clean") == 0;
    int sig = argc > 1 && strcmp(argv[1], "signal") == 0;
    void *kept[8];
    void *once = load_once();
    void *tp = third_party_init();
    for (int i = 0; i < 8; i++) {
        kept[i] = leaky_step();
        steady_step();
        usleep(5000);
        if (sig && (i == 2 || i == 5)) {
            raise(SIGUSR2);
            usleep(200000); /* let the watcher write the dump */
        }
    }
    if (clean) {
        for (int i = 0; i < 8; i++) cudaFree(kept[i]);
        cudaFree(once);
        cudaFree(tp);
    }
    printf("done\n");
    return 0;
}
