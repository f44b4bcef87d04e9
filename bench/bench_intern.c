/* bench_intern.c -- the slowest single interning of a new stack, up to
 * millions of distinct stacks.
 *
 *   bench_intern N
 *       N distinct stacks of depth 21 interned one after another, each
 *       through vt_tracker_stack_id (the call a hook makes once its capture
 *       differs from the last), each call timed by the wall clock and by
 *       this thread's CPU time; then every stack looked up again (a hit,
 *       without the lock). Prints "max_call_us X at I over_1ms K
 *       max_cpu_us X at_cpu I over_1ms_cpu K ns_per_new X ns_per_hit X
 *       rss_kb X", the tables made and the most stacks one call moved, and
 *       the first eight calls over 0.2 ms of CPU time with their indexes.
 *
 * Linked straight to the tracker's sources (as the unit tests are), so it
 * needs no program that really has millions of call paths: the stacks are
 * made as return-address arrays, ten fixed outer frames (a recursion's)
 * and eleven levels below them, each one of four call sites picked by a
 * base-4 digit of the stack's number, so that stacks share their callers
 * as a program's do (4^11 = 4,194,304 distinct stacks at most).
 * Instructions per new stack, with its share of the tables' growth: run
 *   valgrind --tool=callgrind --toggle-collect=vt_tracker_stack_id \
 *       build/bench/bench_intern N nohits
 * ("nohits": no look-up pass) at N and at N / 2, and divide the difference
 * of the totals by N / 2. Exits 1 if a stack did not get the id of its
 * number (ids are handed out in the order stacks are first seen). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../tracker/tracker.h"
#include "../tracker/intern.h"
#include "bench_util.h"

#define OUTER 10
#define LEVELS 11
#define DEPTH (OUTER + LEVELS)

/* Stack `i`, innermost first: level 0 (innermost) takes the lowest digit. */
static void make_stack(uintptr_t *f, unsigned i) {
    for (int l = 0; l < LEVELS; l++, i >>= 2) f[l] = 0x401000 + 0x1000 * (uintptr_t)l + 0x40 * (uintptr_t)(i & 3);
    for (int k = 0; k < OUTER; k++) f[LEVELS + k] = 0x500000 + 0x20 * (uintptr_t)k;
}

static double cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    int hits = !(argc > 2 && strcmp(argv[2], "nohits") == 0);
    if (n < 1 || n > (1l << (2 * LEVELS))) {
        fprintf(stderr, "usage: bench_intern N [nohits] (N from 1 to %ld)\n", 1l << (2 * LEVELS));
        return 2;
    }
    vt_tracker_init(64, 16);
    uintptr_t f[DEPTH];
    double worst = 0, worst_cpu = 0, t0 = now(), c0 = cpu_now();
    long at = 0, at_cpu = 0, over = 0, over_cpu = 0, bad = 0, slow_at[8];
    double slow_us[8];
    int nslow = 0;
    for (long i = 0; i < n; i++) {
        make_stack(f, (unsigned)i);
        double c = cpu_now(), a = now();
        uint32_t id = vt_tracker_stack_id(f, DEPTH);
        double d = now() - a, dc = cpu_now() - c;
        bad += id != (uint32_t)i;
        if (d > worst) { worst = d; at = i; }
        if (dc > worst_cpu) { worst_cpu = dc; at_cpu = i; }
        if (dc > 2e-4 && nslow < 8) { slow_us[nslow] = dc * 1e6; slow_at[nslow++] = i; }
        if (d > 1e-3) over++;
        if (dc > 1e-3) over_cpu++;
    }
    double per_new = (cpu_now() - c0) / (double)n, t1 = now();
    double per_hit = 0;
    if (hits) {
        double h0 = cpu_now();
        for (long i = 0; i < n; i++) {
            make_stack(f, (unsigned)i);
            bad += vt_tracker_stack_id(f, DEPTH) != (uint32_t)i;
        }
        per_hit = (cpu_now() - h0) / (double)n;
    }
    /* per_new includes the two clocks read around each call. */
    printf("max_call_us %.1f at %ld over_1ms %ld max_cpu_us %.1f at_cpu %ld over_1ms_cpu %ld ns_per_new %.0f "
           "ns_per_hit %.0f total_s %.3f rss_kb %ld wrong_ids %ld\n",
           worst * 1e6, at, over, worst_cpu * 1e6, at_cpu, over_cpu, per_new * 1e9, per_hit * 1e9, t1 - t0, rss_kb(),
           bad);
    struct vt_intern_stats st;
    pthread_mutex_lock(&vt_tracker_lock);
    vt_intern_stats(&st);
    pthread_mutex_unlock(&vt_tracker_lock);
    printf("tables %zu most_moved_in_a_call %zu\n", st.growths, st.moved_most);
    /* The first calls over 0.2 ms of CPU time, to tell a pattern (a growth
     * at a power of two) from the machine's noise. */
    for (int k = 0; k < nslow; k++) printf("slow_call_cpu_us %.1f at %ld\n", slow_us[k], slow_at[k]);
    return bad != 0;
}
