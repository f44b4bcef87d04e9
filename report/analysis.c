/* analysis.c -- holders, growth and findings of a snapshot, once. */
#include <stdlib.h>

#include "../common/warn.h"
#include "analysis.h"
#include "holders.h"

static struct vt_analysis empty;

struct vt_analysis *vt_analyse(const struct vt_snapshot *s, const struct vt_symbols *sym, int growth) {
    struct vt_analysis *a = calloc(1, sizeof *a);
    if (!a) {
        vt_records_lost("the report's analysis");
        return &empty;
    }
    a->holders = vt_holders(s, &a->nholders);
    if (a->holders) a->by_site = vt_holders_by_site(a->holders, a->nholders, sym, &a->nby_site);
    if (s->totals.live_count && (!a->holders || !a->by_site)) vt_records_lost("the holder table");
    if (growth) a->growth = vt_find_growth(s, sym, s->now_ns, &a->ngrowth);
    size_t n = s->nooms < VT_ANALYSED_OOMS ? s->nooms : VT_ANALYSED_OOMS;
    a->findings = n ? calloc(n, sizeof *a->findings) : NULL;
    if (n && !a->findings) vt_records_lost("the findings");
    if (a->findings) {
        a->nfindings = n;
        for (size_t i = 0; i < n; i++) a->findings[i].n = vt_findings(s, i, sym, a->findings[i].f);
    }
    if (s->nooms > 0 && s->nooms - 1 < a->nfindings) {
        a->latest = &a->findings[s->nooms - 1];
    } else if (s->nooms > 0) {
        a->latest_beyond.n = vt_findings(s, s->nooms - 1, sym, a->latest_beyond.f);
        a->latest = &a->latest_beyond;
    }
    return a;
}

void vt_analysis_free(struct vt_analysis *a) {
    if (!a || a == &empty) return;
    free(a->holders);
    free(a->by_site);
    free(a->growth);
    free(a->findings);
    free(a);
}
