/* test_cow.c -- a live table copied on write (tracker/cow.h): whatever the
 * table's thread does between the copy's steps (adds, deletes that shift
 * runs back, growth, a handle mapped, the copy given up), the copy is the
 * table as it was armed: every record it held then, once, with the fields
 * it had then, and nothing added since. Built plain and with ASan+UBSan by
 * `make unit` (a record read after its free is an ASan failure). */
#include <stdlib.h>
#include <string.h>

#include "../../tracker/cow.h"
#include "check.h"

#define NMAX 400000

/* What the copy handed on, by key index (address / 16). */
static unsigned char seen[NMAX];
static uint64_t seen_bytes[NMAX], seen_mapped[NMAX];
static uint64_t dups, strays, kept_calls;

static void keep(void *ctx, struct vt_rec *const *recs, size_t n) {
    (void)ctx;
    kept_calls++;
    for (size_t i = 0; i < n; i++) {
        uint64_t k = recs[i]->key.address / 16;
        if (k >= NMAX) {
            strays++;
            continue;
        }
        dups += seen[k];
        seen[k] = 1;
        seen_bytes[k] = recs[i]->a.bytes;
        seen_mapped[k] = recs[i]->a.mapped;
    }
}

/* The model: which keys are live, their records, and what the armed
 * point held. */
static struct vt_rec *live[NMAX];
static unsigned char at_arm[NMAX];
static uint64_t arm_bytes[NMAX], arm_mapped[NMAX];
static uint64_t next_key, nlive_keys;
static uint64_t keys[NMAX]; /* the live keys, in no order */
static size_t where[NMAX];  /* each live key's index in keys */

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void add(struct live_table *t) {
    uint64_t k = next_key++;
    struct vt_rec *r = calloc(1, sizeof *r);
    r->key = (struct vt_key){k * 16, 1, 0};
    r->a.address = k * 16;
    r->a.bytes = 1000 + rnd() % 1000;
    uint32_t h = key_hash(&r->key);
    size_t at;
    if (k % 2) { /* the allocation's way: where the miss stopped */
        CHECK(table_find_at(t, &r->key, h, &at) == NULL);
        CHECK(table_add_at(t, r, key_tag(&r->key), h, at));
    } else {
        CHECK(table_add(t, r, h));
    }
    live[k] = r;
    where[k] = nlive_keys;
    keys[nlive_keys++] = k;
}

static void del(struct live_table *t, uint64_t k) {
    struct vt_rec *r = live[k];
    table_del(t, r, key_hash(&r->key));
    free(r); /* the copy must have read it before this */
    live[k] = NULL;
    uint64_t last = keys[--nlive_keys];
    keys[where[k]] = last;
    where[last] = where[k];
}

/* A handle mapped: the record changes in place (vt_tracker_map's way). */
static void map(struct live_table *t, uint64_t k) {
    struct vt_rec *r = live[k];
    uint32_t h = key_hash(&r->key);
    if (t->cow) vt_cow_touch_key(t, h);
    r->a.mapped = 0x7000000000ull + rnd() % 4096;
}

static void reset(void) {
    memset(seen, 0, sizeof seen);
    memset(at_arm, 0, sizeof at_arm);
    memset(live, 0, sizeof live);
    dups = strays = kept_calls = 0;
    next_key = nlive_keys = 0;
}

/* One run: n0 records (and, with `growing`, more until the table is
 * growing at the arm), then `ops` random changes with a copy step every
 * `every` of them on average, then the rest of the copy. */
static void run(size_t n0, int growing, size_t ops, unsigned every) {
    reset();
    struct live_table t = {0};
    for (size_t i = 0; i < n0; i++) add(&t);
    while (growing && !t.old) add(&t);
    if (growing) CHECK(t.old != NULL);
    for (uint64_t i = 0; i < nlive_keys; i++) {
        uint64_t k = keys[i];
        at_arm[k] = 1;
        arm_bytes[k] = live[k]->a.bytes;
        arm_mapped[k] = live[k]->a.mapped;
    }
    uint64_t armed = nlive_keys;
    struct vt_cow_sink sink = {keep, NULL, 0};
    CHECK(vt_cow_begin(&t, &sink));
    CHECK(armed == 0 ? t.cow == NULL : t.cow != NULL);
    for (size_t i = 0; i < ops && next_key < NMAX - 1; i++) {
        unsigned x = (unsigned)(rnd() % 100);
        if (x < 100 / every && t.cow) vt_cow_step(&t);
        else if (x < 55 || !nlive_keys) add(&t);
        else if (x < 92) del(&t, keys[rnd() % nlive_keys]);
        else map(&t, keys[rnd() % nlive_keys]);
    }
    while (vt_cow_step(&t)) continue;
    vt_cow_end(&t);
    CHECK(t.cow == NULL);
    uint64_t missing = 0, wrong = 0, extra = 0;
    for (uint64_t k = 0; k < next_key; k++) {
        if (at_arm[k]) {
            missing += !seen[k];
            wrong += seen[k] && (seen_bytes[k] != arm_bytes[k] || seen_mapped[k] != arm_mapped[k]);
        } else {
            extra += seen[k];
        }
    }
    CHECK_EQ(missing, 0);
    CHECK_EQ(wrong, 0);
    CHECK_EQ(extra, 0);
    CHECK_EQ(dups, 0);
    CHECK_EQ(strays, 0);
    TABLE_EACH(&t, r, free(r));
    vt_table_free(&t);
}

/* Given up (the sink's stop set): the table's next change disarms it, and
 * nothing more is handed on. */
static void test_stopped_copy_lets_go(void) {
    reset();
    struct live_table t = {0};
    for (int i = 0; i < 5000; i++) add(&t);
    struct vt_cow_sink sink = {keep, NULL, 0};
    CHECK(vt_cow_begin(&t, &sink));
    CHECK(vt_cow_step(&t));
    uint64_t calls = kept_calls;
    CHECK_EQ(calls, 1);
    __atomic_store_n(&sink.stop, 1, __ATOMIC_RELEASE);
    CHECK(!vt_cow_step(&t));
    del(&t, keys[0]);
    CHECK(t.cow == NULL);
    for (int i = 0; i < 1000; i++) add(&t);
    CHECK_EQ(kept_calls, calls);
    TABLE_EACH(&t, r, free(r));
    vt_table_free(&t);
}

int main(void) {
    /* An empty table is not armed; one record; small and large tables;
     * copies that step rarely (the thread changes most chunks first) and
     * often; tables growing when armed, and growing while copied. */
    run(0, 0, 1000, 10);
    run(1, 0, 1000, 10);
    run(100, 0, 5000, 50);
    for (int seed = 0; seed < 6; seed++) {
        run(20000, 0, 60000, seed % 2 ? 3 : 200);
        run(20000, 1, 60000, seed % 2 ? 5 : 100);
        run(3000, 0, 150000, 1000); /* grows several times while copied */
    }
    test_stopped_copy_lets_go();
    return check_report("unit-cow");
}
