/* test_live.c -- the live view's parts that need no process around them:
 * the tracker's view (vt_tracker_view) and the forecast (report/forecast.c)
 * fed samples at exact times. */
#include <stdlib.h>
#include <string.h>

#include "../../common/live.h"
#include "../../report/forecast.h"
#include "../../tracker/tracker.h"
#include "check.h"

#define MiB (1ull << 20)
#define S 1000000000ull

/* Samples every 250 ms from t0 for `seconds`, live from fn. */
static void feed(struct vt_forecast *f, uint64_t t0, int seconds, uint64_t (*fn)(int), uint64_t cap) {
    for (int i = 0; i < seconds * 4; i++) vt_forecast_sample(f, t0 + (uint64_t)i * S / 4, fn(i), cap);
}
static uint64_t leak(int i) { return (uint64_t)i * MiB; }          /* 4 MiB a second */
static uint64_t steady(int i) { return (i % 2 ? 20 : 10) * MiB; }  /* a loop over 10 MiB */
static uint64_t loading(int i) { return (i < 12 ? (uint64_t)i : 12) * 10 * MiB; } /* 3 s, then flat */
/* 1 KiB for a second, 200 MiB loaded, then 64 KiB more a second. */
static uint64_t load_then_creep(int i) { return i < 4 ? 1024 : 200 * MiB + (uint64_t)(i / 4) * 64 * 1024; }

static void forecast_tests(void) {
    struct vt_forecast f;
    vt_forecast_init(&f, 30); /* windows of 1 s */
    CHECK_EQ(f.window_ns, S);
    feed(&f, 0, 5, leak, 100 * MiB);
    CHECK_EQ(f.growth_per_min, 0); /* five windows: not yet five rises */
    vt_forecast_sample(&f, 5 * S, 20 * MiB, 100 * MiB);
    vt_forecast_sample(&f, 6 * S, 24 * MiB, 100 * MiB);
    CHECK_EQ(f.growth_per_min, 240 * MiB); /* 20 MiB over the last 5 windows */
    CHECK_EQ(f.full, 1);
    CHECK_EQ(f.full_in_ns / 1000000, 19000); /* 76 MiB at 4 MiB a second */
    vt_forecast_sample(&f, 6 * S + 1, 24 * MiB, 1000 * MiB);
    CHECK_EQ(f.full, 0); /* 244 s: beyond the horizon */

    vt_forecast_init(&f, 30);
    feed(&f, 0, 20, steady, 15 * MiB);
    CHECK_EQ(f.growth_per_min, 0);
    CHECK_EQ(f.full, 0);

    vt_forecast_init(&f, 30);
    feed(&f, 0, 20, loading, 130 * MiB);
    CHECK_EQ(f.growth_per_min, 0);
    CHECK_EQ(f.full, 0);

    /* The load rose the floor in one window: the rate is the creep's
     * (3.75 MiB a minute: 100 MiB left fill in 27 minutes, past the
     * horizon), not the load's (before: 2.4 GiB a minute, full in 2.5 s). */
    vt_forecast_init(&f, 30);
    feed(&f, 0, 7, load_then_creep, 300 * MiB);
    CHECK_EQ(f.growth_per_min, 60 * 64 * 1024);
    CHECK_EQ(f.full, 0);

    vt_forecast_init(&f, 0); /* no horizon: growth, no forecast */
    feed(&f, 0, 8, leak, 40 * MiB);
    CHECK(f.growth_per_min > 0);
    CHECK_EQ(f.full, 0);

    vt_forecast_init(&f, 3000); /* windows of horizon/30 */
    CHECK_EQ(f.window_ns, 100 * S);
}

/* Growth per step from step boundaries: 8 boundaries 100 ms apart. */
static void step_forecast_tests(void) {
    uint64_t step[8], at[8], leak[8], flat[8], load[8];
    for (int i = 0; i < 8; i++) {
        step[i] = 11 + (uint64_t)i;
        at[i] = (uint64_t)i * S / 10;
        leak[i] = 100 * MiB + (uint64_t)i * 8 * MiB;
        flat[i] = 100 * MiB;
        load[i] = (i < 4 ? (uint64_t)i : 4) * 50 * MiB; /* rises, then stays */
    }
    struct vt_step_forecast sf;
    vt_forecast_steps(&sf, step, at, leak, 8, 156 * MiB, 1024 * MiB, 30 * S);
    CHECK_EQ(sf.growth_per_step, 8 * MiB);
    CHECK_EQ(sf.full, 1);
    CHECK_EQ(sf.full_in_steps, 109);          /* (1024 - 156) / 8 = 108.5: 109 steps */
    CHECK_EQ(sf.full_in_ns / 1000000, 10900); /* at 100 ms a step */
    vt_forecast_steps(&sf, step, at, leak, 8, 156 * MiB, 1024 * MiB, 10 * S);
    CHECK_EQ(sf.full, 0);                     /* 10.9 s: beyond the horizon */
    CHECK_EQ(sf.growth_per_step, 8 * MiB);
    vt_forecast_steps(&sf, step, at, flat, 8, 100 * MiB, 1024 * MiB, 30 * S);
    CHECK_EQ(sf.growth_per_step, 0);
    CHECK_EQ(sf.full, 0);
    vt_forecast_steps(&sf, step, at, load, 8, 200 * MiB, 1024 * MiB, 30 * S);
    CHECK_EQ(sf.growth_per_step, 0);
    vt_forecast_steps(&sf, step, at, leak, 5, 156 * MiB, 1024 * MiB, 30 * S);
    CHECK_EQ(sf.growth_per_step, 0);          /* fewer than six boundaries */

    /* A leak a caching allocator absorbs into its segments: a 20 MiB
     * segment every fourth step, flat between (40 boundaries). */
    uint64_t st40[40], at40[40], seg[40], warm[40], drop[40];
    for (int i = 0; i < 40; i++) {
        st40[i] = 100 + (uint64_t)i;
        at40[i] = (uint64_t)i * S / 10;
        seg[i] = 100 * MiB + (uint64_t)(i / 4) * 20 * MiB;
        warm[i] = 100 * MiB + (uint64_t)(i < 6 ? i : 6) * 20 * MiB; /* six rises, then 34 flat */
        drop[i] = i < 20 ? 500 * MiB : 100 * MiB + (uint64_t)(i - 20) * MiB; /* a fall, then a rise each step */
    }
    vt_forecast_steps(&sf, st40, at40, seg, 40, 300 * MiB, 1024 * MiB, 30 * S);
    CHECK_EQ(sf.growth_per_step, 5 * MiB);   /* 180 MiB over the 36 steps from the one before the first rise */
    CHECK_EQ(sf.full, 1);
    vt_forecast_steps(&sf, st40, at40, warm, 40, 220 * MiB, 1024 * MiB, 30 * S);
    CHECK_EQ(sf.growth_per_step, 0);          /* its rises stopped 34 boundaries ago */
    vt_forecast_steps(&sf, st40, at40, warm, 8, 220 * MiB, 1024 * MiB, 30 * S);
    CHECK_EQ(sf.growth_per_step, 20 * MiB);   /* while they went on: the rises' rate, the flat step after them not
                                                 counted (it said 20 MiB * 6 / 7, a rate it never had) */
    vt_forecast_steps(&sf, st40, at40, drop, 40, 119 * MiB, 1024 * MiB, 30 * S);
    CHECK_EQ(sf.growth_per_step, MiB);        /* counted from the fall */
    /* A sawtooth: 9 rises of 16 MiB, then all of it freed, every 10
     * boundaries; in its third cycle, 7 rises from its floor. It rises only
     * to where it was: no growth (it said 16 MiB a step). */
    uint64_t saw[27];
    for (int i = 0; i < 27; i++) saw[i] = (uint64_t)((i + 1) % 10) * 16 * MiB;
    vt_forecast_steps(&sf, st40, at40, saw, 27, saw[26], 1024 * MiB, 30 * S);
    CHECK_EQ(sf.growth_per_step, 0);
    vt_forecast_steps(&sf, st40, at40, saw, 9, saw[8], 1024 * MiB, 30 * S);
    CHECK_EQ(sf.growth_per_step, 16 * MiB);  /* its first cycle is a leak's start as far as is known */
    uint64_t late[40];                        /* flat for 30 boundaries, then 32 MiB a step */
    for (int i = 0; i < 40; i++) late[i] = 100 * MiB + (uint64_t)(i < 30 ? 0 : i - 29) * 32 * MiB;
    vt_forecast_steps(&sf, st40, at40, late, 40, 420 * MiB, 1024 * MiB, 30 * S);
    CHECK_EQ(sf.growth_per_step, 32 * MiB);   /* not diluted by the flat boundaries before */
    /* A leak of 64 KiB a step and, at the fourth boundary, one 1600 MiB
     * buffer kept for good: the rate is the leak's (before: 41.09 MiB a
     * step, the device "full in 9 steps"). */
    uint64_t early[40];
    for (int i = 0; i < 40; i++) early[i] = 100 * MiB + (uint64_t)i * 64 * 1024 + (i >= 3 ? 1600 * MiB : 0);
    vt_forecast_steps(&sf, st40, at40, early, 40, early[39], 2048 * MiB, 30 * S);
    CHECK_EQ(sf.growth_per_step, 64 * 1024);
    CHECK_EQ(sf.full, 0);                     /* 5.4 thousand steps at 100 ms: past the horizon */
    seg[39] = seg[38] - 1;                    /* the newest boundary fell */
    vt_forecast_steps(&sf, st40, at40, seg, 40, 300 * MiB, 1024 * MiB, 30 * S);
    CHECK_EQ(sf.growth_per_step, 0);
}

static void view_tests(void) {
    vt_tracker_init(8, 1000);
    struct vt_view *v = calloc(1, sizeof *v);
    CHECK_EQ(vt_tracker_view(v), 1);
    CHECK_EQ(v->nsites, 0);
    CHECK_EQ(vt_tracker_view(v), 0); /* nothing applied since */
    for (int i = 0; i < 40; i++) {
        uintptr_t frames[2] = {0x1000 + (uintptr_t)i, 0x2000};
        vt_tracker_alloc(0x10000 + (uint64_t)i * 0x1000, (uint64_t)(i + 1) * 4096, VT_KIND_DEVICE, 0, "t", frames, 2);
    }
    CHECK_EQ(vt_tracker_view(v), 1);
    CHECK_EQ(v->nsites, 40);   /* fewer than VT_VIEW_SITES: every one */
    CHECK_EQ(v->sites[0].bytes, 40 * 4096);
    CHECK_EQ(v->sites[39].bytes, 4096);
    int sorted = 1;
    for (uint32_t i = 1; i < v->nsites; i++) sorted &= v->sites[i].bytes < v->sites[i - 1].bytes;
    CHECK(sorted);
    CHECK(v->stacks[0] != NULL && v->stacks[0]->depth == 2 && v->stacks[0]->frames[0] == 0x1000 + 39);
    CHECK_EQ(v->totals.live_bytes, 4096ull * 40 * 41 / 2);
    CHECK_EQ(v->devices[0].live_bytes, 4096ull * 40 * 41 / 2);
    CHECK_EQ(vt_tracker_view(v), 0);
    struct vt_free fr = vt_tracker_free_begin(VT_SPACE_DEVICE, 0x10000 + 39 * 0x1000);
    vt_tracker_free_end(&fr, 1);
    CHECK_EQ(vt_tracker_view(v), 1);
    CHECK_EQ(v->sites[0].bytes, 39 * 4096);
    CHECK_EQ(v->devices[0].free_count, 1);
    uintptr_t frames[1] = {0x3000};
    vt_tracker_alloc(0x900000, 5 * MiB, VT_KIND_MANAGED, 1, "t", frames, 1);
    vt_tracker_alloc(0xa00000, 3 * MiB, VT_KIND_MANAGED, 1, "t", frames, 1);
    vt_tracker_alloc(0x7000, 4096, VT_KIND_HOST, VT_HOST_DEVICE, "t", frames, 1);
    fr = vt_tracker_free_begin(VT_SPACE_DEVICE, 0x900000);
    vt_tracker_free_end(&fr, 1);
    CHECK_EQ(vt_tracker_view(v), 1);
    CHECK_EQ(v->kinds[1].live_bytes[VT_KIND_DEVICE], 4096ull * 39 * 40 / 2);
    CHECK_EQ(v->kinds[1].peak_bytes[VT_KIND_DEVICE], 4096ull * 40 * 41 / 2);
    CHECK_EQ(v->kinds[2].live_bytes[VT_KIND_MANAGED], 3 * MiB);
    CHECK_EQ(v->kinds[2].peak_bytes[VT_KIND_MANAGED], 8 * MiB);
    CHECK_EQ(v->kinds[2].peak_bytes[VT_KIND_DEVICE], 0);
    CHECK_EQ(v->kinds[VT_KINDS_HOST].live_bytes[VT_KIND_HOST], 4096);
    CHECK_EQ(v->devices[1].live_bytes, 3 * MiB);
    /* Past one chunk of the scan (VIEW_CHUNK, 4,096 sites a hold of the
     * global lock): 20,000 more sites, the largest spread over the chunks,
     * each its own size (stack j holds 8 MiB + j * 4 KiB when j % 613 ==
     * 0, else 4 KiB): the top are exactly those, largest first, whichever
     * chunk each fell in. */
    for (uint64_t j = 0; j < 20000; j++) {
        uintptr_t fs[2] = {0x500000 + (uintptr_t)j, 0x2000};
        uint64_t bytes = j % 613 == 0 ? 8 * MiB + j * 4096 : 4096;
        vt_tracker_alloc(0x100000000ull + j * 0x10000000ull, bytes, VT_KIND_DEVICE, 0, "t", fs, 2);
    }
    CHECK_EQ(vt_tracker_view(v), 1);
    CHECK_EQ(v->nsites, VT_VIEW_SITES);
    int top_ok = 1;
    for (uint32_t i = 0; i < 32; i++) {
        uint64_t j = (uint64_t)(19616 - 613 * i); /* 19,616 = 613 x 32, the largest multiple below 20,000 */
        top_ok &= v->sites[i].bytes == 8 * MiB + j * 4096 && v->sites[i].count == 1 &&
                  v->stacks[i]->frames[0] == 0x500000 + j;
    }
    CHECK(top_ok);
    /* Kept in a heap: the VT_VIEW_SITES largest of the 20,000 + 41 live
     * sites, largest first: the 33 big ones, the 3 MiB, the first 39 (4 KiB
     * to 156 KiB), then 4 KiB ones to the end. */
    int sorted_all = 1;
    for (uint32_t i = 1; i < v->nsites; i++) sorted_all &= vt_holder_order(&v->sites[i - 1], &v->sites[i]) < 0;
    CHECK(sorted_all);
    CHECK_EQ(v->sites[32].bytes, 8 * MiB);
    CHECK_EQ(v->sites[33].bytes, 3 * MiB);
    CHECK_EQ(v->sites[34].bytes, 39 * 4096);
    CHECK_EQ(v->sites[VT_VIEW_SITES - 1].bytes, 4096);
    /* Freed again (the records are reachable only from the live table's
     * mapped arrays, which LeakSanitizer does not scan): the top is what
     * it was, the 3 MiB managed one, then the first 39's. */
    for (uint64_t j = 0; j < 20000; j++) {
        struct vt_free f2 = vt_tracker_free_begin(VT_SPACE_DEVICE, 0x100000000ull + j * 0x10000000ull);
        vt_tracker_free_end(&f2, 1);
    }
    CHECK_EQ(vt_tracker_view(v), 1);
    CHECK_EQ(v->sites[0].bytes, 3 * MiB);
    CHECK_EQ(v->sites[1].bytes, 39 * 4096);
    for (uint64_t i = 0; i < 39; i++) {
        struct vt_free f2 = vt_tracker_free_begin(VT_SPACE_DEVICE, 0x10000 + i * 0x1000);
        vt_tracker_free_end(&f2, 1);
    }
    struct vt_free fm = vt_tracker_free_begin(VT_SPACE_DEVICE, 0xa00000), fh = vt_tracker_free_begin(VT_SPACE_HOST, 0x7000);
    vt_tracker_free_end(&fm, 1);
    vt_tracker_free_end(&fh, 1);
    CHECK_EQ(vt_tracker_view(v), 1);
    CHECK_EQ(v->nsites, 0);
    free(v);
}

/* The segment's kind names are the tracker's, in its order. */
static void kind_name_tests(void) {
    static const char *const names[] = {VT_LIVE_KIND_NAMES};
    CHECK_EQ(sizeof names / sizeof *names, VT_KIND_COUNT);
    for (int k = 0; k < VT_KIND_COUNT; k++) CHECK(strcmp(names[k], vt_kind_name(k)) == 0);
}

int main(void) {
    forecast_tests();
    step_forecast_tests();
    view_tests();
    kind_name_tests();
    return check_report("unit_live");
}
