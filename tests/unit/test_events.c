/* test_events.c -- the CLI's packed event history (cli/model_events.c):
 * every event reads back exactly as it was added, in order from any
 * event, one by one in any order, and backward, at block edges and with
 * every field at its extremes; and its size is what the packing promises. */
#include <stdlib.h>
#include <string.h>

#include "../../cli/model_events.h"
#include "check.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static int same(const struct vm_event *a, const struct vm_event *b) {
    return a->time_ns == b->time_ns && a->address == b->address && a->bytes == b->bytes && a->stack == b->stack &&
           a->device == b->device && a->type == b->type && a->kind == b->kind;
}

/* An event drawn from extremes and from random values. */
static struct vm_event draw(size_t i) {
    static const uint64_t big[] = {0, 1, 127, 128, 0x7fffffffffffffffull, 0x8000000000000000ull, UINT64_MAX};
    static const int16_t dev[] = {-1, 0, 1, 2, 3, 127, 128, 4095};
    static const uint8_t kinds[] = {0, 1, 14, 15, 16, 255};
    struct vm_event e;
    uint64_t r = next();
    e.time_ns = r & 1 ? big[next() % 7] : next() >> (next() % 64);
    e.address = r & 2 ? big[next() % 7] : next();
    e.bytes = r & 4 ? big[next() % 7] : next() >> (next() % 64);
    e.stack = r & 8 ? (uint32_t)big[next() % 7] : (uint32_t)(next() % 100000);
    e.device = dev[next() % 8];
    e.type = "afo"[i % 3];
    e.kind = kinds[next() % 6];
    return e;
}

/* n drawn events added, read back every way; while adding, an earlier
 * event is read now and then (vm_event_at's cache moves off the block
 * being written). */
static void round_trip(size_t n) {
    struct vm_events ev = {0};
    struct vm_event *want = malloc((n + 1) * sizeof *want);
    CHECK(want != NULL);
    if (!want) return;
    int added = 1;
    for (size_t i = 0; i < n; i++) {
        want[i] = draw(i);
        added &= vm_events_add(&ev, &want[i]) == 0;
        if (i > 0 && next() % 7 == 0) {
            size_t j = next() % i;
            struct vm_event e = vm_event_at(&ev, j);
            added &= same(&e, &want[j]);
        }
    }
    vm_events_done(&ev);
    CHECK(added);
    CHECK_EQ(ev.n, n);
    struct vm_ev_cursor c;
    struct vm_event e;
    size_t k = 0, bad = 0;
    for (vm_ev_from(&c, &ev, 0); vm_ev_next(&c, &e); k++) bad += k >= n || !same(&e, &want[k]);
    CHECK_EQ(k, n);
    CHECK_EQ(bad, 0);
    /* From every event (a block's first and others). */
    for (size_t i = 0; i < n; i++) {
        vm_ev_from(&c, &ev, i);
        bad += !vm_ev_next(&c, &e) || !same(&e, &want[i]) || c.i != i + 1;
    }
    vm_ev_from(&c, &ev, n);
    bad += vm_ev_next(&c, &e);
    CHECK_EQ(bad, 0);
    /* One by one in a random order, and backward. */
    for (size_t t = 0; n && t < 3 * n; t++) {
        size_t i = next() % n;
        e = vm_event_at(&ev, i);
        bad += !same(&e, &want[i]);
    }
    struct vm_ev_back b;
    vm_ev_back_from_end(&b, &ev);
    for (size_t i = n; i-- > 0;) {
        bad += !vm_ev_prev(&b, &e) || b.i != i || !same(&e, &want[i]);
        /* The backward reading keeps its own block. */
        if (i % 5 == 0 && n) (void)vm_event_at(&ev, next() % n);
    }
    bad += vm_ev_prev(&b, &e);
    CHECK_EQ(bad, 0);
    vm_events_free(&ev);
    CHECK(ev.buf == NULL && ev.n == 0);
    free(want);
}

/* The size promised: an event whose fields all repeat the one before
 * takes 5 bytes (a head and four zero differences), as does a block's
 * first when each field is 1; a kind past 14 adds a byte, a device other
 * than -1 and 0 a byte (up to 127) or two. */
static void sizes(void) {
    struct vm_events ev = {0};
    struct vm_event e = {.time_ns = 1, .address = 1, .bytes = 1, .stack = 1, .device = 0, .type = 'a', .kind = 3};
    for (int i = 0; i < 100; i++) vm_events_add(&ev, &e);
    CHECK_EQ(ev.len, 500);
    e.kind = 15;
    e.device = -1;
    for (int i = 0; i < 100; i++) vm_events_add(&ev, &e);
    CHECK_EQ(ev.len, 500 + 600);
    e.device = 127;
    for (int i = 0; i < 100; i++) vm_events_add(&ev, &e);
    CHECK_EQ(ev.len, 1100 + 700);
    e.device = 4095;
    for (int i = 0; i < 100; i++) vm_events_add(&ev, &e);
    CHECK_EQ(ev.len, 1800 + 800);
    vm_events_done(&ev);
    CHECK_EQ(ev.cap, ev.len);
    CHECK_EQ(ev.n, 400);
    struct vm_event last = vm_event_at(&ev, 399);
    CHECK(same(&last, &e));
    vm_events_free(&ev);
}

int main(void) {
    static const size_t counts[] = {0, 1, 2, 31, 32, 33, 63, 64, 65, 1000, 20011};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) round_trip(counts[i]);
    sizes();
    return check_report("unit_events");
}
