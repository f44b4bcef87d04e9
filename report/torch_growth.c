/* torch_growth.c -- naming what holds a growing call site's memory, from
 * PyTorch's record: the one figure of growth is the library's
 * (vt_growth_rate); the record gives it its holder. */
#include <stdlib.h>
#include <string.h>

#include "../common/summary.h"
#include "../tracker/departed.h"
#include "symbolize.h"
#include "live.h"
#include "torch.h"

_Static_assert(VT_GROWTH_HOLDER == VT_TORCH_TEXT + 1, "a growth's holder holds a tensor's holder");

/* The newest top-level record (exit or on-demand), or NULL. */
static const struct vt_torch_record *newest_top(void) {
    const struct vt_torch_record *e = vt_torch_top("exit"), *s = vt_torch_top("signal");
    if (!e || (s && s->time_ns > e->time_ns)) return s;
    return e;
}

/* Whether record r's device d lists a segment holding no tensor that is
 * the live allocation a: the same address and size. */
static int free_segment(const struct vt_torch_device *d, const struct vt_live *a) {
    size_t lo = 0, hi = d->nfree_segs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (d->free_segs[mid].address < a->address) lo = mid + 1;
        else hi = mid;
    }
    return lo < d->nfree_segs && d->free_segs[lo].address == a->address && d->free_segs[lo].size == a->bytes;
}

/* Each growing site's cache_bytes (growth.h): the bytes of its live
 * allocations that record r lists as segments of PyTorch's cache holding
 * no tensor, when r saw the memory the snapshot holds (no allocation or
 * free since it: the history is in time order). One pass over the live
 * list. */
static void cache_of_sites(const struct vt_snapshot *s, const struct vt_torch_record *r, const uint32_t *group,
                           size_t ngroups, struct vt_growth *g, size_t n) {
    if (s->nevents == 0 || vt_event_at(s, s->nevents - 1).time_ns > r->time_ns) return;
    const struct vt_torch_device *by_dev[VT_MAX_DEVICES] = {0};
    int any = 0;
    for (size_t i = 0; i < r->ndevices; i++)
        if (r->devices[i].device >= 0 && r->devices[i].device < VT_MAX_DEVICES && r->devices[i].nfree_segs) {
            by_dev[r->devices[i].device] = &r->devices[i];
            any = 1;
        }
    if (!any) return;
    size_t *site = malloc(ngroups * sizeof *site); /* group -> growth index + 1, 0: none */
    if (!site) return;
    memset(site, 0, ngroups * sizeof *site);
    for (size_t k = 0; k < n; k++)
        if (g[k].stack < s->nstacks) site[group[g[k].stack]] = k + 1;
    /* A segment free at the record may have held the site's tensors all
     * along the run: kept by a function's locals (a list of losses in
     * main()) and let go when it returned, before the exit's record. So a
     * site's free segments are its cache only where the companion's
     * samples at the optimizer steps saw PyTorch's tensors stay level
     * (their most less their least under half the site's rise) until after
     * the site's last allocation: the cache, not tensors kept across
     * steps, made it grow. */
    struct { int known; uint64_t spread, last_ns; } steps[VT_MAX_DEVICES];
    for (int d = 0; d < VT_MAX_DEVICES; d++)
        steps[d].known = by_dev[d] && vt_torch_live_range(d, &steps[d].spread, &steps[d].last_ns);
    struct vt_live_reader *rd = vt_live_read(s, 0);
    for (const struct vt_live *a; rd && (a = vt_live_next(rd));) {
        if (!vt_kind_owned_device(a->kind) || a->stack >= s->nstacks || a->device < 0 || a->device >= VT_MAX_DEVICES)
            continue;
        size_t k = site[group[a->stack]];
        if (!k || !steps[a->device].known || !free_segment(by_dev[a->device], a)) continue;
        struct vt_growth *x = &g[k - 1];
        /* A buffer that grew step after step left its earlier copies in
         * the cache: the leak made them, and the site is its. */
        if (x->holder_grew) continue;
        uint64_t rise = x->end_bytes > x->first_floor ? x->end_bytes - x->first_floor : 0;
        if (steps[a->device].spread * 2 < rise && x->t_last_ns <= steps[a->device].last_ns) x->cache_bytes += a->bytes;
    }
    vt_live_read_end(rd);
    free(site);
}

int vt_stack_makes_model(const struct vt_symbols *sym, uint32_t stack) {
    if (!sym || stack >= sym->nstacks) return 0;
    static const char *const fns[] = {"Module.cuda", "Module.to", "Module._apply", "Module.to_empty"};
    static const char modules[] = "torch/nn/modules/";
    const struct vt_stack *st = sym->stack[stack];
    for (uint32_t j = 0; j < st->depth; j++) {
        const struct vt_frame *fr = vt_symbols_frame(sym, vt_code_key(st, j));
        if (!fr || !fr->python || !fr->function || !fr->file || !strstr(fr->file, modules)) continue;
        /* A module built on the device (nn.Linear(..., device="cuda")):
         * its constructor makes the parameters there. */
        size_t n = strlen(fr->function);
        if (n > 9 && strcmp(fr->function + n - 9, ".__init__") == 0) return 1;
        for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
            size_t l = strlen(fns[i]);
            if (strncmp(fr->function, fns[i], l) == 0 && (fr->function[l] == '\0' || fr->function[l] == '.'))
                return 1;
        }
    }
    return 0;
}

/* A tensor a program may keep more of from one step to the next: an
 * activation or its own ("other"), not the model's or the optimizer's;
 * but a buffer or parameter the companion gives a holder, which it does
 * only for one assigned a larger tensor at several steps (python/
 * vramtrace_torch/grown.py: `self.hist = torch.cat([self.hist, x])` on a
 * registered buffer), is the growth itself: without it, the largest other
 * tensor in the site's segments, an activation freed every step, was
 * named the holder of a 510 MiB buffer's growth. */
static int kept_per_step(const struct vt_torch_tensor *t) {
    /* What a call of the program's holds while PyTorch runs it (the
     * companion's "the call at ...") is let go when the call returns. */
    if (strstr(t->holder, "the call at ") == t->holder || strstr(t->holder, "graph of the call at ") == t->holder)
        return 0;
    const char *c = vt_torch_categories[t->category];
    return strcmp(c, "activation") == 0 || strcmp(c, "other") == 0 ||
           ((strcmp(c, "buffer") == 0 || strcmp(c, "parameter") == 0) && t->holder[0]);
}

void vt_torch_name_growth(const struct vt_snapshot *s, const struct vt_symbols *sym, const struct vt_torch_record *r,
                          struct vt_growth *g, size_t n, int cache) {
    for (size_t k = 0; k < n; k++) {
        g[k].holder[0] = '\0';
        g[k].holder_bytes = 0;
        g[k].holder_device = -1;
        g[k].holder_grew = 0;
        g[k].cache_bytes = 0;
    }
    if (!r || !n || !s->nstacks) return;
    size_t ngroups;
    uint32_t *group = vt_site_groups(sym, s->nstacks, &ngroups, NULL);
    if (!group) return;
    for (size_t i = 0; i < r->ndevices; i++) {
        const struct vt_torch_device *d = &r->devices[i];
        /* Each listed tensor's site group, through its block's segment and
         * the stack the tracker recorded for it (UINT32_MAX: none). */
        uint32_t site[VT_TORCH_TENSORS];
        int64_t stacks[VT_TORCH_TENSORS];
        vt_torch_tensor_stacks(s, d, stacks);
        for (size_t j = 0; j < d->ntensors && j < VT_TORCH_TENSORS; j++) {
            int64_t st = stacks[j];
            site[j] = st >= 0 && (size_t)st < s->nstacks ? group[st] : UINT32_MAX;
        }
        for (size_t k = 0; k < n; k++) {
            uint32_t want = g[k].stack < s->nstacks ? group[g[k].stack] : UINT32_MAX - 1;
            /* Where the record lists every tensor of the device (fewer
             * than it lists at most) and the site's add up to less than
             * half its rise, no tensor holds the growth (its memory is
             * PyTorch's cache, or was let go): no holder is named (a
             * finished thread's leak was said held by a gradient that lay
             * in one of its 28 segments). */
            uint64_t rise = g[k].end_bytes > g[k].first_floor ? g[k].end_bytes - g[k].first_floor : 0, mine = 0;
            int grown = 0;   /* a buffer or parameter of the site's grew step after step (kept_per_step) */
            for (size_t j = 0; j < d->ntensors; j++)
                if (site[j] == want) {
                    mine += d->tensors[j].bytes;
                    grown |= d->tensors[j].holder[0] && (strcmp(vt_torch_categories[d->tensors[j].category], "buffer") == 0 ||
                                                         strcmp(vt_torch_categories[d->tensors[j].category], "parameter") == 0);
                }
            /* Unless one did: its earlier, smaller copies are the cache
             * PyTorch keeps at the site (80 MiB of a buffer grown 2 MiB a
             * step left 1.4 GiB of segments behind), and it is the leak
             * that made them. */
            if (d->ntensors < VT_TORCH_TENSORS && mine * 2 < rise && !grown) continue;
            /* The holder of the most bytes of the site's tensors; the
             * first listed (the largest) on a tie. Parameters, buffers,
             * gradients and the optimizer's state are made once and kept
             * on purpose: never a growth's holder, whose advice is to free
             * what it keeps from one step to the next (a first step that
             * did not fit was "held by `gradient of model.0.weight`"),
             * unless a buffer or parameter grew step after step
             * (kept_per_step). */
            for (size_t j = 0; j < d->ntensors; j++) {
                const struct vt_torch_tensor *t = &d->tensors[j];
                if (site[j] != want || !t->holder[0] || !kept_per_step(t)) continue;
                uint64_t sum = 0;
                for (size_t m = 0; m < d->ntensors; m++)
                    if (site[m] == want && strcmp(d->tensors[m].holder, t->holder) == 0) sum += d->tensors[m].bytes;
                if (sum > g[k].holder_bytes) {
                    g[k].holder_bytes = sum;
                    g[k].holder_device = d->device;
                    g[k].holder_grew = strcmp(vt_torch_categories[t->category], "buffer") == 0 ||
                                       strcmp(vt_torch_categories[t->category], "parameter") == 0;
                    memcpy(g[k].holder, t->holder, sizeof g[k].holder);
                }
            }
        }
    }
    if (cache) cache_of_sites(s, r, group, ngroups, g, n);
    free(group);
}

void vt_torch_name_growth_oom(const struct vt_snapshot *s, const struct vt_symbols *sym, size_t i,
                              struct vt_growth *g, size_t n) {
    vt_torch_lock();
    /* No cache bound at a failure: PyTorch empties its cache before it
     * raises, after the snapshot's moment. */
    vt_torch_name_growth(s, sym, vt_torch_for_oom(s, i), g, n, 0);
    vt_torch_unlock();
}

void vt_torch_name_growth_top(const struct vt_snapshot *s, const struct vt_symbols *sym, struct vt_growth *g,
                              size_t n) {
    vt_torch_lock();
    vt_torch_name_growth(s, sym, newest_top(), g, n, 1);
    vt_torch_unlock();
}

uint64_t vt_torch_oom_time(const struct vt_snapshot *s, size_t i) {
    vt_torch_lock();
    const struct vt_torch_record *r = vt_torch_for_oom(s, i);
    uint64_t t = r ? r->time_ns : 0;
    vt_torch_unlock();
    return t;
}

const struct vt_growth *vt_torch_growth_on(const struct vt_growth *g, size_t n, int device) {
    for (size_t k = 0; g && k < n; k++)
        if (g[k].allocs && g[k].holder[0] && g[k].holder_device == device &&
            !vt_growth_mostly_cache(g[k].first_floor, g[k].end_bytes, g[k].cache_bytes))
            return &g[k];
    return NULL;
}

int vt_torch_oom_cache(const struct vt_snapshot *s, size_t i, struct vt_torch_cache *out) {
    int found = 0;
    vt_torch_lock();
    const struct vt_torch_record *r = vt_torch_for_oom(s, i);
    for (size_t k = 0; r && k < r->ndevices; k++) {
        const struct vt_torch_device *d = &r->devices[k];
        if (d->device != r->oom_device) continue;
        *out = (struct vt_torch_cache){d->allocated, d->reserved, d->largest_free, vt_torch_request(r, s, i),
                                       strstr(d->settings, "expandable_segments:True") != NULL,
                                       strstr(d->settings, "backend:cudaMallocAsync") != NULL, .fraction = 1.0};
        /* PYTORCH_CUDA_ALLOC_CONF's own text when it was set, else
         * PyTorch's settings (max_split_size:-1 for none). */
        for (int c = 0; c < VT_TORCH_NCAT; c++) {
            if (strcmp(vt_torch_categories[c], "activation") == 0) out->activation = d->cat[c];
            if (strcmp(vt_torch_categories[c], "optimizer_state") == 0) out->optimizer_state = d->cat[c];
        }
        /* The precision the program runs in, as the listed tensors show it:
         * autocast saves its activations in half precision; activations
         * listed all in float32 are of a program without it. */
        int acts = 0, acts32 = 0;
        for (size_t j = 0; j < d->ntensors; j++) {
            const struct vt_torch_tensor *t = &d->tensors[j];
            if (strcmp(t->dtype, "float16") == 0 || strcmp(t->dtype, "bfloat16") == 0) out->half = 1;
            if (strcmp(vt_torch_categories[t->category], "activation") == 0) {
                acts++;
                acts32 += strcmp(t->dtype, "float32") == 0;
            }
        }
        out->fp32_activations = acts > 0 && acts == acts32;
        out->eval_grad = strstr(d->settings, "eval_with_grad:True") != NULL;
        const char *m = strstr(d->settings, "max_split_size_mb:");
        const char *dflt = strstr(d->settings, "max_split_size:");
        out->split = m != NULL || (dflt && strncmp(dflt + strlen("max_split_size:"), "-1", 2) != 0);
        const char *f = strstr(d->settings, "per_process_memory_fraction:");
        if (f) {
            char *end;
            double v = strtod(f + strlen("per_process_memory_fraction:"), &end);
            if (end != f + strlen("per_process_memory_fraction:") && v >= 0 && v < 1) out->fraction = v;
        }
        out->raised_allocated = r->raised_allocated;
        out->request_rounded = vt_torch_request_rounded(r, s, i);
        found = 1;
    }
    vt_torch_unlock();
    return found;
}
