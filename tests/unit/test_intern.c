/* test_intern.c -- interned stacks, looked up without the lock.
 *
 * Same stack, same id; stacks that share their callers, or are the callers
 * of others, each get their own id, in the order first seen; and random
 * stacks (random depths over a few return addresses, so that many share
 * callers and the table grows twice) are checked against a plain list of
 * the stacks seen, by one thread and by four at once. The table's growth
 * through several doublings: no call moves more than VT_INTERN_STEP
 * stacks, and every stack keeps its id and frames and is found without
 * the lock during and after each move, by one thread and by eight
 * interning and looking up at once. Frames of code that left the process
 * (departed.h): keyed by the library that was there when their stack was
 * interned. Built twice: with
 * the real hash under TSan, and with one that makes every stack collide
 * with a quarter of the others (VT_INTERN_COLLIDE). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../../report/symbolize.h"
#include "../../tracker/departed.h"
#include "../../tracker/intern.h"
#include "../../tracker/tracker.h"
#include "check.h"

/* The frames of stack `id`, from the tracker's table (as report/ reads them). */
static int frames_are(uint32_t id, const uintptr_t *frames, int depth) {
    pthread_mutex_lock(&vt_tracker_lock);
    int ok = id < vt_stacks.n && (int)vt_stacks.list[id]->depth == depth && vt_stacks.list[id]->id == id &&
             memcmp(vt_stacks.list[id]->frames, frames, (size_t)depth * sizeof *frames) == 0;
    pthread_mutex_unlock(&vt_tracker_lock);
    return ok;
}

static void test_known_paths(void) {
    /* Innermost first: a <- b <- c, where c is the outermost frame. */
    const uintptr_t abc[] = {0xa, 0xb, 0xc}, dbc[] = {0xd, 0xb, 0xc}, bc[] = {0xb, 0xc}, abx[] = {0xa, 0xb, 0xe};
    uint32_t s1 = vt_tracker_stack_id(abc, 3);
    CHECK_EQ(s1, 0);
    CHECK_EQ(vt_tracker_stack_id(abc, 3), s1);
    /* Shares b <- c: a stack of its own. */
    uint32_t s2 = vt_tracker_stack_id(dbc, 3);
    CHECK_EQ(s2, 1);
    /* A stack that is the callers of others: its own id. */
    uint32_t s3 = vt_tracker_stack_id(bc, 2);
    CHECK_EQ(s3, 2);
    /* Same inner frames under another outermost one: its own id. */
    uint32_t s4 = vt_tracker_stack_id(abx, 3);
    CHECK_EQ(s4, 3);
    /* Back and forth: the memo's compare from the outer end, each depth. */
    CHECK_EQ(vt_tracker_stack_id(abc, 3), s1);
    CHECK_EQ(vt_tracker_stack_id(bc, 2), s3);
    CHECK_EQ(vt_tracker_stack_id(dbc, 3), s2);
    CHECK_EQ(vt_tracker_stack_id(abx, 3), s4);
    CHECK_EQ(vt_tracker_stack_id(bc, 2), s3);
    CHECK_EQ(vt_tracker_stack_id(abc, 3), s1);
    /* The empty stack is the root's. */
    uint32_t s5 = vt_tracker_stack_id(abc, 0);
    CHECK_EQ(s5, 4);
    CHECK(frames_are(s1, abc, 3) && frames_are(s2, dbc, 3) && frames_are(s3, bc, 2) && frames_are(s4, abx, 3));
    CHECK(frames_are(s5, abc, 0));
    /* vt_intern (under the lock, no memo) finds the same ids. */
    pthread_mutex_lock(&vt_tracker_lock);
    uint32_t again = vt_intern(dbc, 3, 0);
    pthread_mutex_unlock(&vt_tracker_lock);
    CHECK_EQ(again, s2);
    /* A forked child starts an empty table. */
    vt_tracker_reset_child();
    CHECK_EQ(vt_tracker_stack_id(dbc, 3), 0);
    CHECK_EQ(vt_tracker_stack_id(abc, 3), 1);
    vt_tracker_reset_child();
}

/* Random stacks over a small set of return addresses, by seed. */
#define RMAX 24
#define RSTACKS 3000
struct rstack {
    int depth;
    uintptr_t f[RMAX];
};

static unsigned long long next(unsigned long long *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* RSTACKS stacks sharing outer frames as programs' do: a common base of
 * random length, then random frames from eight addresses. */
static void make_stacks(struct rstack *st, unsigned long long seed) {
    for (int i = 0; i < RSTACKS; i++) {
        st[i].depth = (int)(next(&seed) % (RMAX + 1));
        int base = (int)(next(&seed) % (RMAX + 1));
        for (int k = 0; k < st[i].depth; k++) {
            int from_out = st[i].depth - 1 - k;
            st[i].f[k] = from_out < base ? 0x1000 + (uintptr_t)from_out : 0x2000 + (uintptr_t)(next(&seed) % 8);
        }
    }
}

static int same(const struct rstack *a, const struct rstack *b) {
    return a->depth == b->depth && memcmp(a->f, b->f, (size_t)a->depth * sizeof a->f[0]) == 0;
}

static void test_random_stacks_single(void) {
    static struct rstack st[RSTACKS];
    make_stacks(st, 0x9e3779b97f4a7c15ull);
    uint32_t id[RSTACKS];
    int distinct = 0, wrong = 0;
    unsigned long long pick = 12345;
    for (int round = 0; round < 3 * RSTACKS; round++) {
        int i = round < RSTACKS ? round : (int)(next(&pick) % RSTACKS);
        uint32_t got = vt_tracker_stack_id(st[i].f, st[i].depth);
        if (round < RSTACKS) {
            int first = -1;
            for (int j = 0; j < i && first < 0; j++)
                if (same(&st[j], &st[i])) first = j;
            if (first >= 0) wrong += got != id[first];
            else wrong += got != (uint32_t)distinct++;
            id[i] = got;
        } else {
            wrong += got != id[i];
        }
        wrong += !frames_are(got, st[i].f, st[i].depth);
    }
    CHECK_EQ(wrong, 0);
    pthread_mutex_lock(&vt_tracker_lock);
    CHECK_EQ(vt_stacks.n, distinct);
    pthread_mutex_unlock(&vt_tracker_lock);
    vt_tracker_reset_child();
}

/* Four threads intern the same stacks in their own random orders: every
 * thread gets one id per distinct stack, the same as the others', with the
 * stack's own frames. */
static struct rstack shared[RSTACKS];
static uint32_t thread_ids[4][RSTACKS];

static void *intern_thread(void *arg) {
    int t = (int)(long)arg;
    unsigned long long pick = 777 + (unsigned long long)t;
    for (int round = 0; round < 2 * RSTACKS; round++) {
        int i = (int)(next(&pick) % RSTACKS);
        thread_ids[t][i] = vt_tracker_stack_id(shared[i].f, shared[i].depth);
    }
    for (int i = 0; i < RSTACKS; i++) thread_ids[t][i] = vt_tracker_stack_id(shared[i].f, shared[i].depth);
    return NULL;
}

static void test_random_stacks_threads(void) {
    make_stacks(shared, 0x2545f4914f6cdd1dull);
    pthread_t th[4];
    for (long t = 0; t < 4; t++) pthread_create(&th[t], NULL, intern_thread, (void *)t);
    for (int t = 0; t < 4; t++) pthread_join(th[t], NULL);
    int wrong = 0, distinct = 0;
    for (int i = 0; i < RSTACKS; i++) {
        for (int t = 1; t < 4; t++) wrong += thread_ids[t][i] != thread_ids[0][i];
        wrong += !frames_are(thread_ids[0][i], shared[i].f, shared[i].depth);
        int first = 1;
        for (int j = 0; j < i && first; j++)
            if (same(&shared[j], &shared[i])) {
                first = 0;
                wrong += thread_ids[0][j] != thread_ids[0][i];
            }
        distinct += first;
    }
    CHECK_EQ(wrong, 0);
    pthread_mutex_lock(&vt_tracker_lock);
    CHECK_EQ(vt_stacks.n, distinct);
    pthread_mutex_unlock(&vt_tracker_lock);
    vt_tracker_reset_child();
}

/* ---- growth through several doublings ----------------------------------- */

/* Stack `i` of the growth tests, innermost first: its own innermost frame
 * (so stacks of distinct numbers differ), then up to 11 callers shared by
 * many. Its depth: 1 to 12. */
static int growth_stack(uintptr_t *f, unsigned i) {
    int depth = 1 + (int)(i % 12);
    f[0] = 0x10000000 + (uintptr_t)i;
    for (int k = 1; k < depth; k++) f[k] = 0x3000 + 0x10 * (uintptr_t)k + ((i >> k) & 1);
    return depth;
}

static struct vt_intern_stats stats_now(void) {
    struct vt_intern_stats st;
    pthread_mutex_lock(&vt_tracker_lock);
    vt_intern_stats(&st);
    pthread_mutex_unlock(&vt_tracker_lock);
    return st;
}

/* Every stack 0..n-1 (stack i was given id ids[i]) found without the lock
 * with its id, and its frames in the tracker's list; the count of wrong. */
static int check_all(const uint32_t *ids, unsigned n) {
    int wrong = 0;
    uintptr_t f[12];
    for (unsigned i = 0; i < n; i++) {
        int depth = growth_stack(f, i);
        wrong += vt_intern_lookup(f, depth) != ids[i];
        wrong += !frames_are(ids[i], f, depth);
    }
    return wrong;
}

#ifdef VT_INTERN_COLLIDE
#define GROW_STACKS 3000 /* every probe walks a quarter of the stacks */
#define GROW_BASE 2
#else
#define GROW_STACKS 140000
#define GROW_BASE 64
#endif

/* One thread interns GROW_STACKS new stacks, through growths at 512, 1,024,
 * ... entries used. No call moves more than VT_INTERN_STEP stacks, and
 * every stack is found with its id and frames, without the lock, right
 * after each growth, twice in the middle of each move (the old array
 * searched then for the stacks not yet moved) and right after its end. A
 * fork's reset in the middle of a move starts an empty table that grows
 * again. */
static void test_growth_single(void) {
    static uint32_t ids[GROW_STACKS];
    uintptr_t f[12];
    size_t growths = 0, moving_checks = 0, calls_moving = 0, over_bound = 0, most = 0;
    int wrong = 0, was_moving = 0;
    for (unsigned i = 0; i < GROW_STACKS; i++) {
        int depth = growth_stack(f, i);
        ids[i] = vt_tracker_stack_id(f, depth);
        wrong += ids[i] != i;
        struct vt_intern_stats st = stats_now();
        over_bound += st.moved_last > VT_INTERN_STEP;
        if (st.moved_last > most) most = st.moved_last;
        calls_moving = st.moving ? calls_moving + 1 : 0;
        /* A move of C / 2 stacks (C the old table's entries) lasts C / 8
         * calls: look at 1/3 and 2/3 of it. */
        size_t third = st.cap / 2 / VT_INTERN_STEP / 3;
        int check = st.growths != growths || (was_moving && !st.moving) ||
                    (st.moving && (calls_moving == third || calls_moving == 2 * third));
        if (st.moving && check) moving_checks++;
        if (check) wrong += check_all(ids, i + 1);
        growths = st.growths;
        was_moving = st.moving;
    }
    CHECK_EQ(wrong, 0);
    CHECK_EQ(over_bound, 0);
    CHECK(most > 0); /* the moves were spread over calls, not skipped */
    struct vt_intern_stats st = stats_now();
    CHECK_EQ(st.moved_most, most);
    /* 1,024 entries, then a doubling at each power of two from 512 used. */
    size_t want_growths = 1;
    for (size_t used = 512; used < GROW_STACKS; used *= 2) want_growths++;
    CHECK_EQ(st.growths, want_growths);
    CHECK(moving_checks >= 2 * (want_growths - 1));
    /* A fork in the middle of a move: intern until one is under way. */
    for (unsigned i = GROW_STACKS; !stats_now().moving; i++) {
        int depth = growth_stack(f, i);
        vt_tracker_stack_id(f, depth);
    }
    vt_tracker_reset_child();
    st = stats_now();
    CHECK_EQ(st.growths, 0);
    CHECK_EQ(st.moving, 0);
    wrong = 0;
    for (unsigned i = 0; i < 3000; i++) {
        int depth = growth_stack(f, 5 * i + 1);
        wrong += vt_tracker_stack_id(f, depth) != i;
    }
    for (unsigned i = 0; i < 3000; i++) {
        int depth = growth_stack(f, 5 * i + 1);
        wrong += vt_intern_lookup(f, depth) != i || !frames_are(i, f, depth);
    }
    CHECK_EQ(wrong, 0);
    CHECK_EQ(stats_now().growths, 4); /* 1,024 entries, then at 512, 1,024 and 2,048 used */
    vt_tracker_reset_child();
}

/* Eight threads intern and look up at once, in eight phases whose sizes
 * double, so that each phase has a growth or two in it: each thread its
 * own new stacks (numbers t, t + 8, ...) and, in its own order, the
 * phase's shared stacks that every thread interns. After each of its own
 * stacks a thread looks up, without the lock, one of its earlier stacks
 * and one shared stack it has seen, and checks the ids. Between phases
 * the main thread checks every stack: one id per stack whichever thread
 * interned it, found without the lock, its frames, the count of stacks,
 * and the bound on a call's moves. */
#define GT 8
#define GPHASES 8
#define GOWN (GROW_BASE * ((1u << GPHASES) - 1)) /* a thread's own stacks in all */
#define GSHARED (GROW_BASE * ((1u << GPHASES) - 1))
#define GSHARED_FIRST 0x8000000u /* shared stacks' numbers start here */
static uint32_t own_ids[GT][GOWN], shared_ids[GT][GSHARED];
static pthread_barrier_t phase_start, phase_end;
static int thread_wrong[GT];

static unsigned phase_first(int p) { return GROW_BASE * ((1u << p) - 1); }

/* The growths while the count of stacks went from `lo` to `hi`: a table is
 * made for the first stack, and doubles when the 513th, 1,025th, ... comes. */
static size_t growths_between(size_t lo, size_t hi) {
    size_t n = lo < 1 && hi >= 1;
    for (size_t k = 513; k <= hi; k = 2 * k - 1) n += k > lo;
    return n;
}

static void *growth_thread(void *arg) {
    int t = (int)(long)arg;
    unsigned long long rnd = 0x1234567 + (unsigned long long)t * 7919;
    uintptr_t f[12];
    for (int p = 0; p < GPHASES; p++) {
        pthread_barrier_wait(&phase_start);
        unsigned from = phase_first(p), to = phase_first(p + 1), n = to - from;
        unsigned stride = 2 * (unsigned)t + 1; /* odd: a permutation of the shared slice (n a power of 2 times base) */
        for (unsigned k = 0; k < n; k++) {
            unsigned own = from + k, sh = from + (k * stride + (unsigned)t * 13) % n;
            int depth = growth_stack(f, own * GT + (unsigned)t);
            own_ids[t][own] = vt_tracker_stack_id(f, depth);
            depth = growth_stack(f, GSHARED_FIRST + sh);
            shared_ids[t][sh] = vt_tracker_stack_id(f, depth);
            unsigned back = (unsigned)(next(&rnd) % (own + 1));
            depth = growth_stack(f, back * GT + (unsigned)t);
            thread_wrong[t] += vt_intern_lookup(f, depth) != own_ids[t][back];
            /* A shared stack of an earlier phase, which this thread has interned. */
            if (from) {
                unsigned old = (unsigned)(next(&rnd) % from);
                depth = growth_stack(f, GSHARED_FIRST + old);
                thread_wrong[t] += vt_intern_lookup(f, depth) != shared_ids[t][old];
            }
        }
        pthread_barrier_wait(&phase_end);
    }
    return NULL;
}

static void test_growth_threads(void) {
    pthread_t th[GT];
    pthread_barrier_init(&phase_start, NULL, GT + 1);
    pthread_barrier_init(&phase_end, NULL, GT + 1);
    for (long t = 0; t < GT; t++) pthread_create(&th[t], NULL, growth_thread, (void *)t);
    size_t growths = 0, phases_grown = 0;
    int wrong = 0;
    uintptr_t f[12];
    for (int p = 0; p < GPHASES; p++) {
        pthread_barrier_wait(&phase_start);
        pthread_barrier_wait(&phase_end);
        unsigned to = phase_first(p + 1);
        /* Every thread's ids, exact: ids are taken in order, so they are all
         * distinct and below the count; each found again without the lock. */
        static unsigned char seen[GT * GOWN + GSHARED];
        memset(seen, 0, sizeof seen);
        for (int t = 0; t < GT; t++)
            for (unsigned i = 0; i < to; i++) {
                int depth = growth_stack(f, i * GT + (unsigned)t);
                uint32_t id = own_ids[t][i];
                wrong += id >= GT * to + to || seen[id]++ != 0;
                wrong += vt_intern_lookup(f, depth) != id || !frames_are(id, f, depth);
            }
        for (unsigned i = 0; i < to; i++) {
            int depth = growth_stack(f, GSHARED_FIRST + i);
            uint32_t id = shared_ids[0][i];
            for (int t = 1; t < GT; t++) wrong += shared_ids[t][i] != id;
            wrong += id >= GT * to + to || seen[id]++ != 0;
            wrong += vt_intern_lookup(f, depth) != id || !frames_are(id, f, depth);
        }
        struct vt_intern_stats st = stats_now();
        pthread_mutex_lock(&vt_tracker_lock);
        wrong += vt_stacks.n != (size_t)GT * to + to;
        pthread_mutex_unlock(&vt_tracker_lock);
        wrong += st.moved_most > VT_INTERN_STEP;
        size_t before = (size_t)(GT + 1) * phase_first(p), after = (size_t)(GT + 1) * to;
        wrong += st.growths - growths != growths_between(before, after);
        phases_grown += st.growths > growths;
        growths = st.growths;
    }
    for (int t = 0; t < GT; t++) pthread_join(th[t], NULL);
    int wrong_while_interning = 0;
    for (int t = 0; t < GT; t++) wrong_while_interning += thread_wrong[t];
    CHECK_EQ(wrong, 0);
    CHECK_EQ(wrong_while_interning, 0);
    /* Most phases grow the table (all eight of them without the collide
     * build's smaller sizes). */
    CHECK(phases_grown >= GPHASES - 3);
    CHECK_EQ(growths, growths_between(0, (size_t)(GT + 1) * phase_first(GPHASES)));
    pthread_barrier_destroy(&phase_start);
    pthread_barrier_destroy(&phase_end);
    vt_tracker_reset_child();
}

/* The stack of id `id`, as report/ reads it. */
static const struct vt_stack *stack_of(uint32_t id) {
    pthread_mutex_lock(&vt_tracker_lock);
    const struct vt_stack *st = id < vt_stacks.n ? vt_stacks.list[id] : NULL;
    pthread_mutex_unlock(&vt_tracker_lock);
    return st;
}

/* The path of the departure frame j of stack id is keyed by, or "" for
 * code still loaded. */
static const char *gone_path(uint32_t id, uint32_t j) {
    const struct vt_departed *d = vt_departed_of(vt_code_key(stack_of(id), j));
    return d ? d->span.path : "";
}

/* A dlclose in which no stack was interned. */
static void mark_note(const struct vt_code_span *s) {
    uint32_t m = vt_departed_mark();
    vt_departed_note(s, 1, m, m);
}

static __attribute__((noinline)) void test_departed(void) {
    vt_tracker_reset_child();
    const uintptr_t in_a[] = {0x1010, 0x9000}, also_in_a[] = {0x2fff, 0x9000}, later[] = {0x1010, 0x9000, 0x9100};
    const uintptr_t at_end[] = {0x3001, 0x9000}, py[] = {(1ull << 63) | 0x1010, 0x9000};
    uint32_t s0 = vt_tracker_stack_id(in_a, 2), s1 = vt_tracker_stack_id(also_in_a, 2);
    uint32_t s_end = vt_tracker_stack_id(at_end, 2), s_py = vt_tracker_stack_id(py, 2);
    /* Nothing left yet: every key is its address. */
    CHECK_EQ(vt_code_key(stack_of(s0), 0), 0x1010);
    struct vt_code_span a = {.lo = 0x1000, .hi = 0x3000, .base = 0x1000, .path = "/lib/a.so",
                             .build_id = {1, 2}, .build_id_len = 2};
    struct vt_code_span b = a;
    b.path = "/lib/b.so";
    b.build_id[0] = 9;
    mark_note(&a);
    /* Stacks interned before a left: their frames in its range are a's
     * (the return address less one is the call: 0x3000 is a's last byte's
     * return address, 0x3001 is not a's); others keep their address. */
    CHECK_STR(gone_path(s0, 0), "/lib/a.so");
    CHECK_STR(gone_path(s1, 0), "/lib/a.so");
    CHECK_STR(gone_path(s0, 1), "");
    CHECK_STR(gone_path(s_end, 0), "");
    CHECK_STR(gone_path(s_py, 0), "");
    CHECK_EQ(vt_code_key(stack_of(s_py), 0), py[0]);
    CHECK_EQ(vt_code_address(vt_code_key(stack_of(s0), 0)), 0x1010);
    CHECK(vt_code_key(stack_of(s0), 0) != 0x1010);
    /* Walked after a left (b loaded there since): b's when b leaves. */
    uint32_t s2 = vt_tracker_stack_id(later, 3);
    CHECK_STR(gone_path(s2, 0), "");
    mark_note(&b);
    CHECK_STR(gone_path(s0, 0), "/lib/a.so");
    CHECK_STR(gone_path(s2, 0), "/lib/b.so");
    CHECK(vt_code_key(stack_of(s0), 0) != vt_code_key(stack_of(s2), 0));
    /* a back, then leaving twice more in the same place: one record more,
     * whose stays both read as a's. */
    const uintptr_t third[] = {0x1020, 0x9000}, fourth[] = {0x1030, 0x9000};
    uint32_t s3 = vt_tracker_stack_id(third, 2);
    mark_note(&a);
    uint32_t s4 = vt_tracker_stack_id(fourth, 2);
    mark_note(&a);
    CHECK_STR(gone_path(s3, 0), "/lib/a.so");
    CHECK_STR(gone_path(s4, 0), "/lib/a.so");
    CHECK_EQ(vt_departed_index(vt_code_key(stack_of(s3), 0)), 2);
    CHECK_EQ(vt_departed_index(vt_code_key(stack_of(s4), 0)), 2);
    CHECK_EQ(vt_departed_index(vt_code_key(stack_of(s0), 0)), 0);
    CHECK_EQ(vt_departed_index(vt_code_key(stack_of(s2), 0)), 1);
    /* A library that leaves while a session names its stacks: the frames
     * the session symbolized while it was loaded are still found (the
     * live view's names came out "(no stack)" when a dlclose fell between
     * the symbolizing and the naming). A session after it reads the
     * library's file (none here: module and offset only). */
    uintptr_t here[] = {(uintptr_t)test_departed + 1, 0x9000};
    const struct vt_stack *st = stack_of(vt_tracker_stack_id(here, 2));
    struct vt_snapshot snap;
    memset(&snap, 0, sizeof snap);
    snap.stacks = &st;
    snap.nstacks = 1;
    struct vt_symbols *sym = vt_symbolize(&snap);
    struct vt_code_span self = {.lo = (uintptr_t)test_departed, .hi = (uintptr_t)test_departed + 16,
                                .base = (uintptr_t)test_departed - 0x1000, .path = "/nonexistent/t.so"};
    mark_note(&self);
    CHECK(vt_code_key(st, 0) != here[0]);
    struct vt_frame *out = malloc(VT_SHOWN_FRAMES * sizeof *out);
    CHECK_EQ(vt_stack_frames(sym, 0, out), 2);
    CHECK_STR(out[0].function, "test_departed");
    CHECK(vt_call_site(sym, 0) != NULL);
    vt_symbols_free(sym);
    sym = vt_symbolize(&snap);
    CHECK_EQ(vt_stack_frames(sym, 0, out), 2);
    CHECK(out[0].function == NULL);
    CHECK_STR(out[0].module, "/nonexistent/t.so");
    CHECK_EQ(out[0].offset, 0x1001);
    CHECK_EQ(out[0].address, here[0]);
    vt_symbols_free(sym);
    free(out);
    /* The record keeps its own copy of the path. */
    CHECK(vt_departed_of(vt_code_key(stack_of(s0), 0))->span.path != a.path);
    /* A stack interned while the dlclose ran (another thread walking a
     * library it loaded where a was, or a itself loaded, used and closed
     * again while this dlclose waited for the loader) is of unknown code
     * there, not a's; one interned before it began is a's. */
    vt_tracker_reset_child();
    uint32_t early = vt_tracker_stack_id(in_a, 2);
    uint32_t m = vt_departed_mark();
    uint32_t during = vt_tracker_stack_id(also_in_a, 2);
    vt_departed_note(&a, 1, m, vt_departed_mark());
    CHECK_STR(gone_path(early, 0), "/lib/a.so");
    CHECK(vt_code_unknown(vt_code_key(stack_of(during), 0)));
    CHECK_STR(gone_path(during, 1), "");
    /* a back and gone again, its second dlclose quiet: a stack of its
     * second stay is a's, and so is the one the first dlclose left
     * unknown (a was there either way: it left again the same). */
    const uintptr_t second[] = {0x1040, 0x9000};
    uint32_t stay2 = vt_tracker_stack_id(second, 2);
    mark_note(&a);
    CHECK_STR(gone_path(stay2, 0), "/lib/a.so");
    CHECK_STR(gone_path(early, 0), "/lib/a.so");
    CHECK_STR(gone_path(during, 0), "/lib/a.so");
    /* Every record taken: nothing changes any more, and a frame of a
     * stack interned since that lies where libraries left is of unknown
     * code (before: the next departure of b moved b's record on, and such
     * frames were named after b). */
    vt_tracker_reset_child();
    uint32_t old_stack = vt_tracker_stack_id(in_a, 2);
    const uintptr_t at_first[] = {0x100020, 0x9000};
    uint32_t early_first = vt_tracker_stack_id(at_first, 2);
    for (int i = 0; i < VT_MAX_DEPARTED; i++) {
        struct vt_code_span x = i % 2 ? a : b;
        x.lo = 0x100000 + (uintptr_t)i * 0x1000;
        x.hi = x.lo + 0x1000;
        mark_note(&x);
    }
    mark_note(&a);   /* a at 0x1000: no room */
    uint32_t since = vt_tracker_stack_id(later, 3);
    mark_note(&b);   /* b at 0x1000: no room either */
    /* a and then b left 0x1000 unremembered: a stack interned before
     * either (before: its address, named after whatever came there next)
     * or between them is of unknown code there. */
    CHECK(vt_code_unknown(vt_code_key(stack_of(old_stack), 0)));
    CHECK(vt_code_unknown(vt_code_key(stack_of(since), 0)));
    CHECK_EQ(vt_code_key(stack_of(old_stack), 1), 0x9000);
    const uintptr_t after_all[] = {0x1010, 0x9000, 0x9200};
    uint32_t now_there = vt_tracker_stack_id(after_all, 3);
    CHECK_EQ(vt_code_key(stack_of(now_there), 0), 0x1010);   /* walked since: the code there now */
    /* Walked since, where the first record's library was: the code there
     * now, until it too leaves (unremembered: then unknown). */
    const uintptr_t in_first[] = {0x100010, 0x9000};
    uint32_t walked = vt_tracker_stack_id(in_first, 2);
    mark_note(&b);
    CHECK_EQ(vt_code_key(stack_of(walked), 0), 0x100010);
    struct vt_code_span first = a;
    first.lo = 0x100000;
    first.hi = 0x101000;
    mark_note(&first);
    CHECK(vt_code_unknown(vt_code_key(stack_of(walked), 0)));
    CHECK(vt_departed_of(vt_code_key(stack_of(walked), 0)) == NULL);
    CHECK_EQ(vt_code_address(vt_code_key(stack_of(walked), 0)), 0x100010);
    /* A stack interned before the record's library left still has it. */
    CHECK_STR(gone_path(early_first, 0), "/lib/b.so");
    /* A forked child's stacks start after every departure. */
    vt_tracker_reset_child();
    uint32_t c0 = vt_tracker_stack_id(in_a, 2);
    CHECK_EQ(c0, 0);
    CHECK_EQ(vt_code_key(stack_of(c0), 0), 0x1010);
    vt_tracker_reset_child();
}

int main(void) {
    vt_tracker_init(64, 16);
    test_known_paths();
    test_random_stacks_single();
    test_random_stacks_threads();
    test_growth_single();
    test_growth_threads();
    test_departed();
    return check_report("unit-intern");
}
