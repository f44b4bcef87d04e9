/* findings.c -- turning an OOM's numbers into findings and next steps. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "findings.h"
#include "../common/format.h"
#include "../common/oomtext.h"
#include "holders.h"
#include "live.h"
#include "torch.h"
#include "traits.h"

#define B(v, buf) vt_fmt_bytes((v), (buf), sizeof(buf))
#define PCT(part, whole) vt_fmt_pct((part), (whole), 0, pct, sizeof pct)

/* The next finding; past VT_MAX_FINDINGS, one written and then dropped
 * (the most likely come first). */
static struct vt_finding *add(struct vt_finding *out, int *n, const char *id) {
    static __thread struct vt_finding dropped __attribute__((tls_model("initial-exec")));
    struct vt_finding *f = *n < VT_MAX_FINDINGS ? &out[(*n)++] : &dropped;
    f->id = id;
    f->text[0] = f->next[0] = '\0';
    f->from_record = 0;
    f->fits = 0;
    return f;
}

/* A size as the findings give it: "about 1.07 GiB" where it is PyTorch's
 * error's two-decimal figure (1100 MiB asked reads 1.07 GiB). */
static const char *about(uint64_t v, int rounded, char *buf, size_t n) {
    char b[32];
    snprintf(buf, n, "%s%s", rounded ? "about " : "", vt_fmt_bytes(v, b, sizeof b));
    return buf;
}

/* Whether acting on finding f alone, which would free `bytes` of the
 * device's, makes the `asked` fit beside the `free_now` free (known only
 * where the device's free memory was read). */
static void would_free(struct vt_finding *f, int known, uint64_t bytes, uint64_t free_now, uint64_t asked) {
    if (known) f->fits = free_now + bytes >= asked ? 1 : -1;
}

/* The n findings in out, each whose step would make the request fit
 * moved before the first whose step cannot (a holder that freed leaves
 * 424 MiB free of the 600 MiB asked came before the pool whose trim
 * leaves 824 MiB); the order kept otherwise. */
static void by_fit(struct vt_finding *out, int n) {
    for (int i = 1; i < n; i++) {
        if (out[i].fits != 1) continue;
        int j = 0;
        while (j < i && out[j].fits != -1) j++;
        if (j == i) continue;
        struct vt_finding f = out[i];
        memmove(&out[j + 1], &out[j], (size_t)(i - j) * sizeof *out);
        out[j] = f;
    }
}

/* What freeing all of a holder's `bytes` would leave free where that is
 * less than the `asked`, appended to f's text: it is not enough
 * alone. */
static void not_enough(struct vt_finding *f, uint64_t bytes, uint64_t free_now, uint64_t asked, int rounded) {
    if (f->fits != -1) return;
    char a[32], q[48];
    size_t k = strlen(f->text);
    snprintf(f->text + k, sizeof f->text - k, "; freed, it would leave %s free, less than the %s asked: not enough "
             "alone", vt_fmt_bytes(free_now + bytes, a, sizeof a), about(asked, rounded, q, sizeof q));
}

/* Where the largest holder freed is not enough alone (not_enough said
 * so): which of the next largest, freed with it, would be, appended to
 * f's text (two holders of 300 MiB each, 324 MiB free, 900 MiB asked: the
 * second was never named). Returns how many holders together would be
 * enough; 0 where the first is enough alone, or all would not be. */
static size_t together_enough(struct vt_finding *f, const struct vt_holder *sites, size_t nsites,
                              const struct vt_symbols *sym, uint64_t free_now, uint64_t asked) {
    if (f->fits != -1) return 0;
    uint64_t sum = free_now + sites[0].bytes;
    size_t k = 1;
    while (k < nsites && sum < asked) sum += sites[k++].bytes;
    if (sum < asked) return 0;
    char a[32], b[32], site[256];
    size_t len = strlen(f->text);
    if (k == 2) {
        vt_site_label(sym, sites[1].stack, site, sizeof site);
        snprintf(f->text + len, sizeof f->text - len, "; with %s (%s) freed too, %s would be free: enough", site,
                 vt_fmt_bytes(sites[1].bytes, a, sizeof a), vt_fmt_bytes(sum, b, sizeof b));
    } else {
        snprintf(f->text + len, sizeof f->text - len, "; with the next %zu largest call sites freed too, %s would be "
                 "free: enough", k - 1, vt_fmt_bytes(sum, b, sizeof b));
    }
    return k;
}

/* The finding `id` of the n in out first, the others after it in their
 * order. */
static void lead(struct vt_finding *out, int n, const char *id) {
    for (int i = 1; i < n; i++) {
        if (strcmp(out[i].id, id) != 0) continue;
        struct vt_finding f = out[i];
        memmove(&out[1], &out[0], (size_t)i * sizeof *out);
        out[0] = f;
        return;
    }
}

/* Whether OOM `index` repeats an earlier request of the same size after
 * the process freed memory in between and allocated none on that device
 * (what a caching allocator does when it empties its cache and retries:
 * frees, then the same request; a program that caught the first failure
 * and trained on until the next one allocated meanwhile). Sets the freed
 * count and bytes. */
static int is_retry(const struct vt_snapshot *s, size_t index, uint64_t *freed, uint64_t *nfreed) {
    if (index == 0) return 0;
    const struct vt_oom *o = &s->ooms[index], *prev = &s->ooms[index - 1];
    if (prev->number + 1 != o->number) return 0; /* the one before was not kept */
    if (prev->requested != o->requested || prev->device != o->device || prev->thread != o->thread) return 0;
    if (o->time_ns - prev->time_ns > 5000000000ull) return 0;
    *freed = *nfreed = 0;
    for (size_t i = 0; i < s->nevents; i++) {
        const struct vt_event ev = vt_event_at(s, i), *e = &ev;
        if (e->device != o->device || e->time_ns < prev->time_ns || e->time_ns > o->time_ns) continue;
        if (e->type == VT_EV_ALLOC && e->time_ns > prev->time_ns && e->time_ns < o->time_ns) return 0;
        if (e->type == VT_EV_FREE) {
            *freed += e->bytes;
            (*nfreed)++;
        }
    }
    return *nfreed > 0;
}

const char *vt_procs_text(const struct vt_proc *procs, uint32_t n, char *buf, size_t size) {
    size_t k = 0;
    buf[0] = '\0';
    for (uint32_t i = 0; i < n && k < size; i++) {
        const struct vt_proc *p = &procs[i];
        char one[128];
        int w = snprintf(buf + k, size - k, "%s", vt_fmt_proc(i == 0, p->pid, p->name, p->used_bytes != UINT64_MAX,
                                                              p->used_bytes, one, sizeof one));
        if (w < 0) break;
        k += (size_t)w;
    }
    return buf;
}

/* Whether a row of sites[0..n) (holders by call site) is labelled `label`. */
static int holds_here(const struct vt_symbols *sym, const struct vt_holder *sites, size_t n, const char *label) {
    char row[160];
    for (size_t i = 0; i < n; i++) {
        vt_site_label(sym, sites[i].stack, row, sizeof row);
        if (strcmp(row, label) == 0) return 1;
    }
    return 0;
}

/* The program's step boundaries at or before t (its step number then). */
static uint64_t steps_before(const struct vt_snapshot *s, uint64_t t) {
    uint64_t n = 0;
    for (size_t j = 0; j < s->nsteps && s->steps[j].time_ns <= t; j++) n = s->steps[j].step;
    return n;
}

/* A PyTorch batch's advice at `where`: what is on already (no graph kept,
 * checkpointing recomputing) is not advised again. */
static void batch_advice(char *out, size_t n, const char *where, int graphless, int checkpointing,
                         int recomputing) {
    if (graphless)
        snprintf(out, n, "at %s: a smaller micro-batch, or keep fewer of its results (.cpu() moves them to the host); "
                 "no activations are kept for backward here (torch.no_grad() is on, or nothing needs gradients), so "
                 "no_grad() and checkpointing change nothing", where);
    else if (checkpointing)
        snprintf(out, n, "at %s: a smaller micro-batch (with gradient accumulation) or mixed precision; activation "
                 "checkpointing is on already%s", where, recomputing ? " (this failed in its recomputation)" : "");
    else
        snprintf(out, n, "at %s: a smaller micro-batch (with gradient accumulation), torch.no_grad() or "
                 "torch.inference_mode() if it runs evaluation, or activation checkpointing", where);
}

/* The next step of a failure before the program's second optimizer
 * step completed, fitted to what is known of it. After a completed step
 * (the failure in step 2 or later), the model, its gradients and the
 * optimizer's state fitted with that step's work: what fails is this
 * step's own, a larger batch than the one before. A lighter optimizer
 * only where the failing device holds optimizer state (PyTorch's record,
 * else a holder made by torch/optim/'s code): Adam's state on cuda:0 is
 * not what fills cuda:1. Mixed precision only where PyTorch's record
 * shows the program runs without it (its activations listed, all
 * float32): under torch.autocast it is on already, and without the
 * record which it is cannot be told. */
static void first_step_advice(char *out, size_t size, const struct vt_snapshot *s, const struct vt_oom *o,
                              const struct vt_symbols *sym, const struct vt_holder *holders, size_t nholders,
                              const struct vt_torch_cache *tc) {
    uint64_t done = steps_before(s, o->time_ns);
    int optimizer = 0;
    if (tc) optimizer = tc->optimizer_state > 0;
    else
        for (size_t i = 0; !optimizer && holders && i < nholders; i++) optimizer = vt_in_optimizer(sym, holders[i].stack);
    int amp = tc && tc->fp32_activations && !tc->half;
    if (done >= 1) {
        char a[32], acts[96] = "";
        if (tc && tc->activation)
            snprintf(acts, sizeof acts, " (its activations: %s at the failure)", B(tc->activation, a));
        snprintf(out, size, "step %" PRIu64 " does not fit though the %" PRIu64 " optimizer step%s before it did: "
                 "the model%s fit; what does not is this step's own work%s, a larger batch or longer "
                 "sequences than before: a smaller batch here (with gradient accumulation)%s, or activation "
                 "checkpointing", done + 1, done, done == 1 ? "" : "s",
                 optimizer ? ", its gradients and the optimizer's state" : " and its gradients", acts,
                 amp ? ", mixed precision" : "");
        return;
    }
    snprintf(out, size, "the first step does not fit: a smaller batch or model%s%s, or sharding (FSDP, ZeRO)",
             optimizer ? ", a lighter optimizer (SGD, Adafactor, 8-bit Adam: Adam keeps two tensors a parameter)" : "",
             amp ? ", mixed precision" : "");
}

/* The next step of one_site_dominates where PyTorch's cache is
 * fragmented and the site is where its segments were made: a cached
 * segment serves later tensors once its first ones are freed, so the
 * line that made it may hold none of what fills it now (a list
 * comprehension whose tensors were all deleted was told to shrink its
 * micro-batch). The holder PyTorch's record names for the tensors lying
 * in the site's segments is named instead. */
static void cache_segments_advice(char *out, size_t size, const struct vt_snapshot *s, size_t index,
                                  const struct vt_symbols *sym, const struct vt_holder *h, const char *site) {
    struct vt_growth g;
    memset(&g, 0, sizeof g);
    g.stack = h->stack;
    g.end_bytes = h->bytes;
    vt_torch_name_growth_oom(s, sym, index, &g, 1);
    char a[32];
    if (g.holder[0])
        snprintf(out, size, "these are segments of PyTorch's cache, made at %s and reused since: what lies in them now "
                 "is mostly `%.60s`'s (%s), not that line's; free or shrink what `%.60s` keeps, and see the fragmentation "
                 "finding", site, g.holder, B(g.holder_bytes, a), g.holder);
    else
        snprintf(out, size, "these are segments of PyTorch's cache, made at %s and reused since: what lies in them now "
                 "may be later lines' tensors (PyTorch's record lists them), not that line's; see the fragmentation "
                 "finding", site);
}

/* One line of the program's whose call sites, each its line through a
 * different library function (`train.py:9 -> Linear.forward ...` and
 * `train.py:9 -> relu ...`), hold half the tracked memory together while
 * none does alone: the line is what a call site is to its author (67%
 * held by one line of a batch, split in two rows, went unsaid). */
struct line_sum {
    char line[160], callees[200];
    uint64_t bytes, count;
    size_t nsites;
    int python, torch;
};

struct site_line {
    char line[160];
    const struct vt_holder *h;
};

static int by_line(const void *a, const void *b) {
    return strcmp(((const struct site_line *)a)->line, ((const struct site_line *)b)->line);
}

static int dominant_line(const struct vt_symbols *sym, const struct vt_holder *sites, size_t n, uint64_t live,
                         struct line_sum *out) {
    struct site_line *l = malloc(n * sizeof *l);
    if (!l) return 0;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        char label[160];
        vt_site_label(sym, sites[i].stack, label, sizeof label);
        char *arrow = strstr(label, " -> ");
        if (!arrow) continue;
        *arrow = '\0';
        snprintf(l[m].line, sizeof l[m].line, "%s", label);
        l[m++].h = &sites[i];
    }
    qsort(l, m, sizeof *l, by_line);
    int found = 0;
    for (size_t i = 0, j; i < m; i = j) {
        uint64_t bytes = 0, count = 0;
        for (j = i; j < m && strcmp(l[j].line, l[i].line) == 0; j++) bytes += l[j].h->bytes, count += l[j].h->count;
        if (j - i < 2 || bytes * 2 < live || (found && bytes <= out->bytes)) continue;
        found = 1;
        snprintf(out->line, sizeof out->line, "%s", l[i].line);
        out->bytes = bytes;
        out->count = count;
        out->nsites = j - i;
        out->python = vt_is_python(sym, l[i].h->stack);
        out->torch = 0;
        out->callees[0] = '\0';
        size_t k = 0;
        for (size_t x = i; x < j; x++) {
            out->torch |= vt_through_torch(sym, l[x].h->stack);
            char label[160];
            vt_site_label(sym, l[x].h->stack, label, sizeof label);
            const char *callee = strstr(label, " -> ");
            callee = callee ? callee + 4 : label;
            int w = snprintf(out->callees + k, sizeof out->callees - k, "%s%s", x > i ? ", " : "", callee);
            if (w < 0 || (size_t)w >= sizeof out->callees - k) break;
            k += (size_t)w;
        }
    }
    free(l);
    return found;
}

int vt_findings(const struct vt_snapshot *s, size_t index, const struct vt_symbols *sym,
                const struct vt_holder *holders, size_t nholders, struct vt_finding *out, struct vt_growth *grew) {
    int n = 0;
    memset(grew, 0, sizeof *grew);
    if (index >= s->nooms) return 0;
    const struct vt_oom *o = &s->ooms[index];
    char a[32], b[32], c[32], pct[16], site[160];
    uint64_t total = o->total_bytes, freeb = o->free_bytes, live = o->live_bytes;

    if (o->budget) {
        struct vt_finding *f = add(out, &n, "budget");
        /* What the budget counted beyond the live bytes: other threads'
         * allocations in flight (hook.c's promises). */
        uint64_t used = total > freeb ? total - freeb : 0, inflight = used > live ? used - live : 0;
        if (inflight) {
            char d[32];
            snprintf(f->text, sizeof f->text,
                     "VRAMTRACE_LIMIT refused it: %s asked with %s live and %s being allocated by other threads "
                     "would pass the %s budget", B(o->requested, a), B(live, b), B(inflight, d), B(total, c));
        } else {
            snprintf(f->text, sizeof f->text,
                     "VRAMTRACE_LIMIT refused it: %s asked with %s live would pass the %s budget", B(o->requested, a),
                     B(live, b), B(total, c));
        }
        /* When rounding hides the difference between the budget and the
         * need (8.00 MiB and 8.00 MiB), both are given in bytes. */
        uint64_t need = live + inflight + o->requested;
        if (strcmp(B(total, a), B(need, b)) == 0) {
            snprintf(a, sizeof a, "%" PRIu64 " bytes", total);
            snprintf(b, sizeof b, "%" PRIu64 " bytes", need);
        }
        snprintf(f->next, sizeof f->next,
                 "a GPU with %s would fail here too: this step needs at least %s; shrink it or raise the limit", a, b);
    }
    struct vt_torch_cache tc;
    int torch = vt_torch_oom_cache(s, index, &tc);
    /* PyTorch refused it itself: no CUDA call failed (its companion's
     * record made the failure, hook.c's vt_hook_torch_oom). */
    int refused_itself = o->api && strcmp(o->api, "PyTorch") == 0;
    /* PyTorch's own limit (torch.cuda.set_per_process_memory_fraction):
     * its allocator refuses what would pass that share of the device,
     * whatever the device has free. A limit, as the budget is: stated
     * first after it. The native allocator counts the bytes it reserved
     * against it; the cudaMallocAsync backend the bytes allocated to
     * tensors (its error's "Currently allocated", of the moment it
     * refused: its record comes after the failing operation freed its
     * outputs), and the fraction is the only limit of its own it refuses
     * by. */
    uint64_t allowed = torch && total ? (uint64_t)(tc.fraction * (double)total) : 0;
    uint64_t counted = !torch ? 0 : !tc.pool ? tc.reserved : tc.raised_allocated ? tc.raised_allocated : tc.allocated;
    int fraction = torch && tc.fraction < 1 && (counted + tc.request > allowed || (tc.pool && refused_itself));
    if (fraction) {
        struct vt_finding *f = add(out, &n, "memory_fraction");
        f->from_record = 1;
        char d[48];
        if (tc.pool) {
            /* Its error gives what it had allocated, and the request where
             * no call of it failed, to two decimals: 3.00 GiB held and
             * 1.00 GiB asked "would pass" the 4.00 GiB allowed read as
             * false (1025 MiB was asked). Said as about, with by how much
             * they pass it where that rounding leaves it known. */
            int counted_rounded = tc.raised_allocated && counted == tc.raised_allocated;
            uint64_t slack = (counted_rounded ? vt_torch_rounding(counted) : 0) +
                             (tc.request_rounded ? vt_torch_rounding(tc.request) : 0);
            uint64_t need = counted + tc.request;
            char by[192] = "", e[48], g[32], h[32];
            /* Rounded figures give a range, not a point: 71.68 MiB said
             * "about" was 76 MiB in truth. */
            if (need > allowed + slack && slack)
                snprintf(by, sizeof by, " by %s to %s", B(need - allowed - slack, g), B(need - allowed + slack, h));
            else if (need > allowed + slack)
                snprintf(by, sizeof by, " by %s", B(need - allowed, g));
            if (slack && need > allowed + slack)
                snprintf(by + strlen(by), sizeof by - strlen(by), " (PyTorch's error gives its figures to two "
                         "decimals)");
            else if (slack)
                snprintf(by, sizeof by, ": PyTorch's error gives its figures to two decimals, which hide by how "
                         "much they pass the %s", B(allowed, g));
            snprintf(f->text, sizeof f->text, "PyTorch's per-process memory fraction (%.6g) allows %s of the device's "
                     "%s: its cudaMallocAsync backend counts the bytes allocated to tensors, %s when it refused, and "
                     "%s%s asked would pass it%s", tc.fraction, B(allowed, a), B(total, b),
                     about(counted, counted_rounded, e, sizeof e), tc.request_rounded ? "" : "the ",
                     about(tc.request, tc.request_rounded, d, sizeof d), by);
            snprintf(f->next, sizeof f->next,
                     "raise torch.cuda.set_per_process_memory_fraction, or lower what the holders keep (what the "
                     "pool keeps unused does not count against the fraction: trimming it changes nothing)");
        } else {
            snprintf(f->text, sizeof f->text, "PyTorch's per-process memory fraction (%.6g) allows %s of the device's "
                     "%s: %s reserved and the %s asked would pass it", tc.fraction, B(allowed, a), B(total, b),
                     B(counted, c), B(tc.request, d));
            snprintf(f->next, sizeof f->next,
                     "raise torch.cuda.set_per_process_memory_fraction, or lower what the holders keep");
        }
    }
    /* What this process can ever have of the device: all of it but what
     * is held outside its tracked allocations (the CUDA context, other
     * processes), as the forecast measures it. A request above that fails
     * even if the process freed everything else (2.50 GiB asked of a
     * 2.73 GiB device with 200 MiB of context said nothing). */
    uint64_t outside0 = o->have_info && !o->budget ? vt_oom_outside(total, freeb, live, o->graph_reserved,
                                                                    o->graph_used, o->pool_reserved, o->pool_used)
                                                   : 0;
    uint64_t usable = total > outside0 ? total - outside0 : 0;
    /* What was asked: the failed call's bytes, or PyTorch's request where
     * its record says it asked more (under expandable segments the call
     * that failed is one page of the tensor: a 9 GiB tensor failed as a
     * 20 MiB cuMemCreate and was never said to be larger than the
     * device). */
    uint64_t asked = torch && tc.request > o->requested ? tc.request : o->requested;
    int asked_rounded = asked == o->requested ? o->requested_rounded : tc.request_rounded;
    /* Whether the device's free memory is what refused it, so that what a
     * step frees tells whether the request then fits (not where a limit
     * of PyTorch's refused it). */
    int free_tells = o->have_info && !refused_itself && !fraction;
    if (o->have_info && (asked > total || (!o->budget && asked > usable))) {
        struct vt_finding *f = add(out, &n, "request_exceeds_device");
        f->from_record = asked != o->requested;
        vt_site_label(sym, o->stack, site, sizeof site);
        char q[48];
        about(asked, asked == o->requested ? o->requested_rounded : tc.request_rounded, q, sizeof q);
        if (asked > total && o->budget) {
            /* Under a budget the total is the budget's, not the device's. */
            snprintf(f->text, sizeof f->text, "the request alone (%s) is larger than the budget (VRAMTRACE_LIMIT: %s)",
                     q, B(total, b));
        } else if (asked > total) {
            snprintf(f->text, sizeof f->text, "the request alone (%s) is larger than the device (%s)",
                     q, B(total, b));
        } else {
            char d[32], e[32];
            snprintf(f->text, sizeof f->text, "the request alone (%s) is more than this process can ever have of the "
                     "device, by %s: %s of its %s, the rest (%s) held outside its allocations (the CUDA context, "
                     "other processes); it fails even with everything else freed", q,
                     B(asked - usable, d), B(usable, b), B(total, c), B(outside0, e));
        }
        if (vt_stack_makes_model(sym, o->stack))
            snprintf(f->next, sizeof f->next,
                     "no allocator setting can fit it: it is one of the model's own parameters (made or moved to the "
                     "device at %s): a smaller layer, lower precision (bf16), or shard it across devices (tensor "
                     "parallel, FSDP) or keep it on the host", site);
        else
            snprintf(f->next, sizeof f->next,
                     "no allocator setting can fit it: make that tensor smaller at %s (batch or sequence length) "
                     "or shard it across devices", site);
        /* Larger than the device: nothing else matters. Larger than what
         * the process can have: what holds the rest (other processes, the
         * context) and what grew are still told. */
        if (asked > total) return n;
    }
    uint64_t others = 0;
    int known_others = 0;
    const struct vt_proc *big = NULL;
    for (uint32_t i = 0; o->procs && i < o->nprocs; i++) {
        if (o->procs[i].used_bytes == UINT64_MAX) continue;
        others += o->procs[i].used_bytes;
        known_others = 1;
        if (!big || o->procs[i].used_bytes > big->used_bytes) big = &o->procs[i];
    }
    if (known_others && o->have_info && others * 20 >= total &&
        (others + freeb >= o->requested || others * 4 >= total)) {
        struct vt_finding *f = add(out, &n, "other_processes");
        int k = snprintf(f->text, sizeof f->text, "other processes hold %s (%s of the device):", B(others, a),
                         PCT(others, total));
        if (k > 0 && (size_t)k < sizeof f->text)
            vt_procs_text(o->procs, o->nprocs < 4 ? o->nprocs : 4, f->text + k, sizeof f->text - (size_t)k);
        snprintf(f->next, sizeof f->next,
                 "stop pid %d or run on a free GPU (CUDA_VISIBLE_DEVICES); without them %s would be free",
                 big->pid, B(others + freeb, c));
        would_free(f, free_tells, others, freeb, asked);
    }
    /* Tensors of a failed attempt that a caught exception keeps: its
     * traceback keeps every frame the error went through, with their
     * locals and graphs (the retry loop that keeps `last_error = e` and
     * halves the batch failed again for the 3 GiB of the first attempt,
     * and was told to shrink its batch). Stated when they hold the
     * request, or a tenth of what PyTorch allocated. */
    struct vt_torch_kept kept;
    if (torch && vt_torch_oom_kept(s, index, &kept) &&
        (kept.bytes >= tc.request || kept.bytes * 10 >= tc.allocated)) {
        struct vt_finding *f = add(out, &n, "kept_exception");
        f->from_record = 1;
        char q[48];
        snprintf(f->text, sizeof f->text,
                 "%s of PyTorch's memory is still alive because a caught exception is kept: the traceback of `%.80s` "
                 "keeps the frames of the attempt that failed, with their tensors (%" PRIu64 " listed; the largest: %.300s)"
                 ", %s the %s asked for", B(kept.bytes, a), kept.exception, kept.count, kept.largest,
                 kept.bytes >= tc.request ? "no less than" : "beside", about(tc.request, tc.request_rounded, q, sizeof q));
        snprintf(f->next, sizeof f->next,
                 "do not keep the exception or its traceback: keep str(e) (or `del e` once it is logged) and retry "
                 "outside the except block; a kept exception's traceback keeps every frame it went through alive "
                 "(PyTorch's FAQ: recover from out-of-memory errors outside the except clause)");
    }
    /* The failing device's holders alone (other devices hold memory too):
     * a growing site speaks of this failure only if it holds memory here. */
    if (!holders && o->device_holders) { /* of the failing device, kept at the failure */
        holders = o->device_holders;
        nholders = o->ndevice_holders;
    }
    int device_only = holders != NULL;
    if (!holders) {
        holders = o->holders;
        nholders = o->nholders;
    }
    /* The holders and the growth are of device memory: a failure of pinned
     * host memory is not explained by them (a device site "held 469%" of
     * the host bytes live). */
    if (!vt_kind_owned_device(o->kind)) holders = NULL, nholders = 0;
    /* The handles the failing request made before it are its own, no
     * holder's (tracker/handlerun.h): what the program holds is the rest. */
    struct vt_holder *held = NULL;
    size_t nheld = 0;
    if (holders && o->taken_count) {
        held = vt_holders_less_taken(holders, nholders, o, &nheld);
        holders = held;
        nholders = nheld;
    }
    uint64_t held_live = live > o->taken_bytes ? live - o->taken_bytes : 0;
    /* A request that made more handles than everything else the program
     * holds on the device is said before the holders. It alone is what
     * does not fit only where it is larger than what the process can ever
     * have of the device (a tensor a little smaller than the device failed
     * at its 390th page); where it fits without the holders, it is the two
     * together (3 GiB held, then 6 GiB asked of 8 GiB was told "not what
     * is held"), and either freeing them or a smaller request would do.
     * Of the request, what it asked so far is known; the whole where
     * PyTorch's record says it (from the record: said with it, after the
     * post-mortem, which came before it). */
    int taken_most = o->taken_count && vt_kind_owned_device(o->kind) && o->taken_bytes + o->requested >= held_live;
    if (taken_most) {
        struct vt_finding *f = add(out, &n, "request_takes_most");
        vt_site_label(sym, o->stack, site, sizeof site);
        uint64_t so_far = o->taken_bytes + o->requested;
        int whole_known = torch && tc.request > o->requested;
        uint64_t whole = whole_known && tc.request > so_far ? tc.request : so_far;
        f->from_record = whole_known;
        char d[32], e[48], g[32], h[32], said[96] = "";
        if (whole_known)
            snprintf(said, sizeof said, "; PyTorch asked %s in all", about(tc.request, tc.request_rounded, e, sizeof e));
        int k = snprintf(f->text, sizeof f->text, "this request made %" PRIu64 " handle%s (%s) before the one of %s "
                         "that failed: %s asked so far, no less than everything else the program holds on the device "
                         "(%s)%s", o->taken_count, o->taken_count == 1 ? "" : "s", B(o->taken_bytes, a),
                         B(o->requested, b), B(so_far, c), B(held_live, d), said);
        char *rest = f->text + (k > 0 && (size_t)k < sizeof f->text ? (size_t)k : 0);
        size_t room = sizeof f->text - (size_t)(rest - f->text);
        if (o->have_info && whole > usable) {
            snprintf(rest, room, "; it is the request that does not fit, not what is held");
            snprintf(f->next, sizeof f->next, "make that tensor smaller at %s (batch or sequence length) or shard it "
                     "across devices", site);
        } else if (o->have_info && whole_known) {
            snprintf(rest, room, "; the request alone fits the %s this process can have of the device, and with what "
                     "is held it does not", B(usable, g));
            snprintf(f->next, sizeof f->next, "either would let it fit: free what the program holds on the device "
                     "before %s (%s, the holders), or make that tensor smaller there (batch or sequence length) than "
                     "the %s left beside them", site, B(held_live, h),
                     B(usable > held_live ? usable - held_live : 0, e));
        } else {
            /* Only a lower bound of the request: that the holders' memory
             * would be enough is not known. */
            snprintf(rest, room, "; that much fits %s%s%s, and with what is held it does not (how much more the "
                     "request wanted is not known here)", o->have_info ? "the " : "the device",
                     o->have_info ? B(usable, g) : "", o->have_info ? " this process can have of the device" : "");
            snprintf(f->next, sizeof f->next, "make that tensor smaller at %s (batch or sequence length), or free "
                     "what the program holds on the device before it (%s, the holders)", site, B(held_live, h));
        }
    }
    /* A request PyTorch's allocator did not make (ctypes, CuPy, a
     * library's own workspace) while PyTorch's cache holds device memory:
     * PyTorch keeps the segments its tensors let go of and gives them to no
     * other allocator. Which part tensors use, only PyTorch knows (its
     * record comes at its own failures, not at another allocator's): its
     * companion's figures at the newest optimizer step (live_torch.c) say
     * it where its segments are still those then (reserved then is what
     * they hold now). Stated first when the part no tensor uses would
     * have made the request fit; not stated when it would not (every
     * segment full of tensors a leak keeps: empty_cache() gave back 18 MiB
     * of a 2 GiB request, and the leak came second); with that part
     * unknown, said so, after a growing site. */
    struct vt_finding cache_holds;
    int cache_later = 0;
    if (!o->budget && !torch && o->have_info && holders && !vt_through_torch_allocator(sym, o->stack)) {
        uint64_t cached = 0, segments = 0;
        for (size_t i = 0; i < nholders; i++)
            if (vt_through_torch_allocator(sym, holders[i].stack)) cached += holders[i].bytes, segments += holders[i].count;
        uint64_t allocated = 0, reserved = 0;
        int known = vt_torch_live_last(o->device, &allocated, &reserved) && reserved == cached;
        uint64_t unused = known && reserved > allocated ? reserved - allocated : 0;
        if (cached && cached + freeb >= o->requested && (!device_only || nholders) &&
            (!known || unused + freeb >= o->requested)) {
            struct vt_finding *f = known ? add(out, &n, "torch_cache_holds") : &cache_holds;
            cache_later = !known;
            if (known) would_free(f, free_tells, unused, freeb, asked);
            vt_site_label(sym, o->stack, site, sizeof site);
            char part[160];
            if (known)
                snprintf(part, sizeof part, "; %s of them held no tensor at its last optimizer step", B(unused, c));
            else
                snprintf(part, sizeof part, "; how much of them no tensor uses is not known (PyTorch's own figures "
                         "come at its optimizer steps)");
            snprintf(f->text, sizeof f->text,
                     "PyTorch's caching allocator holds %s of device %d in %" PRIu64 " segment%s (%s of the tracked "
                     "memory), and this request did not come through it: PyTorch keeps the segments its tensors "
                     "let go of for its own next tensors and gives them to no other allocator%s", B(cached, a),
                     o->device, segments, segments == 1 ? "" : "s", PCT(cached, live ? live : cached), part);
            snprintf(f->next, sizeof f->next,
                     "torch.cuda.empty_cache() before %s gives back the segments no tensor uses "
                     "(torch.cuda.memory_reserved() - torch.cuda.memory_allocated() of them); or allocate it through "
                     "PyTorch (torch.empty(..., device=\"cuda\")), or cap PyTorch's share "
                     "(torch.cuda.set_per_process_memory_fraction)", site);
        }
    }
    size_t nsites = 0;
    struct vt_holder *sites = holders ? vt_holders_by_site(holders, nholders, sym, &nsites) : NULL;
    size_t ngrowth = 0;
    /* A site's growth on the failing device alone, when the failure is
     * about its memory alone. */
    struct vt_growth *growth = vt_kind_owned_device(o->kind)
                                   ? vt_find_growth_on(s, sym, o->time_ns, device_only ? o->device : -1, &ngrowth)
                                   : NULL;
    if (ngrowth) vt_torch_name_growth_oom(s, sym, index, growth, 1);
    /* A PyTorch program that fails once an optimizer step began and before
     * its second completed: what rose is its model, gradients and
     * optimizer state being made (Adam's made at its first step), not yet
     * a leak. A program that never steps one (inference) is left out. */
    int first_steps = ngrowth && vt_torch_stepping() && steps_before(s, o->time_ns) < 2;
    /* What PyTorch's record says is on already: no graph kept (evaluation
     * under torch.no_grad()), and checkpointing's recomputation failing. */
    int graphless = torch && tc.activation == 0;
    /* Checkpointing is in use where the failing call or memory live on
     * the device came through it (a failure in backward proper has no
     * Python frame of its own). */
    int recomputing = vt_in_checkpoint(sym, o->stack), checkpointing = recomputing;
    for (size_t i = 0; !checkpointing && holders && i < nholders; i++) checkpointing = vt_in_checkpoint(sym, holders[i].stack);
    for (size_t i = 0; i < ngrowth; i++) {
        vt_site_label(sym, growth[i].stack, site, sizeof site);
        if (device_only && !holds_here(sym, sites, nsites, site)) continue;
        /* A model moved to the device rises once, however long its copy
         * takes: not a leak suspect. */
        if (vt_stack_makes_model(sym, growth[i].stack)) continue;
        *grew = growth[i];
        struct vt_finding *f = add(out, &n, "growing_site");
        char rate[400];
        if (first_steps) {
            snprintf(f->text, sizeof f->text, "%s rose from %s to %s before the program's second optimizer step: "
                     "the model, its gradients and the optimizer's state being made, not yet a leak", site,
                     B(growth[i].first_floor, a), B(growth[i].end_bytes, b));
            first_step_advice(f->next, sizeof f->next, s, o, sym, holders, nholders, torch ? &tc : NULL);
            break;
        }
        /* A PyTorch program before any step (no boundary, no optimizer
         * step begun): its first batch's activations rise as a leak does;
         * which one it is, only the program knows (a first batch too big
         * was called a leak suspect alone). */
        if (vt_through_torch(sym, growth[i].stack) && steps_before(s, o->time_ns) == 0 && !vt_torch_stepping() &&
            graphless) {
            /* No graph kept: no training's first batch, a loop keeping its
             * results (an evaluation under torch.no_grad()). */
            snprintf(f->text, sizeof f->text, "%s grew through the run from %s to %s: %s, before any optimizer step, "
                     "with no graph kept (no activations saved for backward): a loop that keeps its results; a leak "
                     "suspect", site, B(growth[i].first_floor, a), B(growth[i].end_bytes, b),
                     vt_growth_text(&growth[i], rate, sizeof rate));
            snprintf(f->next, sizeof f->next, "free what %s keeps from one pass to the next: keep fewer of its "
                     "results, or .cpu() them (.detach() and torch.no_grad() change nothing here)", site);
            break;
        }
        if (vt_through_torch(sym, growth[i].stack) && steps_before(s, o->time_ns) == 0 && !vt_torch_stepping()) {
            snprintf(f->text, sizeof f->text, "%s grew through the run from %s to %s: %s, before any optimizer step: "
                     "the first batch's work if the program trains, a leak suspect if it loops without steps",
                     site, B(growth[i].first_floor, a), B(growth[i].end_bytes, b),
                     vt_growth_text(&growth[i], rate, sizeof rate));
            /* A graph holding the growth before any step: a loss summed
             * over micro-batches for one backward() keeps every one's. */
            char summed[176] = "";
            if (strncmp(growth[i].holder, "graph of ", 9) == 0)
                snprintf(summed, sizeof summed, "; if `%.40s` sums the losses of micro-batches for one backward(), it "
                         "keeps every micro-batch's graph until then: call backward() on each", growth[i].holder + 9);
            snprintf(f->next, sizeof f->next,
                     "a first batch that does not fit: a smaller batch (with gradient accumulation), mixed precision%s%s; "
                     "a loop without steps (evaluation): free what %s keeps from one pass to the next (%s)",
                     recomputing     ? " (activation checkpointing is on already: its recomputation failed)"
                     : checkpointing ? " (activation checkpointing is on already)"
                                     : " or activation checkpointing",
                     summed, site, "keep loss.item() or .detach(); torch.no_grad()");
            break;
        }
        snprintf(f->text, sizeof f->text, "%s grew through the run from %s to %s: %s; a leak suspect", site,
                 B(growth[i].first_floor, a), B(growth[i].end_bytes, b), vt_growth_text(&growth[i], rate, sizeof rate));
        if (vt_through_torch(sym, growth[i].stack) && graphless)
            snprintf(f->next, sizeof f->next,
                     "free what %s keeps from one step to the next (results appended to a list: keep fewer, or .cpu() "
                     "them); no graph is kept here, so .detach() and torch.no_grad() change nothing", site);
        else if (vt_through_torch(sym, growth[i].stack))
            snprintf(f->next, sizeof f->next,
                     "free what %s keeps from one step to the next (results appended to a list, tensors kept with "
                     "their graph: keep loss.item() or .detach() of what is only logged; a loss summed over "
                     "micro-batches for one backward() keeps every micro-batch's graph: call backward() on each)",
                     site);
        else
            snprintf(f->next, sizeof f->next,
                     "free what %s keeps from one step to the next (results appended to a list, a cache that only "
                     "grows, a buffer allocated in a loop and never freed)", site);
        break;
    }
    free(growth);
    if (cache_later) {
        struct vt_finding *f = add(out, &n, "torch_cache_holds");
        memcpy(f->text, cache_holds.text, sizeof f->text);
        memcpy(f->next, cache_holds.next, sizeof f->next);
    }
    /* PyTorch's cache fragmented: no block it keeps free holds the
     * request, yet what it keeps free, with the device's free memory,
     * would (800 MiB in holes of 40 MiB among live tensors and 872 MiB
     * free, 900 MiB asked: expandable segments, which join the two, made
     * it fit; the finding wanted the holes alone to hold it). The holes
     * are at least half the request, so that they are most of why it
     * failed: 29 MiB of them beside 42 MiB free, 64 MiB asked in the
     * middle of making Adam's state, is a step that does not fit. */
    uint64_t unallocated = torch && tc.reserved > tc.allocated ? tc.reserved - tc.allocated : 0;
    uint64_t device_free = o->have_info ? freeb : 0;
    int cache_frag = torch && !tc.pool && unallocated && tc.largest_free < tc.request &&
                     (unallocated >= tc.request || (unallocated * 2 >= tc.request &&
                                                    unallocated + device_free >= tc.request));
    /* PyTorch's evaluation keeping a graph: every model in eval mode
     * (training False) with grad mode on at the failure, and activations
     * saved for a backward that evaluation never runs. Said whatever share
     * one line holds (48% at the evaluation's line said nothing). */
    if (torch && tc.eval_grad && tc.activation) {
        struct vt_finding *f = add(out, &n, "evaluation_keeps_graph");
        f->from_record = 1;
        char line[160];
        vt_site_label(sym, o->stack, line, sizeof line);
        char *arrow = strstr(line, " -> ");
        if (arrow) *arrow = '\0';
        snprintf(f->text, sizeof f->text, "the model is in evaluation mode (training is False) with grad mode on: "
                 "autograd keeps %s of activations (%s of what PyTorch allocated) for a backward that evaluation "
                 "never runs", B(tc.activation, a), PCT(tc.activation, tc.allocated ? tc.allocated : tc.activation));
        snprintf(f->next, sizeof f->next, "run the evaluation at %s under torch.no_grad() or torch.inference_mode(): "
                 "no activations are kept then", line);
    }
    if (taken_most) {
        ; /* the request is the cause, said above */
    } else if (nsites > 0 && held_live > 0 && sites[0].bytes * 2 >= held_live) {
        const struct vt_holder *h = &sites[0];
        struct vt_finding *f = add(out, &n, "one_site_dominates");
        vt_site_label(sym, h->stack, site, sizeof site);
        snprintf(f->text, sizeof f->text, "%s holds %s of the tracked memory (%s in %" PRIu64 " allocation%s)",
                 site, PCT(h->bytes, held_live), B(h->bytes, a), (uint64_t)h->count, h->count == 1 ? "" : "s");
        would_free(f, free_tells, h->bytes, freeb, asked);
        not_enough(f, h->bytes, freeb, asked, asked_rounded);
        size_t together = together_enough(f, sites, nsites, sym, freeb, asked);
        if (vt_is_python(sym, h->stack) && vt_stack_makes_model(sym, h->stack))
            snprintf(f->next, sizeof f->next,
                     "the model's own parameters (made or moved to the device at %s): mixed precision (bf16 weights), a "
                     "smaller model, or sharding or offloading (FSDP, ZeRO, device_map) across devices", site);
        else if (cache_frag && vt_through_torch_allocator(sym, h->stack)) {
            cache_segments_advice(f->next, sizeof f->next, s, index, sym, h, site);
            f->from_record = 1;
        }
        else if (vt_is_python(sym, h->stack) && vt_through_torch(sym, h->stack))
            batch_advice(f->next, sizeof f->next, site, graphless, checkpointing, recomputing);
        else if (together == 2) {
            char second[256];
            vt_site_label(sym, sites[1].stack, second, sizeof second);
            snprintf(f->next, sizeof f->next, "shrink or free what %s and %s allocate before the failing call: the "
                     "two together", site, second);
        } else if (together > 2)
            snprintf(f->next, sizeof f->next, "shrink or free what %s and the next %zu largest call sites allocate "
                     "before the failing call (the holders table lists them)", site, together - 1);
        else
            snprintf(f->next, sizeof f->next, "shrink or free what %s allocates before the failing call", site);
    } else if (nsites > 1 && held_live > 0) {
        struct line_sum ls;
        if (dominant_line(sym, sites, nsites, held_live, &ls)) {
            struct vt_finding *f = add(out, &n, "one_site_dominates");
            snprintf(f->text, sizeof f->text,
                     "%s holds %s of the tracked memory (%s in %" PRIu64 " allocation%s, through %zu call sites: %s)",
                     ls.line, PCT(ls.bytes, held_live), B(ls.bytes, a), ls.count, ls.count == 1 ? "" : "s", ls.nsites,
                     ls.callees);
            would_free(f, free_tells, ls.bytes, freeb, asked);
            not_enough(f, ls.bytes, freeb, asked, asked_rounded);
            if (ls.python && ls.torch)
                batch_advice(f->next, sizeof f->next, ls.line, graphless, checkpointing, recomputing);
            else
                snprintf(f->next, sizeof f->next, "shrink or free what %s allocates before the failing call",
                         ls.line);
        }
    }
    free(sites);
    free(held);
    /* The graphs' pool: what it keeps reserved that no graph allocation
     * uses, when that is a tenth of the device or would have fitted the
     * request. */
    uint64_t spare = o->graph_reserved > o->graph_used ? o->graph_reserved - o->graph_used : 0;
    if (!o->budget && spare && ((total && spare * 10 >= total) || spare >= o->requested)) {
        struct vt_finding *f = add(out, &n, "graph_pool");
        snprintf(f->text, sizeof f->text,
                 "the CUDA graphs' memory pool keeps %s reserved that no graph allocation uses (%s reserved, %s in "
                 "use)", B(spare, a), B(o->graph_reserved, b), B(o->graph_used, c));
        snprintf(f->next, sizeof f->next,
                 "cudaDeviceGraphMemTrim(%d) gives it back between launches; destroy the graphs (cudaGraphExecDestroy) "
                 "you no longer launch", o->device);
        would_free(f, free_tells, spare, freeb, asked);
    }
    /* The stream-ordered pools' the same: freed blocks a pool keeps for its
     * next allocations (a release threshold; PyTorch's cudaMallocAsync
     * backend keeps all). Not where PyTorch refused it itself: no pool
     * was asked, and what it keeps unused was read after the failing
     * operation had freed its outputs into it. */
    uint64_t pool_spare = o->pool_reserved > o->pool_used ? o->pool_reserved - o->pool_used : 0;
    if (!o->budget && !refused_itself && pool_spare &&
        ((total && pool_spare * 10 >= total) || pool_spare >= o->requested)) {
        struct vt_finding *f = add(out, &n, "stream_pool");
        snprintf(f->text, sizeof f->text,
                 "the stream-ordered memory pools keep %s reserved that no allocation uses (%s reserved, %s in use)",
                 B(pool_spare, a), B(o->pool_reserved, b), B(o->pool_used, c));
        /* PyTorch's cudaMallocAsync backend trims its pool and retries
         * before it raises: what it kept unused was given back already. */
        if (o->kind == VT_KIND_ASYNC && vt_through_torch(sym, o->stack))
            snprintf(f->next, sizeof f->next,
                     "not torch.cuda.empty_cache(): PyTorch's cudaMallocAsync backend trims the pool and asks again "
                     "before it raises; what is left is in use: lower the peak (the holders above)");
        else
            snprintf(f->next, sizeof f->next,
                     "cudaMemPoolTrimTo(pool, 0) gives it back; a lower release threshold "
                     "(cudaMemPoolAttrReleaseThreshold) keeps less");
        /* What PyTorch's backend would trim, it trimmed already. */
        if (!(o->kind == VT_KIND_ASYNC && vt_through_torch(sym, o->stack)))
            would_free(f, free_tells, pool_spare, freeb, asked);
    }
    if (o->have_info && !o->budget &&
        vt_oom_outside(total, freeb, live, o->graph_reserved, o->graph_used, o->pool_reserved, o->pool_used)) {
        uint64_t outside = vt_oom_outside(total, freeb, live, o->graph_reserved, o->graph_used, o->pool_reserved,
                                          o->pool_used);
        uint64_t unexplained = outside > others ? outside - others : 0;
        if (unexplained * 10 >= total) {
            struct vt_finding *f = add(out, &n, "outside_tracked");
            snprintf(f->text, sizeof f->text,
                     "%s (%s of the device) is held outside this process's tracked allocations%s",
                     B(unexplained, a), PCT(unexplained, total),
                     known_others ? " and other processes" : "");
            snprintf(f->next, sizeof f->next,
                     "look for memory outside the allocations shown: the CUDA context (CUDA_MODULE_LOADING=LAZY), "
                     "library workspaces (cuBLAS, cuDNN, NCCL buffers)%s",
                     known_others ? "" : ", or other processes (nvidia-smi)");
        }
    }
    /* Expandable segments on already: not the advice. Nor is
     * torch.cuda.empty_cache(): PyTorch's allocator gives back every
     * cached block it can (whole segments, free pages) and retries before
     * it raises, so what its cache keeps free at the error lies among live
     * tensors. */
    const char *defrag = torch && tc.expandable
                             ? "expandable segments are on already, and PyTorch gave back the pages it could before it "
                               "raised: what its cache keeps free lies among live tensors; lower the peak (the holders "
                               "above), or allocate the largest tensors first"
                             : NULL;
    int free_enough = 0; /* the fragmentation finding: more was free than asked */
    if (o->have_info && !o->budget && freeb >= o->requested && !fraction) {
        struct vt_finding *f = add(out, &n, "fragmentation");
        free_enough = 1;
        snprintf(f->text, sizeof f->text, "%s was free, more than the %s asked for, yet it failed: free memory is "
                 "fragmented or a pool limit applies", B(freeb, a), B(o->requested, b));
        snprintf(f->next, sizeof f->next, "%s",
                 defrag                                      ? defrag
                 : torch || vt_through_torch(sym, o->stack)     ? "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True; for "
                                                               "stream-ordered pools check the pool's release threshold"
                                                             : "allocate the largest buffers first, or fewer and larger "
                                                               "ones to carve up; for stream-ordered pools check the "
                                                               "pool's release threshold");
    }
    int frag_cache = 0; /* the cache's free memory lies among live tensors */
    if (torch && tc.pool && !refused_itself && o->pool_reserved > o->pool_used && pool_spare >= tc.request) {
        /* cudaMallocAsync: its pool's blocks are the driver's, unknown;
         * what it keeps unused is the driver's figure read at the failed
         * call (PyTorch's record comes later, when autograd may have let
         * go of its buffers: 320 MiB more "unused" in an outside check). */
        struct vt_finding *f = add(out, &n, "fragmented_cache");
        f->from_record = 1;
        snprintf(f->text, sizeof f->text, "PyTorch's cudaMallocAsync pool kept %s reserved that no tensor used at the "
                 "failed call, no less than the %s asked for, yet it failed: the pool's free memory is fragmented",
                 B(pool_spare, a), B(tc.request, b));
        snprintf(f->next, sizeof f->next, "PYTORCH_CUDA_ALLOC_CONF without backend:cudaMallocAsync (the native "
                 "allocator, with expandable_segments:True); not torch.cuda.empty_cache(): this backend trims the "
                 "pool and asks again before it raises");
    } else if (cache_frag) {
        struct vt_finding *f = add(out, &n, "fragmented_cache");
        f->from_record = 1;
        frag_cache = 1;
        if (unallocated >= tc.request) {
            snprintf(f->text, sizeof f->text, "PyTorch's cache holds %s reserved but unallocated, more than the %s "
                     "asked for, yet its largest free block is %s: the cache is fragmented", B(unallocated, a),
                     B(tc.request, b), B(tc.largest_free, c));
        } else {
            char d[32];
            snprintf(f->text, sizeof f->text, "PyTorch's cache holds %s reserved but unallocated and the device had %s "
                     "free, together more than the %s asked for, yet the cache's largest free block is %s: the cache "
                     "is fragmented", B(unallocated, a), B(device_free, d), B(tc.request, b), B(tc.largest_free, c));
        }
        snprintf(f->next, sizeof f->next, "%s",
                 defrag     ? defrag
                 : tc.split ? "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (segments that grow instead of "
                              "splitting; the max_split_size_mb set did not prevent it); not torch.cuda.empty_cache(): "
                              "PyTorch gave back its empty segments before it raised"
                            : "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (segments that grow instead "
                              "of splitting) or max_split_size_mb:N (blocks over N MiB never split for smaller "
                              "tensors); not torch.cuda.empty_cache(): PyTorch gave back its empty segments "
                              "before it raised");
    }
    uint64_t freed, nfreed;
    if (is_retry(s, index, &freed, &nfreed)) {
        struct vt_finding *f = add(out, &n, "allocator_retry");
        snprintf(f->text, sizeof f->text, "this is a retry: after the failure before it the process freed %" PRIu64
                 " allocation%s (%s), as a caching allocator releasing its cache does, and the same %s still failed",
                 nfreed, nfreed == 1 ? "" : "s", B(freed, a), B(o->requested, b));
        /* A caching allocator's retry gives back only its empty segments:
         * with the cache fragmented, what it keeps free lies in segments
         * among live tensors. */
        /* With more free than asked (the fragmentation finding), the
         * memory is not held by live allocations: saying so contradicted
         * the finding beside it. */
        snprintf(f->next, sizeof f->next, "%s",
                 free_enough ? "what the release gave back left more free than asked, and it still failed: the free "
                               "memory is fragmented (the fragmentation above), not held by live allocations; act on "
                               "that"
                 : frag_cache ? "what the cache held empty was given back and did not suffice; what it still keeps free "
                                "lies among live tensors (the fragmentation above): act on the holders or on that"
                              : "the cache is not the problem: the memory is held by live allocations; act on the "
                                "holders, not on allocator settings");
    }
    by_fit(out, n);
    /* More was free than asked: no holder's size explains the failure,
     * the fragmentation (or a pool's limit) does; most likely first (it
     * came after a leak suspect and a holder's "shrink or free it"). */
    if (free_enough) lead(out, n, "fragmentation");
    return n;
}
