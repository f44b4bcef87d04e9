/* torch_print.c -- PyTorch's breakdown in the library's reports. */
#include <string.h>

#include "../common/display.h"
#include "../common/format.h"
#include "../common/summary.h"
#include "../common/torchfmt.h"
#include "torch.h"

#define TOP_SHOWN 10

static void print_record(FILE *f, const struct vt_snapshot *s, const struct vt_symbols *sym,
                         const struct vt_torch_record *r, uint64_t request, const struct vt_growth *g, size_t n) {
    for (size_t i = 0; i < r->ndevices; i++) {
        const struct vt_torch_device *d = &r->devices[i];
        uint64_t out;
        int has_out = vt_torch_outside(d, &out);
        int at_oom = r->reason == VT_TORCH_OOM && r->oom_device == d->device;
        vt_put_torch_device(f, "vramtrace: ", d->device, d->allocated, d->reserved, d->largest_free,
                            at_oom ? &request : NULL, has_out ? &out : NULL, r->steps,
                            vt_torch_categories, d->cat, VT_TORCH_NCAT, d->settings);
        const struct vt_growth *grew = vt_torch_growth_on(g, n, d->device);
        if (grew) {
            char rate[512], site[512] = "";
            vt_growth_text(grew, rate, sizeof rate);
            if (sym) vt_site_shown(sym, grew->stack, site, sizeof site);
            int cache = vt_growth_mostly_cache(grew->first_floor, grew->end_bytes, grew->cache_bytes);
            vt_put_torch_growth(f, "vramtrace: ", rate, site, cache ? "" : grew->holder, d->settings, vt_put_display);
        }
        if (d->ntensors) fputs("vramtrace:   largest tensors:\n", f);
        int64_t stacks[VT_TORCH_TENSORS];
        if (d->ntensors) vt_torch_tensor_stacks(s, d, stacks);
        for (size_t j = 0; j < d->ntensors && j < TOP_SHOWN; j++) {
            const struct vt_torch_tensor *t = &d->tensors[j];
            int64_t st = stacks[j];
            char site[512] = "";
            if (st >= 0 && sym) vt_site_shown(sym, (uint32_t)st, site, sizeof site);
            vt_put_torch_tensor(f, "vramtrace: ", t->bytes, t->dtype, t->shape, vt_torch_categories[t->category],
                                t->name, t->holder, site, vt_put_display);
        }
        if (d->ntensors) vt_put_torch_segment_note(f, "vramtrace: ", d->settings);
    }
}

void vt_torch_print_oom(FILE *f, const struct vt_snapshot *s, const struct vt_symbols *sym,
                        const struct vt_growth *g, size_t n) {
    if (!s->nooms) return;
    vt_torch_lock();
    const struct vt_torch_record *r = vt_torch_for_oom(s, s->nooms - 1);
    uint64_t raised = s->ooms[s->nooms - 1].raised_allocated;
    if (r && raised) {
        /* Taken as the error reached Python, after the failing operation
         * freed its outputs: not the refusal's figures (common/oomtext.c). */
        char a[32];
        fprintf(f, "vramtrace: inside PyTorch as this out-of-memory error reached Python (%s allocated when it "
                   "refused, as its error says):\n", vt_fmt_bytes(raised, a, sizeof a));
        print_record(f, s, sym, r, vt_torch_request(r, s, s->nooms - 1), g, n);
    } else if (r) {
        fputs("vramtrace: inside PyTorch at this out-of-memory error:\n", f);
        print_record(f, s, sym, r, vt_torch_request(r, s, s->nooms - 1), g, n);
    }
    vt_torch_unlock();
}

void vt_torch_print_top(FILE *f, const struct vt_snapshot *s, const struct vt_symbols *sym, const char *reason,
                        const struct vt_growth *g, size_t n) {
    vt_torch_lock();
    const struct vt_torch_record *r = vt_torch_top(reason);
    if (r) print_record(f, s, sym, r, r->request, g, n);
    vt_torch_unlock();
}

void vt_torch_print_oom_findings(FILE *f, const struct vt_finding *fs, int n) {
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (!fs[i].from_record) continue;
        if (!k++) fputs("vramtrace: what PyTorch's record adds to the findings:\n", f);
        vt_put_finding(f, "vramtrace: ", k, fs[i].text, fs[i].next, vt_put_display);
    }
}
