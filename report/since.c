/* since.c -- the reports of a mark (since.h). */
#include <inttypes.h>
#include <stdlib.h>
#include <unistd.h>

#include "../tracker/mark.h"
#include "../tracker/options.h"
#include "holders.h"
#include "since.h"
#include "symbolize.h"
#include "traits.h"

static int outside_torch_allocator(const struct vt_symbols *sym, uint32_t stack) {
    return !vt_through_torch_allocator(sym, stack);
}

int vt_since_leaks(FILE *f, int mark, int outside_torch, struct vt_leak_result *res) {
    *res = (struct vt_leak_result){0};
    struct vt_snapshot *s = vt_mark_snapshot(mark);
    if (!s) return -1;
    vt_sort_live(s);
    struct vt_symbols *sym = vt_symbolize_kept(s);
    char err[512];
    /* A bad suppressions file was warned of at the start of the exit
     * check's reading; here it only means none. */
    struct vt_suppressions *sup = vt_suppressions_load(vt_opt.suppressions, err, sizeof err);
    *res = vt_leak_report(f, s, sym, sup, (int)getpid(), NULL, outside_torch ? outside_torch_allocator : NULL);
    vt_suppressions_free(sup);
    vt_symbols_free(sym);
    vt_snapshot_free(s);
    return 0;
}

int vt_since_peak(FILE *f, int mark) {
    struct vt_snapshot *s = vt_mark_snapshot(mark);
    if (!s) return -1;
    if (s->npeak_holders > 0) {
        struct vt_symbols *sym = vt_symbolize_kept(s);
        uint64_t count = 0;
        for (size_t i = 0; i < s->npeak_holders; i++) count += s->peak_holders[i].count;
        fprintf(f, "==%d==vramtrace: peak of GPU memory since the mark: %" PRIu64 " byte(s) in %" PRIu64
                   " allocation(s), held by:\n", (int)getpid(), s->totals.peak_bytes, count);
        vt_leak_holders(f, s->peak_holders, s->npeak_holders, sym, "", NULL, 0);
        fprintf(f, "\nSUMMARY: vramtrace: peak of %" PRIu64 " byte(s) in %" PRIu64 " allocation(s) since the mark.\n",
                s->totals.peak_bytes, count);
        fflush(f);
        vt_symbols_free(sym);
    }
    vt_snapshot_free(s);
    return 0;
}
