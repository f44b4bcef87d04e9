/* test_pages.c -- what the tracker maps in the hot path is mapped in small
 * pages: the event ring and a live table's arrays of a megabyte or more.
 * A huge page's first touch clears 2 MiB inside one hooked call (1 to 3 ms
 * of its CPU time, measured by `bench_shapes maxcall`), so each of these
 * mappings must carry the kernel's "no huge pages" flag (VmFlags "nh" in
 * /proc/self/smaps), whatever the system's transparent huge page setting. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "../../tracker/history.h"
#include "../../tracker/intern.h"
#include "../../tracker/rules.h"
#include "../../tracker/slot.h"
#include "check.h"

/* The VmFlags line of the mapping holding `p`, in `flags` (empty when
 * none was found). */
static void vm_flags_of(const void *p, char *flags, size_t size) {
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[512];
    int in = 0;
    flags[0] = 0;
    if (!f) return;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') == line + strspn(line, "0123456789abcdef")) {
            in = (uintptr_t)p >= lo && (uintptr_t)p < hi;
            continue;
        }
        if (in && strncmp(line, "VmFlags:", 8) == 0) {
            snprintf(flags, size, "%s", line + 8);
            break;
        }
    }
    fclose(f);
}

static int has_flag(const char *flags, const char *flag) {
    char want[8];
    snprintf(want, sizeof want, " %s", flag);
    for (const char *s = flags; (s = strstr(s, want)); s += strlen(want))
        if (s[strlen(want)] == ' ' || s[strlen(want)] == '\n' || s[strlen(want)] == 0) return 1;
    return 0;
}

static long minor_faults(void) {
    struct rusage u;
    getrusage(RUSAGE_THREAD, &u);
    return u.ru_minflt;
}

/* A table that has just grown into a mapped array of `cap` entries (after
 * `n` adds, the last few moved or put into it, `fresh_lo` to `fresh_hi`
 * of its blocks of a page still never written): lookups of keys it does
 * not hold, and a walk of every entry, read no block never written, so
 * they take no page fault (a read of such a page maps the shared zero
 * page, and the first write after it is a fault that flushes every CPU's
 * TLB). Every record is still found; deleted to the end, the move is over
 * and the bits are let go. */
static void grown_table_reads_no_fresh_block(size_t n, size_t cap, size_t fresh_lo, size_t fresh_hi, uint64_t base) {
    struct live_table t;
    memset(&t, 0, sizeof t);
    struct vt_rec *recs = calloc(n, sizeof *recs);
    for (size_t i = 0; i < n; i++) {
        recs[i].key = (struct vt_key){base + i * 256, 0, 0};
        table_add(&t, &recs[i], key_hash(&recs[i].key));
    }
    CHECK_EQ(t.cap, cap);
    CHECK(t.old != NULL);
    CHECK(t.fresh_left > fresh_lo && t.fresh_left < fresh_hi);
    size_t fresh = t.fresh_left, found = 0, walked = 0, wrong = 0;
    long f0 = minor_faults();
    for (uint64_t i = 0; i < 20000; i++) {
        struct vt_key k = {base + 0x80000000 + i * 4096 * 7, 0, 0};
        found += table_find(&t, &k, key_hash(&k)) != NULL;
    }
    TABLE_EACH(&t, r, walked += r != NULL);
    long f1 = minor_faults();
    CHECK_EQ(found, 0);
    CHECK_EQ(walked, n);
    CHECK_EQ(f1 - f0, 0);
    CHECK_EQ(t.fresh_left, fresh);
    for (size_t i = 0; i < n; i++) wrong += table_find(&t, &recs[i].key, key_hash(&recs[i].key)) != &recs[i];
    CHECK_EQ(wrong, 0);
    for (size_t i = 0; i < n; i++) table_del(&t, &recs[i], key_hash(&recs[i].key));
    CHECK_EQ(t.count, 0);
    vt_table_free(&t);
    CHECK(t.written == NULL && t.fresh_left == 0);
    free(recs);
}

static void test_fresh_blocks_are_not_read(void) {
    /* The add of the 32,769th grows 65,536 entries to 131,072 (512 blocks). */
    grown_table_reads_no_fresh_block(32768 + 50, 131072, 100, 512, 0x10000000);
}

/* The same for a table of 2,049 records: its array of 8,192 entries (128
 * KiB, 32 blocks) is mapped too, with the same bits (it was calloc'd: the
 * C library gives memory fresh from the kernel unwritten, and 256 threads'
 * tables of that size made most of their hooked calls over 1 ms at the
 * zero pages' replacements). */
static void test_small_arrays_too(void) { grown_table_reads_no_fresh_block(2049 + 3, 8192, 0, 32, 0x20000000); }

/* The stacks' table: just grown into an array of 8,192 entries with a few
 * stacks in it, look-ups of stacks it does not hold (without the lock, as
 * every hooked call's) read no block never written: no page fault. Every
 * stack is still found. */
static void test_stack_table_blocks(void) {
    size_t n = 2049 + 2; /* the 2,049th grows 4,096 entries to 8,192 */
    uint32_t *ids = calloc(n, sizeof *ids);
    for (size_t i = 0; i < n; i++) {
        uintptr_t frames[2] = {0x400000 + i * 16, 0x500000};
        ids[i] = vt_tracker_stack_id(frames, 2);
    }
    struct vt_intern_stats st;
    vt_intern_stats(&st);
    CHECK_EQ(st.cap, 8192);
    CHECK(st.moving);
    size_t found = 0, wrong = 0;
    long f0 = minor_faults();
    for (uintptr_t i = 0; i < 20000; i++) {
        uintptr_t frames[2] = {0x9000000 + i * 16, 0x500000};
        found += vt_intern_lookup(frames, 2) != UINT32_MAX;
    }
    long f1 = minor_faults();
    CHECK_EQ(found, 0);
    CHECK_EQ(f1 - f0, 0);
    for (size_t i = 0; i < n; i++) {
        uintptr_t frames[2] = {0x400000 + i * 16, 0x500000};
        wrong += vt_intern_lookup(frames, 2) != ids[i];
    }
    CHECK_EQ(wrong, 0);
    free(ids);
}

/* The walker's table of unwind rules, shared by every thread: a look-up
 * (without the lock) of a code address it does not hold reads no block
 * never written; after rules were computed for a few addresses, those are
 * found, and 20,000 look-ups of others take no page fault (256 threads'
 * first walks wrote blocks their reads had mapped as zero pages). */
static void test_rule_table_blocks(void) {
    vt_rules_init();
    CHECK(vt_rules != NULL);
    if (!vt_rules) return;
    uintptr_t here = (uintptr_t)&test_rule_table_blocks;
    for (uintptr_t k = 0; k < 8; k++) (void)vt_rules_compute(here + k);
    struct vt_rule r;
    size_t found = 0, others = 0;
    for (uintptr_t k = 0; k < 8; k++) found += vt_rules_lookup(vt_rules, here + k, &r);
    long f0 = minor_faults();
    for (uintptr_t i = 0; i < 20000; i++) others += vt_rules_lookup(vt_rules, 0x7f0000000000 + i * 4099, &r);
    long f1 = minor_faults();
    CHECK_EQ(found, 8);
    CHECK_EQ(others, 0);
    CHECK_EQ(f1 - f0, 0);
}

int main(void) {
    test_fresh_blocks_are_not_read();
    test_rule_table_blocks();
    test_small_arrays_too();
    test_stack_table_blocks();
    vt_tracker_init(64, 1000000);
    uintptr_t frames[2] = {0x1000, 0x2000};
    /* Past 32,768 live the table's array is 1 MiB or more: mapped. */
    for (uint64_t i = 0; i < 40000; i++) vt_tracker_alloc(0x10000000 + i * 256, 256, VT_KIND_DEVICE, 0, "x", frames, 2);
    struct vt_snapshot *s = vt_tracker_snapshot(); /* applies the logs: the ring is mapped */
    CHECK_EQ(s->totals.live_count, 40000);
    vt_snapshot_free(s);
    char flags[512];
    CHECK(vt_history.ring != NULL);
    vm_flags_of(vt_history.ring, flags, sizeof flags);
    CHECK(flags[0] != 0);
    CHECK(has_flag(flags, "nh"));
    CHECK(!has_flag(flags, "hg"));
    CHECK(vt_my_slot && vt_my_slot->table.cap * sizeof(struct live_entry) >= ((size_t)1 << 20));
    if (vt_my_slot) {
        vm_flags_of(vt_my_slot->table.e, flags, sizeof flags);
        CHECK(flags[0] != 0);
        CHECK(has_flag(flags, "nh"));
    }
    return check_report("unit-pages");
}
