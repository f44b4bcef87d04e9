/* test_tracker.c -- unit tests of tracker/ and the report helpers. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../../report/analysis.h"
#include "../../report/dump.h"
#include "../../common/format.h"
#include "../../report/growth.h"
#include "../../report/owntime.h"
#include "../../report/holders.h"
#include "../../report/postmortem.h"
#include "../../report/torch.h"
#include "../../tracker/mappings.h"
#include "../../tracker/released.h"
#include "../../tracker/history.h"
#include "../../tracker/stack.h"
#include "../../tracker/released.h"
#include "../../tracker/tracker.h"
#include "check.h"

static const uintptr_t site_a[] = {0x1000, 0x2000, 0x3000};

/* A free as the hooks make it: time stamp, real call, outcome. */
static void free_it(int space, uint64_t address, int ok) {
    struct vt_free f = vt_tracker_free_begin(space, address);
    vt_tracker_free_end(&f, ok);
}
static const uintptr_t site_b[] = {0x1100, 0x2000, 0x3000};

/* The totals' device figures of snapshot s, all six checked at once. */
#define CHECK_TOTALS(s, live_count_, live_bytes_, peak_bytes_, alloc_count_, free_count_, unknown_frees_) \
    do {                                                                                        \
        CHECK_EQ((s)->totals.live_count, live_count_);                                          \
        CHECK_EQ((s)->totals.live_bytes, live_bytes_);                                          \
        CHECK_EQ((s)->totals.peak_bytes, peak_bytes_);                                          \
        CHECK_EQ((s)->totals.alloc_count, alloc_count_);                                        \
        CHECK_EQ((s)->totals.free_count, free_count_);                                          \
        CHECK_EQ((s)->totals.unknown_frees, unknown_frees_);                                    \
    } while (0)

/* Its pinned host memory: live bytes, allocations and peak. */
#define CHECK_HOST(s, bytes_, count_, peak_)                  \
    do {                                                      \
        CHECK_EQ((s)->totals.host_live_bytes, bytes_);        \
        CHECK_EQ((s)->totals.host_live_count, count_);        \
        CHECK_EQ((s)->totals.host_peak_bytes, peak_);         \
    } while (0)

static void test_ring_wraps(void) {
    /* The ring holds 4 events; 6 allocations and 4 frees leave the last 4. */
    for (int i = 0; i < 6; i++)
        vt_tracker_alloc(0x100 + (uint64_t)i, 10 + (uint64_t)i, VT_KIND_DEVICE, 0, "t", site_a, 3);
    for (int i = 0; i < 4; i++) free_it(VT_SPACE_DEVICE, 0x100 + (uint64_t)i, 1);
    struct vt_snapshot *s = vt_tracker_snapshot();
    CHECK_EQ(s->nevents, 4);
    CHECK_EQ(s->events_dropped, 6);
    for (size_t i = 0; i < s->nevents; i++) {
        CHECK_EQ(vt_event_at(s, i).type, VT_EV_FREE);
        CHECK_EQ(vt_event_at(s, i).address, 0x100 + i);
        if (i) CHECK(vt_event_at(s, i).time_ns >= vt_event_at(s, i - 1).time_ns);
    }
    CHECK_EQ(s->totals.live_count, 2);
    CHECK_EQ(s->totals.live_bytes, 14 + 15);
    vt_snapshot_free(s);
    vt_tracker_reset_child();
}

/* A thread's log is applied before it can lap itself: 5,000 allocations
 * of distinct sizes with no reader between them (a slot's log holds 1,024
 * ops; its room mark, log.h, must never let head pass tail + 1,024) are
 * all counted, once. */
static void test_log_never_laps_itself(void) {
    enum { N = 5000 };
    for (uint64_t i = 0; i < N; i++) vt_tracker_alloc(0x100000 + 16 * i, i + 1, VT_KIND_DEVICE, 0, "t", site_a, 3);
    struct vt_snapshot *s = vt_tracker_snapshot();
    CHECK_TOTALS(s, N, (uint64_t)N * (N + 1) / 2, (uint64_t)N * (N + 1) / 2, N, 0, 0);
    vt_snapshot_free(s);
    vt_tracker_reset_child();
}

static void test_totals_peak_devices_host(void) {
    CHECK(!vt_tracker_touched());
    vt_tracker_alloc(0xa000, 1000, VT_KIND_DEVICE, 0, "cuMemAlloc_v2", site_a, 3);
    vt_tracker_alloc(0xb000, 3000, VT_KIND_ASYNC, 1, "cuMemAllocAsync", site_b, 3);
    vt_tracker_alloc(0xc000, 500, VT_KIND_HOST, 0, "cuMemAllocHost_v2", site_a, 3);
    CHECK(vt_tracker_touched());
    free_it(VT_SPACE_DEVICE, 0xb000, 1);
    free_it(VT_SPACE_DEVICE, 0xdead, 1);
    /* A host pointer is not found in the device space. */
    free_it(VT_SPACE_DEVICE, 0xc000, 1);
    vt_tracker_alloc(0xd000, 200, VT_KIND_DEVICE, 1, "cuMemAlloc_v2", site_b, 3);

    struct vt_snapshot *s = vt_tracker_snapshot();
    CHECK_TOTALS(s, 2, 1200, 4000, 4, 1, 2);
    CHECK_HOST(s, 500, 1, 500);
    CHECK_EQ(s->ndevices, 2);
    CHECK_EQ(s->devices[0].live_bytes, 1000);
    CHECK_EQ(s->devices[0].peak_bytes, 1000);
    CHECK_EQ(s->devices[1].live_bytes, 200);
    CHECK_EQ(s->devices[1].peak_bytes, 3000);
    CHECK_EQ(s->devices[1].alloc_count, 2);
    CHECK_EQ(s->devices[1].free_count, 1);
    CHECK_EQ(s->nstacks, 2);
    vt_snapshot_free(s);
    vt_tracker_reset_child();
}

/* A reset of device 0: its memory of the kinds a context owns leaves the
 * live counts as a free would and is kept by stack, and the pinned host
 * memory the driver says was made on it; device 1's, stream-ordered
 * memory, other pinned host memory and cuMemCreate handles stay; a reset
 * that failed puts the records back; an address the driver hands out
 * again during the reset (to another thread) is a new allocation that the
 * release leaves alone; what was released stays across later resets, the
 * pinned host memory in a list of its own (kept apart from the device's,
 * as the host totals are). */
static int pinned_on_0(uint64_t address, void *arg) {
    (*(int *)arg)++;
    return address == 0xc000;
}

static void test_reset_releases_the_devices_memory(void) {
    vt_tracker_alloc(0xa000, 1000, VT_KIND_DEVICE, 0, "cuMemAlloc_v2", site_a, 3);
    vt_tracker_alloc(0xa100, 2000, VT_KIND_ASYNC, 0, "cuMemAllocAsync", site_a, 3);
    vt_tracker_alloc(0xa200, 4000, VT_KIND_MANAGED, 0, "cuMemAllocManaged", site_b, 3);
    vt_tracker_alloc(0xa300, 300, VT_KIND_DEVICE, 0, "cuMemAlloc_v2", site_b, 3);
    vt_tracker_alloc(0xb000, 500, VT_KIND_DEVICE, 1, "cuMemAlloc_v2", site_a, 3);
    vt_tracker_alloc(0xc000, 64, VT_KIND_HOST, VT_HOST_DEVICE, "cuMemAllocHost_v2", site_a, 3);
    vt_tracker_alloc(0xd000, 32, VT_KIND_HOST, VT_HOST_DEVICE, "cuMemAllocHost_v2", site_b, 3);
    vt_tracker_alloc(0x77, 8000, VT_KIND_VMM, 0, "cuMemCreate", site_b, 3);
    size_t n = 99;
    struct vt_holder *h = vt_tracker_released(0, &n);
    CHECK(h == NULL);
    CHECK_EQ(n, 0);
    h = vt_tracker_released(1, &n);
    CHECK(h == NULL);
    CHECK_EQ(n, 0);
    /* A reset that failed: nothing released, the records back. */
    int asked = 0;
    vt_tracker_release_end(vt_tracker_release_begin(0, pinned_on_0, &asked), 0);
    CHECK_EQ(asked, 2); /* the driver asked of pinned host memory alone */
    struct vt_snapshot *s = vt_tracker_snapshot();
    CHECK_TOTALS(s, 6, 15800, 15800, 8, 0, 0);
    CHECK_HOST(s, 96, 2, 96);
    CHECK_EQ(s->nreleased, 0);
    CHECK_EQ(s->nreleased_host, 0);
    vt_snapshot_free(s);
    struct vt_release *rl = vt_tracker_release_begin(0, pinned_on_0, &asked);
    /* During the reset the driver hands 0xa000 out again. */
    vt_tracker_alloc(0xa000, 10, VT_KIND_DEVICE, 0, "cuMemAlloc_v2", site_b, 3);
    vt_tracker_release_end(rl, 1);
    s = vt_tracker_snapshot();
    CHECK_TOTALS(s, 4, 10510, 15800, 9, 4, 0);
    CHECK_HOST(s, 32, 1, 96);
    CHECK_EQ(s->devices[0].live_bytes, 10010);
    CHECK_EQ(s->devices[1].live_bytes, 500);
    CHECK_EQ(s->nreleased, 2);
    if (s->nreleased == 2) {   /* by stack, largest first: site_b 4300 in 2, site_a 1000 in 1 */
        CHECK_EQ(s->released[0].stack, 1); CHECK_EQ(s->released[0].bytes, 4300); CHECK_EQ(s->released[0].count, 2);
        CHECK_EQ(s->released[1].stack, 0); CHECK_EQ(s->released[1].bytes, 1000); CHECK_EQ(s->released[1].count, 1);
    }
    CHECK_EQ(s->nreleased_host, 1);   /* site_a's 64 of pinned host memory */
    if (s->nreleased_host == 1) {
        CHECK_EQ(s->released_host[0].stack, 0); CHECK_EQ(s->released_host[0].bytes, 64);
        CHECK_EQ(s->released_host[0].count, 1);
    }
    vt_snapshot_free(s);
    /* Without a driver to ask, no pinned host memory goes. */
    vt_tracker_release_end(vt_tracker_release_begin(1, NULL, NULL), 1);
    s = vt_tracker_snapshot();
    CHECK_TOTALS(s, 3, 10010, 15800, 9, 5, 0);
    CHECK_HOST(s, 32, 1, 96);
    CHECK_EQ(s->nreleased, 2);
    if (s->nreleased == 2) {
        CHECK_EQ(s->released[0].stack, 1); CHECK_EQ(s->released[0].bytes, 4300);
        CHECK_EQ(s->released[1].stack, 0); CHECK_EQ(s->released[1].bytes, 1500); CHECK_EQ(s->released[1].count, 2);
    }
    CHECK_EQ(s->nreleased_host, 1);
    vt_snapshot_free(s);
    vt_tracker_reset_child();
    h = vt_tracker_released(0, &n);
    CHECK(h == NULL);
    CHECK_EQ(n, 0);
    h = vt_tracker_released(1, &n);
    CHECK(h == NULL);
    CHECK_EQ(n, 0);
}

/* A stand-in for vt_stack_capture_since: it answers VT_STACK_SAME when
 * `same` is set and it is handed the serial of its last capture; else it
 * captures `frames` and its serial moves on. */
static struct {
    const uintptr_t *frames;
    int same, calls;
    uint64_t serial, since;
} fake;

static int fake_capture(uintptr_t *out, int max, uint64_t since) {
    fake.calls++;
    fake.since = since;
    if (fake.same && since == fake.serial) return VT_STACK_SAME;
    fake.serial++;
    memcpy(out, fake.frames, 3 * sizeof *out);
    return max < 3 ? max : 3;
}

static uint64_t fake_serial(void) { return fake.serial; }

/* The one memo of the last stack: a capture that says "same" gets the
 * memo's id, one that does not is interned; an id taken from frames
 * (vt_tracker_stack_id) leaves no serial a capture could match. */
static void test_same_stack_memo(void) {
    fake.frames = site_a;
    fake.same = 1;
    fake.serial = 100;
    uint32_t a = vt_tracker_stack_id_captured(20, fake_capture, fake_serial);
    CHECK_EQ(fake.since, UINT64_MAX);
    CHECK_EQ(vt_tracker_stack_id_captured(20, fake_capture, fake_serial), a);
    CHECK_EQ(fake.since, 101);
    CHECK_EQ(fake.serial, 101); /* told "same": nothing captured */
    fake.frames = site_b;
    fake.same = 0;
    uint32_t b = vt_tracker_stack_id_captured(20, fake_capture, fake_serial);
    CHECK(b != a);
    fake.same = 1;
    CHECK_EQ(vt_tracker_stack_id_captured(20, fake_capture, fake_serial), b);
    CHECK_EQ(fake.since, 102);
    CHECK_EQ(vt_tracker_stack_id(site_a, 3), a);
    CHECK_EQ(vt_tracker_stack_id_captured(20, fake_capture, fake_serial), b);
    CHECK_EQ(fake.since, UINT64_MAX);
    CHECK_EQ(fake.calls, 5);
    vt_tracker_alloc_at(1, 10, VT_KIND_DEVICE, 0, "x", b);
    struct vt_snapshot *s = vt_tracker_snapshot();
    CHECK_EQ(s->nstacks, 2);
    if (s->nstacks == 2) CHECK_EQ(s->stacks[b]->frames[0], 0x1100);
    vt_snapshot_free(s);
    /* A forked child's memo is empty: its stack ids start anew. */
    vt_tracker_reset_child();
    CHECK_EQ(vt_tracker_stack_id_captured(20, fake_capture, fake_serial), 0);
    CHECK_EQ(fake.since, UINT64_MAX);
    vt_tracker_reset_child();
}

static void test_interning_and_holders(void) {
    uintptr_t deep[300];
    for (int i = 0; i < 300; i++) deep[i] = 0x5000 + (uintptr_t)i;
    vt_tracker_alloc(1, 100, VT_KIND_DEVICE, 0, "x", site_a, 3);
    vt_tracker_alloc(2, 300, VT_KIND_DEVICE, 0, "x", site_b, 3);
    vt_tracker_alloc(3, 100, VT_KIND_DEVICE, 0, "x", site_a, 3);
    vt_tracker_alloc(4, 150, VT_KIND_DEVICE, 0, "x", site_a, 2); /* a prefix is another stack */
    vt_tracker_alloc(5, 7, VT_KIND_DEVICE, 0, "x", deep, 300);    /* cut at VT_MAX_FRAMES */
    vt_tracker_alloc(6, 9999, VT_KIND_HOST, 0, "x", site_b, 3);   /* not a GPU holder */
    struct vt_snapshot *s = vt_tracker_snapshot();
    CHECK_EQ(s->nstacks, 4);
    CHECK_EQ(s->stacks[3]->depth, VT_MAX_FRAMES);
    size_t n = 0;
    struct vt_holder *h = vt_holders(s, &n);
    CHECK_EQ(n, 4);
    if (n == 4) {
        CHECK_EQ(h[0].bytes, 300); CHECK_EQ(h[0].stack, 1); CHECK_EQ(h[0].count, 1);
        CHECK_EQ(h[1].bytes, 200); CHECK_EQ(h[1].stack, 0); CHECK_EQ(h[1].count, 2);
        CHECK_EQ(h[2].bytes, 150); CHECK_EQ(h[3].bytes, 7);
    }
    free(h);
    vt_sort_live(s);
    CHECK_EQ(s->live[0].bytes, 9999);
    CHECK_EQ(s->live[1].bytes, 300);
    CHECK_EQ(s->live[s->nlive - 1].bytes, 7);
    vt_snapshot_free(s);
    vt_tracker_reset_child();
}

/* The peak table as a dump writes it (vt_peak_holder_next): its entry i. */
static int peak_entry(const struct vt_snapshot *s, size_t i, struct vt_holder *h) {
    struct vt_peak_cursor c = {0, 0};
    for (size_t k = 0; vt_peak_holder_next(s, &c, h); k++)
        if (k == i) return 1;
    return 0;
}

static size_t peak_count(const struct vt_snapshot *s) {
    struct vt_holder h;
    size_t n = 0;
    while (peak_entry(s, n, &h)) n++;
    return n;
}

static uint64_t peak_of(const struct vt_snapshot *s, uint32_t stack, uint64_t *count) {
    struct vt_peak_cursor c = {0, 0};
    struct vt_holder h;
    while (vt_peak_holder_next(s, &c, &h))
        if (h.stack == stack) {
            *count = h.count;
            return h.bytes;
        }
    *count = 0;
    return 0;
}

/* The holders of every kind (the leak report's): the device table where
 * no site holds memory of other kinds (all_is_device), else the device
 * entries with each site's other kinds added, and the sites of other kinds
 * alone, merged by stack (tracker/account.c). */
static void test_holders_of_every_kind(void) {
    static const uintptr_t s0[] = {0x7100, 0x7200}, s1[] = {0x7300, 0x7200}, s2[] = {0x7400, 0x7200},
                           s3[] = {0x7500, 0x7200};
    vt_tracker_alloc(0x100, 100, VT_KIND_DEVICE, 0, "x", s0, 2);
    vt_tracker_alloc(0x200, 40, VT_KIND_DEVICE, 0, "x", s1, 2);
    struct vt_snapshot *s = vt_tracker_snapshot();
    CHECK_EQ(s->all_is_device, 1);
    CHECK(s->all_holders == NULL);
    size_t n = 0;
    struct vt_holder *h = vt_holders_of(s, 0, &n);
    CHECK_EQ(n, 2);
    if (n == 2) {
        CHECK_EQ(h[0].stack, 0); CHECK_EQ(h[0].bytes, 100); CHECK_EQ(h[0].count, 1);
        CHECK_EQ(h[1].stack, 1); CHECK_EQ(h[1].bytes, 40); CHECK_EQ(h[1].count, 1);
    }
    free(h);
    vt_snapshot_free(s);
    /* Stack 1 holds pinned host memory too, stack 2 only that, stack 3
     * only imported memory; stack 0 device memory alone. */
    vt_tracker_alloc(0x300, 1000, VT_KIND_HOST, 0, "x", s1, 2);
    vt_tracker_alloc(0x400, 5, VT_KIND_HOST, 0, "x", s2, 2);
    vt_tracker_alloc(0x500, 6, VT_KIND_HOST, 0, "x", s2, 2);
    vt_tracker_alloc(0x600, 70, VT_KIND_IMPORTED, 0, "x", s3, 2);
    s = vt_tracker_snapshot();
    CHECK_EQ(s->all_is_device, 0);
    h = vt_holders_of(s, 0, &n);
    CHECK_EQ(n, 4);
    if (n == 4) {
        CHECK_EQ(h[0].stack, 1); CHECK_EQ(h[0].bytes, 1040); CHECK_EQ(h[0].count, 2);
        CHECK_EQ(h[1].stack, 0); CHECK_EQ(h[1].bytes, 100); CHECK_EQ(h[1].count, 1);
        CHECK_EQ(h[2].stack, 3); CHECK_EQ(h[2].bytes, 70); CHECK_EQ(h[2].count, 1);
        CHECK_EQ(h[3].stack, 2); CHECK_EQ(h[3].bytes, 11); CHECK_EQ(h[3].count, 2);
    }
    free(h);
    h = vt_holders_of(s, 1, &n);
    CHECK_EQ(n, 2);
    if (n == 2) {
        CHECK_EQ(h[0].stack, 0); CHECK_EQ(h[0].bytes, 100);
        CHECK_EQ(h[1].stack, 1); CHECK_EQ(h[1].bytes, 40);
    }
    free(h);
    vt_snapshot_free(s);
    vt_tracker_reset_child();
}

/* The peak table as a dump writes it: sites that hold at the peak what
 * they hold now keep no peak entry of their own (a bit in peak_same), the
 * others do, and vt_peak_holder_next merges the two in vt_holder_order. */
static void test_peak_table_merged_from_same_and_changed(void) {
    static const uintptr_t s0[] = {0x8100, 0x8200}, s1[] = {0x8300, 0x8200}, s2[] = {0x8400, 0x8200},
                           s3[] = {0x8500, 0x8200};
    vt_tracker_alloc(0xa0, 100, VT_KIND_DEVICE, 0, "x", s0, 2);
    vt_tracker_alloc(0xb0, 50, VT_KIND_DEVICE, 0, "x", s1, 2);
    vt_tracker_alloc(0xc0, 10, VT_KIND_DEVICE, 0, "x", s2, 2); /* the peak: 160, now */
    struct vt_snapshot *s = vt_tracker_snapshot();
    CHECK_EQ(s->npeak_holders, 0); /* every site as at the peak */
    struct vt_holder h;
    uint32_t want1[][3] = {{0, 100, 1}, {1, 50, 1}, {2, 10, 1}};
    for (size_t i = 0; i < 3; i++) {
        CHECK(peak_entry(s, i, &h));
        CHECK_EQ(h.stack, want1[i][0]); CHECK_EQ(h.bytes, want1[i][1]); CHECK_EQ(h.count, want1[i][2]);
    }
    CHECK_EQ(peak_count(s), 3);
    vt_snapshot_free(s);
    free_it(VT_SPACE_DEVICE, 0xa0, 1);
    vt_tracker_alloc(0xd0, 5, VT_KIND_DEVICE, 0, "x", s3, 2);  /* 65 now; the peak stays 160 */
    vt_tracker_alloc(0xb1, 20, VT_KIND_DEVICE, 0, "x", s1, 2); /* s1 70 now, 50 at the peak */
    free_it(VT_SPACE_DEVICE, 0xc0, 1);
    vt_tracker_alloc(0xc1, 5, VT_KIND_DEVICE, 0, "x", s2, 2);
    vt_tracker_alloc(0xc2, 5, VT_KIND_DEVICE, 0, "x", s2, 2);  /* s2 10 bytes in 2 now, in 1 at the peak */
    s = vt_tracker_snapshot();
    CHECK_EQ(s->totals.peak_bytes, 160);
    CHECK_EQ(s->npeak_holders, 3); /* s0 (100 then, none now), s1 (50 then, 70 now), s2 (one then, two now) */
    uint32_t want2[][3] = {{0, 100, 1}, {1, 50, 1}, {2, 10, 1}};
    for (size_t i = 0; i < 3; i++) {
        CHECK(peak_entry(s, i, &h));
        CHECK_EQ(h.stack, want2[i][0]); CHECK_EQ(h.bytes, want2[i][1]); CHECK_EQ(h.count, want2[i][2]);
    }
    CHECK_EQ(peak_count(s), 3);
    CHECK_EQ(s->nholders, 3); /* s1 70, s2 10, s3 5 */
    if (s->nholders == 3) {
        CHECK_EQ(s->holders[1].stack, 2); CHECK_EQ(s->holders[1].bytes, 10); CHECK_EQ(s->holders[1].count, 2);
    }
    vt_snapshot_free(s);
    vt_tracker_reset_child();
}

static void test_restore_and_reuse(void) {
    vt_tracker_alloc(0x10, 64, VT_KIND_DEVICE, 0, "x", site_a, 3);
    free_it(VT_SPACE_DEVICE, 0x10, 0); /* the free failed: still live */
    struct vt_snapshot *s = vt_tracker_snapshot();
    CHECK_EQ(s->totals.live_count, 1);
    CHECK_EQ(s->totals.free_count, 0);
    vt_snapshot_free(s);
    /* The address comes back from the driver while we think it live: its
     * memory went back unseen. The new allocation replaces the old record,
     * which counts as a free and as released without one, by its stack,
     * its free event before the new allocation's. */
    vt_tracker_alloc(0x10, 128, VT_KIND_DEVICE, 0, "x", site_b, 3);
    s = vt_tracker_snapshot();
    CHECK_TOTALS(s, 1, 128, 128, 2, 1, 0);
    CHECK_EQ(s->nreleased, 1);
    if (s->nreleased == 1) {
        CHECK_EQ(s->released[0].stack, 0); CHECK_EQ(s->released[0].bytes, 64); CHECK_EQ(s->released[0].count, 1);
    }
    CHECK_EQ(s->nevents, 4); /* the ring's 4: the restored allocation, the replaced record's free, the new one */
    if (s->nevents == 4) {
        CHECK_EQ(vt_event_at(s, 2).type, VT_EV_FREE); CHECK_EQ(vt_event_at(s, 2).bytes, 64);
        CHECK_EQ(vt_event_at(s, 3).type, VT_EV_ALLOC); CHECK_EQ(vt_event_at(s, 3).bytes, 128);
    }
    vt_snapshot_free(s);
    /* VMM handles live in their own space and take a mapped address. */
    vt_tracker_alloc(0x10, 2 << 20, VT_KIND_VMM, 0, "cuMemCreate", site_a, 3);
    vt_tracker_map(0x10, 0x7000, 2 << 20);
    s = vt_tracker_snapshot();
    CHECK_EQ(s->totals.live_count, 2);
    for (size_t i = 0; i < s->nlive; i++)
        if (s->live[i].kind == VT_KIND_VMM) CHECK_EQ(vt_live_mapped(s, &s->live[i]), 0x7000);
    vt_snapshot_free(s);
    vt_tracker_reset_child();
}

/* The history of VMM mappings: each with its handle, address, bytes, the
 * handle's device and its place among the events (the allocation before
 * it, the free after it, even where that free's log was not applied yet),
 * its unmap the same; the newest VT_MAX_MAPPINGS kept, an unmap of one
 * overwritten ignored, a handle with no record never kept; a forked child
 * starts with none. The event ring holds 4 events here. */
static void test_mappings_history(void) {
    vt_tracker_reset_child();
    CHECK_EQ(vt_tracker_map(0x99, 0x9000, 4096), 0);   /* no record: not kept */
    vt_tracker_alloc(0x20, 2 << 20, VT_KIND_VMM, 1, "cuMemCreate", site_a, 3);
    uint64_t id = vt_tracker_map(0x20, 0x7100000000ull, 2 << 20);
    CHECK_EQ(id, 1);
    struct vt_snapshot *s = vt_tracker_snapshot();
    CHECK_EQ(s->mappings_total, 1);
    CHECK_EQ(s->nmappings, 1);
    CHECK_EQ(s->nevents, 1);
    const struct vt_mapping *m = &s->mappings[0];
    CHECK_EQ(m->handle, 0x20);
    CHECK_EQ(m->address, 0x7100000000ull);
    CHECK_EQ(m->bytes, 2 << 20);
    CHECK_EQ(m->device, 1);
    CHECK_EQ(m->unmapped, 0);
    CHECK_EQ(vt_event_index(s, m->event), 1);   /* after the allocation */
    CHECK(m->time_ns >= vt_event_at(s, 0).time_ns);
    vt_snapshot_free(s);
    /* The free, then the unmap (a handle released while mapped ends at its
     * unmap: the free is logged before the driver's call). */
    free_it(VT_SPACE_HANDLE, 0x20, 1);
    vt_tracker_unmap(id);
    vt_tracker_unmap(0);
    s = vt_tracker_snapshot();
    CHECK_EQ(s->nmappings, 1);
    CHECK_EQ(s->nevents, 2);
    m = &s->mappings[0];
    CHECK_EQ(m->unmapped, 1);
    CHECK_EQ(vt_event_index(s, m->event), 1);   /* the free is event 1, after it */
    CHECK_EQ(vt_event_index(s, m->unmap_event), 2);
    CHECK(m->unmap_ns >= m->time_ns && m->unmap_ns >= vt_event_at(s, 1).time_ns);
    vt_snapshot_free(s);
    /* More than the ring holds: the newest kept, oldest first. */
    vt_tracker_alloc(0x30, 4096, VT_KIND_VMM, 0, "cuMemCreate", site_a, 3);
    uint64_t last = 0;
    for (uint64_t i = 0; i < VT_MAX_MAPPINGS + 2; i++) last = vt_tracker_map(0x30, 0x7200000000ull + i * 4096, 4096);
    CHECK_EQ(last, VT_MAX_MAPPINGS + 3);
    vt_tracker_unmap(2);   /* overwritten: nothing */
    vt_tracker_unmap(last);
    s = vt_tracker_snapshot();
    CHECK_EQ(s->mappings_total, VT_MAX_MAPPINGS + 3);
    CHECK_EQ(s->nmappings, VT_MAX_MAPPINGS);
    CHECK_EQ(s->mappings[0].address, 0x7200000000ull + 2 * 4096);
    CHECK_EQ(s->mappings[VT_MAX_MAPPINGS - 1].address, 0x7200000000ull + (VT_MAX_MAPPINGS + 1) * 4096ull);
    size_t unmapped = 0;
    for (size_t i = 0; i < s->nmappings; i++) unmapped += s->mappings[i].unmapped;
    CHECK_EQ(unmapped, 1);
    CHECK_EQ(s->mappings[VT_MAX_MAPPINGS - 1].unmapped, 1);
    vt_snapshot_free(s);
    vt_tracker_reset_child();
    s = vt_tracker_snapshot();
    CHECK_EQ(s->mappings_total, 0);
    CHECK_EQ(s->nmappings, 0);
    vt_snapshot_free(s);
}

/* An address the driver hands to another thread while the first still
 * holds a record of it: left behind (each thread looks in its own table)
 * until memory may have gone unseen (vt_tracker_unseen_release); from
 * then on the old record, in whichever thread's table, is released
 * without a free before the new one counts (the peak never holds both). */
static void *alloc_0x40(void *arg) {
    vt_tracker_alloc(0x40, (uint64_t)(uintptr_t)arg, VT_KIND_DEVICE, 0, "x", site_b, 3);
    return NULL;
}

static void test_reuse_across_threads(void) {
    pthread_t t;
    vt_tracker_alloc(0x40, 100, VT_KIND_DEVICE, 0, "x", site_a, 3);
    pthread_create(&t, NULL, alloc_0x40, (void *)(uintptr_t)200);
    pthread_join(t, NULL);
    struct vt_snapshot *s = vt_tracker_snapshot();
    CHECK_TOTALS(s, 2, 300, 300, 2, 0, 0); /* both: the first is left behind */
    CHECK_EQ(s->nreleased, 0);
    vt_snapshot_free(s);
    vt_tracker_unseen_release(VT_SPACES_ALL);
    vt_tracker_alloc(0x40, 400, VT_KIND_DEVICE, 0, "x", site_a, 3);   /* this thread's and the other's */
    pthread_create(&t, NULL, alloc_0x40, (void *)(uintptr_t)800);     /* this thread's new one */
    pthread_join(t, NULL);
    s = vt_tracker_snapshot();
    CHECK_TOTALS(s, 1, 800, 800, 4, 3, 0);
    CHECK_EQ(s->nreleased, 2);
    if (s->nreleased == 2) {   /* largest first: site_a 500 in 2, site_b 200 in 1 */
        CHECK_EQ(s->released[0].stack, 0); CHECK_EQ(s->released[0].bytes, 500); CHECK_EQ(s->released[0].count, 2);
        CHECK_EQ(s->released[1].stack, 1); CHECK_EQ(s->released[1].bytes, 200); CHECK_EQ(s->released[1].count, 1);
    }
    vt_snapshot_free(s);
    vt_tracker_reset_child();
}

/* Only the name spaces that may have records left behind are looked for
 * in the other threads' tables: after a context's destruction, which
 * leaves its arrays (known by handle), an array's, not device memory's. */
static void *alloc_0x60_0x70(void *arg) {
    (void)arg;
    vt_tracker_alloc(0x60, 30, VT_KIND_DEVICE, 0, "x", site_b, 3);
    vt_tracker_alloc(0x70, 40, VT_KIND_ARRAY, 0, "x", site_b, 3);
    return NULL;
}

static void test_stale_by_space(void) {
    vt_tracker_alloc(0x60, 10, VT_KIND_DEVICE, 0, "x", site_a, 3);
    vt_tracker_alloc(0x70, 20, VT_KIND_ARRAY, 0, "x", site_a, 3);
    vt_tracker_unseen_release(1u << VT_SPACE_ARRAY);
    pthread_t t;
    pthread_create(&t, NULL, alloc_0x60_0x70, NULL);
    pthread_join(t, NULL);
    struct vt_snapshot *s = vt_tracker_snapshot();
    CHECK_TOTALS(s, 3, 80, 80, 4, 1, 0); /* 0x60 twice, the array once */
    CHECK_EQ(s->nreleased, 1);
    if (s->nreleased == 1) {
        CHECK_EQ(s->released[0].stack, 0); CHECK_EQ(s->released[0].bytes, 20); CHECK_EQ(s->released[0].count, 1);
    }
    vt_snapshot_free(s);
    vt_tracker_reset_child();
}

/* References to a live record (an IPC mapping opened again): counted on
 * it, from any thread; one fewer while it has more than its first; none
 * for an address not live. */
static void *ref_0x90(void *arg) {
    (void)arg;
    return (void *)(uintptr_t)vt_tracker_ref(VT_SPACE_IMPORTED, 0x90);
}

static void test_references(void) {
    vt_tracker_alloc(0x90, 4096, VT_KIND_IMPORTED, 0, "cuIpcOpenMemHandle_v2", site_a, 3);
    CHECK_EQ(vt_tracker_ref(VT_SPACE_IMPORTED, 0x91), 0);
    CHECK_EQ(vt_tracker_ref(VT_SPACE_DEVICE, 0x90), 0);   /* another name space */
    CHECK_EQ(vt_tracker_unref(VT_SPACE_IMPORTED, 0x90), 0); /* its first only */
    pthread_t t;
    void *got = NULL;
    pthread_create(&t, NULL, ref_0x90, NULL);
    pthread_join(t, &got);
    CHECK_EQ((uintptr_t)got, 1);
    CHECK_EQ(vt_tracker_ref(VT_SPACE_IMPORTED, 0x90), 1);
    struct vt_alloc a;
    CHECK(vt_tracker_find(VT_SPACE_IMPORTED, 0x90, &a) && a.refs == 2);
    CHECK_EQ(vt_tracker_unref(VT_SPACE_IMPORTED, 0x90), 1);
    CHECK_EQ(vt_tracker_unref(VT_SPACE_IMPORTED, 0x90), 1);
    CHECK_EQ(vt_tracker_unref(VT_SPACE_IMPORTED, 0x90), 0);
    struct vt_snapshot *s = vt_tracker_snapshot();
    CHECK_EQ(s->totals.imported_live_count, 1);   /* one mapping, however many references */
    CHECK_EQ(s->totals.imported_live_bytes, 4096);
    CHECK_EQ(s->totals.alloc_count, 1);
    vt_snapshot_free(s);
    free_it(VT_SPACE_IMPORTED, 0x90, 1);
    CHECK_EQ(vt_tracker_ref(VT_SPACE_IMPORTED, 0x90), 0);
    vt_tracker_reset_child();
}

/* Frees and allocations of one address that reach the tables out of
 * order: each is matched by its time stamp, not by its arrival. */
static void *alloc_0x20(void *arg) {
    (void)arg;
    vt_tracker_alloc(0x20, 200, VT_KIND_DEVICE, 0, "x", site_b, 3);
    return NULL;
}

static void test_order_by_time_stamp(void) {
    /* Thread 1 frees 0x20; before it records the free, the driver hands
     * 0x20 to thread 2. The free comes out of the table first (thread 2's
     * allocation does not find it), and the logs are applied by time
     * stamp: the old 100 bytes go before the new 200 come, so the peak is
     * 200, not 300. */
    vt_tracker_alloc(0x20, 100, VT_KIND_DEVICE, 0, "x", site_a, 3);
    struct vt_free late = vt_tracker_free_begin(VT_SPACE_DEVICE, 0x20);
    pthread_t t;
    pthread_create(&t, NULL, alloc_0x20, NULL);
    pthread_join(t, NULL);
    vt_tracker_free_end(&late, 1);
    struct vt_snapshot *s = vt_tracker_snapshot();
    CHECK_TOTALS(s, 1, 200, 200, 2, 1, 0);
    CHECK_EQ(s->nlive, 1);
    if (s->nlive == 1) CHECK_EQ(s->live[0].bytes, 200);
    vt_snapshot_free(s);
    /* A free of an address not live is one of a pointer never seen, even
     * when the driver refuses it; a later allocation there is live. */
    free_it(VT_SPACE_DEVICE, 0x30, 1);
    free_it(VT_SPACE_DEVICE, 0x31, 0);
    s = vt_tracker_snapshot();
    CHECK_EQ(s->totals.unknown_frees, 2);
    vt_snapshot_free(s);
    vt_tracker_alloc(0x30, 300, VT_KIND_DEVICE, 0, "x", site_a, 3);
    s = vt_tracker_snapshot();
    CHECK_EQ(s->totals.live_bytes, 500);
    CHECK_EQ(s->nlive, 2);
    vt_snapshot_free(s);
    vt_tracker_reset_child();
}

static void test_failures(void) {
    struct vt_oom o = {.requested = 5000, .api = "cudaMalloc", .device = 0, .kind = VT_KIND_DEVICE,
                       .free_bytes = 10, .total_bytes = 100, .have_info = 1};
    vt_tracker_failed(0, &o, site_a, 3);
    CHECK(!vt_tracker_touched()); /* no driver is not "used a GPU" */
    vt_tracker_alloc(0x1, 40, VT_KIND_DEVICE, 0, "x", site_a, 3);
    vt_tracker_failed(1, &o, site_b, 3);
    struct vt_snapshot *s = vt_tracker_snapshot();
    CHECK_EQ(s->totals.failed_count, 2);
    CHECK_EQ(s->totals.oom_count, 1);
    CHECK_EQ(s->nooms, 1);
    CHECK_EQ(s->ooms[0].live_bytes, 40);
    CHECK_EQ(s->ooms[0].stack, 1);
    CHECK_EQ(s->devices[0].oom_count, 1);
    vt_snapshot_free(s);
    vt_tracker_reset_child();
}

/* Two threads fail at once: the first's listener is told after the
 * second's failure is recorded. Each thread knows its own failure's place
 * (vt_thread_oom_seq), so the first's outputs are of its own failure, not
 * of the second's in the same snapshot. */
static pthread_mutex_t race_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t race_cv = PTHREAD_COND_INITIALIZER;
static int race_state; /* 1: the first recorded its failure; 2: the second did */
static uint64_t race_seq[2];
static size_t race_nooms;
static uint64_t race_seen_request;
static __thread int race_first;

/* What a post-mortem of failure k of s would have left told, s keeping
 * every failure up to k (its requests' counts then, from the records). */
static struct vt_oom_told told_after(const struct vt_snapshot *s, uint64_t k) {
    struct vt_oom_told t = {.postmortems = 1, .failures = k, .have_last = 1, .last = s->ooms[k - 1]};
    t.counts = calloc(s->noom_requests + 1, sizeof *t.counts);
    t.ncounts = s->noom_requests;
    for (size_t i = 0; i < s->noom_requests; i++)
        for (uint64_t n = 0; n < k; n++) {
            const struct vt_oom *o = &s->ooms[n];
            const struct vt_oom_request *r = &s->oom_requests[i];
            t.counts[i] += o->requested == r->requested && o->stack == r->stack && o->device == r->device &&
                           o->api == r->api && o->kind == r->kind;
        }
    return t;
}

static void race_listener(void) {
    if (!race_first) {
        race_seq[1] = vt_thread_oom_seq;
        return;
    }
    pthread_mutex_lock(&race_mu);
    race_state = 1;
    pthread_cond_broadcast(&race_cv);
    while (race_state != 2) pthread_cond_wait(&race_cv, &race_mu);
    pthread_mutex_unlock(&race_mu);
    race_seq[0] = vt_thread_oom_seq;
    struct vt_snapshot *s = vt_tracker_snapshot();
    race_nooms = s->nooms;
    race_seen_request = vt_thread_oom_seq ? s->ooms[vt_thread_oom_seq - 1].requested : 0;
    vt_snapshot_free(s);
}

static void *race_first_thread(void *arg) {
    (void)arg;
    race_first = 1;
    struct vt_oom o = {.requested = 1 << 20, .api = "x", .device = 0, .kind = VT_KIND_DEVICE};
    vt_tracker_failed(1, &o, site_a, 3);
    return NULL;
}

static void test_each_thread_knows_its_own_failure(void) {
    struct vt_oom first = {.requested = 7, .api = "x", .device = 0, .kind = VT_KIND_DEVICE};
    vt_tracker_failed(1, &first, site_b, 3); /* an earlier one, told before */
    CHECK_EQ(vt_thread_oom_seq, 1);
    vt_tracker_on_failure(race_listener);
    pthread_t t;
    pthread_create(&t, NULL, race_first_thread, NULL);
    pthread_mutex_lock(&race_mu);
    while (race_state != 1) pthread_cond_wait(&race_cv, &race_mu);
    pthread_mutex_unlock(&race_mu);
    struct vt_oom o = {.requested = 10 << 20, .api = "x", .device = 0, .kind = VT_KIND_DEVICE};
    vt_tracker_failed(1, &o, site_b, 3);
    pthread_mutex_lock(&race_mu);
    race_state = 2;
    pthread_cond_broadcast(&race_cv);
    pthread_mutex_unlock(&race_mu);
    pthread_join(t, NULL);
    vt_tracker_on_failure(NULL);
    CHECK_EQ(race_seq[0], 2);
    CHECK_EQ(race_seq[1], 3);
    CHECK_EQ(race_nooms, 3);
    CHECK_EQ(race_seen_request, 1 << 20);

    /* The post-mortem of the last, after one told (told->failures 1): the
     * second, untold, in a line; none with all told, none for a retry of
     * the last (its request, device and call site). */
    struct vt_snapshot *s = vt_tracker_snapshot();
    struct vt_analysis *an = vt_analyse(s, NULL, 0);
    struct vt_dump_meta m = {.reason = "oom", .pid = 7};
    CHECK_EQ(s->noom_requests, 3);
    for (int told = 1; told <= 3; told++) {
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        struct vt_oom_told t = told_after(s, (uint64_t)told);
        vt_postmortem_oom(f, s, NULL, an, &m, NULL, 5, &t);
        vt_postmortem_told_reset(&t);
        fclose(f);
        const char *also = strstr(buf, "vramtrace:   also failed, without a post-mortem of its own: 1.00 MiB by x on "
                                        "device 0 at ");
        CHECK_EQ(also != NULL, told == 1);
        if (also) CHECK(strstr(also + 24, "also failed") == NULL); /* past its own "also failed" */
        free(buf);
    }
    struct vt_oom_told told1 = told_after(s, 1);
    s->ooms[1].requested = s->oom_requests[1].requested = s->ooms[2].requested;
    s->ooms[1].stack = s->oom_requests[1].stack = s->ooms[2].stack;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    vt_postmortem_oom(f, s, NULL, an, &m, NULL, 5, &told1);
    vt_postmortem_told_reset(&told1);
    fclose(f);
    CHECK(strstr(buf, "also failed") == NULL);
    free(buf);
    vt_analysis_free(an);
    vt_snapshot_free(s);
    vt_tracker_reset_child();
}

static const uintptr_t site_c[] = {0x1200, 0x2000, 0x3000};

/* Past the records kept: the first VT_FIRST_OOMS failures and the newest
 * VT_NEWEST_OOMS, in number order, and every request counted whole.
 * Before: the first 4096 only, the failure that ended a job dropped, and
 * the counts of what failed the records'. */
static void test_oom_records_keep_the_newest(void) {
    uint64_t n = VT_MAX_OOMS + 1000;
    for (uint64_t i = 1; i <= n; i++) {
        struct vt_oom o = {.requested = i <= 10 ? 7 : 9, .api = "x", .device = 0, .kind = VT_KIND_DEVICE};
        vt_tracker_failed(1, &o, i <= 10 ? site_a : site_b, 3);
        CHECK_EQ(vt_thread_oom_seq, i);
    }
    struct vt_snapshot *s = vt_tracker_snapshot();
    CHECK_EQ(s->totals.oom_count, n);
    CHECK_EQ(s->nooms, VT_MAX_OOMS);
    if (s->nooms == VT_MAX_OOMS) {
        CHECK_EQ(s->ooms[0].number, 1);
        CHECK_EQ(s->ooms[VT_FIRST_OOMS - 1].number, VT_FIRST_OOMS);
        CHECK_EQ(s->ooms[VT_FIRST_OOMS].number, n - VT_NEWEST_OOMS + 1);
        CHECK_EQ(s->ooms[VT_MAX_OOMS - 1].number, n);
        CHECK_EQ(s->ooms[VT_MAX_OOMS - 1].requested, 9);
        for (size_t i = 1; i < s->nooms; i++) CHECK(s->ooms[i].time_ns >= s->ooms[i - 1].time_ns);
    }
    CHECK_EQ(s->noom_requests, 2);
    if (s->noom_requests == 2) {
        CHECK_EQ(s->oom_requests[0].count, 10);
        CHECK_EQ(s->oom_requests[1].count, n - 10);
        CHECK_EQ(s->oom_requests[1].first_number, 11);
        CHECK_EQ(s->oom_requests[1].last_number, n);
    }
    /* A snapshot read as of failure n - 3 (another thread's three after
     * it left out): the counts as they were then. */
    CHECK_EQ(vt_postmortem_upto(s, n - 3), 1);
    CHECK_EQ(s->totals.oom_count, n - 3);
    CHECK_EQ(s->ooms[s->nooms - 1].number, n - 3);
    if (s->noom_requests == 2) CHECK_EQ(s->oom_requests[1].count, n - 13);
    if (s->noom_requests == 2) CHECK_EQ(s->oom_requests[1].last_number, n - 3);
    CHECK_EQ(vt_postmortem_upto(s, 20), 0); /* the ones after 20 are not all kept */
    vt_snapshot_free(s);
    vt_tracker_reset_child();
}

static void *fail_on_device_0(void *arg) {
    struct vt_oom o = {.requested = 5 << 20, .api = "x", .device = 0, .kind = VT_KIND_DEVICE};
    vt_tracker_failed(1, &o, site_c, 3);
    return NULL;
}

/* Two threads' failures on one device, the first thread's PyTorch record
 * arriving after both: the record is the first thread's failure's (before:
 * the latest failure on the device by time, the other thread's). */
static void test_torch_record_of_its_own_threads_failure(void) {
    struct vt_oom o = {.requested = 3 << 20, .api = "x", .device = 0, .kind = VT_KIND_DEVICE};
    vt_tracker_failed(1, &o, site_b, 3);
    pthread_t t;
    pthread_create(&t, NULL, fail_on_device_0, NULL);
    pthread_join(t, NULL);
    static const char rec[] = "vramtrace-torch\t1\toom\t0\t0\t9\n";
    CHECK_EQ(vt_torch_take(rec, sizeof rec - 1), 0);
    struct vt_snapshot *s = vt_tracker_snapshot();
    CHECK_EQ(s->nooms, 2);
    const struct vt_torch_record *r = vt_torch_for_oom(s, 0);
    CHECK(r != NULL && r->steps == 9);
    CHECK(vt_torch_for_oom(s, 1) == NULL);
    vt_snapshot_free(s);
    vt_tracker_reset_child();
}

static void test_holders_at_peak_and_oom(void) {
    uint64_t c;
    vt_tracker_alloc(0xa1, 100, VT_KIND_DEVICE, 0, "x", site_a, 3); /* stack 0 */
    vt_tracker_alloc(0xb1, 50, VT_KIND_DEVICE, 0, "x", site_b, 3);  /* stack 1; peak 150 */
    free_it(VT_SPACE_DEVICE, 0xa1, 1);
    vt_tracker_alloc(0xb2, 30, VT_KIND_DEVICE, 0, "x", site_b, 3);
    vt_tracker_alloc(0xc1, 60, VT_KIND_DEVICE, 0, "x", site_c, 3);  /* 140: below the peak */
    vt_tracker_alloc(0xd1, 999, VT_KIND_HOST, 0, "x", site_c, 3);   /* host: not counted */
    struct vt_snapshot *s = vt_tracker_snapshot();
    CHECK_EQ(s->totals.peak_bytes, 150);
    CHECK_EQ(peak_count(s), 2);
    CHECK_EQ(peak_of(s, 0, &c), 100); CHECK_EQ(c, 1);
    CHECK_EQ(peak_of(s, 1, &c), 50); CHECK_EQ(c, 1);
    CHECK_EQ(peak_of(s, 2, &c), 0);
    struct vt_holder first;
    CHECK(peak_entry(s, 0, &first) && first.stack == 0);
    vt_snapshot_free(s);

    struct vt_oom o = {.requested = 1 << 20, .api = "x", .device = 0, .kind = VT_KIND_DEVICE};
    vt_tracker_failed(1, &o, site_a, 3);
    vt_tracker_alloc(0xa2, 200, VT_KIND_DEVICE, 0, "x", site_a, 3); /* new peak 340 */
    s = vt_tracker_snapshot();
    CHECK_EQ(s->totals.peak_bytes, 340);
    CHECK_EQ(peak_of(s, 0, &c), 200); CHECK_EQ(c, 1);
    CHECK_EQ(peak_of(s, 1, &c), 80); CHECK_EQ(c, 2);
    CHECK_EQ(peak_of(s, 2, &c), 60); CHECK_EQ(c, 1);
    /* The OOM saw what was live then: B 80 in 2, C 60 in 1, A nothing. */
    CHECK_EQ(s->nooms, 1);
    CHECK_EQ(s->ooms[0].nholders, 2);
    if (s->ooms[0].nholders == 2) {
        CHECK_EQ(s->ooms[0].holders[0].stack, 1);
        CHECK_EQ(s->ooms[0].holders[0].bytes, 80);
        CHECK_EQ(s->ooms[0].holders[0].count, 2);
        CHECK_EQ(s->ooms[0].holders[1].stack, 2);
        CHECK_EQ(s->ooms[0].holders[1].bytes, 60);
    }
    vt_snapshot_free(s);
    /* Frees after the peak do not change what the peak held. */
    free_it(VT_SPACE_DEVICE, 0xa2, 1);
    free_it(VT_SPACE_DEVICE, 0xb1, 1);
    s = vt_tracker_snapshot();
    CHECK_EQ(peak_of(s, 0, &c), 200);
    CHECK_EQ(peak_of(s, 1, &c), 80);
    CHECK_EQ(s->totals.live_bytes, 90);
    vt_snapshot_free(s);
    vt_tracker_reset_child();
}

/* A snapshot of nothing but a history, the live allocations and the
 * stacks given (not owned: never vt_snapshot_free it). */
static struct vt_snapshot history_of(struct vt_event *ev, size_t nev, struct vt_live *live, size_t nlive,
                                     const struct vt_stack **stacks, size_t nstacks) {
    return (struct vt_snapshot){.events = ev, .nevents = nev, .live = live, .nlive = nlive, .stacks = stacks,
                                .nstacks = nstacks};
}

/* The one growing site of s up to `until` (checked to be one; all zero
 * when it is not). */
static struct vt_growth the_growth(const struct vt_snapshot *s, uint64_t until) {
    size_t n = 0;
    struct vt_growth *g = vt_find_growth(s, NULL, until, &n), one;
    CHECK_EQ(n, 1);
    memset(&one, 0, sizeof one);
    if (n == 1) one = g[0];
    free(g);
    return one;
}

/* A site keeps 10 bytes a step over 8 steps (and uses 5 more for a
 * moment in each), and the ring kept the last 4 steps' events: its live
 * allocations older than those keep their times, so its growth is known
 * from its first, at 100 (0 -> 80, 10 a step over the 8 steps), and says
 * it is of the history kept from 180. With the oldest 2 step boundaries
 * dropped too, per step over the 5 complete steps after the oldest kept
 * one (from what the site held there, 30), of the run's 8. Before: from
 * 40, over the 4 steps of the events kept. */
static void test_growth_known_past_the_ring(void) {
    struct vt_stack st = {0, 3, site_a};
    const struct vt_stack *stacks[] = {&st};
    struct vt_event all[24];
    struct vt_live live[8];
    struct vt_step steps[8];
    for (int i = 0; i < 8; i++) {
        uint64_t t = 100 + 20 * (uint64_t)i;
        all[3 * i] = (struct vt_event){t, 0x100 + (uint64_t)i, 10, 0, 0, VT_EV_ALLOC, VT_KIND_DEVICE};
        all[3 * i + 1] = (struct vt_event){t + 5, 0x200, 5, 0, 0, VT_EV_ALLOC, VT_KIND_DEVICE};
        all[3 * i + 2] = (struct vt_event){t + 10, 0x200, 5, 0, 0, VT_EV_FREE, VT_KIND_DEVICE};
        live[i] = (struct vt_live){0x100 + (uint64_t)i, 10, t, 0, 1, 0, VT_KIND_DEVICE, VT_LIVE_NO_API, 0};
        steps[i] = (struct vt_step){.step = (uint64_t)i + 1, .time_ns = t + 15, .event = 3 * (uint64_t)i + 3};
    }
    struct vt_snapshot s = history_of(all + 12, 12, live, 8, stacks, 1);
    s.events_dropped = 12;
    s.steps = steps;
    s.nsteps = s.steps_total = 8;
    struct vt_growth g = the_growth(&s, 1000);
    CHECK_EQ(g.first_floor, 0);
    CHECK_EQ(g.end_bytes, 80);
    CHECK_EQ(g.allocs, 12);         /* the 8 in the ring, and the 4 still live before it */
    CHECK_EQ(g.t_first_ns, 100);
    CHECK_EQ(g.history_from_ns, 180);
    CHECK_EQ(g.steps, 8);
    CHECK_EQ(g.step_rise, 80);
    CHECK_EQ(g.run_steps, 0);
    s.steps = steps + 2;
    s.nsteps = 6;
    g = the_growth(&s, 1000);
    CHECK_EQ(g.first_floor, 0);
    CHECK_EQ(g.t_first_ns, 100);
    CHECK_EQ(g.steps, 5);
    CHECK_EQ(g.step_rise, 50);
    CHECK_EQ(g.run_steps, 8);
    CHECK_EQ(g.t_step_first_ns, 155);
    char text[400];
    vt_growth_text(&g, text, sizeof text);
    CHECK(strstr(text, "+10 B per step over the last 5 of the run's 8 steps (+50 B in ") == text);
    CHECK(strstr(text, "; figures of the history kept (events from 0.000 s; before them, only its allocations "
                       "still live)") != NULL);
    /* The whole history: none of it said, the same figures. */
    s = history_of(all, 24, live, 8, stacks, 1);
    s.steps = steps;
    s.nsteps = s.steps_total = 8;
    g = the_growth(&s, 1000);
    CHECK_EQ(g.first_floor, 0);
    CHECK_EQ(g.allocs, 16);
    CHECK_EQ(g.history_from_ns, 0);
    CHECK_EQ(g.steps, 8);
    CHECK_EQ(g.step_rise, 80);
}

static void test_growth_with_events_out_of_order(void) {
    /* A history from several threads need not be in time order. */
    struct vt_stack st = {0, 3, site_a};
    const struct vt_stack *stacks[] = {&st};
    struct vt_event ev[8];
    struct vt_live live[8];
    uint64_t times[8] = {500, 100, 900, 300, 1500, 1200, 2000, 1800};
    for (int i = 0; i < 8; i++) {
        ev[i] = (struct vt_event){times[i], 0x100 + (uint64_t)i, 10, 0, 0, VT_EV_ALLOC, VT_KIND_DEVICE};
        live[i] = (struct vt_live){0x100 + (uint64_t)i, 10, times[i], 0, 1, 0, VT_KIND_DEVICE, VT_LIVE_NO_API, 0};
    }
    struct vt_snapshot s = history_of(ev, 8, live, 8, stacks, 1);
    s.now_ns = 2100;
    struct vt_growth g1 = the_growth(&s, s.now_ns);
    CHECK_EQ(g1.t_first_ns, 100);
    CHECK_EQ(g1.end_bytes, 80);
    CHECK_EQ(g1.allocs, 8);
    size_t n = 0;
    struct vt_growth *g = vt_find_growth(&s, NULL, 50, &n); /* before any event */
    CHECK_EQ(n, 0);
    free(g);
}

/* A site that grew in four steps early in a run: reported right after,
 * it is growing; reported a second later by a program that marked no step,
 * its rise was a phase of the run (without steps only the time counts the
 * work a program does without allocating: a caching allocator's warm-up
 * then its quiet steps read so); with the program's steps marked, the
 * steps count the work, and a report a second later finds it all the same
 * (a slow exit does not hide it). The windows are the site's own events,
 * whichever. */
static void test_growth_counts_the_work_to_the_report(void) {
    struct vt_stack st = {0, 3, site_a};
    const struct vt_stack *stacks[] = {&st};
    struct vt_event ev[8];
    struct vt_live live[4];
    struct vt_step steps[4];
    /* Each step allocates 10 and frees the step's scratch of 5: 5 kept. */
    for (int i = 0; i < 4; i++) {
        ev[2 * i] = (struct vt_event){100 + 20 * (uint64_t)i, 0x100 + (uint64_t)i, 10, 0, 0, VT_EV_ALLOC,
                                      VT_KIND_DEVICE};
        ev[2 * i + 1] = (struct vt_event){110 + 20 * (uint64_t)i, 0x200 + (uint64_t)i, 5, 0, 0, VT_EV_FREE,
                                          VT_KIND_DEVICE};
        live[i] = (struct vt_live){0x100 + (uint64_t)i, 5, 100 + 20 * (uint64_t)i, 0, 1, 0, VT_KIND_DEVICE,
                                   VT_LIVE_NO_API, 0};
        steps[i] = (struct vt_step){.step = (uint64_t)i + 1, .time_ns = 115 + 20 * (uint64_t)i,
                                    .event = 2 * (uint64_t)i + 2};
    }
    struct vt_snapshot s = history_of(ev, 8, live, 4, stacks, 1);
    for (int k = 0; k < 3; k++) {
        s.now_ns = k ? 1000000000 : 200; /* right after the steps; a second later, without and with steps */
        s.steps = k == 2 ? steps : NULL;
        s.nsteps = k == 2 ? 4 : 0;
        size_t n = 99;
        struct vt_growth *g = vt_find_growth(&s, NULL, s.now_ns, &n);
        CHECK_EQ(n, k == 1 ? 0 : 1);
        if (n == 1) {
            CHECK_EQ(g[0].first_floor, 0);
            CHECK_EQ(g[0].end_bytes, 20);
            CHECK_EQ(g[0].allocs, 4);
            CHECK_EQ(g[0].t_last_ns, 160);
            CHECK_EQ(g[0].marked, k == 2);
        }
        free(g);
    }
    /* Without steps, a second later, but all of it but 40 ns vramtrace's
     * own outputs (a dump of many stacks before the exit's): 60 of 100 ns
     * of the program's, still rising; their time within the growth does
     * not count either (here 20 of its 60 ns: 40 of 80). */
    s.steps = NULL;
    s.nsteps = 0;
    s.now_ns = 1000000000;
    vt_own_time_add(180, 1000000000 - 20);
    for (int k = 0; k < 2; k++) {
        size_t n = 99;
        struct vt_growth *g = vt_find_growth(&s, NULL, s.now_ns, &n);
        CHECK_EQ(n, 1);
        free(g);
        if (k == 0) vt_own_time_add(120, 140); /* inside the growth: 40 of 80 is still half */
    }
    vt_own_time_add(150, 155); /* 35 of 75: a phase */
    {
        size_t n = 99;
        struct vt_growth *g = vt_find_growth(&s, NULL, s.now_ns, &n);
        CHECK_EQ(n, 0);
        free(g);
    }
    CHECK_EQ(vt_own_time_within(0, UINT64_MAX), 1000000000 - 200 - 20 + 40 + 5);
    vt_own_time_reset();
    CHECK_EQ(vt_own_time_within(0, UINT64_MAX), 0);
    /* Overlapping stretches are counted once: a failure's handling (10 to
     * 50) holding its post-mortem's writing (20 to 30, kept first), and a
     * stretch reaching into both (45 to 60). */
    vt_own_time_add(20, 30);
    vt_own_time_add(10, 50);
    vt_own_time_add(45, 60);
    vt_own_time_add(70, 75);
    CHECK_EQ(vt_own_time_within(0, UINT64_MAX), 50 + 5);
    CHECK_EQ(vt_own_time_within(25, 72), 35 + 2);
    vt_own_time_reset();
    /* Without steps, at the half: the last allocation at 160 is in the
     * later half of 100 to 220 (at its middle), not of 100 to 222. */
    s.steps = NULL;
    s.nsteps = 0;
    for (uint64_t end = 220; end <= 222; end += 2) {
        s.now_ns = end;
        size_t n = 99;
        struct vt_growth *g = vt_find_growth(&s, NULL, s.now_ns, &n);
        CHECK_EQ(n, end == 220 ? 1 : 0);
        free(g);
    }
}

/* A site that filled in one phase and kept it (a model loaded, a cache
 * filled in the first step) is not growing, though its own events make a
 * staircase: its allocations stopped in the first half of the program's
 * work since its first event, counted in time (a run without steps) and
 * in the program's steps. The same site allocating again at the end is. */
static void test_growth_phase_is_not_a_leak(void) {
    struct vt_stack sa = {0, 3, site_a}, sb = {1, 3, site_b};
    const struct vt_stack *stacks[] = {&sa, &sb};
    struct vt_event ev[88];
    struct vt_live live[8];
    for (int late = 0; late < 2; late++) {
        size_t n = 0, nl = 0;
        uint64_t t = 100;
        /* A: 8 allocations of 10, kept; with `late`, the last 4 after B's work. */
        for (int i = 0; i < (late ? 4 : 8); i++, t += 10) {
            ev[n++] = (struct vt_event){t, 0x100 + (uint64_t)i, 10, 0, 0, VT_EV_ALLOC, VT_KIND_DEVICE};
            live[nl++] = (struct vt_live){0x100 + (uint64_t)i, 10, t, 0, 1, 0, VT_KIND_DEVICE, VT_LIVE_NO_API, 0};
        }
        /* B: 40 allocations each freed (a loop that gives back what it takes). */
        for (int i = 0; i < 40; i++, t += 10) {
            ev[n++] = (struct vt_event){t, 0x900, 64, 1, 0, VT_EV_ALLOC, VT_KIND_DEVICE};
            ev[n++] = (struct vt_event){t + 5, 0x900, 64, 1, 0, VT_EV_FREE, VT_KIND_DEVICE};
        }
        for (int i = 4; late && i < 8; i++, t += 10) {
            ev[n++] = (struct vt_event){t, 0x100 + (uint64_t)i, 10, 0, 0, VT_EV_ALLOC, VT_KIND_DEVICE};
            live[nl++] = (struct vt_live){0x100 + (uint64_t)i, 10, t, 0, 1, 0, VT_KIND_DEVICE, VT_LIVE_NO_API, 0};
        }
        CHECK_EQ(n, 88);
        struct vt_snapshot s = history_of(ev, n, live, nl, stacks, 2);
        s.now_ns = t;
        size_t ng = 99;
        struct vt_growth *g = vt_find_growth(&s, NULL, s.now_ns, &ng);
        if (!late) {
            CHECK_EQ(ng, 0);
            /* Up to the end of A's phase it was growing (an OOM then). */
            struct vt_growth g1 = the_growth(&s, 170);
            CHECK_EQ(g1.end_bytes, 80);
            CHECK_EQ(g1.allocs, 8);
        } else {
            CHECK_EQ(ng, 1);
            if (ng == 1) { CHECK_EQ(g[0].stack, 0); CHECK_EQ(g[0].end_bytes, 80); CHECK_EQ(g[0].first_floor, 0); }
        }
        free(g);
    }
    /* Steps: A's 8 allocations, then 10 steps a caching allocator served
     * from its cache (no event); with one step after, the work since is
     * too short to say (still growing). */
    struct vt_step steps[10];
    memset(steps, 0, sizeof steps);
    for (int nsteps = 10; nsteps >= 1; nsteps -= 9) {
        size_t n = 0;
        for (int i = 0; i < 8; i++) {
            ev[n] = (struct vt_event){100 + 10 * (uint64_t)i, 0x100 + (uint64_t)i, 10, 0, 0, VT_EV_ALLOC,
                                      VT_KIND_DEVICE};
            live[n] = (struct vt_live){0x100 + (uint64_t)i, 10, 100 + 10 * (uint64_t)i, 0, 1, 0, VT_KIND_DEVICE,
                                       VT_LIVE_NO_API, 0};
            n++;
        }
        for (int j = 0; j < nsteps; j++)
            steps[j] = (struct vt_step){.step = (uint64_t)j + 1, .time_ns = 1000 + 100 * (uint64_t)j, .event = 8};
        struct vt_snapshot s = history_of(ev, n, live, n, stacks, 1);
        s.steps = steps;
        s.nsteps = (size_t)nsteps;
        s.now_ns = 5000;
        size_t ng = 99;
        struct vt_growth *g = vt_find_growth(&s, NULL, s.now_ns, &ng);
        CHECK_EQ(ng, nsteps == 10 ? 0 : 1);
        free(g);
    }
    /* A leak at each of 6 epochs' ends, a step marked in each, then a long
     * evaluation pass of alloc/free churn with no step: the steps count
     * the work (the churn's events would make the leak look stopped). */
    {
        static struct vt_event e2[6 * 26 + 400];
        static struct vt_live l2[24];
        struct vt_step st2[6];
        size_t n = 0, nl = 0;
        uint64_t t = 100;
        for (int e = 0; e < 6; e++) {
            for (int i = 0; i < 10; i++, t += 10) {
                e2[n++] = (struct vt_event){t, 0x900, 64, 1, 0, VT_EV_ALLOC, VT_KIND_DEVICE};
                e2[n++] = (struct vt_event){t + 5, 0x900, 64, 1, 0, VT_EV_FREE, VT_KIND_DEVICE};
            }
            st2[e] = (struct vt_step){.step = (uint64_t)e + 1, .time_ns = t, .event = n};
            t += 10;
            for (int i = 0; i < 4; i++, t += 10) {
                uint64_t a = 0x1000 + (uint64_t)(4 * e + i);
                e2[n++] = (struct vt_event){t, a, 10, 0, 0, VT_EV_ALLOC, VT_KIND_DEVICE};
                l2[nl++] = (struct vt_live){a, 10, t, 0, 1, 0, VT_KIND_DEVICE, VT_LIVE_NO_API, 0};
            }
        }
        for (int i = 0; i < 200; i++, t += 10) {
            e2[n++] = (struct vt_event){t, 0x900, 64, 1, 0, VT_EV_ALLOC, VT_KIND_DEVICE};
            e2[n++] = (struct vt_event){t + 5, 0x900, 64, 1, 0, VT_EV_FREE, VT_KIND_DEVICE};
        }
        struct vt_snapshot s = history_of(e2, n, l2, nl, stacks, 2);
        s.steps = st2;
        s.nsteps = 6;
        s.now_ns = t;
        struct vt_growth g = the_growth(&s, s.now_ns);
        CHECK_EQ(g.stack, 0);
        CHECK_EQ(g.end_bytes, 240);
    }
}

static void test_format(void) {
    char b[32];
    CHECK_STR(vt_fmt_bytes(0, b, sizeof b), "0 B");
    CHECK_STR(vt_fmt_bytes(1023, b, sizeof b), "1023 B");
    CHECK_STR(vt_fmt_bytes(1536, b, sizeof b), "1.50 KiB");
    CHECK_STR(vt_fmt_bytes((uint64_t)80 << 30, b, sizeof b), "80.00 GiB");
    /* The unit is the one the figure has once rounded to two decimals:
     * just under a unit is 1.00 of it, never 1024.00 of the one below. */
    CHECK_STR(vt_fmt_bytes(1024, b, sizeof b), "1.00 KiB");
    CHECK_STR(vt_fmt_bytes(1048570, b, sizeof b), "1023.99 KiB");
    CHECK_STR(vt_fmt_bytes(1048571, b, sizeof b), "1.00 MiB");
    CHECK_STR(vt_fmt_bytes(1048575, b, sizeof b), "1.00 MiB");
    CHECK_STR(vt_fmt_bytes(1048576, b, sizeof b), "1.00 MiB");
    CHECK_STR(vt_fmt_bytes(((uint64_t)1 << 30) - 1, b, sizeof b), "1.00 GiB");
    CHECK_STR(vt_fmt_bytes(((uint64_t)1 << 40) - 1, b, sizeof b), "1.00 TiB");
    CHECK_STR(vt_fmt_bytes((uint64_t)1 << 40, b, sizeof b), "1.00 TiB");
    CHECK_STR(vt_fmt_bytes(((uint64_t)1 << 50) - 1, b, sizeof b), "1.00 PiB");
    /* PiB is the largest unit: past it the figure grows. */
    CHECK_STR(vt_fmt_bytes((uint64_t)1 << 60, b, sizeof b), "1024.00 PiB");
    CHECK_STR(vt_fmt_bytes(UINT64_MAX, b, sizeof b), "16384.00 PiB");
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    vt_json_string(f, "a\"b\\c\n\x01<\xc3\xa9>\xff");
    fputc(' ', f);
    vt_json_string(f, NULL);
    fclose(f);
    /* The byte 0xff, not UTF-8: the text \xff (JSON "\\xff"), not U+00FF. */
    CHECK_STR(buf, "\"a\\\"b\\\\c\\n\\u0001<\xc3\xa9>\\\\xff\" null");
    free(buf);
}

static void test_dump_writes_every_section(void) {
    vt_tracker_alloc(0x42, 4096, VT_KIND_DEVICE, 0, "cudaMalloc", site_a, 3);
    struct vt_snapshot *s = vt_tracker_snapshot();
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    char *argv[] = {"prog", "--x=\"1\""};
    struct vt_dump_meta m = {.reason = "exit", .pid = 7, .argc = 2, .argv = argv, .host = "h", .rank = 2};
    struct vt_analysis *an = vt_analyse(s, NULL, 0);
    CHECK_EQ(vt_dump_write(f, s, NULL, an, &m), 0);
    vt_analysis_free(an);
    fclose(f);
    CHECK(strstr(buf, "{\"format\":\"vramtrace-dump\",\"version\":2,\"reason\":\"exit\",\"pid\":7,\"rank\":2") == buf);
    CHECK(strstr(buf, "\"argv\":[\"prog\",\"--x=\\\"1\\\"\"]") != NULL);
    CHECK(strstr(buf, "\"holders\":[\n 0,4096,1],\n\"peak_holders\":[\n 0,4096,1],") != NULL);
    /* kind and api are strings 0 and 1; the stack is node 2 of the tree of
     * its three frames, written outermost first. */
    CHECK(strstr(buf, "\"live\":[\n[\"0x42\",4096,0,1,0,0,") != NULL);
    CHECK(strstr(buf, "\"nevents\":1,\n\"events\":\"") != NULL);
    CHECK(strstr(buf, "\"nodes\":[-1,0,0,1,1,2],\n\"stacks\":[2,-1,-1],\n"
                      "\"frames\":[[-1,-1,0,-1,0,\"0x3000\",0],\n[-1,-1,0,-1,0,\"0x2000\",0],\n"
                      "[-1,-1,0,-1,0,\"0x1000\",0]],\n\"strings\":[\"device\",\"cudaMalloc\"]\n}\n") != NULL);
    free(buf);
    vt_snapshot_free(s);
    vt_tracker_reset_child();
}

/* The exit path's snapshot gives up on a lock that is not let go (here the
 * global lock and every slot's, held by this very thread as around fork);
 * host kinds count as host memory in their own key spaces; missed calls are
 * counted. */
static void test_bounded_snapshot_host_kinds_missed(void) {
    vt_tracker_alloc(0x10, 2 << 20, VT_KIND_HOST_VMM, 5, "cuMemCreate", site_a, 3);
    vt_tracker_alloc(0x10, 4096, VT_KIND_HOST_ASYNC, 0, "cuMemAllocFromPoolAsync", site_a, 3);
    vt_tracker_alloc(0x20, 100, VT_KIND_DEVICE, 0, "cuMemAlloc_v2", site_b, 3);
    vt_tracker_missed();
    vt_tracker_missed();
    free_it(VT_SPACE_HANDLE, 0x10, 1);
    vt_tracker_lock_all();
    struct vt_snapshot *s = vt_tracker_snapshot_within(50 * 1000 * 1000);
    CHECK(s == NULL);
    vt_tracker_unlock_all();
    s = vt_tracker_snapshot_within(50 * 1000 * 1000);
    CHECK(s != NULL);
    if (!s) return;
    CHECK_EQ(s->totals.missed, 2);
    CHECK_TOTALS(s, 1, 100, 100, 3, 1, 0);
    CHECK_HOST(s, 4096, 1, (2 << 20) + 4096);
    CHECK_EQ(s->nlive, 2);
    for (size_t i = 0; i < s->nlive; i++)
        if (s->live[i].kind == VT_KIND_HOST_ASYNC) CHECK_EQ((uint64_t)(int64_t)s->live[i].device, (uint64_t)(int64_t)-1);
    CHECK_STR(vt_kind_name(VT_KIND_HOST_VMM), "host_vmm");
    CHECK_STR(vt_kind_name(VT_KIND_HOST_ASYNC), "host_async");
    CHECK(!vt_kind_owned_device(VT_KIND_HOST_VMM) && !vt_kind_owned_device(VT_KIND_HOST_ASYNC));
    vt_snapshot_free(s);
    vt_tracker_reset_child();
    s = vt_tracker_snapshot();
    CHECK_EQ(s->totals.missed, 0);
    vt_snapshot_free(s);
}

/* The post-mortem (oom set) or the exit summary of a snapshot taken now,
 * its live list sorted, as a malloc'd string. */
static char *postmortem_now(int oom) {
    struct vt_snapshot *s = vt_tracker_snapshot();
    vt_sort_live(s); /* as report/output.c sorts it */
    struct vt_analysis *an = vt_analyse(s, NULL, 0);
    struct vt_dump_meta m = {.reason = oom ? "oom" : "exit", .pid = 7};
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (oom) vt_postmortem_oom(f, s, NULL, an, &m, NULL, 5, NULL);
    else vt_postmortem_exit(f, s, NULL, an, &m, NULL, 5,
                            &(struct vt_oom_told){.postmortems = 1, .failures = s->totals.oom_count});
    fclose(f);
    vt_analysis_free(an);
    vt_snapshot_free(s);
    return buf;
}

/* The post-mortem names the kind of host memory a failed request asked
 * for, and both it and the exit summary say how many calls passed through
 * unrecorded. */
static void test_postmortem_host_kinds_and_missed(void) {
    static const struct { int kind; const char *said; } kinds[] = {
        {VT_KIND_HOST, "by cuMemHostAlloc (pinned host memory)\n"},
        {VT_KIND_HOST_VMM, "by cuMemHostAlloc (host memory from cuMemCreate)\n"},
        {VT_KIND_HOST_ASYNC, "by cuMemHostAlloc (host memory from a pool on the host)\n"},
        {VT_KIND_DEVICE, "by cuMemHostAlloc on device 0\n"},
    };
    static const char missed[] = "\nvramtrace:   3 calls passed through unrecorded (made while vramtrace was "
                                 "busy on that thread: a signal handler?)\n";
    vt_tracker_alloc(0x42, 4096, VT_KIND_DEVICE, 0, "cudaMalloc", site_a, 3);
    vt_tracker_missed();
    vt_tracker_missed();
    vt_tracker_missed();
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        struct vt_oom o = {.requested = 512, .api = "cuMemHostAlloc", .kind = (uint8_t)kinds[i].kind,
                           .device = (int16_t)(vt_kind_is_host(kinds[i].kind) ? VT_HOST_DEVICE : 0)};
        vt_tracker_failed(1, &o, site_b, 3);
        char *text = postmortem_now(1);
        CHECK(strstr(text, kinds[i].said) != NULL);
        CHECK(strstr(text, missed) != NULL);
        free(text);
    }
    char *text = postmortem_now(0);
    CHECK(strstr(text, missed) != NULL);
    free(text);
    vt_tracker_reset_child();
    text = postmortem_now(0);
    CHECK(strstr(text, "unrecorded") == NULL); /* none missed: nothing said */
    free(text);
}

/* The lines of `text` from the one that begins `from` up to the next
 * section's (a line that begins "vramtrace: " and a letter), as a
 * malloc'd string ("" when none begins so). */
static char *section_of(const char *text, const char *from) {
    const char *a = strstr(text, from), *e;
    if (!a) return strdup("");
    for (e = strchr(a, '\n'); e && strncmp(e + 1, "vramtrace:  ", 12) == 0; e = strchr(e + 1, '\n')) continue;
    return strndup(a, e ? (size_t)(e + 1 - a) : strlen(a));
}

/* The bytes column of a live table's rows, each followed by a comma (a
 * static buffer). */
static const char *sizes_of(const char *table) {
    static char out[256];
    out[0] = 0;
    for (const char *r = strchr(table, '\n'); r && r[1]; r = strchr(r + 1, '\n')) {
        char b[16], unit[8];
        if (sscanf(r + 1, "vramtrace: %15s %7s", b, unit) == 2 && strlen(out) + 32 < sizeof out)
            sprintf(out + strlen(out), "%s %s,", b, unit);
    }
    return out;
}

/* Other threads allocate and free between a failure and its
 * post-mortem's snapshot (the failing thread is still on its way there):
 * the post-mortem's holders are the failure's, as its tracked line and
 * its findings are, and its live list, of the later moment, says so.
 * Before: the holders and the list were the snapshot's, 8 MiB in 3
 * allocations under "6.00 MiB live in 3 allocations at the failure".
 * With nothing allocated or freed in between, the list is the failure's
 * and says nothing of a moment. */
static void test_postmortem_of_the_failures_moment(void) {
    vt_tracker_alloc(0xa1, 3 << 20, VT_KIND_DEVICE, 0, "cudaMalloc", site_a, 3);
    vt_tracker_alloc(0xa2, 2 << 20, VT_KIND_DEVICE, 0, "cudaMalloc", site_a, 3);
    vt_tracker_alloc(0xb1, 1 << 20, VT_KIND_DEVICE, 0, "cudaMalloc", site_b, 3);
    struct vt_oom o = {.requested = 3 << 20, .api = "cudaMalloc", .kind = VT_KIND_DEVICE, .device = 0};
    vt_tracker_failed(1, &o, site_a, 3);
    static const char tracked[] = "vramtrace:   tracked on device 0: 6.00 MiB live in 3 allocations at the failure;";
    static const char holders[] = "vramtrace: largest holders by call site (2 call sites):\n"
                                  "vramtrace:     5.00 MiB  83.3%      2 allocs  (no stack)\n"
                                  "vramtrace:     1.00 MiB  16.7%      1 alloc   (no stack)\n";
    static const char then[] = "vramtrace: largest live allocations (3 live):\n",
                      after[] = "vramtrace: largest live allocations when this report was written, not at the failure "
                                "(3 live):\n";
    for (int later = 0; later < 2; later++) {
        if (later) { /* another thread's calls, after the failure */
            vt_tracker_alloc(0xb2, 3 << 20, VT_KIND_DEVICE, 0, "cudaMalloc", site_b, 3);
            vt_tracker_alloc(0xb3, 2 << 20, VT_KIND_DEVICE, 0, "cudaMalloc", site_b, 3);
            free_it(VT_SPACE_DEVICE, 0xa2, 1);
            free_it(VT_SPACE_DEVICE, 0xb1, 1);
        }
        char *text = postmortem_now(1);
        char *h = section_of(text, "vramtrace: largest holders"), *l = section_of(text, "vramtrace: largest live");
        CHECK(strstr(text, tracked) != NULL);
        CHECK_STR(h, holders);
        if (!later) {
            CHECK(strncmp(l, then, sizeof then - 1) == 0);
            CHECK_STR(sizes_of(l), "3.00 MiB,2.00 MiB,1.00 MiB,"); /* a1, a2, b1 */
        } else {
            CHECK(strncmp(l, after, sizeof after - 1) == 0);
            CHECK_STR(sizes_of(l), "3.00 MiB,3.00 MiB,2.00 MiB,"); /* a1, b2, b3: a2 and b1 freed */
        }
        free(h);
        free(l);
        free(text);
    }
    /* Past the failures whose holders are kept, the holders are the
     * snapshot's: of the failure where nothing changed since, else said
     * to be of the later moment. */
    for (int i = 1; i < VT_MAX_OOM_HOLDERS; i++) vt_tracker_failed(1, &o, site_a, 3);
    static const char kept_none[] = "vramtrace: largest holders by call site (2 call sites):\n"
                                    "vramtrace:     5.00 MiB  62.5%      2 allocs  (no stack)\n"
                                    "vramtrace:     3.00 MiB  37.5%      1 alloc   (no stack)\n";
    static const char kept_none_later[] = "vramtrace: largest holders when this report was written, not at the failure, "
                                          "by call site (2 call sites):\n"
                                          "vramtrace:     5.00 MiB  55.6%      2 allocs  (no stack)\n"
                                          "vramtrace:     4.00 MiB  44.4%      2 allocs  (no stack)\n";
    for (int later = 0; later < 2; later++) {
        if (later) vt_tracker_alloc(0xa4, 1 << 20, VT_KIND_DEVICE, 0, "cudaMalloc", site_a, 3);
        else vt_tracker_failed(1, &o, site_a, 3);
        struct vt_snapshot *s = vt_tracker_snapshot();
        CHECK_EQ(s->totals.oom_count, VT_MAX_OOM_HOLDERS + 1);
        CHECK(s->nooms && s->ooms[s->nooms - 1].holders == NULL);
        vt_snapshot_free(s);
        char *text = postmortem_now(1);
        char *h = section_of(text, "vramtrace: largest holders");
        CHECK_STR(h, later ? kept_none_later : kept_none);
        free(h);
        free(text);
    }
    vt_tracker_reset_child();
}

/* After a failure, a snapshot taken later gives every time stamp the
 * nanoseconds the first one after the failure gave it (the rate ticks are
 * converted at stays fixed), so that a dump at exit repeats the
 * post-mortem's times, spans and rates to the digit. First of the tests:
 * the rate is fixed once per process. */
static void test_times_fixed_after_a_failure(void) {
    vt_tracker_alloc(0x42, 4096, VT_KIND_DEVICE, 0, "cudaMalloc", site_a, 3);
    struct vt_oom o = {.requested = 512, .api = "cudaMalloc", .kind = VT_KIND_DEVICE, .device = 0};
    vt_tracker_failed(1, &o, site_b, 3);
    struct vt_snapshot *a = vt_tracker_snapshot();
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do clock_gettime(CLOCK_MONOTONIC, &t);
    while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 60000000L);
    vt_tracker_alloc(0x43, 4096, VT_KIND_DEVICE, 0, "cudaMalloc", site_a, 3);
    struct vt_snapshot *b = vt_tracker_snapshot();
    CHECK_EQ(a->nooms, 1);
    CHECK_EQ(b->nooms, 1);
    CHECK_EQ(a->nevents, 2); /* the allocation and the failure */
    CHECK_EQ(b->nevents, 3);
    if (a->nooms == 1 && b->nooms == 1) CHECK_EQ(b->ooms[0].time_ns, a->ooms[0].time_ns);
    if (a->nevents == 2 && b->nevents == 3) {
        CHECK_EQ(vt_event_at(b, 0).time_ns, vt_event_at(a, 0).time_ns);
        CHECK_EQ(vt_event_at(b, 1).time_ns, vt_event_at(a, 1).time_ns);
        CHECK(vt_event_at(b, 2).time_ns >= a->ooms[0].time_ns + 60000000);
    }
    vt_snapshot_free(a);
    vt_snapshot_free(b);
    vt_tracker_reset_child();
}

int main(void) {
    vt_tracker_init(64, 4);
    test_times_fixed_after_a_failure();
    test_bounded_snapshot_host_kinds_missed();
    test_ring_wraps();
    test_log_never_laps_itself();
    test_totals_peak_devices_host();
    test_reset_releases_the_devices_memory();
    test_interning_and_holders();
    test_holders_of_every_kind();
    test_peak_table_merged_from_same_and_changed();
    test_same_stack_memo();
    test_restore_and_reuse();
    test_mappings_history();
    test_reuse_across_threads();
    test_stale_by_space();
    test_references();
    test_order_by_time_stamp();
    test_failures();
    test_holders_at_peak_and_oom();
    test_growth_with_events_out_of_order();
    test_growth_known_past_the_ring();
    test_growth_counts_the_work_to_the_report();
    test_growth_phase_is_not_a_leak();
    test_format();
    test_dump_writes_every_section();
    test_postmortem_host_kinds_and_missed();
    test_postmortem_of_the_failures_moment();
    test_each_thread_knows_its_own_failure();
    test_torch_record_of_its_own_threads_failure();
    test_oom_records_keep_the_newest();
    return check_report("unit");
}
