/* test_xfree.c -- many threads freeing each other's memory: the counts,
 * the live list, the peaks, the events and the snapshots stay exact.
 * Built plain and with TSan by `make unit`.
 *
 * XF_THREADS threads run three phases, a barrier between each:
 *   0. each allocates XF_BIG big allocations (device t % 2 for even items,
 *      the other for odd ones) and hands every one to another thread;
 *   1. each frees the big ones it was handed (the free of every
 *      XF_REFUSE-th address is refused once by the "driver", then asked
 *      again), and after each
 *      free allocates one small allocation on that same device, so that no
 *      device's live bytes ever rise again: the peaks are phase 0's;
 *   2. each hands its small ones round, to a thread picked at random; the
 *      receiver frees all but every XF_KEEP-th, which stay live (the leaks).
 * A snapshot taken between phases 1 and 2 (every thread waiting) must hold
 * exactly the small allocations, and a snapshot thread running through
 * phases 1 and 2 must always find its counters equal to its live list.
 * The last snapshot holds exactly the kept ones, by address.
 *
 * Then a producer and a consumer: rounds of XF_ROUND allocations by one
 * thread, all freed by the other, which never allocates (it has no slot);
 * from the third round on, the producer's records are the ones the
 * consumer freed (slot.h's depot): none is made (recslab.h). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../../tracker/recslab.h"
#include "../../tracker/slot.h"
#include "../../tracker/tracker.h"
#include "check.h"

#define XF_THREADS 12
#define XF_BIG 1500
#define XF_BIG_BYTES 4096
#define XF_SMALL_BYTES 64
#define XF_KEEP 7
#define XF_REFUSE 13

/* A thread's mailbox: the addresses other threads handed it. */
struct box {
    pthread_mutex_t lock;
    uint64_t *a;
    size_t n, cap;
};
static struct box boxes[XF_THREADS];
static pthread_barrier_t phase;
static int snapshots_on;

static void post(int to, uint64_t address) {
    struct box *b = &boxes[to];
    pthread_mutex_lock(&b->lock);
    if (b->n == b->cap) {
        b->cap = b->cap ? b->cap * 2 : 256;
        b->a = realloc(b->a, b->cap * sizeof *b->a);
    }
    b->a[b->n++] = address;
    pthread_mutex_unlock(&b->lock);
}

/* What thread `me` was handed, taken out of its mailbox. */
static uint64_t *take_box(int me, size_t *n) {
    struct box *b = &boxes[me];
    pthread_mutex_lock(&b->lock);
    uint64_t *a = b->a;
    *n = b->n;
    b->a = NULL;
    b->n = b->cap = 0;
    pthread_mutex_unlock(&b->lock);
    return a;
}

/* Addresses: thread, phase and item in the bits, so that each is unique
 * and says who made it. */
static uint64_t address_of(int t, int ph, int i) { return (0x3ull << 44) | ((uint64_t)t << 36) | ((uint64_t)ph << 32) | (uint64_t)i * 256; }
static int device_of(uint64_t address) { return (int)(((address >> 36) & 0xff) + ((address & 0xffffffff) / 256)) % 2; }

/* Which small ones stay live, and which frees the driver refuses once. */
static int kept(uint64_t address) { return (address / 256) % XF_KEEP == 0; }
static int refused(uint64_t address) { return (address / 256) % XF_REFUSE == 1; }

static void free_one(uint64_t address, int refuse) {
    struct vt_free f = vt_tracker_free_begin(VT_SPACE_DEVICE, address);
    vt_tracker_free_end(&f, !refuse);
}

static void *worker(void *arg) {
    int me = (int)(intptr_t)arg;
    unsigned x = 0x9e3779b9u * (unsigned)(me + 1);
    uintptr_t frames[3] = {0x7000 + (uintptr_t)me, 0x7100, 0x7200};
    for (int i = 0; i < XF_BIG; i++) {
        uint64_t a = address_of(me, 0, i);
        vt_tracker_alloc(a, XF_BIG_BYTES, VT_KIND_DEVICE, device_of(a), "cuMemAlloc", frames, 3);
        post((me + 1 + i % (XF_THREADS - 1)) % XF_THREADS, a);
    }
    pthread_barrier_wait(&phase);
    size_t n;
    uint64_t *got = take_box(me, &n);
    for (size_t i = 0; i < n; i++) {
        if (refused(got[i])) free_one(got[i], 1);
        free_one(got[i], 0);
        uint64_t a = address_of(me, 1, (int)i);
        /* The small one on the device the big one was freed on. */
        vt_tracker_alloc(a, XF_SMALL_BYTES, VT_KIND_DEVICE, device_of(got[i]), "cuMemAlloc", frames, 2);
        got[i] = a;
    }
    pthread_barrier_wait(&phase); /* the main thread's snapshot */
    pthread_barrier_wait(&phase);
    for (size_t i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        post((me + 1 + (int)((x >> 16) % (XF_THREADS - 1))) % XF_THREADS, got[i]);
    }
    free(got);
    pthread_barrier_wait(&phase);
    got = take_box(me, &n);
    for (size_t i = 0; i < n; i++)
        if (!kept(got[i])) free_one(got[i], refused(got[i]));
    /* The refused ones of the loop above, freed now. */
    for (size_t i = 0; i < n; i++)
        if (!kept(got[i]) && refused(got[i])) free_one(got[i], 0);
    free(got);
    return NULL;
}

/* 0 when the snapshot's counters (totals and devices) equal its live
 * list's sums. */
static int disagrees(const struct vt_snapshot *s) {
    uint64_t bytes[2] = {0}, count[2] = {0};
    for (size_t i = 0; i < s->nlive; i++) {
        int d = s->live[i].device;
        if (d < 0 || d > 1) return 1;
        bytes[d] += s->live[i].bytes;
        count[d]++;
    }
    return bytes[0] + bytes[1] != s->totals.live_bytes || count[0] + count[1] != s->totals.live_count ||
           bytes[0] != s->devices[0].live_bytes || bytes[1] != s->devices[1].live_bytes ||
           count[0] != s->devices[0].live_count || count[1] != s->devices[1].live_count ||
           s->totals.alloc_count - s->totals.free_count != s->totals.live_count;
}

static int bad_snapshots, nsnapshots;

static void *snapshotter(void *arg) {
    (void)arg;
    while (__atomic_load_n(&snapshots_on, __ATOMIC_ACQUIRE)) {
        struct vt_snapshot *s = vt_tracker_snapshot();
        bad_snapshots += disagrees(s);
        nsnapshots++;
        vt_snapshot_free(s);
    }
    return NULL;
}

static int by_address(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Events by address, then in the order they happened. */
static int by_address_then_index(const void *a, const void *b) {
    const uint64_t *x = a, *y = b; /* address, then index: the first two fields */
    return x[0] != y[0] ? (x[0] < y[0] ? -1 : 1) : x[1] < y[1] ? -1 : x[1] > y[1];
}

/* Device d's bytes in phase 0 (every big allocation live). */
static uint64_t big_bytes_on(int d) {
    uint64_t b = 0;
    for (int t = 0; t < XF_THREADS; t++)
        for (int i = 0; i < XF_BIG; i++) b += device_of(address_of(t, 0, i)) == d ? XF_BIG_BYTES : 0;
    return b;
}

/* A multiple of REC_BATCH: the consumer's cache, full (REC_CACHE) after
 * the first round, is full again after each, so every round hands the
 * producer as many records as it takes (the second round makes up the
 * REC_CACHE the consumer keeps). */
#define XF_ROUND 1024
#define XF_ROUNDS 48
static pthread_barrier_t pair;
static uint64_t made_in_round[XF_ROUNDS];

static uint64_t round_address(int r, int i) { return (0x5ull << 44) | ((uint64_t)r << 32) | (uint64_t)i * 256; }

static void *producer(void *arg) {
    (void)arg;
    uintptr_t frames[2] = {0x5000, 0x5100};
    for (int r = 0; r < XF_ROUNDS; r++) {
        uint64_t before = vt_rec_made();
        for (int i = 0; i < XF_ROUND; i++)
            vt_tracker_alloc(round_address(r, i), 128, VT_KIND_DEVICE, 0, "cuMemAlloc", frames, 2);
        made_in_round[r] = vt_rec_made() - before;
        pthread_barrier_wait(&pair);
        pthread_barrier_wait(&pair);
    }
    return NULL;
}

static void *consumer(void *arg) {
    (void)arg;
    for (int r = 0; r < XF_ROUNDS; r++) {
        pthread_barrier_wait(&pair);
        for (int i = 0; i < XF_ROUND; i++) free_one(round_address(r, i), 0);
        pthread_barrier_wait(&pair);
    }
    return NULL;
}

static void producer_and_consumer(void) {
    pthread_barrier_init(&pair, NULL, 2);
    struct vt_snapshot *s = vt_tracker_snapshot();
    uint64_t frees = s->totals.free_count, live = s->totals.live_count;
    vt_snapshot_free(s);
    pthread_t p, c;
    pthread_create(&p, NULL, producer, NULL);
    pthread_create(&c, NULL, consumer, NULL);
    pthread_join(p, NULL);
    pthread_join(c, NULL);
    uint64_t later = 0;
    for (int r = 2; r < XF_ROUNDS; r++) later += made_in_round[r];
    CHECK_EQ(later, 0);
    CHECK(made_in_round[0] + made_in_round[1] <= XF_ROUND + REC_CACHE);
    s = vt_tracker_snapshot();
    CHECK_EQ(s->totals.free_count - frees, (uint64_t)XF_ROUND * XF_ROUNDS);
    CHECK_EQ(s->totals.live_count, live);
    CHECK_EQ(s->totals.unknown_frees, 0);
    vt_snapshot_free(s);
}

int main(void) {
    /* Room for every event: allocations and frees, twice over, and each
     * refused free's two. */
    vt_tracker_init(64, 5 * XF_THREADS * XF_BIG);
    for (int i = 0; i < XF_THREADS; i++) pthread_mutex_init(&boxes[i].lock, NULL);
    pthread_barrier_init(&phase, NULL, XF_THREADS + 1);
    pthread_t t[XF_THREADS], snap;
    for (int i = 0; i < XF_THREADS; i++) pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i);
    pthread_barrier_wait(&phase); /* phase 0 done */
    __atomic_store_n(&snapshots_on, 1, __ATOMIC_RELEASE);
    pthread_create(&snap, NULL, snapshotter, NULL);
    pthread_barrier_wait(&phase); /* phase 1 done: every thread waits */

    /* Mid-run: only the small ones, one for each big one freed. */
    const uint64_t all = (uint64_t)XF_THREADS * XF_BIG;
    struct vt_snapshot *s = vt_tracker_snapshot();
    CHECK_EQ(s->totals.live_count, all);
    CHECK_EQ(s->totals.live_bytes, all * XF_SMALL_BYTES);
    CHECK_EQ(s->nlive, all);
    CHECK_EQ(disagrees(s), 0);
    CHECK_EQ(s->totals.peak_bytes, all * XF_BIG_BYTES);
    CHECK_EQ(s->devices[0].peak_bytes, big_bytes_on(0));
    CHECK_EQ(s->devices[1].peak_bytes, big_bytes_on(1));
    CHECK_EQ(s->devices[0].live_bytes, big_bytes_on(0) / XF_BIG_BYTES * XF_SMALL_BYTES);
    CHECK_EQ(s->devices[1].live_bytes, big_bytes_on(1) / XF_BIG_BYTES * XF_SMALL_BYTES);
    size_t phase1 = 0;
    for (size_t i = 0; i < s->nlive; i++) phase1 += ((s->live[i].address >> 32) & 0xf) == 1;
    CHECK_EQ(phase1, all);
    CHECK_EQ(s->totals.unknown_frees, 0);
    vt_snapshot_free(s);
    pthread_barrier_wait(&phase);
    pthread_barrier_wait(&phase); /* the small ones handed round */
    for (int i = 0; i < XF_THREADS; i++) pthread_join(t[i], NULL);
    __atomic_store_n(&snapshots_on, 0, __ATOMIC_RELEASE);
    pthread_join(snap, NULL);
    CHECK_EQ(bad_snapshots, 0);
    CHECK(nsnapshots > 0);

    /* The end: exactly the kept small ones, by address. */
    uint64_t *want = malloc(all * sizeof *want);
    size_t nwant = 0;
    uint64_t want_dev[2] = {0};
    for (int th = 0; th < XF_THREADS; th++)
        for (int i = 0; i < XF_BIG; i++) {
            uint64_t a = address_of(th, 1, i);
            if (kept(a)) want[nwant++] = a;
        }
    s = vt_tracker_snapshot();
    CHECK_EQ(s->nlive, nwant);
    CHECK_EQ(s->totals.live_count, nwant);
    CHECK_EQ(s->totals.live_bytes, nwant * XF_SMALL_BYTES);
    CHECK_EQ(disagrees(s), 0);
    uint64_t *got = malloc((s->nlive ? s->nlive : 1) * sizeof *got);
    for (size_t i = 0; i < s->nlive; i++) got[i] = s->live[i].address;
    qsort(got, s->nlive, sizeof *got, by_address);
    qsort(want, nwant, sizeof *want, by_address);
    CHECK(s->nlive == nwant && memcmp(got, want, nwant * sizeof *got) == 0);
    for (size_t i = 0; i < s->nlive; i++) want_dev[s->live[i].device] += s->live[i].bytes;
    CHECK_EQ(s->devices[0].live_bytes, want_dev[0]);
    CHECK_EQ(s->devices[1].live_bytes, want_dev[1]);
    /* Every allocation counted once, every free once (a refused free is
     * undone), and the peaks still phase 0's. */
    CHECK_EQ(s->totals.alloc_count, 2 * all);
    CHECK_EQ(s->totals.free_count, 2 * all - nwant);
    CHECK_EQ(s->totals.peak_bytes, all * XF_BIG_BYTES);
    CHECK_EQ(s->devices[0].peak_bytes, big_bytes_on(0));
    CHECK_EQ(s->devices[1].peak_bytes, big_bytes_on(1));
    CHECK_EQ(s->totals.unknown_frees, 0);

    /* The events: in time order; one for every allocation and every free
     * asked for (a refused free keeps its event: the program did ask for
     * it), and an allocation's after each refused free (the memory is live
     * again); at each address, allocations and frees in turn, an
     * allocation first, with its bytes. */
    uint64_t nrefused = 0;
    for (int th = 0; th < XF_THREADS; th++)
        for (int i = 0; i < XF_BIG; i++)
            nrefused += refused(address_of(th, 0, i)) + (!kept(address_of(th, 1, i)) && refused(address_of(th, 1, i)));
    CHECK_EQ(s->events_dropped, 0);
    CHECK_EQ(s->nevents, 2 * all + (2 * all - nwant) + 2 * nrefused);
    struct ev { uint64_t address; size_t i; int type; uint64_t bytes; } *ev = malloc((s->nevents + 1) * sizeof *ev);
    size_t out_of_order = 0, misplaced = 0;
    for (size_t i = 0; i < s->nevents; i++) {
        const struct vt_event ev_i = vt_event_at(s, i), *e = &ev_i;
        if (i && e->time_ns < vt_event_at(s, i - 1).time_ns) out_of_order++;
        ev[i] = (struct ev){e->address, i, e->type, e->bytes};
    }
    qsort(ev, s->nevents, sizeof *ev, by_address_then_index);
    for (size_t i = 0; i < s->nevents;) {
        size_t j = i;
        while (j < s->nevents && ev[j].address == ev[i].address) j++;
        /* Allocation, free, in turn from an allocation; one allocation
         * more than the first, for a refused free; all of its bytes. */
        size_t allocs = 0;
        for (size_t k = i; k < j; k++) {
            allocs += ev[k].type == VT_EV_ALLOC;
            misplaced += ev[k].type != ((k - i) % 2 ? VT_EV_FREE : VT_EV_ALLOC);
            misplaced += ev[k].bytes != (((ev[k].address >> 32) & 0xf) ? XF_SMALL_BYTES : XF_BIG_BYTES);
        }
        int small = ((ev[i].address >> 32) & 0xf) != 0;
        misplaced += allocs != 1u + (size_t)(refused(ev[i].address) && !(small && kept(ev[i].address)));
        i = j;
    }
    CHECK_EQ(out_of_order, 0);
    CHECK_EQ(misplaced, 0);
    free(ev);
    vt_snapshot_free(s);
    free(got);
    free(want);
    producer_and_consumer();
    return check_report("unit-xfree");
}
