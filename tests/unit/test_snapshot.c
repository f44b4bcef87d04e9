/* test_snapshot.c -- a snapshot reads the event ring in place (lent, not
 * copied) and sorts its live list in place: what it holds stays exact
 * while the process goes on recording. Built plain and with TSan by
 * `make unit`.
 *
 * Every event here is known by its index in the whole history: the j-th
 * is an allocation of address BASE + (j / 2) * 256 of 100 + j / 2 bytes
 * for even j, the free of that address for odd j. */
#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <string.h>
#include <unistd.h>

#include "../../common/warn.h"
#include "../../tracker/history.h"
#include "../../tracker/live_spill.h"
#include "../../tracker/slot.h"
#include "../../tracker/tracker.h"
#include "check.h"

#define CAP 1000
#define BASE 0x5000000000ull

static const uintptr_t frames[] = {0x1000, 0x2000, 0x3000};
static uint64_t pairs; /* allocation and free pairs made so far */
static uint64_t shift; /* pair events not kept (lost) less other events, mod 2^64 */

/* The next n pairs of the sequence. */
static void pairs_go_on(uint64_t n) {
    for (uint64_t k = 0; k < n; k++, pairs++) {
        vt_tracker_alloc(BASE + pairs * 256, 100 + pairs, VT_KIND_DEVICE, 0, "cuMemAlloc", frames, 3);
        struct vt_free f = vt_tracker_free_begin(VT_SPACE_DEVICE, BASE + pairs * 256);
        vt_tracker_free_end(&f, 1);
    }
}

/* How many of s's events from index `from` on (in the whole history) are
 * not the sequence's events of their index (events_dropped + i), or come
 * out of time order. */
static uint64_t wrong_events_from(const struct vt_snapshot *s, uint64_t from) {
    uint64_t wrong = 0, t = 0;
    for (size_t i = 0; i < s->nevents; i++) {
        struct vt_event e = vt_event_at(s, i);
        if (s->events_dropped + i < from) continue;
        uint64_t j = s->events_dropped + i + shift, k = j / 2;
        wrong += e.type != (j % 2 ? VT_EV_FREE : VT_EV_ALLOC) || e.address != BASE + k * 256 || e.bytes != 100 + k ||
                 e.time_ns < t;
        t = e.time_ns;
    }
    return wrong;
}

static uint64_t wrong_events(const struct vt_snapshot *s) { return wrong_events_from(s, 0); }

/* A snapshot's events stay those of its moment while twice the ring's
 * worth of events are recorded; a snapshot taken meanwhile (the ring is
 * lent already: it copies) and one taken after the ring is given back both
 * hold the newest CAP events, those held back among them. */
static void test_lent_ring_holds_while_events_go_on(void) {
    pairs_go_on(750); /* 1,500 events: the ring holds the newest 1,000 */
    struct vt_snapshot *s = vt_tracker_snapshot();
    CHECK(s->ring != NULL);
    CHECK(s->events == NULL);
    CHECK_EQ(s->nevents, CAP);
    CHECK_EQ(s->events_dropped, 500);
    CHECK_EQ(wrong_events(s), 0);
    pairs_go_on(1000);
    struct vt_snapshot *during = vt_tracker_snapshot();
    CHECK_EQ(wrong_events(s), 0); /* the ring's 1,000 stayed where they were */
    CHECK_EQ(s->events_dropped, 500);
    CHECK(during->ring == NULL && during->events != NULL);
    CHECK_EQ(during->nevents, CAP);
    CHECK_EQ(during->events_dropped, 3500 - CAP);
    CHECK_EQ(wrong_events(during), 0);
    vt_snapshot_free(during);
    vt_snapshot_free(s);
    struct vt_snapshot *after = vt_tracker_snapshot();
    CHECK(after->ring != NULL);
    CHECK_EQ(after->nevents, CAP);
    CHECK_EQ(after->events_dropped, 3500 - CAP);
    CHECK_EQ(wrong_events(after), 0);
    pairs_go_on(10); /* the ring is lent again: these are held back */
    vt_snapshot_free(after);
    struct vt_snapshot *last = vt_tracker_snapshot();
    CHECK_EQ(last->events_dropped, 3520 - CAP);
    CHECK_EQ(wrong_events(last), 0);
    vt_snapshot_free(last);
}

/* Past VT_SPILL_MAX events held back, the newest are not kept: they are
 * counted apart from what was lost for lack of memory (records_lost), in
 * the next snapshot's events_dropped_while_read, never written over the
 * lent ones, and the history goes on after them without a gap in its
 * indexes. */
static void test_held_back_past_the_bound_are_counted_lost(void) {
    struct vt_snapshot *s = vt_tracker_snapshot();
    uint64_t first = s->events_dropped, lost0 = vt_records_lost_count(), s_read = s->events_dropped_while_read;
    uint64_t before = pairs;
    pairs_go_on(64);
    vt_snapshot_free(vt_tracker_snapshot()); /* applied: 128 held back */
    const struct vt_event *room = vt_history.spill;
    CHECK(room != NULL);
    CHECK_EQ(vt_history.nspill, 128);
    pairs_go_on(VT_SPILL_MAX / 2 + 250 - 64); /* 500 events past the bound */
    vt_snapshot_free(vt_tracker_snapshot()); /* every thread's log applied */
    /* The held-back events never moved: their room is mapped at its bound
     * (a copy to a bigger block, made under the global lock by whichever
     * hooked call applied the logs, cost one call milliseconds). */
    CHECK(vt_history.spill == room);
    CHECK_EQ(vt_history.nspill, VT_SPILL_MAX);
    CHECK_EQ(room[0].address, BASE + before * 256);
    CHECK_EQ(room[VT_SPILL_MAX - 1].address, BASE + (before + VT_SPILL_MAX / 2 - 1) * 256);
    CHECK_EQ(wrong_events(s), 0);
    CHECK_EQ(s->events_dropped, first);
    vt_snapshot_free(s);
    CHECK_EQ(vt_records_lost_count() - lost0, 0);
    struct vt_snapshot *t = vt_tracker_snapshot();
    CHECK_EQ(t->events_dropped_while_read - s_read, 500);
    /* The history as kept: the first VT_SPILL_MAX events after s, so its
     * newest CAP end at the last pair the bound let in. */
    CHECK_EQ(t->events_dropped + t->nevents, 2 * before + VT_SPILL_MAX);
    uint64_t bad = 0;
    for (size_t i = 0; i < t->nevents; i++) {
        struct vt_event e = vt_event_at(t, i);
        uint64_t j = t->events_dropped + i, k = j / 2;
        bad += e.address != BASE + k * 256 || e.type != (j % 2 ? VT_EV_FREE : VT_EV_ALLOC);
    }
    CHECK_EQ(bad, 0);
    vt_snapshot_free(t);
    /* Kept again from here on: the next pair is the next index. */
    uint64_t at = 2 * before + VT_SPILL_MAX;
    uint64_t skipped = 2 * pairs - at; /* the lost events' pairs */
    pairs_go_on(1);
    struct vt_snapshot *u = vt_tracker_snapshot();
    struct vt_event e = vt_event_at(u, u->nevents - 1);
    CHECK_EQ(u->events_dropped + u->nevents, at + 2);
    CHECK_EQ(e.address, BASE + (pairs - 1) * 256);
    CHECK_EQ(e.type, VT_EV_FREE);
    CHECK_EQ(skipped, 500);
    vt_snapshot_free(u);
    shift = skipped;
}

/* Sorted in place: largest first, then the older, then by address; the
 * API names and VMM mapped addresses read back through their tables. */
static void test_live_sorted_in_place(void) {
    static const uint64_t sizes[] = {300, 7, 9999, 300, 42, 300, 7, 1 << 20};
    uint64_t base = 0x6000000000ull;
    for (int i = 0; i < 8; i++)
        vt_tracker_alloc(base + (uint64_t)i * 0x1000, sizes[i], VT_KIND_DEVICE, 1, i % 2 ? "cuMemAlloc" : "cudaMalloc",
                         frames, 3);
    vt_tracker_alloc(0x77, 4096, VT_KIND_VMM, 1, "cuMemCreate", frames, 3);
    vt_tracker_map(0x77, 0x7000000000ull, 4096);
    struct vt_snapshot *s = vt_tracker_snapshot();
    vt_snapshot_sort_live(s);
    CHECK_EQ(s->nlive, 9);
    static const uint64_t want_bytes[] = {1 << 20, 9999, 4096, 300, 300, 300, 42, 7, 7};
    static const int want_item[] = {7, 2, -1, 0, 3, 5, 4, 1, 6};
    for (size_t i = 0; i < s->nlive && i < 9; i++) {
        const struct vt_live *a = &s->live[i];
        CHECK_EQ(a->bytes, want_bytes[i]);
        if (want_item[i] < 0) {
            CHECK_EQ(a->address, 0x77);
            CHECK_EQ(vt_live_mapped(s, a), 0x7000000000ull);
            CHECK_STR(vt_live_api(s, a), "cuMemCreate");
            continue;
        }
        CHECK_EQ(a->address, base + (uint64_t)want_item[i] * 0x1000);
        CHECK_EQ(vt_live_mapped(s, a), 0);
        CHECK_STR(vt_live_api(s, a), want_item[i] % 2 ? "cuMemAlloc" : "cudaMalloc");
        CHECK_EQ(a->device, 1);
        if (i) CHECK(a->bytes < s->live[i - 1].bytes || a->time_ns >= s->live[i - 1].time_ns);
    }
    CHECK_EQ(s->napis, 3);
    vt_snapshot_free(s);
}

/* A thread records the sequence while snapshots are taken, read through
 * and freed: each holds exactly the sequence's events of its indexes. The
 * recorder goes at most 30,000 pairs past where it was when a snapshot
 * began (60,000 events, fewer than VT_SPILL_MAX held back while the ring
 * is lent): a snapshot whose thread lost its CPU for a few milliseconds
 * would otherwise see events lost (counted, and tested above), and the
 * sequence's indexes here shift. */
static volatile int stop;
static uint64_t progress, allow = UINT64_MAX;
static void *recorder(void *arg) {
    (void)arg;
    while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE) && pairs < 2000000) {
        if (pairs >= __atomic_load_n(&allow, __ATOMIC_ACQUIRE)) {
            sched_yield();
            continue;
        }
        pairs_go_on(64);
        __atomic_store_n(&progress, pairs, __ATOMIC_RELEASE);
    }
    return NULL;
}

static void test_snapshots_while_recording(void) {
    struct vt_snapshot *z = vt_tracker_snapshot();
    uint64_t from = z->events_dropped + z->nevents; /* the recorder's first event */
    shift = 2 * pairs - from;
    __atomic_store_n(&progress, pairs, __ATOMIC_RELEASE);
    vt_snapshot_free(z);
    pthread_t t;
    pthread_create(&t, NULL, recorder, NULL);
    uint64_t wrong = 0, nonempty = 0;
    for (int k = 0; k < 200; k++) {
        __atomic_store_n(&allow, __atomic_load_n(&progress, __ATOMIC_ACQUIRE) + 30000, __ATOMIC_RELEASE);
        struct vt_snapshot *s = vt_tracker_snapshot();
        wrong += wrong_events_from(s, from);
        nonempty += s->nevents == CAP;
        vt_snapshot_free(s);
    }
    __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
    pthread_join(t, NULL);
    CHECK_EQ(wrong, 0);
    CHECK_EQ(nonempty, 200);
}

/* A record of few distinct values, so that many compare equal in their
 * first fields and some are the same record altogether. */
static struct vt_live tied(unsigned i) {
    unsigned h = i * 2654435761u;
    return (struct vt_live){.address = (h >> 3) % 5, .bytes = (h >> 7) % 3, .time_ns = (h >> 11) % 4,
                            .stack = (h >> 13) % 2, .thread = (int32_t)((h >> 17) % 2), .device = (int16_t)((h >> 19) % 2),
                            .kind = (uint8_t)((h >> 23) % 2), .api = (uint8_t)((h >> 25) % 2), .mapped = (h >> 29) % 2};
}

/* The list of s read in order (sorted): how many records it gave, and
 * in *wrong how many are past n or differ from want's, in order. */
static size_t read_in_order(struct vt_snapshot *s, const struct vt_live *want, size_t n, size_t *wrong) {
    struct vt_live_reader *r = vt_live_read(s, 1);
    size_t got = 0;
    *wrong = 0;
    for (const struct vt_live *a; r && (a = vt_live_next(r)); got++) *wrong += got >= n || memcmp(a, &want[got], sizeof *a);
    vt_live_read_end(r);
    return got;
}

/* A spilled list of n tied records in runs of `run`, sorted: read in order
 * it is the list sorted in memory, record for record; read in file order,
 * each record once. */
static void spilled_list_is_the_sorted_list(size_t n, size_t run) {
    struct vt_live *want = malloc((n ? n : 1) * sizeof *want);
    struct vt_snapshot s = {.live = malloc(run * sizeof *s.live)};
    s.spill = vt_live_spill_open(run);
    CHECK(s.spill != NULL);
    if (!s.spill || !want || !s.live) return;
    for (unsigned i = 0; i < n; i++) {
        want[i] = tied(i);
        vt_live_keep(&s, &want[i]);
    }
    vt_live_spill_flush(&s);
    CHECK_EQ(s.nlive, n);
    vt_snapshot_sort_live(&s);
    CHECK(s.live == NULL);
    vt_live_sort(want, n);
    size_t wrong, got = read_in_order(&s, want, n, &wrong);
    CHECK_EQ(got, n);
    CHECK_EQ(wrong, 0);
    uint64_t sum = 0, want_sum = 0;
    struct vt_live_reader *r = vt_live_read(&s, 0);
    got = 0;
    for (const struct vt_live *a; r && (a = vt_live_next(r)); got++) sum += a->address * 7 + a->bytes * 3 + a->time_ns;
    vt_live_read_end(r);
    for (size_t i = 0; i < n; i++) want_sum += want[i].address * 7 + want[i].bytes * 3 + want[i].time_ns;
    CHECK_EQ(got, n);
    CHECK_EQ(sum, want_sum);
    vt_live_spill_close(s.spill);
    free(s.live);
    free(want);
}

static void test_spilled_runs_merge_to_the_one_order(void) {
    spilled_list_is_the_sorted_list(10000, 102); /* 99 runs, the last short */
    spilled_list_is_the_sorted_list(204, 102);   /* two whole runs */
    spilled_list_is_the_sorted_list(103, 102);   /* a run of one */
    spilled_list_is_the_sorted_list(5000, 4096); /* the first run short of full */
}

/* How many of the process's descriptors are open. */
static int open_fds(void) {
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    for (struct dirent *e; d && (e = readdir(d));) n += e->d_name[0] != '.';
    if (d) closedir(d);
    return n;
}

/* The list of a snapshot taken past the bound (VRAMTRACE_SPILL 0: runs of
 * a page's worth) reads as the same snapshot's in memory, record for
 * record (times aside: each snapshot converts them with its own scale, in
 * the same order); its file goes when the snapshot does, and it leaves no
 * name in the directory. */
static void test_spilled_snapshot_is_the_snapshot_in_memory(void) {
    char dir[] = "/tmp/vt-unit-spill-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    for (unsigned i = 0; i < 3000; i++)
        vt_tracker_alloc(0x9000000000ull + i * 0x100, 1000 + (i * 7919u) % 13, i % 3 ? VT_KIND_DEVICE : VT_KIND_MANAGED,
                         (int)(i % 2), i % 2 ? "cuMemAlloc" : "cudaMalloc", frames, 1 + (int)(i % 3));
    vt_tracker_spill(16u << 20, dir);
    struct vt_snapshot *m = vt_tracker_snapshot();
    vt_snapshot_sort_live(m);
    CHECK(m->spill == NULL);
    int fds = open_fds();
    vt_tracker_spill(0, dir);
    struct vt_snapshot *s = vt_tracker_snapshot();
    CHECK(s->spill != NULL);
    CHECK_EQ(open_fds(), fds + 1);
    vt_snapshot_sort_live(s);
    CHECK(s->live == NULL);
    CHECK_EQ(s->nlive, m->nlive);
    struct vt_live_reader *r = vt_live_read(s, 1);
    size_t got = 0, wrong = 0;
    for (const struct vt_live *a; r && (a = vt_live_next(r)); got++) {
        struct vt_live x = *a, y = got < m->nlive ? m->live[got] : x;
        int w1 = (got && x.time_ns < m->live[got - 1].time_ns && x.bytes == m->live[got - 1].bytes);
        if (w1) fprintf(stderr, "ORDER got %zu x.t %lu prev m.t %lu y.t %lu\n", got, (unsigned long)x.time_ns, (unsigned long)m->live[got-1].time_ns, (unsigned long)y.time_ns);
        wrong += w1;
        x.time_ns = y.time_ns = 0;
        int w2 = memcmp(&x, &y, sizeof x) != 0 || strcmp(vt_live_api(s, a), vt_live_api(m, &m->live[got])) != 0;
        if (w2) fprintf(stderr, "DIFF got %zu x %lx/%lu y %lx/%lu api %s %s\n", got, (unsigned long)x.address, (unsigned long)x.bytes, (unsigned long)y.address, (unsigned long)y.bytes, vt_live_api(s, a), vt_live_api(m, &m->live[got]));
        wrong += w2;
    }
    vt_live_read_end(r);
    CHECK_EQ(got, m->nlive);
    CHECK_EQ(wrong, 0);
    DIR *d = opendir(dir);
    int names = 0;
    for (struct dirent *e; d && (e = readdir(d));) names += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    if (d) closedir(d);
    CHECK_EQ(names, 0);
    vt_snapshot_free(s);
    vt_snapshot_free(m);
    CHECK_EQ(open_fds(), fds);
    rmdir(dir);
    vt_tracker_spill(16u << 20, NULL);
}

/* A file that cannot take the records (a file size limit of 8 KiB: the
 * first stage of 256 KiB fails, EFBIG, as a full disk's ENOSPC would)
 * keeps the list in memory: all of it, none counted lost, the file
 * closed, sorted as a list that never spilled. */
static void test_spill_that_cannot_be_written_keeps_the_list_in_memory(void) {
    struct rlimit was, small = {8192, 8192};
    getrlimit(RLIMIT_FSIZE, &was);
    small.rlim_max = was.rlim_max;
    void (*old)(int) = signal(SIGXFSZ, SIG_IGN);
    CHECK(setrlimit(RLIMIT_FSIZE, &small) == 0);
    size_t run = 102, n = 1000;
    struct vt_live *want = malloc(n * sizeof *want);
    struct vt_snapshot s = {.live = malloc(run * sizeof *s.live)};
    s.spill = vt_live_spill_open(run);
    CHECK(s.spill != NULL);
    uint64_t lost = vt_records_lost_count();
    if (s.spill && want && s.live) {
        for (unsigned i = 0; i < n; i++) {
            want[i] = tied(i);
            vt_live_keep(&s, &want[i]);
        }
        vt_live_spill_flush(&s);
        CHECK_EQ(s.nlive, n);
        CHECK(s.spill == NULL);
        CHECK_EQ(s.live_lost, 0);
        CHECK_EQ(vt_records_lost_count() - lost, 0);
        vt_snapshot_sort_live(&s);
        vt_live_sort(want, n);
        size_t wrong, got = read_in_order(&s, want, n, &wrong);
        CHECK_EQ(got, n);
        CHECK_EQ(wrong, 0);
    }
    setrlimit(RLIMIT_FSIZE, &was);
    signal(SIGXFSZ, old);
    vt_live_spill_close(s.spill);
    free(s.live);
    free(want);
}

/* Records of a stage (live_spill.c's STAGE: 256 KiB of them). */
#define STAGE_RECS (256 * 1024 / sizeof(struct vt_live))

/* One full stage taken out as the copy's thread does, checked (a stage
 * long, its first record at `at`, its records want's), written and given
 * back; 0 when none was waiting. A bad stage counts in *wrong. */
static int take_one(struct vt_snapshot *s, const struct vt_live *want, size_t at, size_t *wrong) {
    struct vt_live_stage st;
    if (!vt_live_spill_take_stage(s->spill, &st)) return 0;
    *wrong += st.n != STAGE_RECS || st.at != at || memcmp(st.buf, want + st.at, st.n * sizeof *want) != 0;
    if (!vt_live_spill_write_stage(s->spill, &st)) vt_live_spill_keep_stage(s->spill, &s->nlive, &st);
    else vt_live_spill_give_stage(s->spill, &st);
    return 1;
}

/* With `defer` (a snapshot's copy: whoever keeps a record is under a
 * slot's lock, and writes wait for the copy's thread), stages that fill
 * while none is taken out wait in a queue, each a stage long: none is
 * made longer (a longer one's copy faulted in megabytes inside one keep).
 * Taken out oldest first, each with the index of its first record; the
 * list written from them and the flush is the list, record for record.
 * With fail_at (a stage's index), the file takes only the stages before
 * it: that stage and every one after it stay in memory (none taken out
 * any more, the queue unbounded), and the flush reads the list back into
 * memory whole, none lost. take_every: one stage taken
 * out after every take_every filled, as the copy's thread does; with none
 * taken, the queue stops at VT_SPILL_QUEUE_MAX and the put writes the
 * oldest itself. */
static void deferred_stages_queue(size_t nst, size_t take_every, size_t fail_at) {
    size_t run = 102, n = run + nst * STAGE_RECS + 77;
    struct rlimit was, small;
    getrlimit(RLIMIT_FSIZE, &was);
    void (*old)(int) = signal(SIGXFSZ, SIG_IGN);
    if (fail_at < nst) { /* the file ends where stage fail_at begins */
        small = (struct rlimit){(run + fail_at * STAGE_RECS) * sizeof(struct vt_live), was.rlim_max};
        CHECK(setrlimit(RLIMIT_FSIZE, &small) == 0);
    }
    struct vt_live *want = malloc(n * sizeof *want);
    struct vt_snapshot s = {.live = malloc(run * sizeof *s.live)};
    s.spill = vt_live_spill_open(run);
    CHECK(s.spill != NULL);
    if (!s.spill || !want || !s.live) return;
    s.spill->defer = 1;
    uint64_t lost = vt_records_lost_count();
    size_t taken = 0, wrong = 0;
    /* With none taken out, a queue past VT_SPILL_QUEUE_MAX stages has its
     * oldest written by the put: those come out no more. */
    size_t sync = !take_every && nst > VT_SPILL_QUEUE_MAX ? nst - VT_SPILL_QUEUE_MAX : 0;
    for (unsigned i = 0; i < n; i++) {
        want[i] = tied(i);
        vt_live_keep(&s, &want[i]);
        /* One stage taken out after every take_every filled: the queue
         * grows behind, and its taken slots are used again. */
        size_t filled = i + 1 > run ? (i + 1 - run) / STAGE_RECS : 0;
        if (take_every && i + 1 > run && (i + 1 - run) % STAGE_RECS == 0 && filled % take_every == 0)
            taken += take_one(&s, want, run + taken * STAGE_RECS, &wrong);
    }
    if (!take_every) /* each queued at the record after it */
        CHECK_EQ(s.spill->nfull - s.spill->full_head, fail_at < sync ? nst - fail_at : nst - sync);
    while (take_one(&s, want, run + (sync + taken) * STAGE_RECS, &wrong)) taken++;
    size_t keep = n;
    CHECK_EQ(taken, fail_at < sync ? 0 : fail_at < nst ? fail_at - sync + 1 : nst - sync);
    CHECK_EQ(wrong, 0);
    vt_live_spill_flush(&s);
    CHECK_EQ(s.nlive, keep);
    CHECK_EQ(vt_records_lost_count() - lost, n - keep);
    vt_snapshot_sort_live(&s);
    vt_live_sort(want, keep);
    size_t got = read_in_order(&s, want, keep, &wrong);
    CHECK_EQ(got, keep);
    CHECK_EQ(wrong, 0);
    setrlimit(RLIMIT_FSIZE, &was);
    signal(SIGXFSZ, old);
    vt_live_spill_close(s.spill);
    free(s.live);
    free(want);
}

static void test_deferred_stages_queue_a_stage_each(void) {
    deferred_stages_queue(5, 0, SIZE_MAX);  /* all queued, then all written */
    deferred_stages_queue(5, 0, 2);         /* the third stage's write fails */
    deferred_stages_queue(40, 2, SIZE_MAX); /* one taken for every two filled: the queue reaches 20 */
    deferred_stages_queue(40, 2, 25);       /* ... and the 26th write fails, taken from a long queue */
    deferred_stages_queue(VT_SPILL_QUEUE_MAX + 6, 0, SIZE_MAX); /* the first 6 written by the puts */
    deferred_stages_queue(VT_SPILL_QUEUE_MAX + 6, 0, 3);        /* ... the fourth of them fails */
    deferred_stages_queue(VT_SPILL_QUEUE_MAX + 6, 0, 9);        /* a queued one fails */
}

/* A thread keeps a window of live allocations, indexes lo .. hi - 1
 * (address WBASE + i * 256, 1000 + i % 97 bytes), 10,000 long to begin
 * with, growing it by 40,000 and shrinking it back, over and over, while snapshots are taken with
 * small spill runs (the list on a file, its stages written with no lock
 * held). The tables are copied a chunk at a time while the thread goes on,
 * so each snapshot must still be of one point: one window, every index of
 * it once with its bytes, and counts that hold exactly the copied list. */
#define WBASE 0xa000000000ull
static volatile int window_stop;
static uint64_t window_lo, window_hi;

static void *window_keeper(void *arg) {
    (void)arg;
    for (unsigned round = 0; !__atomic_load_n(&window_stop, __ATOMIC_ACQUIRE); round++) {
        for (int k = 0; k < 40000; k++, window_hi++)
            vt_tracker_alloc(WBASE + window_hi * 256, 1000 + window_hi % 97, VT_KIND_DEVICE, 0, "cuMemAlloc", frames, 3);
        for (int k = 0; k < 40000; k++, window_lo++) {
            struct vt_free f = vt_tracker_free_begin(VT_SPACE_DEVICE, WBASE + window_lo * 256);
            vt_tracker_free_end(&f, 1);
        }
    }
    return NULL;
}

static void test_copy_while_the_table_changes_is_of_one_point(void) {
    char dir[] = "/tmp/vt-unit-window-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    struct vt_snapshot *z = vt_tracker_snapshot();
    uint64_t base_n = z->nlive, base_bytes = z->totals.live_bytes, base_count = z->totals.live_count;
    vt_snapshot_free(z);
    vt_tracker_spill(64 * 1024, dir);
    for (; window_hi < 10000; window_hi++)
        vt_tracker_alloc(WBASE + window_hi * 256, 1000 + window_hi % 97, VT_KIND_DEVICE, 0, "cuMemAlloc", frames, 3);
    pthread_t t;
    pthread_create(&t, NULL, window_keeper, NULL);
    uint64_t not_one_window = 0, wrong_counts = 0, short_windows = 0;
    unsigned char *have = calloc(1 << 22, 1);
    for (int k = 0; k < 40; k++) {
        struct vt_snapshot *s = vt_tracker_snapshot();
        uint64_t lo = UINT64_MAX, hi = 0, n = 0, bytes = 0, bad = 0;
        struct vt_live_reader *r = vt_live_read(s, 0);
        for (const struct vt_live *a; r && (a = vt_live_next(r));) {
            if (a->address < WBASE || a->address >= WBASE + (1ull << 32)) continue;
            uint64_t i = (a->address - WBASE) / 256;
            bad += a->bytes != 1000 + i % 97;
            n++;
            bytes += a->bytes;
            lo = i < lo ? i : lo;
            hi = i + 1 > hi ? i + 1 : hi;
        }
        vt_live_read_end(r);
        /* Every index from the lowest to the highest, once: as many as the
         * range holds, and none twice (a bitmap of the range). */
        uint64_t dup = 0;
        if (n && hi - lo <= (1u << 22)) {
            memset(have, 0, 1 << 22);
            r = vt_live_read(s, 0);
            for (const struct vt_live *a; r && (a = vt_live_next(r));) {
                if (a->address < WBASE || a->address >= WBASE + (1ull << 32)) continue;
                uint64_t i = (a->address - WBASE) / 256 - lo;
                dup += have[i];
                have[i] = 1;
            }
            vt_live_read_end(r);
        }
        not_one_window += bad || dup || (n && hi - lo != n);
        wrong_counts += s->nlive != base_n + n || s->totals.live_bytes != base_bytes + bytes ||
                        s->totals.live_count != base_count + n;
        short_windows += n < 10000 || n > 50000;
        vt_snapshot_free(s);
    }
    __atomic_store_n(&window_stop, 1, __ATOMIC_RELEASE);
    pthread_join(t, NULL);
    free(have);
    CHECK_EQ(not_one_window, 0);
    CHECK_EQ(wrong_counts, 0);
    CHECK_EQ(short_windows, 0);
    for (uint64_t i = window_lo; i < window_hi; i++) {
        struct vt_free f = vt_tracker_free_begin(VT_SPACE_DEVICE, WBASE + i * 256);
        vt_tracker_free_end(&f, 1);
    }
    vt_tracker_spill(16u << 20, NULL);
    rmdir(dir);
}

/* The holder tables of a snapshot are copied a chunk of sites at a time
 * after the global lock (account.h's site copy), while a thread goes on:
 * each must still be of the snapshot's one point. The thread keeps a
 * window of allocations over 200,000 stacks (49 chunks), growing it a
 * little more each round than it shrinks it, so that new peaks come while
 * a copy is under way. Per snapshot: each stack's holder (bytes, count)
 * is exactly what the live list holds of it, the holders sum to the live
 * totals, and the holders at the peak to the peak. */
#define HBASE 0xc000000000ull
#define HSTACKS 200000
static volatile int holders_stop;
static uint64_t holders_lo, holders_hi;

static void holders_alloc(uint64_t i) {
    uintptr_t fs[3] = {0xc0000 + (uintptr_t)(i % HSTACKS), 0x2000, 0x3000};
    vt_tracker_alloc(HBASE + i * 256, 500 + i % 89, VT_KIND_DEVICE, 0, "cuMemAlloc", fs, 3);
}

static void *holders_keeper(void *arg) {
    (void)arg;
    for (unsigned round = 0; !__atomic_load_n(&holders_stop, __ATOMIC_ACQUIRE); round++) {
        for (unsigned k = 0; k < 20000 + 50 * round; k++) holders_alloc(holders_hi++);
        for (int k = 0; k < 20000; k++, holders_lo++) {
            struct vt_free f = vt_tracker_free_begin(VT_SPACE_DEVICE, HBASE + holders_lo * 256);
            vt_tracker_free_end(&f, 1);
        }
    }
    return NULL;
}

static void test_holders_copied_while_sites_change_are_of_one_point(void) {
    /* Every stack interned first, so that each copy has all 49 chunks. */
    for (uint64_t i = 0; i < HSTACKS; i++) {
        holders_alloc(i);
        struct vt_free f = vt_tracker_free_begin(VT_SPACE_DEVICE, HBASE + i * 256);
        vt_tracker_free_end(&f, 1);
    }
    holders_lo = holders_hi = HSTACKS;
    for (; holders_hi < HSTACKS + 5000; holders_hi++) holders_alloc(holders_hi);
    pthread_t t;
    pthread_create(&t, NULL, holders_keeper, NULL);
    uint64_t (*want)[2] = calloc(1u << 20, sizeof *want); /* by stack id: bytes, count */
    uint64_t wrong_sites = 0, wrong_sums = 0, wrong_peak = 0, chunked = 0;
    for (int k = 0; k < 30; k++) {
        struct vt_snapshot *s = vt_tracker_snapshot();
        memset(want, 0, (1u << 20) * sizeof *want);
        struct vt_live_reader *r = vt_live_read(s, 0);
        for (const struct vt_live *a; r && (a = vt_live_next(r));)
            if (a->stack < (1u << 20)) {
                want[a->stack][0] += a->bytes;
                want[a->stack][1]++;
            }
        vt_live_read_end(r);
        uint64_t sum = 0, count = 0, peak = 0, seen = 0;
        for (size_t i = 0; i < s->nholders; i++) {
            const struct vt_holder *h = &s->holders[i];
            wrong_sites += h->stack >= (1u << 20) || want[h->stack][0] != h->bytes || want[h->stack][1] != h->count;
            if (h->stack < (1u << 20)) want[h->stack][0] = want[h->stack][1] = 0; /* seen */
            sum += h->bytes;
            count += h->count;
            seen++;
        }
        for (size_t i = 0; i < (1u << 20); i++) wrong_sites += want[i][0] || want[i][1]; /* a stack with no holder */
        struct vt_peak_cursor pc = {0, 0};
        for (struct vt_holder ph; vt_peak_holder_next(s, &pc, &ph);) peak += ph.bytes;
        wrong_sums += sum != s->totals.live_bytes || count != s->totals.live_count;
        wrong_peak += peak != s->totals.peak_bytes;
        chunked += seen > 4096;
        vt_snapshot_free(s);
    }
    __atomic_store_n(&holders_stop, 1, __ATOMIC_RELEASE);
    pthread_join(t, NULL);
    free(want);
    CHECK_EQ(wrong_sites, 0);
    CHECK_EQ(wrong_sums, 0);
    CHECK_EQ(wrong_peak, 0);
    CHECK_EQ(chunked, 30); /* each snapshot's holders spanned more than one chunk */
    for (uint64_t i = holders_lo; i < holders_hi; i++) {
        struct vt_free f = vt_tracker_free_begin(VT_SPACE_DEVICE, HBASE + i * 256);
        vt_tracker_free_end(&f, 1);
    }
}

/* A slot whose lock is not let go (held here, as a thread stuck inside a
 * hooked call would hold it): the bounded snapshot gives up, and the slot
 * it had armed before it (a newer thread's) is disarmed, so that its
 * thread goes on changing its table with no copy pointing at anything (an
 * ASan failure if it did), and the next snapshot is whole. */
#define GBASE 0xb000000000ull
static pthread_barrier_t stuck_bar;

static void *stuck_owner(void *arg) {
    (void)arg;
    for (int i = 0; i < 333; i++) vt_tracker_alloc(GBASE + i * 256ull, 100, VT_KIND_DEVICE, 0, "cuMemAlloc", frames, 3);
    pthread_barrier_wait(&stuck_bar); /* its slot made */
    pthread_barrier_wait(&stuck_bar); /* the snapshot tried */
    for (int i = 0; i < 333; i++) {
        struct vt_free f = vt_tracker_free_begin(VT_SPACE_DEVICE, GBASE + i * 256ull);
        vt_tracker_free_end(&f, 1);
    }
    return NULL;
}

static void *armed_owner(void *arg) {
    (void)arg;
    uint64_t base = GBASE + (1ull << 32);
    for (int i = 0; i < 500; i++) vt_tracker_alloc(base + i * 256ull, 200, VT_KIND_DEVICE, 0, "cuMemAlloc", frames, 3);
    pthread_barrier_wait(&stuck_bar);
    pthread_barrier_wait(&stuck_bar);
    /* Every entry of its table changed after the give-up. */
    for (int i = 500; i < 3000; i++) vt_tracker_alloc(base + i * 256ull, 200, VT_KIND_DEVICE, 0, "cuMemAlloc", frames, 3);
    for (int i = 0; i < 3000; i++) {
        struct vt_free f = vt_tracker_free_begin(VT_SPACE_DEVICE, base + i * 256ull);
        vt_tracker_free_end(&f, 1);
    }
    return NULL;
}

static void test_snapshot_given_up_disarms_what_it_armed(void) {
    struct vt_snapshot *z = vt_tracker_snapshot();
    uint64_t base_n = z->nlive;
    vt_snapshot_free(z);
    pthread_barrier_init(&stuck_bar, NULL, 3);
    pthread_t a, b;
    pthread_create(&a, NULL, stuck_owner, NULL);
    /* b's slot is made after a's: newer, it is armed first. */
    while (1) {
        struct vt_slot *l;
        for (l = vt_slots_first(); l; l = l->next) {
            slot_take(l);
            size_t n = l->table.count;
            slot_give(l);
            if (n == 333) break;
        }
        if (l) break;
        sched_yield();
    }
    pthread_create(&b, NULL, armed_owner, NULL);
    pthread_barrier_wait(&stuck_bar);
    struct vt_slot *stuck = NULL, *armed = NULL;
    for (struct vt_slot *l = vt_slots_first(); l; l = l->next) {
        slot_take(l);
        size_t n = l->table.count;
        slot_give(l);
        if (n == 333) stuck = l;
        if (n == 500) armed = l;
    }
    CHECK(stuck != NULL && armed != NULL);
    if (!stuck || !armed) return;
    slot_take(stuck);
    struct vt_snapshot *s = vt_tracker_snapshot_within(50 * 1000 * 1000);
    CHECK(s == NULL);
    slot_take(armed);
    CHECK(armed->table.cow == NULL);
    slot_give(armed);
    slot_give(stuck);
    pthread_barrier_wait(&stuck_bar);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    s = vt_tracker_snapshot();
    CHECK_EQ(s->nlive, base_n);
    vt_snapshot_free(s);
}

int main(void) {
    vt_tracker_init(64, CAP);
    test_lent_ring_holds_while_events_go_on();
    test_held_back_past_the_bound_are_counted_lost();
    test_live_sorted_in_place();
    test_snapshots_while_recording();
    test_spilled_runs_merge_to_the_one_order();
    test_spilled_snapshot_is_the_snapshot_in_memory();
    test_spill_that_cannot_be_written_keeps_the_list_in_memory();
    test_deferred_stages_queue_a_stage_each();
    test_copy_while_the_table_changes_is_of_one_point();
    test_holders_copied_while_sites_change_are_of_one_point();
    test_snapshot_given_up_disarms_what_it_armed();
    return check_report("unit-snapshot");
}
