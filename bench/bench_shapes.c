/* bench_shapes.c -- the loops of the benchmarks' other shapes: many distinct
 * stacks, millions live, frees across threads, the runtime over the driver.
 *
 *   bench_shapes stacks cuda|cudart|malloc NSTACKS N [cold]
 *       N allocate+free pairs at depth 20, each from one of NSTACKS distinct
 *       stacks drawn at random (after an untimed pass over every stack once,
 *       and as many pairs again, unless "cold"); prints "ns_per_pair X"
 *   bench_shapes maxcall N
 *       N allocations kept, each call timed (wall and thread CPU time);
 *       prints "max_call_us X at N over_1ms K max_cpu_us ...", and the
 *       timed thread's context switches (waits of its own, preemptions);
 *       each 256 bytes, or with BENCH_VARIED=SEED (not 0) sizes of 256 B to 64 KiB
 *       drawn from SEED (addresses of uneven spacing, which hash into runs
 *       that fixed sizes never make: the live table's move then ends with
 *       its last old entries all taken)
 *   bench_shapes dumpwait N [STACKS]
 *       N allocations kept by the main thread (from STACKS distinct stacks
 *       in turn, 1 by default), which then allocates and
 *       frees, each call timed by the wall clock, while another thread
 *       writes one named dump (vramtrace_dump; VRAMTRACE_OUT must name a
 *       file), or without vramtrace keeps a CPU busy for BENCH_BUSY_S
 *       (0.5 s: the machine's own noise); prints "dump_wait_max_us X
 *       at_ms T calls K over_1ms M blocked_over_1ms B blocked_max_us W
 *       dump_s D": of the calls made while the dump ran, the slowest
 *       and when it began (ms after the dump began), how many there were
 *       and how many took over 1 ms; of those, how many gave up the CPU of
 *       their own accord (a voluntary context switch: they slept on a lock
 *       of the tracker's, where one only preempted waited for the machine)
 *       and the slowest of them; the dump's wall time. Under the library
 *       built with the lock probe (build/probe/libvramtrace.so), also the
 *       longest holds of a slot's lock and of the global lock in the
 *       dump's window, by the holder's CPU time, and where each was taken,
 *       and what the longest and the heaviest holds did (the probe's counts,
 *       slot_did_* and global_did_*). BENCH_CONTROL=K adds after each pair
 *       a section of K empty loop turns, timed by the thread's CPU clock as
 *       the probe times a hold: "control_max_us X control_mean_us M
 *       control_over_1ms C" are the machine's own (no work of the tracker's
 *       in it: what the host's stalls charge to a thread as its CPU time).
 *       BENCH_TOUCH=K adds, every K-th pair, the first write to a page
 *       never touched (of a 1 GiB mapping, small pages), timed the same way:
 *       "touch_max_us X touch_over_1ms C touches T" are what one page
 *       fault costs the thread on this machine while the dump runs (the
 *       tracker's tables and lists take such faults as they grow).
 *       BENCH_SETTLE=K makes K more pairs before the dump begins (a table
 *       that grew while the N were kept has then finished its move)
 *   bench_shapes xfree same|cross THREADS N
 *       THREADS threads each allocate N in batches of 1024 and pass a batch
 *       to the next thread round; each batch is freed by the next thread
 *       (cross) or by the thread itself (same); prints "pairs_per_sec X
 *       work_ns_per_pair W": W is the threads' CPU time inside the batches'
 *       calls a pair (their waits for each other and the scheduler's turns
 *       left out: what the calls themselves cost)
 *   bench_shapes manythreads THREADS N NSTACKS
 *       THREADS threads started together (a barrier), each keeping N
 *       allocations made over NSTACKS stacks of its own (THREADS x NSTACKS
 *       distinct stacks in all, 2^20 at most), then freeing them in
 *       reverse; each call timed by the thread's CPU clock and the wall
 *       clock, the smaller of the two counted (see call_timed): prints
 *       "alloc_max_us X alloc_over_1ms K free_max_us Y
 *       free_over_1ms L total_s T rss_kb R"
 *   bench_shapes keep N NSTACKS
 *       N allocations of 256 bytes kept, made over NSTACKS distinct stacks
 *       in turn (the first NSTACKS of them each a new stack), by one
 *       thread; prints "rss_kb R rss_before_kb B alloc_s T": resident
 *       memory with all N live and before the first (with and without
 *       vramtrace, the difference over N is what a live allocation costs
 *       the process, its stack's share included)
 *   bench_shapes marks N NSTACKS
 *       The C API's leak report of a mark, as a test runner asks for it at
 *       every test, in a process that has made NSTACKS distinct stacks (a
 *       pair on each): N times, a mark, one allocation kept from one of
 *       those stacks, vramtrace_leaks of the mark, the free, the mark's
 *       end; and a report of a mark with nothing live. Prints
 *       "leaks_ms_one X leaks_ms_none Y": the mean wall time of a report
 *   bench_shapes firstcall THREADS N
 *       After one pair of the main thread's (vramtrace's start), THREADS
 *       threads started together (a barrier), each then making N
 *       allocate+free pairs; each thread's first call timed by the wall
 *       clock (its thread's start in the tracker): prints "first_max_us X
 *       first_over_1ms K first_median_us M"
 *
 * The distinct stacks: ten levels of calls, each made from one of four
 * functions (a digit of the stack's number picks which), below ten levels of
 * plain recursion, so stacks share their callers as real programs' do. */
#define _GNU_SOURCE
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>

#include "../include/vramtrace.h"
#include "bench_util.h"

enum { CUDA, CUDART, MALLOC };
static int api;

/* Set by dumpwait over many stacks and by each of manythreads' threads:
 * pair() allocates and keeps (and with call_times, times the call by the
 * thread's CPU clock into it). */
static __thread CUdeviceptr *keep_to;
static __thread long nkept;
static __thread struct call_times *call_times;
static void call_timed(struct call_times *t, double cpu, double wall);
static double cpu_now(void);

__attribute__((noinline)) static long pair(void) {
    if (keep_to) {
        double c = call_times ? cpu_now() : 0, w = call_times ? now() : 0;
        cuMemAlloc(&keep_to[nkept], 256);
        if (call_times) call_timed(call_times, cpu_now() - c, now() - w);
        return (long)(keep_to[nkept++] & 1);
    }
    if (api == MALLOC) {
        void *p = malloc(256);
        __asm__ volatile("" : : "r"(p) : "memory");
        free(p);
        return (long)((unsigned long)p & 1);
    }
    if (api == CUDART) {
        void *p;
        cudaMalloc(&p, 256);
        cudaFree(p);
        return (long)((unsigned long)p & 1);
    }
    CUdeviceptr p;
    cuMemAlloc(&p, 256);
    cuMemFree(p);
    return (long)(p & 1);
}

#define STACKS_LEAF() pair()
#include "stacks.h"

static unsigned long long rng = 88172645463325252ull;
static unsigned next_rand(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (unsigned)(rng >> 11);
}

static int stacks_main(int argc, char **argv) {
    api = strcmp(argv[2], "malloc") == 0 ? MALLOC : strcmp(argv[2], "cudart") == 0 ? CUDART : CUDA;
    unsigned nstacks = (unsigned)atol(argv[3]);
    long n = atol(argv[4]);
    if (nstacks < 1) nstacks = 1;
    long sum = 0;
    if (!(argc > 5 && strcmp(argv[5], "cold") == 0)) {
        for (unsigned i = 0; i < nstacks; i++) sum += deep(10, i);
        for (long i = 0; i < n; i++) sum += deep(10, next_rand() % nstacks);
    }
    double t0 = now();
    for (long i = 0; i < n; i++) sum += deep(10, next_rand() % nstacks);
    double dt = now() - t0;
    printf("ns_per_pair %.1f rss_kb %ld sum %ld\n", dt * 1e9 / (double)n, rss_kb(), sum & 1);
    return 0;
}

static double cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Each call timed by the wall clock and by this thread's CPU time: on a
 * shared machine the wall clock's slowest call is the scheduler's, the CPU
 * time's is the call's own work (page faults included). */
static int maxcall_main(char **argv) {
    long n = atol(argv[2]);
    double worst = 0, worst_cpu = 0, t0 = now();
    long at = 0, at_cpu = 0, over = 0, over_cpu = 0;
    const char *varied = getenv("BENCH_VARIED");
    uint64_t x = varied ? strtoull(varied, NULL, 10) : 0;
    for (long i = 0; i < n; i++) {
        CUdeviceptr p;
        size_t bytes = 256;
        if (x) {   /* xorshift64 */
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            bytes = 256 + (size_t)(x % 65536);
        }
        double c = cpu_now(), a = now();
        cuMemAlloc(&p, bytes);
        double d = now() - a, dc = cpu_now() - c;
        if (d > worst) { worst = d; at = i; }
        if (dc > worst_cpu) { worst_cpu = dc; at_cpu = i; }
        if (d > 1e-3) over++;
        if (dc > 1e-3) over_cpu++;
    }
    struct rusage ru;
    getrusage(RUSAGE_THREAD, &ru); /* the timed thread's own, not the live publisher's sleeps */
    printf("max_call_us %.1f at %ld over_1ms %ld max_cpu_us %.1f at_cpu %ld over_1ms_cpu %ld total_s %.3f rss_kb %ld "
           "switches_waited %ld switches_preempted %ld\n",
           worst * 1e6, at, over, worst_cpu * 1e6, at_cpu, over_cpu, now() - t0, rss_kb(), ru.ru_nvcsw, ru.ru_nivcsw);
    return 0;
}

/* ---- a call's wait while a dump is taken -------------------------------- */

/* The lock probe's window (a build with tracker/lockprobe.h's probe:
 * build/probe/libvramtrace.so), found by dlsym; NULL in other builds. */
static void (*probe_reset)(void);
static double (*probe_longest)(int kind, unsigned long long *nholds, const char **where);
static const char *(*probe_did)(int kind); /* what the longest hold did: "name value" pairs */

static volatile int dump_done;
static double dump_wall;
static volatile double dump_start;

static void *dump_thread(void *arg) {
    struct vramtrace_api *vt = arg;
    char path[4096];
    struct timespec pause = {0, 20 * 1000 * 1000}; /* the timed loop under way first */
    nanosleep(&pause, NULL);
    if (probe_reset) probe_reset();
    double t = now();
    dump_start = t;
    if (vt->active()) {
        vt->dump("dumpwait", path, sizeof path);
    } else {
        /* Without vramtrace: a CPU kept busy as long (BENCH_BUSY_S, 0.5 s
         * by default), the machine's own slowest call beside such a thread. */
        const char *busy = getenv("BENCH_BUSY_S");
        double until = t + (busy ? atof(busy) : 0.5);
        for (volatile unsigned long x = 0; now() < until; x++) continue;
    }
    dump_wall = now() - t;
    __atomic_store_n(&dump_done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static int dumpwait_main(int argc, char **argv) {
    long n = atol(argv[2]);
    unsigned nstacks = argc > 3 ? (unsigned)atol(argv[3]) : 1;
    CUdeviceptr *kept = malloc((size_t)(n > 0 ? n : 1) * sizeof *kept);
    if (nstacks > 1) { /* from that many distinct stacks, in turn */
        keep_to = kept;
        for (long i = 0; i < n; i++) deep(10, (unsigned)(i % nstacks));
        keep_to = NULL;
    } else {
        for (long i = 0; i < n; i++) cuMemAlloc(&kept[i], 256);
    }
    /* BENCH_SETTLE pairs first (0 by default): a live table that grew
     * while the N were kept has finished moving its old array by then. */
    const char *settle = getenv("BENCH_SETTLE");
    for (long i = 0, k = settle ? atol(settle) : 0; i < k; i++) {
        CUdeviceptr p;
        cuMemAlloc(&p, 256);
        cuMemFree(p);
    }
    struct vramtrace_api vt;
    vramtrace_load(&vt);
    probe_reset = (void (*)(void))dlsym(RTLD_DEFAULT, "vramtrace_probe_reset");
    probe_longest = (double (*)(int, unsigned long long *, const char **))dlsym(RTLD_DEFAULT, "vramtrace_probe_longest");
    probe_did = (const char *(*)(int))dlsym(RTLD_DEFAULT, "vramtrace_probe_did");
    const char *control_env = getenv("BENCH_CONTROL");
    long control = control_env ? atol(control_env) : 0;
    double control_max = 0, control_sum = 0;
    long control_n = 0, control_over = 0;
    const char *touch_env = getenv("BENCH_TOUCH");
    long touch = touch_env ? atol(touch_env) : 0, touches = 0, touch_over = 0, pairs_during = 0;
    double touch_max = 0;
    size_t touch_len = (size_t)1 << 30;
    char *fresh = touch > 0 ? mmap(NULL, touch_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                                   -1, 0) : MAP_FAILED;
    if (fresh != MAP_FAILED) madvise(fresh, touch_len, MADV_NOHUGEPAGE);
    pthread_t t;
    pthread_create(&t, NULL, dump_thread, &vt);
    double worst = 0, worst_at = 0, worst_blocked = 0;
    long calls = 0, over = 0, over_blocked = 0;
    while (!__atomic_load_n(&dump_done, __ATOMIC_ACQUIRE)) {
        CUdeviceptr p;
        int during = dump_start != 0;
        struct rusage r0, r1;
        if (during) getrusage(RUSAGE_THREAD, &r0);
        double a = now();
        cuMemAlloc(&p, 256);
        double b = now();
        cuMemFree(p);
        double c = now();
        if (!during) continue;
        if (control > 0) { /* the control: fixed work, timed as a hold is */
            double c0 = cpu_now();
            for (volatile long k = 0; k < control; k++) continue;
            double c1 = cpu_now() - c0;
            control_sum += c1, control_n++;
            control_over += c1 > 1e-3;
            if (c1 > control_max) control_max = c1;
        }
        if (fresh != MAP_FAILED && ++pairs_during % touch == 0 && (size_t)touches * 4096 < touch_len) {
            double c0 = cpu_now();
            fresh[(size_t)touches++ * 4096] = 1;
            double c1 = cpu_now() - c0;
            touch_over += c1 > 1e-3;
            if (c1 > touch_max) touch_max = c1;
        }
        double d = b - a > c - b ? b - a : c - b;
        if (d > worst) worst = d, worst_at = (b - a > c - b ? a : b) - dump_start;
        over += (b - a > 1e-3) + (c - b > 1e-3);
        calls += 2;
        /* A slow pair whose thread gave up its CPU of its own accord (a
         * voluntary switch: nothing in this loop sleeps but a lock of the
         * tracker's) waited for the tracker; one only preempted waited for
         * the machine. */
        if (d > 1e-3 && getrusage(RUSAGE_THREAD, &r1) == 0 && r1.ru_nvcsw > r0.ru_nvcsw) {
            over_blocked += (b - a > 1e-3) + (c - b > 1e-3);
            if (d > worst_blocked) worst_blocked = d;
        }
    }
    pthread_join(t, NULL);
    printf("dump_wait_max_us %.1f at_ms %.1f calls %ld over_1ms %ld blocked_over_1ms %ld blocked_max_us %.1f "
           "dump_s %.3f", worst * 1e6, worst_at * 1e3, calls, over, over_blocked, worst_blocked * 1e6, dump_wall);
    if (control > 0)
        printf(" control_max_us %.1f control_mean_us %.3f control_over_1ms %ld control_sections %ld", control_max * 1e6,
               control_n ? control_sum / (double)control_n * 1e6 : 0, control_over, control_n);
    if (fresh != MAP_FAILED)
        printf(" touch_max_us %.1f touch_over_1ms %ld touches %ld", touch_max * 1e6, touch_over, touches);
    if (probe_longest) {
        unsigned long long ns, ng;
        const char *ws = NULL, *wg = NULL;
        double s = probe_longest(0, &ns, &ws), g = probe_longest(1, &ng, &wg);
        printf(" slot_hold_max_us %.1f slot_holds %llu slot_hold_at %s global_hold_max_us %.1f global_holds %llu "
               "global_hold_at %s", s, ns, ws ? ws : "-", g, ng, wg ? wg : "-");
        if (probe_did) { /* each count prefixed: slot_did_chunks 3 ... */
            for (int k = 0; k < 3; k++) {
                const char *kind_name[] = {"slot", "global", "handover"};
                char buf[1024];
                snprintf(buf, sizeof buf, "%s", probe_did(k));
                for (char *w = strtok(buf, " "), *v; w && (v = strtok(NULL, " ")); w = strtok(NULL, " "))
                    printf(" %s_did_%s %s", kind_name[k], w, v);
            }
        }
    }
    printf("\n");
    return 0;
}

/* ---- frees across threads ---------------------------------------------- */

#define BATCH 1024
#define QCAP 4
struct queue {
    CUdeviceptr b[QCAP][BATCH];
    unsigned long head, tail; /* head: pushed, tail: popped */
} __attribute__((aligned(64)));
static struct queue *queues;
static int nthreads, cross;
static long per_thread, work_ns;

static void wait_a_little(int *spins) {
    if (++*spins > 64) sched_yield();
    else __asm__ volatile("pause");
}

/* Both ways pass a batch to the next thread round and wait for one from
 * the one before, so that they wait alike: "cross" frees the batch it
 * got, "same" frees its own and passes an empty token. */
static void *xfree_thread(void *arg) {
    int i = (int)(long)arg;
    struct queue *out = &queues[(i + 1) % nthreads], *in = &queues[i];
    CUdeviceptr own[BATCH];
    double work = 0; /* CPU time in the batches' calls */
    for (long done = 0; done < per_thread; done += BATCH) {
        int spins = 0;
        while (__atomic_load_n(&out->head, __ATOMIC_ACQUIRE) - __atomic_load_n(&out->tail, __ATOMIC_ACQUIRE) >= QCAP)
            wait_a_little(&spins);
        CUdeviceptr *b = cross ? out->b[out->head % QCAP] : own;
        double c0 = cpu_now();
        for (int k = 0; k < BATCH; k++) cuMemAlloc(&b[k], 256);
        work += cpu_now() - c0;
        __atomic_store_n(&out->head, out->head + 1, __ATOMIC_RELEASE);
        spins = 0;
        while (__atomic_load_n(&in->head, __ATOMIC_ACQUIRE) == __atomic_load_n(&in->tail, __ATOMIC_RELAXED))
            wait_a_little(&spins);
        CUdeviceptr *f = cross ? in->b[in->tail % QCAP] : own;
        c0 = cpu_now();
        for (int k = 0; k < BATCH; k++) cuMemFree(f[k]);
        work += cpu_now() - c0;
        __atomic_store_n(&in->tail, in->tail + 1, __ATOMIC_RELEASE);
    }
    __atomic_fetch_add(&work_ns, (long)(work * 1e9), __ATOMIC_RELAXED);
    return NULL;
}

static int xfree_main(char **argv) {
    cross = strcmp(argv[2], "cross") == 0;
    nthreads = atoi(argv[3]);
    per_thread = atol(argv[4]);
    if (nthreads < 1 || nthreads > 64) nthreads = 1;
    queues = aligned_alloc(64, sizeof *queues * (size_t)nthreads);
    memset(queues, 0, sizeof *queues * (size_t)nthreads);
    pthread_t t[64];
    double t0 = now();
    for (int i = 0; i < nthreads; i++) pthread_create(&t[i], NULL, xfree_thread, (void *)(long)i);
    for (int i = 0; i < nthreads; i++) pthread_join(t[i], NULL);
    double dt = now() - t0;
    printf("pairs_per_sec %.0f work_ns_per_pair %.1f\n", (double)per_thread * nthreads / dt,
           (double)work_ns / ((double)per_thread * nthreads));
    return 0;
}

/* ---- many threads, each allocating over its own stacks ------------------ */

struct call_times {
    double worst;
    long over; /* calls over 1 ms */
};

/* A call took `cpu` of its thread's CPU time and `wall` by the clock: its
 * own work was no more than either. The wall clock counts the scheduler's
 * turns (256 threads on a few CPUs), and on a virtual machine the thread's
 * CPU clock now and then jumps by milliseconds within a call of a few
 * microseconds by the wall clock (seen here: 2,147 us of CPU time in 4 us):
 * the smaller of the two is the call's. */
static void call_timed(struct call_times *t, double cpu, double wall) {
    double took = cpu < wall ? cpu : wall;
    if (took > t->worst) t->worst = took;
    if (took > 1e-3) t->over++;
}

static long many_n;
static unsigned many_stacks;
static pthread_barrier_t many_barrier;
static struct call_times *many_alloc, *many_free;

static void *many_thread(void *arg) {
    long me = (long)arg;
    keep_to = malloc(sizeof *keep_to * (size_t)many_n);
    pthread_barrier_wait(&many_barrier);
    call_times = &many_alloc[me];
    long sum = 0;
    for (long i = 0; i < many_n; i++) sum += deep(10, (unsigned)(me * many_stacks + (unsigned)(i % many_stacks)));
    call_times = NULL;
    for (long i = many_n - 1; i >= 0; i--) {
        double c = cpu_now(), w = now();
        cuMemFree(keep_to[i]);
        call_timed(&many_free[me], cpu_now() - c, now() - w);
    }
    free(keep_to);
    keep_to = NULL;
    return (void *)(sum & 1);
}

static int keep_main(char **argv) {
    long n = atol(argv[2]);
    unsigned nstacks = (unsigned)atol(argv[3]);
    if (n < 1 || nstacks < 1) return 2;
    keep_to = malloc(sizeof *keep_to * (size_t)n);
    if (!keep_to) return 1;
    memset(keep_to, 0, sizeof *keep_to * (size_t)n); /* its pages counted before */
    long before = rss_kb(), sum = 0;
    double t0 = now();
    for (long i = 0; i < n; i++) sum += deep(10, (unsigned)(i % nstacks));
    printf("rss_kb %ld rss_before_kb %ld alloc_s %.3f sum %ld\n", rss_kb(), before, now() - t0, sum & 1);
    return 0;
}

static int marks_main(char **argv) {
    long n = atol(argv[2]);
    unsigned nstacks = (unsigned)atol(argv[3]);
    struct vramtrace_api vt;
    if (n < 1 || nstacks < 1 || !vramtrace_load(&vt)) return 2;
    long sum = 0;
    for (unsigned i = 0; i < nstacks; i++) sum += deep(10, i);
    static char report[65536];
    CUdeviceptr kept[1];
    double one = 0, none = 0;
    for (long i = 0; i < n; i++) {
        int m = vt.mark();
        keep_to = kept;
        nkept = 0;
        sum += deep(10, (unsigned)(i % nstacks));
        keep_to = NULL;
        double t0 = now();
        if (vt.leaks(m, report, sizeof report) <= 0) return 3;
        one += now() - t0;
        cuMemFree(kept[0]);
        vt.mark_end(m);
        m = vt.mark();
        t0 = now();
        if (vt.leaks(m, report, sizeof report) != 0) return 3;
        none += now() - t0;
        vt.mark_end(m);
    }
    printf("leaks_ms_one %.3f leaks_ms_none %.3f sum %ld\n", one / n * 1e3, none / n * 1e3, sum & 1);
    return 0;
}

static int manythreads_main(char **argv) {
    int nthreads = atoi(argv[2]);
    many_n = atol(argv[3]);
    many_stacks = (unsigned)atol(argv[4]);
    if (nthreads < 1 || nthreads > 4096 || many_n < 1 || many_stacks < 1 ||
        (unsigned long long)nthreads * many_stacks > (1ull << 20))
        return 2;
    pthread_t *t = calloc((size_t)nthreads, sizeof *t);
    many_alloc = calloc((size_t)nthreads, sizeof *many_alloc);
    many_free = calloc((size_t)nthreads, sizeof *many_free);
    pthread_barrier_init(&many_barrier, NULL, (unsigned)nthreads);
    double t0 = now();
    for (long i = 0; i < nthreads; i++) pthread_create(&t[i], NULL, many_thread, (void *)i);
    for (int i = 0; i < nthreads; i++) pthread_join(t[i], NULL);
    double dt = now() - t0;
    struct call_times a = {0, 0}, f = {0, 0};
    for (int i = 0; i < nthreads; i++) {
        if (many_alloc[i].worst > a.worst) a.worst = many_alloc[i].worst;
        if (many_free[i].worst > f.worst) f.worst = many_free[i].worst;
        a.over += many_alloc[i].over;
        f.over += many_free[i].over;
    }
    printf("alloc_max_us %.1f alloc_over_1ms %ld free_max_us %.1f free_over_1ms %ld total_s %.3f rss_kb %ld\n",
           a.worst * 1e6, a.over, f.worst * 1e6, f.over, dt, rss_kb());
    return 0;
}

/* ---- each thread's first call, threads started together ---------------- */

static pthread_barrier_t first_barrier;
static long first_pairs;
static double *first_took;

static void *first_thread(void *arg) {
    long me = (long)arg;
    pthread_barrier_wait(&first_barrier);
    CUdeviceptr p;
    double a = now();
    cuMemAlloc(&p, 256);
    first_took[me] = now() - a;
    cuMemFree(p);
    for (long i = 1; i < first_pairs; i++) {
        cuMemAlloc(&p, 256);
        cuMemFree(p);
    }
    return NULL;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int firstcall_main(char **argv) {
    int nthreads = atoi(argv[2]);
    first_pairs = atol(argv[3]);
    if (nthreads < 1 || nthreads > 4096 || first_pairs < 1) return 2;
    pthread_t *t = calloc((size_t)nthreads, sizeof *t);
    first_took = calloc((size_t)nthreads, sizeof *first_took);
    pthread_barrier_init(&first_barrier, NULL, (unsigned)nthreads);
    CUdeviceptr p; /* the process's first allocation (vramtrace's start) before the threads' */
    cuMemAlloc(&p, 256);
    cuMemFree(p);
    for (long i = 0; i < nthreads; i++) pthread_create(&t[i], NULL, first_thread, (void *)i);
    for (int i = 0; i < nthreads; i++) pthread_join(t[i], NULL);
    qsort(first_took, (size_t)nthreads, sizeof *first_took, by_value);
    int over = 0;
    for (int i = 0; i < nthreads; i++) over += first_took[i] > 1e-3;
    printf("first_max_us %.1f first_over_1ms %d first_median_us %.1f\n", first_took[nthreads - 1] * 1e6, over,
           first_took[nthreads / 2] * 1e6);
    return 0;
}

int main(int argc, char **argv) {
    cuInit(0);
    if (argc >= 4 && strcmp(argv[1], "firstcall") == 0) return firstcall_main(argv);
    if (argc >= 5 && strcmp(argv[1], "stacks") == 0) return stacks_main(argc, argv);
    if (argc >= 3 && strcmp(argv[1], "maxcall") == 0) return maxcall_main(argv);
    if (argc >= 5 && strcmp(argv[1], "xfree") == 0) return xfree_main(argv);
    if (argc >= 3 && strcmp(argv[1], "dumpwait") == 0) return dumpwait_main(argc, argv);
    if (argc >= 5 && strcmp(argv[1], "manythreads") == 0) return manythreads_main(argv);
    if (argc >= 4 && strcmp(argv[1], "keep") == 0) return keep_main(argv);
    if (argc >= 4 && strcmp(argv[1], "marks") == 0) return marks_main(argv);
    fprintf(stderr, "usage: see bench_shapes.c\n");
    return 2;
}
