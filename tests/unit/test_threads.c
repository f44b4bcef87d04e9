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
        if (i % 10 != 0) vt_tracker_commit_free(vt_tracker_take(VT_SPACE_DEVICE, addr));
    }
    return NULL;
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
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
    pthread_join(r, NULL);
    struct vt_snapshot *s = vt_tracker_snapshot();
    CHECK_EQ(s->totals.alloc_count, THREADS * ROUNDS);
    CHECK_EQ(s->totals.free_count, THREADS * ROUNDS * 9 / 10);
    CHECK_EQ(s->totals.live_count, THREADS * ROUNDS / 10);
    CHECK_EQ(s->totals.live_bytes, 64 * THREADS * ROUNDS / 10);
    CHECK_EQ(s->devices[0].live_count + s->devices[1].live_count, THREADS * ROUNDS / 10);
    CHECK_EQ(s->nstacks, THREADS);
    CHECK_EQ(s->nevents, 1000);
    size_t out_of_order = 0;
    for (size_t i = 1; i < s->nevents; i++) out_of_order += s->events[i].time_ns < s->events[i - 1].time_ns;
    CHECK_EQ(out_of_order, 0); /* time stamps are taken under the lock */
    vt_snapshot_free(s);
    return check_report("unit-threads");
}
