/* analysis.c -- holders, growth and findings of a snapshot, once. */
#include <stdlib.h>

#include "../common/freeall.h"
#include "../common/warn.h"
#include "analysis.h"
#include "survived.h"
#include "holders.h"
#include "torch.h"

static struct vt_analysis empty;

/* Findings already worked out, by OOM index. An OOM's findings speak of
 * what happened up to it, so a later dump prints the ones worked out at
 * the first write after it instead of replaying the history once more:
 * findings are computed once per OOM. An entry counts only for the OOM of
 * the same time stamp in ticks (its time in ns moves from one snapshot to
 * the next with the rate measured so far, and the findings' times and
 * rates with it), request, device and stack, and the same PyTorch record of
 * it (the record comes after the failure's first post-mortem and names
 * the growing site's holder: the findings are worked out again then, and
 * once more only if another record comes). Used under the output lock
 * (report/output.c is the one caller outside tests). */
struct memo {
    uint64_t ticks, requested, torch_ns;
    uint32_t stack;
    int device, valid;
    struct vt_oom_findings f;
};
static struct memo *memo;   /* VT_ANALYSED_OOMS entries, made at the first OOM */

static int same_oom(const struct memo *m, const struct vt_oom *o, uint64_t torch_ns) {
    return m->valid && m->ticks == o->ticks && m->requested == o->requested && m->stack == o->stack &&
           m->device == o->device && m->torch_ns == torch_ns;
}

/* The findings of OOM i of s into *out, from the memo when it has them;
 * `holders`: the failing device's (vt_findings), or NULL. */
static void findings_of(const struct vt_snapshot *s, size_t i, const struct vt_symbols *sym,
                        const struct vt_holder *holders, size_t nholders, struct vt_oom_findings *out) {
    const struct vt_oom *o = &s->ooms[i];
    uint64_t torch_ns = vt_torch_oom_time(s, i);
    if (!memo) memo = calloc(VT_ANALYSED_OOMS, sizeof *memo);
    if (memo && same_oom(&memo[i], o, torch_ns)) {
        *out = memo[i].f;
        return;
    }
    out->n = vt_findings(s, i, sym, holders, nholders, out->f, &out->growth);
    if (!memo) return;
    memo[i] = (struct memo){o->ticks, o->requested, torch_ns, o->stack, o->device, 1, *out};
}

/* Whether the handles failure o's request made before it (its own,
 * tracker/handlerun.h) are live in s as they were then: o's thread's
 * unmapped VMM records of its stack and device made from the first of
 * them to the failure are taken_count of them, holding taken_bytes. A
 * snapshot taken at the failure has them; one taken after the program
 * gave them back (PyTorch does, at once) has not, and its holders are
 * all the program's. */
static int taken_live(const struct vt_snapshot *s, const struct vt_oom *o) {
    if (!o->taken_count) return 0;
    struct vt_live_reader *r = vt_live_read(s, 0);
    if (!r) return 0;
    uint64_t n = 0, bytes = 0;
    for (const struct vt_live *x; (x = vt_live_next(r));)
        if (x->kind == VT_KIND_VMM && x->thread == o->thread && x->stack == o->stack && x->device == o->device &&
            !vt_live_mapped(s, x) && x->time_ns >= o->taken_since_ns && x->time_ns <= o->time_ns) {
            n++;
            bytes += x->bytes;
        }
    vt_live_read_end(r);
    return n == o->taken_count && bytes == o->taken_bytes;
}

/* Holders h[0..n) by call site, less the handles o's request took when
 * `taken` (they are the request's, no holder's). */
static struct vt_holder *sites_of(const struct vt_holder *h, size_t n, const struct vt_symbols *sym,
                                  const struct vt_oom *o, int taken, size_t *nout) {
    *nout = 0;
    if (!taken) return vt_holders_by_site(h, n, sym, nout);
    size_t k = 0;
    struct vt_holder *held = vt_holders_less_taken(h, n, o, &k);
    struct vt_holder *sites = held ? vt_holders_by_site(held, k, sym, nout) : NULL;
    free(held);
    return sites;
}

/* Whether s's live list is what was live at failure o: the snapshot's
 * totals count the allocations and frees the failure's did (another
 * thread's calls after the failure, before the snapshot, count more). A
 * free the driver refused counts its free back out: such a refusal after
 * the failure, of a free counted before it, with one other free between,
 * is the one change it does not see. */
static int live_then(const struct vt_snapshot *s, const struct vt_oom *o) {
    return s->totals.alloc_count == o->alloc_count && s->totals.free_count == o->free_count;
}

/* At failure o, whose holders were kept: the failure's own, by call site,
 * less the handles its request took (as its findings take them), for the
 * post-mortem; the failing device's alone where the failure kept those
 * (other devices held memory too). */
static void sites_at_failure(struct vt_analysis *a, const struct vt_oom *o, const struct vt_symbols *sym) {
    a->by_site = sites_of(o->holders, o->nholders, sym, o, o->taken_count != 0, &a->nby_site);
    if (o->nholders && !a->by_site && !o->taken_count) vt_records_lost("the holder table");
    if (o->device_holders && vt_kind_owned_device(o->kind)) {
        a->per_device = 1;
        a->device = o->device;
        a->device_by_site = sites_of(o->device_holders, o->ndevice_holders, sym, o, o->taken_count != 0,
                                     &a->ndevice_by_site);
    }
    a->sites_then = 1;
}

struct vt_analysis *vt_analyse(const struct vt_snapshot *s, const struct vt_symbols *sym, uint64_t growth_until) {
    struct vt_analysis *a = calloc(1, sizeof *a);
    if (!a) {
        vt_records_lost("the report's analysis");
        return &empty;
    }
    a->holders = s->holders;
    a->nholders = s->holders ? s->nholders : 0;
    size_t last = s->nooms ? s->nooms - 1 : 0;
    const struct vt_oom *latest = s->nooms ? &s->ooms[last] : NULL;
    /* At a failure (growth_until 0), its post-mortem is of the failure's
     * moment, as its request's lines and findings are: the holders it
     * kept, and the snapshot's live list where nothing changed since
     * (other threads allocate and free between the failure and the
     * snapshot). */
    int at_failure = !growth_until && latest, taken = 0;
    if (at_failure) a->live_then = live_then(s, latest);
    if (at_failure && latest->holders) {
        sites_at_failure(a, latest, sym);
    } else {
        /* The snapshot's: at a failure whose request made handles before
         * it, still live in s, its post-mortem's holders are the rest. */
        taken = at_failure && taken_live(s, latest);
        if (a->holders) a->by_site = sites_of(a->holders, a->nholders, sym, latest, taken, &a->nby_site);
        if (s->totals.live_count && (!a->holders || (!a->by_site && !taken))) vt_records_lost("the holder table");
        a->sites_then = a->live_then;
    }
    if (growth_until) a->growth = vt_find_growth(s, sym, growth_until, &a->ngrowth);
    if (s->totals.oom_count) a->oom_survived = vt_oom_survived(s, sym, &a->last_oom_survived);
    if (a->growth) vt_torch_name_growth_top(s, sym, a->growth, a->ngrowth);
    /* At a failure of pinned host memory: the host's holders, not the
     * devices' (the failure's own where it kept them: the tracker keeps a
     * host failure's holders of host memory; else the snapshot's). */
    if (at_failure && vt_kind_is_host(latest->kind)) {
        a->host = 1;
        if (!latest->holders) {
            a->device_holders = vt_holders_of_host(s, &a->ndevice_holders);
            a->device = -1;
            if (a->device_holders)
                a->device_by_site = sites_of(a->device_holders, a->ndevice_holders, sym, latest, 0,
                                             &a->ndevice_by_site);
            a->per_device = 1;
        }
    } else if (at_failure && !latest->holders && vt_kind_owned_device(s->ooms[last].kind) &&
               vt_other_devices_hold(s, s->ooms[last].device)) {
        /* At a failure whose holders were not kept, when other devices
         * hold memory too: the failing device's own holders in s, for the
         * post-mortem and the failure's findings. */
        a->device_holders = vt_holders_on_device(s, s->ooms[last].device, &a->ndevice_holders);
        a->device = s->ooms[last].device;
        if (a->device_holders)
            a->device_by_site = sites_of(a->device_holders, a->ndevice_holders, sym, latest, taken,
                                         &a->ndevice_by_site);
        a->per_device = 1;
    }
    size_t n = s->nooms < VT_ANALYSED_OOMS ? s->nooms : VT_ANALYSED_OOMS;
    a->findings = n ? calloc(n, sizeof *a->findings) : NULL;
    if (n && !a->findings) vt_records_lost("the findings");
    if (a->findings) {
        a->nfindings = n;
        for (size_t i = 0; i < n; i++)
            findings_of(s, i, sym, a->per_device && i == last ? a->device_holders : NULL,
                        a->per_device && i == last ? a->ndevice_holders : 0, &a->findings[i]);
    }
    if (s->nooms > 0 && s->nooms - 1 < a->nfindings) {
        a->latest = &a->findings[s->nooms - 1];
    } else if (s->nooms > 0) {
        a->latest_beyond.n = vt_findings(s, last, sym, a->per_device ? a->device_holders : NULL,
                                         a->per_device ? a->ndevice_holders : 0, a->latest_beyond.f,
                                         &a->latest_beyond.growth);
        a->latest = &a->latest_beyond;
    }
    return a;
}

void vt_analysis_free(struct vt_analysis *a) {
    if (a && a != &empty) VT_FREE_ALL(a->by_site, a->device_holders, a->device_by_site, a->growth, a->findings, a);
}

void vt_analysis_reset_child(void) {
    free(memo);
    memo = NULL;
}
