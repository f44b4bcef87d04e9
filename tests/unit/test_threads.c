/* test_threads.c -- the tracker under concurrent allocation, free and
 * snapshot; built with TSan by `make test`. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../../report/holders.h"
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
    for (size_t i = 1; i < s->nevents; i++) out_of_order += s->events[i].time_ns < s->events[i - 1].time_ns;
    CHECK_EQ(out_of_order, 0); /* logs are merged by time stamp */
    CHECK_EQ(s->totals.unknown_frees, 0);
    vt_snapshot_free(s);
    return check_report("unit-threads");
}
