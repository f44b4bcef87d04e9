/* test_threads.c -- the tracker under concurrent allocation, free and
 * snapshot; built with TSan by `make test`. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../../report/holders.h"
#include "../../tracker/history.h"
#include "../../tracker/log.h"
#include "../../tracker/tracker.h"
#include "check.h"

#define THREADS 8
#define ROUNDS 5000

static void *worker(void *arg) {
    uintptr_t id = (uintptr_t)arg;
    uintptr_t frames[4] = {0x1000 + id, 0x2000, 0x3000 + (id & 1), 0x4000};
    for (int i = 0; i < ROUNDS; i++) {
        uint64_t addr = (id << 32) | (uint64_t)i;
        vt_tracker_alloc(addr, 64, VT_KIND_DEVICE, (int)(id % 2), "x", frames, 4);
        if (i % 10 != 0) {
            struct vt_free f = vt_tracker_free_begin(VT_SPACE_DEVICE, addr);
            vt_tracker_free_end(&f, 1);
        }
    }
    return NULL;
}

/* Allocated in one thread, freed in another: the free's log can be read
 * before the allocation's. */
#define HANDOFFS 20000
static uint64_t queue[HANDOFFS];
static int q_head, q_tail;
static pthread_mutex_t q_lock = PTHREAD_MUTEX_INITIALIZER;

static void *producer(void *arg) {
    uintptr_t id = (uintptr_t)arg;
    uintptr_t frames[2] = {0x9000 + id, 0x9100};
    for (int i = 0; i < HANDOFFS / 2; i++) {
        uint64_t addr = (0x77ull << 40) | (id << 32) | (uint64_t)i;
        vt_tracker_alloc(addr, 32, VT_KIND_DEVICE, 0, "x", frames, 2);
        pthread_mutex_lock(&q_lock);
        queue[q_head++] = addr;
        pthread_mutex_unlock(&q_lock);
    }
    return NULL;
}

static void *consumer(void *arg) {
    (void)arg;
    for (;;) {
        uint64_t addr = 0;
        int done = 0;
        pthread_mutex_lock(&q_lock);
        if (q_tail < q_head) addr = queue[q_tail++];
        done = q_tail == HANDOFFS;
        pthread_mutex_unlock(&q_lock);
        if (addr) {
            struct vt_free f = vt_tracker_free_begin(VT_SPACE_DEVICE, addr);
            vt_tracker_free_end(&f, 1);
        }
        if (done) return NULL;
    }
}

static volatile int stop;

static void *reader(void *arg) {
    (void)arg;
    while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
        struct vt_snapshot *s = vt_tracker_snapshot();
        size_t n;
        free(vt_holders(s, &n));
        vt_snapshot_free(s);
    }
    return NULL;
}

/* Three threads take turns in a fixed order, in runs of 1 to 4 ops, each
 * into its own log; nothing is applied until the snapshot (no log reaches
 * half full), which merges the three by time stamp. Every third op frees
 * the op before it, whichever thread made it (then the entry goes to that
 * thread's log). The history must come out in the order of the turns, and
 * the peak be the one of that order. */
#define TURN_OPS 60
static const uintptr_t turn_site[] = {0x1000, 0x2000, 0x3000};
static int turn_owner[TURN_OPS];
static int turn;
static pthread_mutex_t turn_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t turn_cond = PTHREAD_COND_INITIALIZER;

static int turn_is_free(int k) { return k % 3 == 2; }
static uint64_t turn_address(int k) { return 0x5000 + (uint64_t)k * 0x100; }
static uint64_t turn_bytes(int k) { return (uint64_t)(k + 1) * 10; }

static void *take_turns(void *arg) {
    int me = (int)(intptr_t)arg;
    for (int k = 0; k < TURN_OPS; k++) {
        if (turn_owner[k] != me) continue;
        pthread_mutex_lock(&turn_lock);
        while (turn != k) pthread_cond_wait(&turn_cond, &turn_lock);
        pthread_mutex_unlock(&turn_lock);
        if (turn_is_free(k)) {
            struct vt_free f = vt_tracker_free_begin(VT_SPACE_DEVICE, turn_address(k - 1));
            vt_tracker_free_end(&f, 1);
        }
        else vt_tracker_alloc(turn_address(k), turn_bytes(k), VT_KIND_DEVICE, 0, "x", turn_site, 3);
        pthread_mutex_lock(&turn_lock);
        turn = k + 1;
        pthread_cond_broadcast(&turn_cond);
        pthread_mutex_unlock(&turn_lock);
    }
    return NULL;
}

/* The three threads take their turns (turn_owner set). */
static void take_all_turns(void) {
    turn = 0;
    pthread_t t[3];
    for (int i = 0; i < 3; i++) pthread_create(&t[i], NULL, take_turns, (void *)(intptr_t)i);
    for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
}

/* Once every turn is applied: the live bytes and counts, the peak of the
 * turns' order, and the history in that order. */
static void check_turns_applied(void) {
    uint64_t live = 0, peak = 0;
    for (int k = 0; k < TURN_OPS; k++) {
        if (turn_is_free(k)) live -= turn_bytes(k - 1);
        else live += turn_bytes(k);
        if (live > peak) peak = live;
    }
    struct vt_snapshot *s = vt_tracker_snapshot();
    CHECK_EQ(s->totals.live_bytes, live);
    CHECK_EQ(s->totals.peak_bytes, peak);
    CHECK_EQ(s->totals.alloc_count, 40);
    CHECK_EQ(s->totals.free_count, 20);
    CHECK_EQ(s->nevents, TURN_OPS);
    int in_order = s->nevents == TURN_OPS;
    for (size_t k = 0; in_order && k < TURN_OPS; k++) {
        int f = turn_is_free((int)k);
        in_order = vt_event_at(s, k).type == (f ? VT_EV_FREE : VT_EV_ALLOC) &&
                   vt_event_at(s, k).address == turn_address(f ? (int)k - 1 : (int)k);
    }
    CHECK(in_order);
    vt_snapshot_free(s);
}

static void test_merge_of_three_logs(void) {
    unsigned x = 12345;
    for (int k = 0; k < TURN_OPS;) {
        x = x * 1103515245u + 12345u;
        int owner = (int)((x >> 16) % 3), run = 1 + (int)((x >> 8) % 4);
        for (int i = 0; i < run && k < TURN_OPS; i++) turn_owner[k++] = owner;
    }
    take_all_turns();
    check_turns_applied(); /* by the snapshot's merge */
}

/* The same turns, applied in steps (vt_log_drain_some, as a hooked call
 * whose log is past half applies a step): each step applies exactly its
 * budget while entries are left, the oldest of all the logs, so that the
 * history still comes out in the order of the turns, the peak that
 * order's, and nothing is applied twice or left out. */
static void test_merge_in_steps(void) {
    take_all_turns();
    static const size_t budgets[] = {1, 7, 2, 13, 5};
    size_t applied = 0, steps = 0, exact = 0, got;
    vt_global_lock();
    uint64_t written0 = vt_history.written;
    while ((got = vt_log_drain_some(budgets[steps % 5])) != 0) {
        exact += got == budgets[steps % 5] || applied + got == TURN_OPS;
        applied += got;
        steps++;
        if (vt_history.written - written0 != applied) break;
    }
    vt_global_unlock();
    CHECK_EQ(applied, TURN_OPS);
    CHECK_EQ(exact, steps);
    CHECK_EQ(steps, 12); /* 1 + 7 + 2 + 13 + 5 = 28 twice, then 1 and the last 3 */
    check_turns_applied();
}

/* More logs than the merge keeps in place (64): 100 threads, alive at
 * once (each its own slot), each allocating 5 and freeing 2 after a
 * barrier, merged into one history in time order with every count. */
#define MANY_LOGS 100
static pthread_barrier_t many_barrier;

static void *many_logs_worker(void *arg) {
    uintptr_t id = (uintptr_t)arg;
    uintptr_t frames[2] = {0x7000 + id, 0x7100};
    pthread_barrier_wait(&many_barrier);
    for (uint64_t i = 0; i < 5; i++)
        vt_tracker_alloc((0x44ull << 40) | (id << 16) | i, 8, VT_KIND_DEVICE, 0, "x", frames, 2);
    for (uint64_t i = 0; i < 2; i++) {
        struct vt_free f = vt_tracker_free_begin(VT_SPACE_DEVICE, (0x44ull << 40) | (id << 16) | i);
        vt_tracker_free_end(&f, 1);
    }
    pthread_barrier_wait(&many_barrier); /* every slot in use until all are done */
    return NULL;
}

static void test_more_logs_than_kept_in_place(void) {
    pthread_t t[MANY_LOGS];
    pthread_barrier_init(&many_barrier, NULL, MANY_LOGS);
    for (uintptr_t i = 0; i < MANY_LOGS; i++) pthread_create(&t[i], NULL, many_logs_worker, (void *)i);
    for (int i = 0; i < MANY_LOGS; i++) pthread_join(t[i], NULL);
    pthread_barrier_destroy(&many_barrier);
    struct vt_snapshot *s = vt_tracker_snapshot();
    CHECK_EQ(s->totals.alloc_count, MANY_LOGS * 5);
    CHECK_EQ(s->totals.free_count, MANY_LOGS * 2);
    CHECK_EQ(s->totals.live_count, MANY_LOGS * 3);
    CHECK_EQ(s->totals.live_bytes, MANY_LOGS * 3 * 8);
    CHECK_EQ(s->nevents, MANY_LOGS * 7);
    size_t out_of_order = 0;
    for (size_t i = 1; i < s->nevents; i++) out_of_order += vt_event_at(s, i).time_ns < vt_event_at(s, i - 1).time_ns;
    CHECK_EQ(out_of_order, 0);
    vt_snapshot_free(s);
}

/* Threads allocate and free device, pinned host and imported memory at
 * four call sites while snapshots are taken: in every snapshot the
 * counters (totals, devices, holders of device memory and of every kind)
 * agree exactly with its live list. */
#define MIXED_THREADS 4
#define MIXED_ROUNDS 20000
static const int mixed_kinds[] = {VT_KIND_DEVICE, VT_KIND_HOST, VT_KIND_IMPORTED, VT_KIND_MANAGED};
static int mixed_done;

static void *mixed_worker(void *arg) {
    uintptr_t id = (uintptr_t)arg;
    for (int i = 0; i < MIXED_ROUNDS; i++) {
        int kind = mixed_kinds[(i + (int)id) % 4];
        uintptr_t frames[3] = {0xa000 + (uintptr_t)(i % 4), 0xb000, 0xc000};
        uint64_t addr = (0x55ull << 40) | (id << 32) | (uint64_t)i;
        vt_tracker_alloc(addr, 16 + (uint64_t)(i % 7), kind, (int)(id % 2), "x", frames, 3);
        if (i % 3 != 0) {
            struct vt_free f = vt_tracker_free_begin(vt_kind_space(kind), addr);
            vt_tracker_free_end(&f, 1);
        }
    }
    __atomic_add_fetch(&mixed_done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* Where the counters of s disagree with its live list: 0 when they agree. */
static int disagreements(const struct vt_snapshot *s) {
    uint64_t *dev = calloc(s->nstacks + 1, 2 * sizeof *dev), *all = calloc(s->nstacks + 1, 2 * sizeof *all);
    uint64_t live[3][2] = {{0}}, per_dev[2] = {0};
    for (size_t i = 0; i < s->nlive; i++) {
        const struct vt_live *a = &s->live[i];
        int c = vt_kind_is_host(a->kind) ? 1 : a->kind == VT_KIND_IMPORTED ? 2 : 0;
        live[c][0] += a->bytes;
        live[c][1]++;
        if (c == 0 && a->device >= 0 && a->device < 2) per_dev[a->device] += a->bytes;
        if (a->stack >= s->nstacks) continue;
        all[2 * a->stack] += a->bytes;
        all[2 * a->stack + 1]++;
        if (c == 0) { dev[2 * a->stack] += a->bytes; dev[2 * a->stack + 1]++; }
    }
    int bad = live[0][0] != s->totals.live_bytes || live[0][1] != s->totals.live_count ||
              live[1][0] != s->totals.host_live_bytes || live[1][1] != s->totals.host_live_count ||
              live[2][0] != s->totals.imported_live_bytes || live[2][1] != s->totals.imported_live_count ||
              per_dev[0] != s->devices[0].live_bytes || per_dev[1] != s->devices[1].live_bytes;
    for (int device_only = 0; device_only < 2; device_only++) {
        uint64_t *want = device_only ? dev : all;
        size_t n = 0, nonzero = 0;
        struct vt_holder *h = vt_holders_of(s, device_only, &n);
        for (size_t i = 0; i < n; i++)
            bad |= h[i].stack >= s->nstacks || h[i].bytes != want[2 * h[i].stack] ||
                   h[i].count != want[2 * h[i].stack + 1];
        for (size_t k = 0; k < s->nstacks; k++) nonzero += want[2 * k + 1] != 0;
        bad |= n != nonzero;
        free(h);
    }
    free(dev);
    free(all);
    return bad;
}

static void test_counters_agree_with_the_live_list(void) {
    pthread_t t[MIXED_THREADS];
    for (uintptr_t i = 0; i < MIXED_THREADS; i++) pthread_create(&t[i], NULL, mixed_worker, (void *)i);
    int snapshots = 0, bad = 0;
    while (__atomic_load_n(&mixed_done, __ATOMIC_ACQUIRE) < MIXED_THREADS || snapshots < 20) {
        struct vt_snapshot *s = vt_tracker_snapshot();
        bad += disagreements(s);
        snapshots++;
        vt_snapshot_free(s);
    }
    for (int i = 0; i < MIXED_THREADS; i++) pthread_join(t[i], NULL);
    CHECK_EQ(bad, 0);
    struct vt_snapshot *s = vt_tracker_snapshot();
    CHECK_EQ(disagreements(s), 0);
    CHECK_EQ(s->totals.live_count + s->totals.host_live_count + s->totals.imported_live_count,
             MIXED_THREADS * (MIXED_ROUNDS / 3 + 1));
    vt_snapshot_free(s);
}

/* After memory may have gone back unseen (vt_tracker_unseen_release),
 * threads allocate from a pool of addresses and free nothing, as a driver
 * that took everything back would hand them out (an address to one thread
 * at a time, under its lock), while snapshots are taken: each allocation
 * replaces the record of its address that any thread's table holds, so
 * one record an address stays live, every other is a free and released
 * without one, and the counters agree with the live list throughout. */
#define STALE_THREADS 4
#define STALE_ROUNDS 5000
#define STALE_ADDRESSES 64
static pthread_mutex_t stale_lock[STALE_ADDRESSES];
static int stale_done;

static void *stale_worker(void *arg) {
    uintptr_t id = (uintptr_t)arg;
    uintptr_t frames[3] = {0xd000 + id, 0xe000, 0xf000};
    for (int i = 0; i < STALE_ROUNDS; i++) {
        int k = (int)((unsigned)(i * 7 + (int)id * 13) % STALE_ADDRESSES);
        pthread_mutex_lock(&stale_lock[k]);
        vt_tracker_alloc((0x66ull << 40) | (uint64_t)k << 12, 8 + id, VT_KIND_DEVICE, 0, "x", frames, 3);
        pthread_mutex_unlock(&stale_lock[k]);
    }
    __atomic_add_fetch(&stale_done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void test_stale_records_replaced_across_threads(void) {
    for (int k = 0; k < STALE_ADDRESSES; k++) pthread_mutex_init(&stale_lock[k], NULL);
    vt_tracker_unseen_release(VT_SPACES_ALL);
    pthread_t t[STALE_THREADS];
    for (uintptr_t i = 0; i < STALE_THREADS; i++) pthread_create(&t[i], NULL, stale_worker, (void *)i);
    int snapshots = 0, bad = 0;
    while (__atomic_load_n(&stale_done, __ATOMIC_ACQUIRE) < STALE_THREADS || snapshots < 20) {
        struct vt_snapshot *s = vt_tracker_snapshot();
        bad += disagreements(s);
        snapshots++;
        vt_snapshot_free(s);
    }
    for (int i = 0; i < STALE_THREADS; i++) pthread_join(t[i], NULL);
    CHECK_EQ(bad, 0);
    struct vt_snapshot *s = vt_tracker_snapshot();
    CHECK_EQ(disagreements(s), 0);
    uint64_t all = STALE_THREADS * STALE_ROUNDS, released = 0;
    for (size_t i = 0; i < s->nreleased; i++) released += s->released[i].count;
    CHECK_EQ(s->totals.live_count, STALE_ADDRESSES);
    CHECK_EQ(s->totals.alloc_count, all);
    CHECK_EQ(s->totals.free_count, all - STALE_ADDRESSES);
    CHECK_EQ(released, all - STALE_ADDRESSES);
    CHECK_EQ(s->nlive, STALE_ADDRESSES);
    vt_snapshot_free(s);
}

int main(void) {
    vt_tracker_init(64, 1000);
    pthread_t t[THREADS], r;
    pthread_create(&r, NULL, reader, NULL);
    for (uintptr_t i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, worker, (void *)i);
    pthread_t pc[4];
    pthread_create(&pc[0], NULL, producer, (void *)1);
    pthread_create(&pc[1], NULL, producer, (void *)2);
    pthread_create(&pc[2], NULL, consumer, NULL);
    pthread_create(&pc[3], NULL, consumer, NULL);
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < 4; i++) pthread_join(pc[i], NULL);
    __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
    pthread_join(r, NULL);
    struct vt_snapshot *s = vt_tracker_snapshot();
    CHECK_EQ(s->totals.alloc_count, THREADS * ROUNDS + HANDOFFS);
    CHECK_EQ(s->totals.free_count, THREADS * ROUNDS * 9 / 10 + HANDOFFS);
    CHECK_EQ(s->totals.live_count, THREADS * ROUNDS / 10);
    CHECK_EQ(s->totals.live_bytes, 64 * THREADS * ROUNDS / 10);
    CHECK_EQ(s->devices[0].live_count + s->devices[1].live_count, THREADS * ROUNDS / 10);
    CHECK_EQ(s->nstacks, THREADS + 2);
    CHECK_EQ(s->nevents, 1000);
    size_t out_of_order = 0;
    for (size_t i = 1; i < s->nevents; i++) out_of_order += vt_event_at(s, i).time_ns < vt_event_at(s, i - 1).time_ns;
    CHECK_EQ(out_of_order, 0); /* logs are merged by time stamp */
    CHECK_EQ(s->totals.unknown_frees, 0);
    vt_snapshot_free(s);
    /* Every thread but this one is done: start again, as a forked child
     * does, for a merge whose order is known. */
    vt_tracker_reset_child();
    test_merge_of_three_logs();
    vt_tracker_reset_child();
    test_merge_in_steps();
    vt_tracker_reset_child();
    test_more_logs_than_kept_in_place();
    vt_tracker_reset_child();
    test_counters_agree_with_the_live_list();
    vt_tracker_reset_child();
    test_stale_records_replaced_across_threads();
    return check_report("unit-threads");
}
