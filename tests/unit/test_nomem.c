/* test_nomem.c -- what the tracker drops for lack of memory is counted.
 *
 * This program defines malloc, calloc, realloc and aligned_alloc itself
 * (glibc's own behind them), so that a test can make the next allocations
 * fail; the tracker, linked in, then meets out-of-memory where a record, a
 * stack, a table growth or an OOM's holder table is allocated, and each
 * thing dropped must show in the dump's totals.records_lost. Not built
 * with a sanitizer: its allocator would replace these. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/warn.h"
#include "../../report/analysis.h"
#include "../../report/dump.h"
#include "../../tracker/intern.h"
#include "../../tracker/recslab.h"
#include "../../tracker/tracker.h"
#include "check.h"

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

/* The next `skip` allocations succeed, then `fail` of them fail. */
static int skip, fail, failed;

static int refuse(void) {
    if (fail == 0) return 0;
    if (skip > 0) { skip--; return 0; }
    fail--;
    failed++;
    errno = ENOMEM;
    return 1;
}

static void fail_next(int after, int n) { skip = after; fail = n; failed = 0; }

void *malloc(size_t n) { return refuse() ? NULL : __libc_malloc(n); }
void *calloc(size_t n, size_t size) { return refuse() ? NULL : __libc_calloc(n, size); }
void *realloc(void *p, size_t n) { return refuse() ? NULL : __libc_realloc(p, n); }
void *aligned_alloc(size_t align, size_t n) { return refuse() ? NULL : __libc_memalign(align, n); }

static const uintptr_t site_a[] = {0x1000, 0x2000, 0x3000};
static const uintptr_t site_b[] = {0x1100, 0x2000, 0x3000};

static int is_live(const struct vt_snapshot *s, uint64_t address) {
    for (size_t i = 0; i < s->nlive; i++)
        if (s->live[i].address == address) return 1;
    return 0;
}

int main(void) {
    vt_tracker_init(64, 16);
    vt_tracker_alloc(0x100, 10, VT_KIND_DEVICE, 0, "cuMemAlloc_v2", site_a, 3);

    /* A new stack whose interning fails: the allocation is kept, its stack
     * is lost. Its node is carved from this thread's slab (slab.h): with
     * room left for fewer than a node of depth 3 (96 + 24 bytes), the next
     * slab's malloc fails. */
    uintptr_t filler[3] = {0x5000, 0x2000, 0x3000};
    while (vt_intern_slab_left() >= 120) {
        CHECK(vt_tracker_stack_id(filler, 3) != UINT32_MAX);
        filler[0]++;
    }
    fail_next(0, 1);
    vt_tracker_alloc(0x200, 20, VT_KIND_DEVICE, 0, "cuMemAlloc_v2", site_b, 3);
    CHECK_EQ(failed, 1);
    CHECK_EQ(vt_records_lost_count(), 1);

    /* The live table's growth: 32 records fill its first 64 entries; the
     * 33rd's record is carved from this thread's slab (no allocation), the
     * doubled table is not allocated. */
    for (uint64_t a = 0x1000; a < 0x1000 + 30; a++)
        vt_tracker_alloc(a, 1, VT_KIND_DEVICE, 0, "cuMemAlloc_v2", site_a, 3);
    fail_next(0, 1);
    vt_tracker_alloc(0x400, 40, VT_KIND_DEVICE, 0, "cuMemAlloc_v2", site_a, 3);
    CHECK_EQ(failed, 1);
    CHECK_EQ(vt_records_lost_count(), 2);

    /* The record itself: this thread's slab used up (recslab.h: the
     * dropped record first, from the thread's cache), the next slab is
     * not allocated. */
    uint64_t more = 0;
    for (uint64_t a = 0x2000; vt_rec_slab_left() > 0; a++, more++)
        vt_tracker_alloc(a, 1, VT_KIND_DEVICE, 0, "cuMemAlloc_v2", site_a, 3);
    CHECK(more > 0);
    fail_next(0, 1);
    vt_tracker_alloc(0x300, 30, VT_KIND_DEVICE, 0, "cuMemAlloc_v2", site_a, 3);
    CHECK_EQ(failed, 1);
    CHECK_EQ(vt_records_lost_count(), 3);

    /* An OOM's copy of the other processes and its holder table. */
    struct vt_proc procs[1] = {{.pid = 42}};
    struct vt_oom o = {.requested = 1 << 20, .api = "cuMemAlloc_v2", .device = 0, .kind = VT_KIND_DEVICE,
                       .procs = procs, .nprocs = 1};
    fail_next(0, 2);
    vt_tracker_failed(1, &o, site_a, 3);
    CHECK_EQ(failed, 2);
    CHECK_EQ(vt_records_lost_count(), 5);

    struct vt_snapshot *s = vt_tracker_snapshot();
    CHECK(s != NULL);
    if (!s) return check_report("unit-nomem");
    CHECK_EQ(s->totals.live_count, 32 + more);
    CHECK(is_live(s, 0x200) && !is_live(s, 0x300) && !is_live(s, 0x400));
    CHECK_EQ(s->nooms, 1);
    CHECK_EQ(s->ooms[0].nholders, 0);
    CHECK_EQ(s->ooms[0].nprocs, 0);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    struct vt_dump_meta m = {.reason = "oom", .pid = 7};
    struct vt_analysis *an = vt_analyse(s, NULL, 0);
    vt_dump_write(f, s, NULL, an, &m);
    fclose(f);
    CHECK(strstr(buf, "\"records_lost\":5,\"oom_survived\":0,\"last_oom_survived\":false}") != NULL);
    free(buf);
    vt_analysis_free(an);
    vt_snapshot_free(s);
    return check_report("unit-nomem");
}
