/* test_intern.c -- interned stacks, looked up without the lock.
 *
 * Same stack, same id; stacks that share their callers, or are the callers
 * of others, each get their own id, in the order first seen; and random
 * stacks (random depths over a few return addresses, so that many share
 * callers and the table grows twice) are checked against a plain list of
 * the stacks seen, by one thread and by four at once. Built twice: with
 * the real hash under TSan, and with one that makes every stack collide
 * with a quarter of the others (VT_INTERN_COLLIDE). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

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

int main(void) {
    vt_tracker_init(64, 16);
    test_known_paths();
    test_random_stacks_single();
    test_random_stacks_threads();
    return check_report("unit-intern");
}
