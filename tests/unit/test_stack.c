/* test_stack.c -- the stack walker against libunwind, frame for frame.
 *
 * tracker/stack.c, walker.c and cfi.c are linked in as a shared library
 * (its own frames are the ones a capture drops), and every capture here is
 * taken twice at the same place: by the walker (vt_stack_capture) and by
 * libunwind (vt_stack_capture_libunwind). The two must agree exactly below the
 * capturing function: same depth, same return addresses. And the CFI
 * decoder (tracker/cfi.c) on hand-made CIE/FDE bytes with known rules. */
#define _GNU_SOURCE
#include <alloca.h>
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../tracker/cfi.h"
#include "../../tracker/stack.h"
#include "check.h"

#define MAXF 256

/* Both captures, from one function: their innermost frames are two call
 * sites in here; everything below must be equal. */
__attribute__((noinline)) static int both(uintptr_t *a, int *na, uintptr_t *b, int *nb) {
    *na = vt_stack_capture(a, MAXF);
    *nb = vt_stack_capture_libunwind(b, MAXF);
    __asm__ volatile("" : : : "memory");
    return 0;
}

static int max_frames = MAXF;
__attribute__((noinline)) static int both_max(uintptr_t *a, int *na, uintptr_t *b, int *nb) {
    *na = vt_stack_capture(a, max_frames);
    *nb = vt_stack_capture_libunwind(b, max_frames);
    __asm__ volatile("" : : : "memory");
    return 0;
}

static int agree(const uintptr_t *a, int na, const uintptr_t *b, int nb) {
    if (na != nb || na < 2) {
        fprintf(stderr, "  depth: walker %d, libunwind %d\n", na, nb);
        return 0;
    }
    if ((a[0] < (uintptr_t)both || a[0] > (uintptr_t)both + 256) &&
        (a[0] < (uintptr_t)both_max || a[0] > (uintptr_t)both_max + 256)) {
        fprintf(stderr, "  frame 0 %#lx is not in the capturing function\n", (unsigned long)a[0]);
        return 0;
    }
    for (int i = 1; i < na; i++)
        if (a[i] != b[i]) {
            fprintf(stderr, "  frame %d: walker %#lx, libunwind %#lx\n", i, (unsigned long)a[i], (unsigned long)b[i]);
            return 0;
        }
    return 1;
}

typedef int (*capture_fn)(uintptr_t *, int *, uintptr_t *, int *);

__attribute__((noinline)) static int deep(capture_fn f, int d, uintptr_t *a, int *na, uintptr_t *b, int *nb) {
    if (d <= 0) return f(a, na, b, nb);
    int r = deep(f, d - 1, a, na, b, nb);
    __asm__ volatile("" : : : "memory");
    return r + 1;
}

/* rbp-based frames: a variable-length alloca makes the compiler address
 * the frame from rbp, whatever -fomit-frame-pointer says. */
__attribute__((noinline)) static int with_alloca(int n, uintptr_t *a, int *na, uintptr_t *b, int *nb) {
    volatile char *p = alloca((size_t)n * 16 + 8);
    p[0] = 1;
    if (n > 0) {
        int r = with_alloca(n - 1, a, na, b, nb);
        __asm__ volatile("" : : "r"(p) : "memory");
        return r + p[0];
    }
    return both(a, na, b, nb);
}

/* Two callers whose frames are alike (same size, same callee): the
 * callee's frame sits at the same address under either, so only the
 * return address into the caller tells them apart. */
__attribute__((noinline)) static int callee(uintptr_t *a, int *na, uintptr_t *b, int *nb) {
    int r = both(a, na, b, nb);
    __asm__ volatile("" : : : "memory");
    return r;
}
__attribute__((noinline)) static int caller_x(uintptr_t *a, int *na, uintptr_t *b, int *nb) {
    int r = callee(a, na, b, nb);
    __asm__ volatile("" : : : "memory");
    return r + 1;
}
__attribute__((noinline)) static int caller_y(uintptr_t *a, int *na, uintptr_t *b, int *nb) {
    int r = callee(a, na, b, nb);
    __asm__ volatile("" : : : "memory");
    return r + 2;
}

/* One call site for x and y: the callee is read from memory the compiler
 * cannot see through, so it cannot split the call in two. */
static capture_fn volatile callers[2] = {caller_x, caller_y};
__attribute__((noinline)) static int dispatch(int which, uintptr_t *a, int *na, uintptr_t *b, int *nb) {
    int r = callers[which & 1](a, na, b, nb);
    __asm__ volatile("" : : : "memory");
    return r;
}

static struct vt_stack_counts since(struct vt_stack_counts c0) {
    struct vt_stack_counts c = vt_stack_thread_counts();
    c.walks -= c0.walks;
    c.replays -= c0.replays;
    c.fallbacks -= c0.fallbacks;
    c.resumes -= c0.resumes;
    c.rejoins -= c0.rejoins;
    c.steps -= c0.steps;
    return c;
}

/* The walks, replays and fallbacks of this thread since c0, checked. */
#define CHECK_SINCE(c0, walks_, replays_, fallbacks_) \
    do {                                            \
        struct vt_stack_counts c_ = since(c0);      \
        CHECK_EQ(c_.walks, walks_);                 \
        CHECK_EQ(c_.replays, replays_);             \
        CHECK_EQ(c_.fallbacks, fallbacks_);         \
    } while (0)

static void test_depths(void) {
    uintptr_t a[MAXF], b[MAXF];
    int na, nb;
    struct vt_stack_counts c0 = vt_stack_thread_counts();
    for (int d = 0; d <= 60; d += 3) {
        deep(both, d, a, &na, b, &nb);
        CHECK(agree(a, na, b, nb));
        CHECK(na >= d + 3);
    }
    /* All walked (21 depths, each a new start), none handed to libunwind. */
    CHECK_SINCE(c0, 21, 0, 0);
}

/* The same place again and again (the replay), then places that differ in
 * turn (each walk must notice). */
static void test_repeat_and_alternate(void) {
    uintptr_t a[MAXF], b[MAXF], first[MAXF];
    int na, nb, nfirst = 0, ok = 1;
    struct vt_stack_counts c0 = vt_stack_thread_counts();
    for (int i = 0; i < 2000; i++) {
        deep(both, 20, a, &na, b, &nb);
        if (i == 0) { memcpy(first, a, sizeof a); nfirst = na; }
        ok &= agree(a, na, b, nb) && na == nfirst && memcmp(a + 1, first + 1, (size_t)(na - 1) * sizeof *a) == 0;
    }
    CHECK(ok);
    /* One walk, then replays. */
    CHECK_SINCE(c0, 1, 1999, 0);
    ok = 1;
    c0 = vt_stack_thread_counts();
    uintptr_t ax[MAXF], ay[MAXF];
    int nx = 0, ny = 0;
    for (int i = 0; i < 1000; i++) {
        dispatch(i, a, &na, b, &nb);
        __asm__ volatile("" : : : "memory");
        if (i == 0) { memcpy(ax, a, sizeof a); nx = na; }
        if (i == 1) { memcpy(ay, a, sizeof a); ny = na; }
        ok &= agree(a, na, b, nb);
    }
    CHECK(ok);
    /* The two differ in exactly one frame: the return address into x or y. */
    CHECK_EQ(nx, ny);
    int differ = 0;
    for (int i = 1; i < nx && i < ny; i++) differ += ax[i] != ay[i];
    CHECK_EQ(differ, 1);
    if (differ != 1) for (int i = 0; i < nx && i < 6; i++) fprintf(stderr, "  %d %lx %lx\n", i, (unsigned long)ax[i], (unsigned long)ay[i]);
    /* Every switch between x and y is noticed: no replay. */
    CHECK_SINCE(c0, 1000, 0, 0);
    /* And costs two frames: the walk resumes at callee's frame, whose
     * return address changed, steps from it and from caller_x or caller_y,
     * and meets the last walk again at dispatch's frame (same rsp, same
     * return address). Resuming one frame early would step three; one
     * frame late would return the last stack's caller. */
    /* (The counts are taken at every turn, from one call site: a capture
     * on the first turn differs from the last one of the loop above in its
     * caller, and a branch on the turn would let the compiler give the
     * first turns call sites of their own.) */
    static struct vt_stack_counts at[1001];
    for (int i = 0; i < 1001; i++) {
        at[i] = vt_stack_thread_counts();
        dispatch(i, a, &na, b, &nb);
        ok &= agree(a, na, b, nb);
    }
    CHECK(ok);
    CHECK_EQ(since(at[1]).steps, 2 * 1000);
    CHECK_EQ(since(at[1]).resumes, 1000);
    CHECK_EQ(since(at[1]).rejoins, 1000);
    ok = 1;
    for (int i = 0; i < 300; i++) {
        deep(both, i % 7, a, &na, b, &nb);
        ok &= agree(a, na, b, nb);
    }
    CHECK(ok);
}

static void test_alloca(void) {
    uintptr_t a[MAXF], b[MAXF];
    int na, nb, ok = 1;
    struct vt_stack_counts c0 = vt_stack_thread_counts();
    for (int n = 0; n < 12; n++) {
        for (int rep = 0; rep < 2; rep++) { /* walked, then replayed */
            with_alloca(n, a, &na, b, &nb);
            ok &= agree(a, na, b, nb);
        }
    }
    CHECK(ok);
    CHECK_SINCE(c0, 12, 12, 0);
}

/* Called with rbp holding whatever the caller put there. */
long rbp_clobber(long (*f)(void), long v);
static uintptr_t ca[MAXF], cb[MAXF];
static int cna, cnb;
__attribute__((noinline)) static long capture_here(void) {
    both(ca, &cna, cb, &cnb);
    return 0;
}

static void test_garbage_rbp(void) {
    /* rbp differs at every call and is saved in capture_here's frame: the
     * walk reads it but never uses it (no frame above is rbp-based), so the
     * replay must not depend on it. */
    struct vt_stack_counts c0 = vt_stack_thread_counts();
    int ok = 1;
    for (long i = 0; i < 500; i++) {
        rbp_clobber(capture_here, 0x1000 + i * 8);
        ok &= agree(ca, cna, cb, cnb);
    }
    CHECK(ok);
    CHECK_SINCE(c0, 1, 499, 0);
}

/* vt_stack_capture_since: VT_STACK_SAME only while the stack is the one
 * of the capture it names, and never after another stack was captured. */
static int since_rc;
static uint64_t since_serial;
__attribute__((noinline)) static int capture_since(uintptr_t *a, int *na, uintptr_t *b, int *nb) {
    (void)b;
    (void)nb;
    since_rc = vt_stack_capture_since(a, MAXF, since_serial);
    *na = since_rc;
    __asm__ volatile("" : : : "memory");
    return 0;
}

static void test_since(void) {
    uintptr_t a[MAXF], b[MAXF];
    int na, nb;
    /* One call site for every capture; the depth says which stack. */
    static const int depth[] = {6, 6, 6, 7, 6};
    int rc[5];
    uint64_t serial[5];
    since_serial = UINT64_MAX;
    for (int i = 0; i < 5; i++) {
        deep(capture_since, depth[i], a, &na, b, &nb);
        rc[i] = since_rc;
        serial[i] = vt_stack_serial();
        if (i == 0) since_serial = serial[0];
    }
    CHECK(rc[0] > 6);                 /* a walk: frames */
    CHECK_EQ(rc[1], VT_STACK_SAME);   /* the same stack as capture 0 */
    CHECK_EQ(rc[2], VT_STACK_SAME);
    CHECK(rc[3] > 7);                 /* another stack */
    CHECK(rc[4] > 6);                 /* back, but not "same": another was captured between */
    CHECK_EQ(serial[2], serial[0]);
    CHECK(serial[4] != serial[0]);
}

/* Many distinct stacks drawn at random, one after another, each compared
 * with libunwind's. A stack is a path of up to 300 frames, each made by one
 * of six kinds of function: two alike plain frame-pointer ones (frames of
 * one size, so that swapping one for the other changes a return address
 * and moves no frame), a larger frame, an alloca of a size the path
 * chooses (so that the frames below move), code without a frame pointer,
 * and a call through rbp_clobber (rbp holding a value that changes at
 * every call, read by the walk but never used). Paths are one trunk with a
 * few levels changed, or cut short, or drawn afresh; some are deeper than a
 * stack is kept, and some captures keep only a few frames. */
#define PATH_MAX_DEPTH 300
#define NSHAPES 6
typedef long shape_fn(const unsigned char *p, int d);
static shape_fn *volatile shapes[NSHAPES];
static uintptr_t pa[MAXF], pb[MAXF];
static int pna, pnb;
static long clobber_value = 0x5000;

static long shape_next(const unsigned char *p, int d) {
    if (d == 0) return both_max(pa, &pna, pb, &pnb);
    return shapes[p[d - 1] % NSHAPES](p, d - 1);
}
__attribute__((noinline)) static long shape_plain(const unsigned char *p, int d) {
    long r = shape_next(p, d);
    __asm__ volatile("" : : : "memory");
    return r + 1;
}
__attribute__((noinline)) static long shape_plain2(const unsigned char *p, int d) {
    long r = shape_next(p, d);
    __asm__ volatile("" : : : "memory");
    return r + 2;
}
__attribute__((noinline)) static long shape_big(const unsigned char *p, int d) {
    volatile char buf[200];
    buf[0] = (char)d;
    long r = shape_next(p, d);
    __asm__ volatile("" : : : "memory");
    return r + buf[0];
}
__attribute__((noinline)) static long shape_alloca(const unsigned char *p, int d) {
    volatile char *m = alloca((size_t)(p[d] / NSHAPES % 4) * 32 + 16);
    m[0] = 1;
    long r = shape_next(p, d);
    __asm__ volatile("" : : "r"(m) : "memory");
    return r + m[0];
}
__attribute__((noinline, optimize("omit-frame-pointer"))) static long shape_nofp(const unsigned char *p, int d) {
    volatile long x = d;
    long r = shape_next(p, d);
    __asm__ volatile("" : : : "memory");
    return r + x;
}
static const unsigned char *clobber_p;
static int clobber_d;
__attribute__((noinline)) static long shape_clobbered(void) { return shape_next(clobber_p, clobber_d); }
__attribute__((noinline)) static long shape_clobber(const unsigned char *p, int d) {
    clobber_p = p;
    clobber_d = d;
    long r = rbp_clobber(shape_clobbered, clobber_value += 8);
    __asm__ volatile("" : : : "memory");
    return r;
}
static shape_fn *volatile shapes[NSHAPES] = {shape_plain, shape_plain2, shape_big, shape_alloca, shape_nofp,
                                             shape_clobber};

static uint64_t test_rng = 0x9e3779b97f4a7c15ull;
static unsigned rnd(unsigned n) {
    test_rng ^= test_rng << 13;
    test_rng ^= test_rng >> 7;
    test_rng ^= test_rng << 17;
    return (unsigned)(test_rng >> 11) % n;
}

static void test_random_stacks(void) {
    enum { NPATHS = 48, CAPTURES = 6000 };
    static unsigned char trunk[PATH_MAX_DEPTH], path[NPATHS][PATH_MAX_DEPTH];
    static int depth[NPATHS];
    static const int depths[] = {9, 24, 270};
    for (int i = 0; i < PATH_MAX_DEPTH; i++) trunk[i] = (unsigned char)rnd(256);
    for (int k = 0; k < NPATHS; k++) {
        int d = depth[k] = rnd(4) ? depths[rnd(3)] : (int)rnd(PATH_MAX_DEPTH);
        /* The outermost frame is the path's last digit. */
        int fresh = !rnd(8);
        for (int t = 0; t < d; t++) path[k][d - 1 - t] = fresh ? (unsigned char)rnd(256) : trunk[t];
        /* A few levels changed: mostly one plain kind for the other (no
         * frame moves), sometimes any kind for any. */
        for (int m = 1 + (int)rnd(3); m > 0 && d > 0; m--) {
            int at = (int)rnd((unsigned)d), kind = path[k][at] % NSHAPES;
            int to = rnd(4) ? (kind < 2 ? 1 - kind : kind) : (int)rnd(NSHAPES);
            path[k][at] = (unsigned char)(path[k][at] / NSHAPES * NSHAPES + to);
        }
    }
    static const int maxes[] = {MAXF, MAXF, MAXF, MAXF, 6, 13, 40};
    struct vt_stack_counts c0 = vt_stack_thread_counts();
    int bad = 0, frames = 0;
    for (int n = 0; n < CAPTURES; n++) {
        int k = (int)rnd(NPATHS);
        max_frames = maxes[rnd(7)];
        shape_next(path[k], depth[k]);
        frames += pna;
        if (!agree(pa, pna, pb, pnb) && bad++ < 5)
            fprintf(stderr, "  capture %d: path %d of depth %d, max %d\n", n, k, depth[k], max_frames);
    }
    max_frames = MAXF;
    CHECK_EQ(bad, 0);
    struct vt_stack_counts c = since(c0);
    CHECK_EQ(c.fallbacks, 0);
    CHECK_EQ(c.walks + c.replays, CAPTURES);
    /* The captures went through every way: replayed, resumed, rejoined
     * (most walks here are of stacks that moved, and step every frame). */
    CHECK(c.replays > 50);
    CHECK(c.resumes > 100);
    CHECK(c.rejoins > 1000);
    CHECK(c.steps < (uint64_t)frames);
}

/* A capture libunwind took (on a signal's alternate stack) between two
 * walks of the same stack: the second is not "the same as the last", since
 * the last capture was the signal's. */
static uint64_t sig_serial;
static void on_signal_since(int sig) {
    (void)sig;
    uintptr_t a[MAXF];
    vt_stack_capture(a, MAXF);
    sig_serial = vt_stack_serial();
}

static uint64_t sig_fallbacks;
static void no_signal(void) {}
static void signal_between(void) {
    struct vt_stack_counts c0 = vt_stack_thread_counts();
    raise(SIGUSR2);
    sig_fallbacks = since(c0).fallbacks;
    since_serial = sig_serial;
}
static void (*volatile before_capture[3])(void) = {no_signal, no_signal, signal_between};

static void test_since_after_fallback(void) {
    uintptr_t a[MAXF], b[MAXF];
    int na, nb;
    static char altstack[1 << 16] __attribute__((aligned(16)));
    stack_t ss = {.ss_sp = altstack, .ss_size = sizeof altstack, .ss_flags = 0};
    sigaltstack(&ss, NULL);
    struct sigaction act;
    memset(&act, 0, sizeof act);
    act.sa_handler = on_signal_since;
    act.sa_flags = SA_ONSTACK;
    sigaction(SIGUSR2, &act, NULL);
    /* One call site for the three captures (a branch on the turn would let
     * the compiler give turns call sites of their own); each is passed the
     * serial of the capture before it, as the tracker's memo does. */
    int rc[3];
    since_serial = UINT64_MAX;
    for (int i = 0; i < 3; i++) {
        before_capture[i]();
        deep(capture_since, 6, a, &na, b, &nb);
        rc[i] = since_rc;
        since_serial = vt_stack_serial();
    }
    CHECK(rc[0] > 6);
    CHECK_EQ(rc[1], VT_STACK_SAME);
    CHECK_EQ(sig_fallbacks, 1);
    CHECK(rc[2] > 6);
    ss.ss_flags = SS_DISABLE;
    sigaltstack(&ss, NULL);
}

static void test_max(void) {
    uintptr_t a[MAXF], b[MAXF];
    int na, nb;
    max_frames = 5;
    deep(both_max, 30, a, &na, b, &nb);
    CHECK_EQ(na, 5);
    CHECK(agree(a, na, b, nb));
    max_frames = MAXF;
    /* Deeper than a stack is kept: both stop at the same frame. */
    deep(both_max, 300, a, &na, b, &nb);
    CHECK_EQ(na, MAXF);
    CHECK(agree(a, na, b, nb));
    deep(both_max, 300, a, &na, b, &nb);
    CHECK(agree(a, na, b, nb));
}

static void *thread_main(void *arg) {
    int d = (int)(intptr_t)arg;
    uintptr_t a[MAXF], b[MAXF];
    int na, nb, ok = 1;
    for (int i = 0; i < 500; i++) {
        deep(both, d + (i % 3), a, &na, b, &nb);
        ok &= agree(a, na, b, nb);
    }
    return (void *)(intptr_t)ok;
}

static void test_threads(void) {
    pthread_t t[4];
    for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, thread_main, (void *)(intptr_t)(5 * i));
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(t[i], &r);
        CHECK_EQ((intptr_t)r, 1);
    }
}

/* In a signal handler, on the thread's stack and on an alternate one: the
 * signal frame is not the walker's to read; the capture must still be
 * libunwind's, frame for frame. */
static uintptr_t sa[MAXF], sb[MAXF];
static int sna, snb;
static void on_signal(int sig) { (void)sig; both(sa, &sna, sb, &snb); }

static void test_signals(void) {
    struct sigaction act;
    memset(&act, 0, sizeof act);
    act.sa_handler = on_signal;
    sigaction(SIGUSR1, &act, NULL);
    struct vt_stack_counts c0 = vt_stack_thread_counts();
    raise(SIGUSR1);
    CHECK(agree(sa, sna, sb, snb));
    CHECK(sna > 3);
    CHECK_EQ(since(c0).fallbacks, 1);

    /* A static buffer: a malloc'd one that the test forgot would be
     * reported by LeakSanitizer whenever no stale copy of its address
     * happened to remain on the stack. */
    static char altstack[1 << 16] __attribute__((aligned(16)));
    stack_t ss;
    ss.ss_sp = altstack;
    ss.ss_size = sizeof altstack;
    ss.ss_flags = 0;
    sigaltstack(&ss, NULL);
    act.sa_flags = SA_ONSTACK;
    sigaction(SIGUSR2, &act, NULL);
    c0 = vt_stack_thread_counts();
    raise(SIGUSR2);
    CHECK(agree(sa, sna, sb, snb));
    CHECK(sna > 3);
    CHECK_EQ(since(c0).fallbacks, 1);
    ss.ss_flags = SS_DISABLE;
    sigaltstack(&ss, NULL);
}

/* Code loaded after the walker started, then unloaded and loaded again. */
static void test_dlopen(const char *plugin) {
    typedef int (*pcall)(capture_fn, uintptr_t *, int *, uintptr_t *, int *, int);
    uintptr_t a[MAXF], b[MAXF];
    int na, nb;
    uint64_t fallbacks0 = vt_stack_thread_counts().fallbacks;
    for (int round = 0; round < 3; round++) {
        void *h = dlopen(plugin, RTLD_NOW);
        CHECK(h != NULL);
        if (!h) { fprintf(stderr, "  %s\n", dlerror()); return; }
        pcall f = (pcall)dlsym(h, "plugin_call");
        f(both, a, &na, b, &nb, 4 + round);
        CHECK(agree(a, na, b, nb));
        f(both, a, &na, b, &nb, 4 + round);
        CHECK(agree(a, na, b, nb));
        Dl_info info;
        CHECK(dladdr((void *)a[1], &info) && strstr(info.dli_fname, "stack_plugin"));
        CHECK_EQ(vt_stack_thread_counts().fallbacks, fallbacks0);
        dlclose(h);
        vt_stack_forget(); /* what vramtrace's dlclose does */
    }
}

/* cbplug1.so is loaded, called through, unloaded; cbplug2.so, the same
 * code with a bigger frame, is loaded where it was. The walker must use
 * cbplug2's rules: with cbplug1's it would misread the frame (and give the
 * stack to libunwind, or worse). */
static uintptr_t rf[MAXF];
static int nrf;
__attribute__((noinline)) static void capture_cb(void) {
    nrf = vt_stack_capture(rf, MAXF);
    __asm__ volatile("" : : : "memory");
}

__attribute__((noinline)) static int call_plugin(void (*plug_call)(void (*)(void))) {
    plug_call(capture_cb);
    __asm__ volatile("" : : : "memory");
    return 0;
}

static void test_reload_other_code(const char *dir) {
    char p1[4200], p2[4200];
    snprintf(p1, sizeof p1, "%s/libcbplug1.so", dir);
    snprintf(p2, sizeof p2, "%s/libcbplug2.so", dir);
    void *base = NULL;
    for (int round = 0; round < 2; round++) {
        void *h = dlopen(round ? p2 : p1, RTLD_NOW | RTLD_LOCAL);
        CHECK(h != NULL);
        if (!h) return;
        void (*pc)(void (*)(void)) = (void (*)(void (*)(void)))dlsym(h, "plug_call");
        Dl_info info;
        dladdr((void *)pc, &info);
        if (round == 0) base = info.dli_fbase;
        else if (info.dli_fbase != base) printf("  (cbplug2 loaded elsewhere: a weaker test)\n");
        uint64_t fb0 = vt_stack_thread_counts().fallbacks;
        for (int i = 0; i < 3; i++) call_plugin(pc);
        /* capture_cb <- plug_call <- call_plugin, walked, not handed over */
        CHECK_EQ(vt_stack_thread_counts().fallbacks, fb0);
        CHECK(nrf > 3);
        CHECK(rf[1] > (uintptr_t)pc && rf[1] < (uintptr_t)pc + 32);
        CHECK(rf[2] > (uintptr_t)call_plugin && rf[2] < (uintptr_t)call_plugin + 64);
        dlclose(h);
        vt_stack_forget(); /* what vramtrace's dlclose does */
    }
}

/* The same reload seen by a thread that walked cbplug1's frames before the
 * unload and did not unload it itself: the rules that thread keeps (its
 * cache by return address) must go with the code too. The helper walks
 * through the plugin when told to (1), the main thread swaps the plugin
 * meanwhile, and the helper walks again (2). */
static void (*volatile other_pc)(void (*)(void));
static int other_step, other_done, other_bad;
static pthread_mutex_t other_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t other_cond = PTHREAD_COND_INITIALIZER;

static void *reload_other_thread(void *arg) {
    (void)arg;
    for (int want = 1; want <= 2; want++) {
        pthread_mutex_lock(&other_lock);
        while (other_step < want) pthread_cond_wait(&other_cond, &other_lock);
        pthread_mutex_unlock(&other_lock);
        uint64_t fb0 = vt_stack_thread_counts().fallbacks;
        for (int i = 0; i < 3; i++) call_plugin(other_pc);
        if (vt_stack_thread_counts().fallbacks != fb0) other_bad |= want;
        if (!(nrf > 3 && rf[1] > (uintptr_t)other_pc && rf[1] < (uintptr_t)other_pc + 32 &&
              rf[2] > (uintptr_t)call_plugin && rf[2] < (uintptr_t)call_plugin + 64))
            other_bad |= 4 * want;
        pthread_mutex_lock(&other_lock);
        other_done = want;
        pthread_cond_broadcast(&other_cond);
        pthread_mutex_unlock(&other_lock);
    }
    return NULL;
}

static void other_go(int step) {
    pthread_mutex_lock(&other_lock);
    other_step = step;
    pthread_cond_broadcast(&other_cond);
    while (other_done < step) pthread_cond_wait(&other_cond, &other_lock);
    pthread_mutex_unlock(&other_lock);
}

static void test_reload_other_code_other_thread(const char *dir) {
    char p1[4200], p2[4200];
    snprintf(p1, sizeof p1, "%s/libcbplug1.so", dir);
    snprintf(p2, sizeof p2, "%s/libcbplug2.so", dir);
    pthread_t t;
    pthread_create(&t, NULL, reload_other_thread, NULL);
    void *base = NULL;
    for (int round = 0; round < 2; round++) {
        void *h = dlopen(round ? p2 : p1, RTLD_NOW | RTLD_LOCAL);
        CHECK(h != NULL);
        if (!h) break;
        other_pc = (void (*)(void (*)(void)))dlsym(h, "plug_call");
        Dl_info info;
        dladdr((void *)other_pc, &info);
        if (round == 0) base = info.dli_fbase;
        else if (info.dli_fbase != base) printf("  (cbplug2 loaded elsewhere: a weaker test)\n");
        other_go(round + 1);
        dlclose(h);
        vt_stack_forget();
    }
    pthread_join(t, NULL);
    CHECK_EQ(other_bad, 0);
}

static void test_fork(void) {
    uintptr_t a[MAXF], b[MAXF];
    int na, nb;
    vt_stack_fork_prepare();
    pid_t p = fork();
    if (p == 0) {
        vt_stack_fork_done();
        deep(both, 9, a, &na, b, &nb);
        _exit(agree(a, na, b, nb) ? 0 : 1);
    }
    vt_stack_fork_done();
    int st = 0;
    waitpid(p, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* ---- the CFI decoder, on hand-made .eh_frame bytes ----------------------
 *
 * A CIE (version 1, no augmentation, so FDE addresses are 8-byte absolute;
 * code alignment 1, data alignment -8, return address column 16) whose
 * program says what every x86-64 function starts with: CFA = rsp + 8, the
 * return address at CFA - 8. Each FDE after it covers [PC0, PC0 + 0x40). */
#define PC0 0x401000u

struct cfi_buf {
    uint8_t b[512];
    size_t n;
};

static void put(struct cfi_buf *c, const uint8_t *bytes, size_t n) {
    memcpy(c->b + c->n, bytes, n);
    c->n += n;
}

static void put32(struct cfi_buf *c, uint32_t v) { put(c, (const uint8_t *)&v, 4); }
static void put64(struct cfi_buf *c, uint64_t v) { put(c, (const uint8_t *)&v, 8); }

/* The CIE at offset 0; returns the buffer ready for FDEs. */
static void cfi_cie(struct cfi_buf *c) {
    static const uint8_t body[] = {
        0, 0, 0, 0,       /* CIE id */
        1, 0,             /* version, augmentation "" */
        1, 0x78, 16,      /* code align 1, data align -8, ra column 16 */
        0x0c, 7, 8,       /* DW_CFA_def_cfa rsp, 8 */
        0x90, 1,          /* DW_CFA_offset r16, 1 * -8 */
        0, 0,             /* DW_CFA_nop, to a multiple of 4 */
    };
    c->n = 0;
    put32(c, sizeof body);
    put(c, body, sizeof body);
}

/* An FDE for [PC0, PC0 + 0x40) with program `insns`; returns its offset. */
static size_t cfi_fde(struct cfi_buf *c, const uint8_t *insns, size_t n) {
    size_t at = c->n;
    put32(c, (uint32_t)(4 + 8 + 8 + n));
    put32(c, (uint32_t)(c->n)); /* back from this field to the CIE at 0 */
    put64(c, PC0);
    put64(c, 0x40);
    put(c, insns, n);
    return at;
}

static void check_rule(struct vt_rule r, int flags, int cfa_off, int bp_off) {
    CHECK_EQ(r.flags, flags);
    CHECK_EQ(r.known, 1);
    CHECK_EQ((int64_t)r.cfa_off, (int64_t)cfa_off);
    CHECK_EQ((int64_t)r.bp_off, (int64_t)bp_off);
}

/* push rbp; mov rsp, rbp; ...: the rule row by row, and outside the range. */
static void test_cfi_frame_pointer_prologue(void) {
    static const uint8_t prog[] = {
        0x41,       /* advance 1 */
        0x0e, 16,   /* def_cfa_offset 16 */
        0x86, 2,    /* offset r6, 2 * -8 */
        0x43,       /* advance 3 */
        0x0d, 6,    /* def_cfa_register rbp */
    };
    struct cfi_buf c;
    cfi_cie(&c);
    const uint8_t *fde = c.b + cfi_fde(&c, prog, sizeof prog);
    check_rule(vt_cfi_rule(fde, PC0), 0, 8, 0);
    check_rule(vt_cfi_rule(fde, PC0 + 1), VT_RULE_BP_SAVED, 16, -16);
    check_rule(vt_cfi_rule(fde, PC0 + 3), VT_RULE_BP_SAVED, 16, -16);
    check_rule(vt_cfi_rule(fde, PC0 + 4), VT_RULE_CFA_BP | VT_RULE_BP_SAVED, 16, -16);
    check_rule(vt_cfi_rule(fde, PC0 + 0x3f), VT_RULE_CFA_BP | VT_RULE_BP_SAVED, 16, -16);
    CHECK_EQ(vt_cfi_rule(fde, PC0 + 0x40).flags, VT_RULE_OTHER);
    CHECK_EQ(vt_cfi_rule(fde, PC0 - 1).flags, VT_RULE_OTHER);
}

/* remember_state / restore_state bring the whole row back, the CFA too;
 * restore (r6) goes back to the CIE's rule for rbp (unchanged). */
static void test_cfi_remember_restore(void) {
    static const uint8_t prog[] = {
        0x41, 0x0e, 16, 0x86, 2, /* at +1: CFA rsp+16, rbp at -16 */
        0x0a,                    /* remember_state */
        0x42, 0x0e, 48,          /* at +3: CFA rsp+48 */
        0x42, 0x0b,              /* at +5: restore_state */
        0x42, 0xc6,              /* at +7: restore r6 */
    };
    struct cfi_buf c;
    cfi_cie(&c);
    const uint8_t *fde = c.b + cfi_fde(&c, prog, sizeof prog);
    check_rule(vt_cfi_rule(fde, PC0 + 2), VT_RULE_BP_SAVED, 16, -16);
    check_rule(vt_cfi_rule(fde, PC0 + 4), VT_RULE_BP_SAVED, 48, -16);
    check_rule(vt_cfi_rule(fde, PC0 + 5), VT_RULE_BP_SAVED, 16, -16);
    check_rule(vt_cfi_rule(fde, PC0 + 7), 0, 16, 0);
}

/* The outermost frame, a CFA expression, a register kept in another
 * register, a truncated FDE. */
static void test_cfi_end_and_other(void) {
    struct cfi_buf c;
    static const uint8_t undef_ra[] = {0x07, 16};
    cfi_cie(&c);
    const uint8_t *fde = c.b + cfi_fde(&c, undef_ra, sizeof undef_ra);
    CHECK_EQ(vt_cfi_rule(fde, PC0 + 8).flags, VT_RULE_END);

    static const uint8_t cfa_expr[] = {0x41, 0x0f, 2, 0x77, 0x08}; /* def_cfa_expression: breg7 +8 */
    cfi_cie(&c);
    fde = c.b + cfi_fde(&c, cfa_expr, sizeof cfa_expr);
    check_rule(vt_cfi_rule(fde, PC0), 0, 8, 0);
    CHECK_EQ(vt_cfi_rule(fde, PC0 + 1).flags, VT_RULE_OTHER);

    static const uint8_t bp_in_reg[] = {0x09, 6, 3}; /* register r6 in r3 */
    cfi_cie(&c);
    fde = c.b + cfi_fde(&c, bp_in_reg, sizeof bp_in_reg);
    CHECK_EQ(vt_cfi_rule(fde, PC0).flags, VT_RULE_OTHER);

    static const uint8_t bad_op[] = {0x41, 0x3f}; /* an opcode no compiler emits */
    cfi_cie(&c);
    fde = c.b + cfi_fde(&c, bad_op, sizeof bad_op);
    CHECK_EQ(vt_cfi_rule(fde, PC0 + 1).flags, VT_RULE_OTHER);

    static const uint8_t cut[] = {0x41, 0x0e}; /* an operand past the FDE's end */
    cfi_cie(&c);
    fde = c.b + cfi_fde(&c, cut, sizeof cut);
    CHECK_EQ(vt_cfi_rule(fde, PC0 + 1).flags, VT_RULE_OTHER);
}

/* The .eh_frame_hdr search table: version 1, eh_frame_ptr pcrel sdata4,
 * count udata4, table datarel sdata4 of (start, FDE) pairs, sorted. */
static void test_cfi_find_fde(void) {
    static uint8_t hdr[64] __attribute__((aligned(8)));
    const uint8_t head[] = {1, 0x1b, 0x03, 0x3b};
    memcpy(hdr, head, 4);
    int32_t words[] = {0, 2, 0x100, 40, 0x200, 48};
    memcpy(hdr + 4, words, sizeof words);
    uintptr_t h = (uintptr_t)hdr;
    CHECK(vt_cfi_find_fde(hdr, h + 0x150) == hdr + 40);
    CHECK(vt_cfi_find_fde(hdr, h + 0x100) == hdr + 40);
    CHECK(vt_cfi_find_fde(hdr, h + 0x1ff) == hdr + 40);
    CHECK(vt_cfi_find_fde(hdr, h + 0x200) == hdr + 48);
    CHECK(vt_cfi_find_fde(hdr, h + 0x9000) == hdr + 48);
    CHECK(vt_cfi_find_fde(hdr, h + 0x50) == NULL);
    hdr[3] = 0x1b; /* a table encoding linkers do not write */
    CHECK(vt_cfi_find_fde(hdr, h + 0x150) == NULL);
}

int main(int argc, char **argv) {
    (void)argc;
    test_cfi_frame_pointer_prologue();
    test_cfi_remember_restore();
    test_cfi_end_and_other();
    test_cfi_find_fde();
    vt_stack_init(VT_STACK_WALKER);
    test_depths();
    test_repeat_and_alternate();
    test_alloca();
    test_garbage_rbp();
    test_since();
    test_since_after_fallback();
    test_random_stacks();
    test_max();
    test_threads();
    test_signals();
    char plugin[4096];
    snprintf(plugin, sizeof plugin, "%s", argv[0]);
    char *slash = strrchr(plugin, '/');
    snprintf(slash ? slash + 1 : plugin, sizeof plugin - (size_t)(slash ? slash + 1 - plugin : 0), "libstack_plugin.so");
    test_dlopen(plugin);
    *(slash ? slash + 1 : plugin) = '\0';
    test_reload_other_code(slash ? plugin : ".");
    test_reload_other_code_other_thread(slash ? plugin : ".");
    test_fork();
    return check_report("stack");
}
