/* test_hotpath.c -- the hot path's structures: the live table's growth in
 * steps, frees of another thread's memory, interned stacks. Built plain,
 * with ASan+UBSan and with TSan (the threaded parts) by `make unit`. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Counts the old array's entries the probes read (table.h). */
static size_t old_probes;
#define VT_TABLE_OLD_PROBE() (old_probes++)
#include "../../tracker/table.h"
#include "../../tracker/tracker.h"
#include "check.h"

/* ---- the table alone ----------------------------------------------------- */

static struct vt_rec *rec_for(uint64_t address, uint32_t space) {
    struct vt_rec *r = calloc(1, sizeof *r);
    r->key = (struct vt_key){address, space, 0};
    r->a.address = address;
    return r;
}

static struct vt_rec *find(struct live_table *t, uint64_t address, uint32_t space) {
    struct vt_key k = {address, space, 0};
    return table_find(t, &k, key_hash(&k));
}

/* Adds and deletes in a known random order, against a list of what is in:
 * after every op the count is exact, every key in it is found and a key
 * taken out is not; the add that outgrows the table leaves the old array to
 * be moved over later calls (no call moves more than GROW_STEP entries),
 * and the move ends. */
static void test_table_grows_in_steps(void) {
    enum { N = 200000 };
    struct live_table t = {0};
    struct vt_rec **in = calloc(N, sizeof *in);
    size_t nin = 0, grows = 0, max_step = 0, lost = 0, ghosts = 0;
    unsigned x = 7;
    for (uint64_t i = 0; i < N; i++) {
        x = x * 1103515245u + 12345u;
        if (nin && (x >> 16) % 3 == 0) {
            size_t j = (x >> 4) % nin;
            struct vt_rec *r = in[j];
            in[j] = in[--nin];
            table_del(&t, r, key_hash(&r->key));
            if (find(&t, r->key.address, r->key.space)) ghosts++;
            free(r);
        }
        struct vt_rec *r = rec_for(0x7000000000ull + i * 256, (uint32_t)(i % 2));
        size_t moved = t.moved;
        int growing = t.old != NULL;
        CHECK(table_add(&t, r, key_hash(&r->key)));
        if (!growing && t.old) {
            grows++;
            if (t.moved > max_step) max_step = t.moved;
        } else if (growing && t.old && t.moved - moved > max_step) {
            max_step = t.moved - moved;
        }
        in[nin++] = r;
        if (t.count != nin) { CHECK_EQ(t.count, nin); break; }
        if (i % 997 == 0)
            for (size_t k = 0; k < nin; k++) lost += find(&t, in[k]->key.address, in[k]->key.space) != in[k];
    }
    for (size_t k = 0; k < nin; k++) lost += find(&t, in[k]->key.address, in[k]->key.space) != in[k];
    CHECK_EQ(lost, 0);
    CHECK_EQ(ghosts, 0);
    CHECK(grows >= 10);            /* 64 entries doubled to 256 Ki and more */
    CHECK(max_step <= GROW_STEP);
    /* Every record once, whether in the new array or still in the old. */
    size_t seen = 0;
    TABLE_EACH(&t, r, seen++);
    CHECK_EQ(seen, nin);
    /* The move ends: deletes alone finish it. */
    while (nin && t.old) {
        struct vt_rec *r = in[--nin];
        table_del(&t, r, key_hash(&r->key));
        free(r);
    }
    CHECK(t.old == NULL);
    for (size_t k = 0; k < nin; k++) free(in[k]);
    vt_table_free(&t);
    free(in);
}

/* A table grown to a mapped array (a megabyte or more) and emptied while
 * the old array's pages are given back: what is left is still found. */
static void test_table_big_move(void) {
    enum { N = 70000 }; /* past 64 Ki entries' half: a 2 MiB array */
    struct live_table t = {0};
    struct vt_rec **in = calloc(N, sizeof *in);
    for (uint64_t i = 0; i < N; i++) {
        in[i] = rec_for(0x100000 + i * 512, 0);
        table_add(&t, in[i], key_hash(&in[i]->key));
    }
    size_t lost = 0;
    for (uint64_t i = 0; i < N; i += 2) table_del(&t, in[i], key_hash(&in[i]->key));
    for (uint64_t i = 1; i < N; i += 2) lost += find(&t, in[i]->key.address, 0) != in[i];
    for (uint64_t i = 0; i < N; i += 2) lost += find(&t, in[i]->key.address, 0) != NULL;
    CHECK_EQ(lost, 0);
    CHECK_EQ(t.count, N / 2);
    for (uint64_t i = 0; i < N; i++) free(in[i]);
    vt_table_free(&t);
    free(in);
}

/* The move's last entries, all taken: a key in neither array reads each of
 * them once, not the old array's size over (a lookup that did took 11 ms at
 * 8 Mi entries, at every allocation until the move ended); a key among them
 * is found, whether its home lies in the part already moved or not. */
static void test_table_move_end_probes_each_entry_once(void) {
    enum { OLD = 1 << 16, LEFT = 5 };
    struct live_table t = {0};
    struct live_entry *e = calloc(64, sizeof *e), *old = calloc(OLD, sizeof *old);
    struct vt_rec *r[LEFT];
    t.e = e;
    t.cap = 64;
    t.old = old;
    t.old_cap = OLD;
    t.moved = OLD - LEFT;
    for (int i = 0; i < LEFT; i++) {
        r[i] = rec_for(0x500000 + (uint64_t)i * 4096, 0);
        old[OLD - LEFT + i] = (struct live_entry){key_tag(&r[i]->key), i == 2 ? TABLE_TOMB : r[i]};
        t.count += i != 2;
    }
    size_t most = 0, lost = 0;
    for (uint64_t a = 0x900000; a < 0x900000 + 1000 * 256; a += 256) {
        old_probes = 0;
        lost += find(&t, a, 0) != NULL;
        if (old_probes > most) most = old_probes;
    }
    CHECK_EQ(lost, 0);
    CHECK_EQ(most, LEFT);
    for (int i = 0; i < LEFT; i++) {
        old_probes = 0;
        CHECK(find(&t, r[i]->key.address, 0) == (i == 2 ? NULL : r[i]));
        CHECK(old_probes <= LEFT);
        free(r[i]);
    }
    free(e);
    free(old);
}

/* ---- through the tracker, with threads ----------------------------------- */

#define OWNERS 4
#define EACH 20000
static uint64_t addr_of(int owner, int i) { return ((uint64_t)(owner + 1) << 40) | ((uint64_t)i << 8); }
static int handed[OWNERS];
/* Counted by the threads, checked by the main one. */
static size_t missing, dups;

/* Each owner allocates EACH (its table grows step by step meanwhile) and
 * hands them over; a freer per owner frees every other one as they come:
 * its lookups run in the owner's table while it grows. */
static void *owner(void *arg) {
    int me = (int)(intptr_t)arg;
    uintptr_t frames[3] = {0x100 + (uintptr_t)me, 0x200, 0x300};
    for (int i = 0; i < EACH; i++) {
        vt_tracker_alloc(addr_of(me, i), 100, VT_KIND_DEVICE, 0, "x", frames, 3);
        __atomic_store_n(&handed[me], i + 1, __ATOMIC_RELEASE);
    }
    return NULL;
}

static void *freer(void *arg) {
    int of = (int)(intptr_t)arg;
    for (int i = 0; i < EACH; i += 2) {
        while (__atomic_load_n(&handed[of], __ATOMIC_ACQUIRE) <= i) sched_yield();
        struct vt_free f = vt_tracker_free_begin(VT_SPACE_DEVICE, addr_of(of, i));
        if (!f.rec) __atomic_add_fetch(&missing, 1, __ATOMIC_RELAXED);
        vt_tracker_free_end(&f, 1);
    }
    return NULL;
}

static int by_address(const void *a, const void *b) {
    const struct vt_live *x = a, *y = b;
    return x->address < y->address ? -1 : x->address > y->address;
}

static volatile int stop;
static void *snapshots(void *arg) {
    (void)arg;
    size_t n = 0;
    while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE) || n < 3) {
        struct vt_snapshot *s = vt_tracker_snapshot();
        /* Every live record once, in a table growing or not (the tables
         * are copied one by one while the others go on, so only that). */
        size_t dup = 0;
        qsort(s->live, s->nlive, sizeof *s->live, by_address);
        for (size_t i = 1; i < s->nlive; i++) dup += s->live[i].address == s->live[i - 1].address;
        __atomic_add_fetch(&dups, dup, __ATOMIC_RELAXED);
        vt_snapshot_free(s);
        n++;
    }
    return NULL;
}

static void test_frees_across_threads_while_growing(void) {
    pthread_t o[OWNERS], f[OWNERS], s;
    pthread_create(&s, NULL, snapshots, NULL);
    for (int i = 0; i < OWNERS; i++) pthread_create(&o[i], NULL, owner, (void *)(intptr_t)i);
    for (int i = 0; i < OWNERS; i++) pthread_create(&f[i], NULL, freer, (void *)(intptr_t)i);
    for (int i = 0; i < OWNERS; i++) pthread_join(o[i], NULL);
    for (int i = 0; i < OWNERS; i++) pthread_join(f[i], NULL);
    __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
    pthread_join(s, NULL);
    CHECK_EQ(missing, 0);
    CHECK_EQ(dups, 0);
    struct vt_snapshot *snap = vt_tracker_snapshot();
    CHECK_EQ(snap->totals.alloc_count, OWNERS * EACH);
    CHECK_EQ(snap->totals.free_count, OWNERS * EACH / 2);
    CHECK_EQ(snap->totals.unknown_frees, 0);
    CHECK_EQ(snap->totals.live_count, OWNERS * EACH / 2);
    CHECK_EQ(snap->totals.live_bytes, 100ull * OWNERS * EACH / 2);
    CHECK_EQ(snap->nlive, OWNERS * EACH / 2);
    /* Exactly the odd ones of every owner are live. */
    qsort(snap->live, snap->nlive, sizeof *snap->live, by_address);
    size_t wrong = 0, k = 0;
    for (int o2 = 0; o2 < OWNERS; o2++)
        for (int i = 1; i < EACH; i += 2, k++) wrong += k >= snap->nlive || snap->live[k].address != addr_of(o2, i);
    CHECK_EQ(wrong, 0);
    vt_snapshot_free(snap);
}

/* A thread that frees what several others allocated, in turns, finds each
 * record, and a free of what nobody allocated is counted as unknown. */
static void *alloc_three(void *arg) {
    int me = (int)(intptr_t)arg;
    uintptr_t frames[1] = {0x900};
    for (int i = 0; i < 3; i++) vt_tracker_alloc(addr_of(me + 8, i), 10, VT_KIND_DEVICE, 0, "x", frames, 1);
    return NULL;
}

static void test_free_of_many_owners(void) {
    vt_tracker_reset_child();
    pthread_t t[3];
    for (int i = 0; i < 3; i++) pthread_create(&t[i], NULL, alloc_three, (void *)(intptr_t)i);
    for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
    int found = 0;
    for (int i = 0; i < 3; i++)
        for (int o2 = 2; o2 >= 0; o2--) {
            struct vt_free f = vt_tracker_free_begin(VT_SPACE_DEVICE, addr_of(o2 + 8, i));
            found += f.rec != NULL;
            vt_tracker_free_end(&f, 1);
        }
    struct vt_free f = vt_tracker_free_begin(VT_SPACE_DEVICE, 0x4242);
    CHECK(f.rec == NULL);
    vt_tracker_free_end(&f, 1);
    CHECK_EQ(found, 9);
    struct vt_snapshot *s = vt_tracker_snapshot();
    CHECK_EQ(s->totals.live_count, 0);
    CHECK_EQ(s->totals.free_count, 9);
    CHECK_EQ(s->totals.unknown_frees, 1);
    vt_snapshot_free(s);
}

/* Keys whose tags are equal (an address with its top bits set, in
 * another space: key_tag): each found as itself, in either array, before
 * and after the others of its tag are taken out. */
static void test_table_keys_sharing_a_tag(void) {
    enum { GROUPS = 3000, SPACES = 4 };
    struct live_table t = {0};
    struct vt_rec **in = calloc(GROUPS * SPACES, sizeof *in);
    size_t wrong = 0, n = 0, groups = 0;
    /* Until a move is under way (past 4,096 records), so that both arrays
     * are probed. */
    for (uint64_t g = 0; g < GROUPS && !(t.old && n > 2000); g++, groups++)
        for (uint32_t s = 0; s < SPACES; s++) {
            struct vt_rec *r = rec_for((0x7f0000000000ull + g * 4096) ^ ((uint64_t)s << 59), s);
            CHECK_EQ(key_tag(&r->key), 0x7f0000000000ull + g * 4096);
            CHECK(table_add(&t, r, key_hash(&r->key)));
            in[n++] = r;
        }
    CHECK(t.old != NULL);
    CHECK_EQ(n, groups * SPACES);
    for (size_t i = 0; i < n; i++) wrong += find(&t, in[i]->key.address, in[i]->key.space) != in[i];
    /* The tag of one space, asked for in another: no record. */
    for (uint64_t g = 0; g < groups; g++) wrong += find(&t, 0x7f0000000000ull + g * 4096, SPACES) != NULL;
    CHECK_EQ(wrong, 0);
    /* Spaces 0 and 2 taken out: 1 and 3 still found, 0 and 2 not. */
    for (size_t i = 0; i < n; i++)
        if (in[i]->key.space % 2 == 0) table_del(&t, in[i], key_hash(&in[i]->key));
    for (size_t i = 0; i < n; i++)
        wrong += find(&t, in[i]->key.address, in[i]->key.space) != (in[i]->key.space % 2 ? in[i] : NULL);
    CHECK_EQ(wrong, 0);
    CHECK_EQ(t.count, n / 2);
    for (size_t i = 0; i < n; i++) free(in[i]);
    vt_table_free(&t);
    free(in);
}

/* A deletion's shift and a growing table's move find each entry's home
 * from the entry (its tag), reading no record: with every record's page
 * unreadable, records taken out by their pointers and the move carried
 * to its end (a read of a record would fault). The records of another
 * thread's memory sit in that thread's cache; a free of one there read
 * the next entry's too. */
static void test_table_shift_and_move_read_no_record(void) {
    enum { N = 40000 };
    size_t bytes = ((N * sizeof(struct vt_rec)) + 4095) & ~(size_t)4095;
    struct vt_rec *recs = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(recs != MAP_FAILED);
    if (recs == MAP_FAILED) return;
    struct live_table t = {0};
    uint32_t *hash = calloc(N, sizeof *hash);
    size_t i = 0;
    /* Added until a move is under way with most of the old array left. */
    for (; i < N && !(t.old && t.moved == 0 && i > 1000); i++) {
        recs[i].key = (struct vt_key){0x7000000000ull + i * 256, (uint32_t)(i % 3), 0};
        hash[i] = key_hash(&recs[i].key);
        CHECK(table_add(&t, &recs[i], hash[i]));
    }
    size_t added = i;
    CHECK(t.old != NULL);
    CHECK(mprotect(recs, bytes, PROT_NONE) == 0);
    /* Every third taken out, by pointer; each delete moves the move on. */
    for (size_t j = 0; j < added; j += 3) table_del(&t, &recs[j], hash[j]);
    while (t.old) vt_table_move(&t);
    CHECK(mprotect(recs, bytes, PROT_READ | PROT_WRITE) == 0);
    size_t wrong = 0, seen = 0;
    for (size_t j = 0; j < added; j++) wrong += table_find(&t, &recs[j].key, hash[j]) != (j % 3 ? &recs[j] : NULL);
    TABLE_EACH(&t, r, seen++);
    CHECK_EQ(wrong, 0);
    CHECK_EQ(seen, added - (added + 2) / 3);
    CHECK_EQ(t.count, seen);
    vt_table_free(&t);
    munmap(recs, bytes);
    free(hash);
}

int main(void) {
    vt_tracker_init(64, 1000);
    test_table_keys_sharing_a_tag();
    test_table_shift_and_move_read_no_record();
    test_table_grows_in_steps();
    test_table_big_move();
    test_table_move_end_probes_each_entry_once();
    test_frees_across_threads_while_growing();
    test_free_of_many_owners();
    return check_report("unit-hotpath");
}
