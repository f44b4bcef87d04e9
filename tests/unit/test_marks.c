/* test_marks.c -- marks (tracker/mark.h) under concurrent allocation,
 * free, marking and reading, then a mark in a process of many stacks;
 * built with TSan and plain (tests/progs/api.mk) and run by
 * tests/integration/test_pytest.py. */
#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../../report/since.h"
#include "../../tracker/mark.h"
#include "check.h"

#define THREADS 4
#define ROUNDS 3000

/* Each worker allocates ROUNDS blocks of 64 bytes on device id % 2 and
 * frees all but every tenth, then, once told, frees what it kept from
 * before the mark and keeps the rest. */
static pthread_barrier_t half;

static void *worker(void *arg) {
    uintptr_t id = (uintptr_t)arg;
    uintptr_t frames[3] = {0x1000 + id, 0x2000, 0x3000};
    for (int i = 0; i < ROUNDS; i++) {
        if (i == ROUNDS / 2) {
            pthread_barrier_wait(&half); /* the mark is taken */
            pthread_barrier_wait(&half);
        }
        uint64_t addr = (id << 32) | (uint64_t)i;
        vt_tracker_alloc(addr, 64, VT_KIND_DEVICE, (int)(id % 2), "x", frames, 3);
        /* pinned host memory is never counted by a mark */
        vt_tracker_alloc(addr, 32, VT_KIND_HOST, VT_HOST_DEVICE, "h", frames, 3);
        struct vt_free h = vt_tracker_free_begin(VT_SPACE_HOST, addr);
        vt_tracker_free_end(&h, 1);
        if (i % 10 != 0) {
            struct vt_free f = vt_tracker_free_begin(VT_SPACE_DEVICE, addr);
            vt_tracker_free_end(&f, 1);
        }
    }
    /* What was kept from before the mark goes now: the mark's figures do
     * not move. */
    for (int i = 0; i < ROUNDS / 2; i += 10) {
        struct vt_free f = vt_tracker_free_begin(VT_SPACE_DEVICE, (id << 32) | (uint64_t)i);
        vt_tracker_free_end(&f, 1);
    }
    return NULL;
}

static volatile int stop;

/* Marks opened and closed, figures and reports read, all the while; what
 * went wrong is counted here (check.h's counters are the main thread's). */
static int churn_bad;

static void *churn(void *arg) {
    (void)arg;
    unsigned n = 0;
    int bad = 0;
    while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
        int m = vt_mark_begin();
        struct vt_mark_usage u;
        if (m <= 0 || vt_mark_usage(m, -1, &u) != 0 || u.live_bytes > u.peak_bytes) bad++;
        if (n++ % 16 == 0) {
            struct vt_snapshot *s = vt_mark_snapshot(m);
            if (!s) bad++;
            vt_snapshot_free(s);
        }
        if (vt_mark_end(m) != 0 || vt_mark_end(m) != -1) bad++;
    }
    __atomic_add_fetch(&churn_bad, bad, __ATOMIC_RELAXED);
    return NULL;
}

/* The heap in use now, bytes (the C library's; TSan's allocator keeps its
 * own figures, and the check is left to the plain build). */
static size_t heap_used(void) {
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

/* A mark opened after the process made 200,000 stacks, that meets 1,000
 * new ones: its holders are those 1,000, by the stacks their allocations
 * have, and what it keeps is of them, not of every stack id below them
 * (an array by id grew to 262,144 sites, 23 MB, at the first). */
static void many_stacks(void) {
    enum { BEFORE = 200000, SINCE = 1000 };
    for (uint32_t i = 0; i < BEFORE; i++) {
        uintptr_t frames[3] = {0x100000 + i, 0x5000, 0x6000};
        vt_tracker_alloc(0x700000000000ull + i, 64, VT_KIND_DEVICE, 0, "x", frames, 3);
        struct vt_free f = vt_tracker_free_begin(VT_SPACE_DEVICE, 0x700000000000ull + i);
        vt_tracker_free_end(&f, 1);
    }
    size_t before = heap_used();
    int m = vt_mark_begin();
    CHECK(m > 0);
    for (uint32_t i = 0; i < SINCE; i++) {
        uintptr_t frames[3] = {0x900000 + i, 0x5000, 0x6000};
        vt_tracker_alloc(0x710000000000ull + i, 16 * (i + 1), VT_KIND_DEVICE, 0, "x", frames, 3);
    }
    struct vt_mark_usage u;
    CHECK_EQ(vt_mark_usage(m, -1, &u), 0);
    CHECK_EQ(u.live_count, SINCE);
    CHECK_EQ(u.live_bytes, 16ull * SINCE * (SINCE + 1) / 2);
#ifndef __SANITIZE_THREAD__
    size_t grew = heap_used() - before;
    CHECK(grew < 1024 * 1024);
    if (grew >= 1024 * 1024) fprintf(stderr, "the mark and its 1,000 stacks: %zu bytes of heap\n", grew);
#else
    (void)before;
#endif
    struct vt_snapshot *s = vt_mark_snapshot(m);
    CHECK(s != NULL);
    if (s) {
        /* Each holder one allocation of its own stack, of the bytes that
         * stack's allocation has. */
        CHECK_EQ(s->nlive, SINCE);
        CHECK_EQ(s->nholders, SINCE);
        size_t matched = 0;
        uint64_t bytes = 0;
        for (size_t i = 0; i < s->nholders; i++) {
            bytes += s->holders[i].bytes;
            for (size_t k = 0; k < s->nlive; k++)
                if (s->live[k].stack == s->holders[i].stack) {
                    matched += s->holders[i].count == 1 && s->live[k].bytes == s->holders[i].bytes;
                    break;
                }
        }
        CHECK_EQ(matched, SINCE);
        CHECK_EQ(bytes, 16ull * SINCE * (SINCE + 1) / 2);
        CHECK_EQ(s->holders[0].bytes, 16ull * SINCE); /* largest first */
        vt_snapshot_free(s);
    }
    CHECK_EQ(vt_mark_end(m), 0);
    for (uint32_t i = 0; i < SINCE; i++) {
        struct vt_free f = vt_tracker_free_begin(VT_SPACE_DEVICE, 0x710000000000ull + i);
        vt_tracker_free_end(&f, 1);
    }
}

int main(void) {
    vt_tracker_init(16, 1024);
    pthread_barrier_init(&half, NULL, THREADS + 1);
    pthread_t t[THREADS], c[2];
    for (int i = 0; i < 2; i++) pthread_create(&c[i], NULL, churn, NULL);
    for (uintptr_t i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, worker, (void *)i);
    /* Every worker between its halves: what each allocates from here on is
     * since the mark. */
    pthread_barrier_wait(&half);
    int m = vt_mark_begin();
    CHECK(m > 0);
    pthread_barrier_wait(&half);
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    /* Kept since the mark: i % 10 == 0 of the second half, 150 blocks of
     * 64 bytes per worker, two workers a device. The peak is that and at
     * most one block in flight per worker. */
    struct vt_mark_usage all, d0, d1;
    CHECK_EQ(vt_mark_usage(m, -1, &all), 0);
    CHECK_EQ(vt_mark_usage(m, 0, &d0), 0);
    CHECK_EQ(vt_mark_usage(m, 1, &d1), 0);
    CHECK_EQ(all.live_bytes, THREADS * 150 * 64);
    CHECK_EQ(all.live_count, THREADS * 150);
    CHECK_EQ(d0.live_bytes, 2 * 150 * 64);
    CHECK_EQ(d1.live_count, 2 * 150);
    CHECK(all.peak_bytes >= all.live_bytes && all.peak_bytes <= all.live_bytes + THREADS * 64);
    CHECK(d0.peak_bytes >= d0.live_bytes && d0.peak_bytes <= d0.live_bytes + 2 * 64);
    struct vt_snapshot *s = vt_mark_snapshot(m);
    CHECK(s != NULL);
    if (s) {
        CHECK_EQ(s->nlive, THREADS * 150);
        uint64_t peak = 0;
        for (size_t i = 0; i < s->npeak_holders; i++) peak += s->peak_holders[i].bytes;
        CHECK_EQ(peak, all.peak_bytes);
        CHECK_EQ(s->npeak_holders, THREADS);
        vt_snapshot_free(s);
    }
    FILE *null = fopen("/dev/null", "w");
    struct vt_leak_result res;
    CHECK_EQ(vt_since_leaks(null, m, 0, &res), 0);
    CHECK_EQ(res.bytes, THREADS * 150 * 64);
    CHECK_EQ(res.count, THREADS * 150);
    fclose(null);
    CHECK_EQ(vt_mark_end(m), 0);
    __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < 2; i++) pthread_join(c[i], NULL);
    CHECK_EQ(churn_bad, 0);
    many_stacks();
    return check_report("marks");
}
