/* leaks.c -- leak report, suppressions (their file: common/suppfile.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/display.h"
#include "../common/oomtext.h"
#include "../common/suppfile.h"
#include "../common/summary.h"
#include "../common/warn.h"
#include "holders.h"
#include "leaks.h"
#include "match.h"
#include "symbolize.h"

struct rule {
    char *pattern;
    uint64_t count, bytes;   /* what it suppressed */
};

struct vt_suppressions {
    struct rule *rules;
    size_t n;
};

struct vt_suppressions *vt_suppressions_load(const char *path, char *err, size_t errsize) {
    struct vt_suppressions *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    if (!path || !*path) return s;
    char **pat;
    size_t n;
    if (vt_supp_read(path, NULL, &pat, &n, err, errsize) != 0) {
        free(s);
        return NULL;
    }
    s->rules = n ? calloc(n, sizeof *s->rules) : NULL;
    if (n && !s->rules) {
        snprintf(err, errsize, "cannot read suppressions %s: out of memory", path);
        vt_supp_free(pat, n);
        free(s);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) s->rules[i].pattern = pat[i];   /* taken over */
    s->n = n;
    free(pat);
    return s;
}

void vt_suppressions_free(struct vt_suppressions *s) {
    if (!s) return;
    for (size_t i = 0; i < s->n; i++) free(s->rules[i].pattern);
    free(s->rules);
    free(s);
}

/* The first rule (in the file's order) that matches text, or -1; an
 * empty or unknown text matches none, as in LeakSanitizer. */
static int first_rule(const struct vt_suppressions *sup, const char *text) {
    if (!text || !*text) return -1;
    for (size_t r = 0; r < sup->n; r++)
        if (vt_template_match(sup->rules[r].pattern, text)) return (int)r;
    return -1;
}

/* The rule LeakSanitizer would credit with the stack (lsan_common.cpp's
 * GetSuppressionForStack), or -1: its return addresses innermost first;
 * at each, the first rule that matches the module ("<unknown module>"
 * where there is none), else, for each of its frames (an inlined
 * function's before the one it was inlined into), the first that matches
 * the function, else the first that matches the file. So a rule written
 * for an inner frame is the one used and counted, wherever it stands in
 * the file, and a rule that a CI job finds unused is one that suppressed
 * nothing. A Python frame has no module: its function and file only. */
static int suppressed_by(const struct vt_suppressions *sup, const struct vt_symbols *sym, uint32_t stack) {
    struct vt_frame *frames = sup && sup->n ? malloc(VT_SHOWN_FRAMES * sizeof *frames) : NULL;
    size_t depth = frames ? vt_stack_frames(sym, stack, frames) : 0;
    int found = -1;
    for (size_t j = 0; j < depth && found < 0;) {
        size_t at = 1;   /* the frames at this return address (vt_frames_at, within the cut) */
        while (j + at < depth && frames[j + at - 1].inlined) at++;
        const struct vt_frame *outer = &frames[j + at - 1];
        if (!outer->python) found = first_rule(sup, outer->module ? outer->module : "<unknown module>");
        for (size_t k = j; k < j + at && found < 0; k++) {
            found = first_rule(sup, frames[k].function);
            if (found < 0) found = first_rule(sup, frames[k].file);
        }
        j += at;
    }
    free(frames);
    return found;
}

static int by_stack(const void *a, const void *b) {
    const struct vt_holder *x = a, *y = b;
    return x->stack < y->stack ? -1 : x->stack > y->stack;
}

/* One holder's entry: its header line after an empty line, its call site,
 * the `kind` line when given, what a reset released of it when `released`
 * has its stack, then its frames. */
static void put_entry(FILE *f, const char *header, uint32_t st, const char *kind, const struct vt_symbols *sym,
                      const struct vt_holder *released, size_t nreleased) {
    fprintf(f, "\n%s\n", header);
    char site[2048];   /* as long as the holders table's */
    fprintf(f, "    call site: %s\n", vt_site_shown(sym, st, site, sizeof site));
    if (kind) fprintf(f, "    kind: %s\n", kind);
    struct vt_holder key = {.stack = st};
    const struct vt_holder *r = nreleased ? bsearch(&key, released, nreleased, sizeof *released, by_stack) : NULL;
    if (r)
        fprintf(f, "    released by a context's reset or destruction without a free: %" PRIu64 " byte(s) in %" PRIu64
                   " object(s)\n", r->bytes, (uint64_t)r->count);
    struct vt_frame *frames = malloc(VT_SHOWN_FRAMES * sizeof *frames);
    size_t depth = frames ? vt_stack_frames(sym, st, frames) : 0;
    vt_put_frames(f, "    ", depth ? frames : NULL, depth, vt_put_display);
    free(frames);
}

void vt_leak_holders(FILE *f, const struct vt_holder *h, size_t n, const struct vt_symbols *sym,
                     const char *lead, const struct vt_holder *released, size_t nreleased) {
    for (size_t i = 0; i < n; i++) {
        char header[160];
        snprintf(header, sizeof header, "%s%" PRIu64 " byte(s) in %" PRIu64 " object(s) allocated from:", lead,
                 h[i].bytes, (uint64_t)h[i].count);
        put_entry(f, header, h[i].stack, NULL, sym, released, nreleased);
    }
}

const char *vt_leak_kind_label(int kind) {
    switch (kind) {
    case VT_KIND_DEVICE: return "device memory";
    case VT_KIND_PITCHED: return "pitched device memory";
    case VT_KIND_MANAGED: return "managed memory";
    case VT_KIND_ASYNC: return "stream-ordered device memory";
    case VT_KIND_VMM: return "device memory from cuMemCreate";
    case VT_KIND_ARRAY: return "a CUDA array";
    case VT_KIND_IMPORTED: return "an IPC mapping of another process's memory";
    case VT_KIND_GRAPH: return "device memory of a CUDA graph's allocation node";
    case VT_KIND_HOST: return "pinned host memory";
    case VT_KIND_HOST_REGISTERED: return "registered host memory (the program's own, page-locked)";
    default: {
        /* Host memory from cuMemCreate or a pool on the host: as an
         * out-of-memory failure of it is named. */
        const char *host = vt_host_memory_label(vt_kind_name(kind));
        return host ? host : "memory of a kind vramtrace does not know";
    }
    }
}

/* What one stack holds of one kind of memory at exit: an entry of the
 * leak report. api: the API that made all of it (an index into the
 * snapshot's apis), VT_LIVE_NO_API when several did or none is known;
 * kind VT_KIND_COUNT: released by a reset alone, its kind not kept. */
struct leak {
    uint32_t stack, count;
    uint64_t bytes;
    uint8_t kind, api, seen;   /* seen: an API was counted in */
};

/* The leaks of s by stack and kind, with what resets released added to
 * the entry of its stack (or an entry of its own); NULL when memory ran
 * out (*n 0) or nothing is there. */
struct leak_table {
    struct leak *v;
    size_t n, cap;
    uint32_t *slot;      /* open addressing: entry + 1, 0 empty */
    size_t nslots;
};

static size_t leak_slot(uint32_t stack, unsigned kind, size_t nslots) {
    uint64_t k = ((uint64_t)stack << 8 | kind) * 0x9e3779b97f4a7c15ull;
    return (size_t)(k >> 32) & (nslots - 1);
}

/* The entry of (stack, kind), made when absent; NULL when memory ran out. */
static struct leak *leak_at(struct leak_table *t, uint32_t stack, unsigned kind, int make) {
    if (t->nslots) {
        for (size_t h = leak_slot(stack, kind, t->nslots); t->slot[h]; h = (h + 1) & (t->nslots - 1)) {
            struct leak *x = &t->v[t->slot[h] - 1];
            if (x->stack == stack && x->kind == kind) return x;
        }
    }
    if (!make) return NULL;
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 64;
        struct leak *v = realloc(t->v, cap * sizeof *v);
        if (!v) return NULL;
        t->v = v;
        t->cap = cap;
    }
    if (2 * (t->n + 1) > t->nslots) {
        size_t nslots = t->nslots ? 2 * t->nslots : 128;
        uint32_t *slot = calloc(nslots, sizeof *slot);
        if (!slot) return NULL;
        for (size_t i = 0; i < t->n; i++) {
            size_t h = leak_slot(t->v[i].stack, t->v[i].kind, nslots);
            while (slot[h]) h = (h + 1) & (nslots - 1);
            slot[h] = (uint32_t)i + 1;
        }
        free(t->slot);
        t->slot = slot;
        t->nslots = nslots;
    }
    size_t h = leak_slot(stack, kind, t->nslots);
    while (t->slot[h]) h = (h + 1) & (t->nslots - 1);
    t->slot[h] = (uint32_t)t->n + 1;
    struct leak *x = &t->v[t->n++];
    *x = (struct leak){.stack = stack, .kind = (uint8_t)kind, .api = VT_LIVE_NO_API};
    return x;
}

static void leak_add(struct leak *x, uint64_t bytes, uint64_t count, int api) {
    x->bytes += bytes;
    x->count = x->count + count < x->count || x->count + count > UINT32_MAX ? UINT32_MAX : (uint32_t)(x->count + count);
    if (!x->seen) x->api = (uint8_t)api;
    else if (x->api != api) x->api = VT_LIVE_NO_API;
    x->seen = 1;
}

static int leak_order(const void *a, const void *b) {
    const struct leak *x = a, *y = b;
    if (x->bytes != y->bytes) return x->bytes < y->bytes ? 1 : -1;
    if (x->count != y->count) return x->count < y->count ? 1 : -1;
    if (x->stack != y->stack) return x->stack < y->stack ? -1 : 1;
    return x->kind < y->kind ? -1 : x->kind > y->kind;
}

static struct leak *leaks_of(const struct vt_snapshot *s, const struct vt_holder *rel, size_t nr, size_t *n) {
    struct leak_table t = {0};
    int lost = 0;
    struct vt_live_reader *rd = s->nlive ? vt_live_read(s, 0) : NULL;
    if (s->nlive && !rd) lost = 1;
    for (const struct vt_live *a; rd && (a = vt_live_next(rd));) {
        struct leak *x = leak_at(&t, a->stack, a->kind, 1);
        if (!x) { lost = 1; break; }
        leak_add(x, a->bytes, 1, a->api);
    }
    vt_live_read_end(rd);
    /* What a context's reset released without a free is leaked too (as
     * compute-sanitizer reports it at the reset): added to its stack's
     * entry, of the kind that stack holds (its own kind was not kept). */
    for (size_t i = 0; !lost && i < nr; i++) {
        struct leak *x = NULL;
        for (unsigned k = 0; !x && k <= VT_KIND_COUNT; k++) x = leak_at(&t, rel[i].stack, k, 0);
        if (!x && !(x = leak_at(&t, rel[i].stack, VT_KIND_COUNT, 1))) { lost = 1; break; }
        leak_add(x, rel[i].bytes, rel[i].count, x->seen ? x->api : VT_LIVE_NO_API);
    }
    free(t.slot);
    if (lost) vt_records_lost("the leak report");
    if (t.n) qsort(t.v, t.n, sizeof *t.v, leak_order);
    *n = t.n;
    return t.v;
}

/* An entry's kind line: the kind, and the API when one made all of it. */
static const char *kind_line(const struct vt_snapshot *s, const struct leak *x, char *buf, size_t size) {
    if (x->kind >= VT_KIND_COUNT) return NULL;
    const char *api = x->api < s->napis ? s->apis[x->api] : NULL;
    if (api) snprintf(buf, size, "%s (%s)", vt_leak_kind_label(x->kind), api);
    else snprintf(buf, size, "%s", vt_leak_kind_label(x->kind));
    return buf;
}

/* The holders h[0..*n), sorted by stack, with the entries of one stack
 * made one (a stack that released both device and pinned host memory). */
static void merge_stacks(struct vt_holder *h, size_t *n) {
    size_t k = 0;
    for (size_t i = 0; i < *n; i++) {
        if (k && h[k - 1].stack == h[i].stack) {
            uint64_t count = (uint64_t)h[k - 1].count + h[i].count;
            h[k - 1].bytes += h[i].bytes;
            h[k - 1].count = count > UINT32_MAX ? UINT32_MAX : (uint32_t)count;
        } else {
            h[k++] = h[i];
        }
    }
    *n = k;
}

/* The holders h[0..*n) that keep accepts (all without keep), kept in
 * their order in place. */
static void keep_only(struct vt_holder *h, size_t *n, const struct vt_symbols *sym, vt_leak_keep keep) {
    if (!keep || !h) return;
    size_t k = 0;
    for (size_t i = 0; i < *n; i++)
        if (keep(sym, h[i].stack)) h[k++] = h[i];
    *n = k;
}

struct vt_leak_result vt_leak_report(FILE *f, const struct vt_snapshot *s, const struct vt_symbols *sym,
                                     struct vt_suppressions *sup, int pid, const char *place, vt_leak_keep keep) {
    struct vt_leak_result res = {0};
    /* What resets released, device and pinned host memory together: a
     * leak is a leak (LeakSanitizer's rule), one entry per stack. */
    size_t nr = s->nreleased + s->nreleased_host, ns = 0;
    struct vt_holder *rel = nr ? malloc(nr * sizeof *rel) : NULL;   /* by stack, for bsearch */
    if (nr && !rel) {
        vt_records_lost("the leak report");
        nr = 0;
    } else if (nr) {
        if (s->nreleased) memcpy(rel, s->released, s->nreleased * sizeof *rel);
        if (s->nreleased_host) memcpy(rel + s->nreleased, s->released_host, s->nreleased_host * sizeof *rel);
        keep_only(rel, &nr, sym, keep);
        qsort(rel, nr, sizeof *rel, by_stack);
        merge_stacks(rel, &nr);
    }
    struct leak *g = leaks_of(s, rel, nr, &ns);
    if (keep) {   /* the stacks keep accepts alone, in their order */
        size_t k = 0;
        for (size_t i = 0; i < ns; i++)
            if (keep(sym, g[i].stack)) g[k++] = g[i];
        ns = k;
    }
    /* Leaks first, then the IPC mappings left open: another process's
     * memory, which this process did not allocate and so cannot leak
     * (LeakSanitizer's rule), told apart and counted in neither the
     * summary nor the exit status. */
    size_t ng = 0, nipc = 0;
    struct leak *ipc = ns ? malloc(ns * sizeof *ipc) : NULL;
    for (size_t i = 0; i < ns; i++) {
        if (g[i].kind == VT_KIND_IMPORTED) {
            if (ipc) ipc[nipc++] = g[i];
            res.ipc_bytes += g[i].bytes;
            res.ipc_count += g[i].count;
            continue;
        }
        int r = suppressed_by(sup, sym, g[i].stack);
        if (r >= 0) {
            sup->rules[r].count += g[i].count;
            sup->rules[r].bytes += g[i].bytes;
            res.suppressed_bytes += g[i].bytes;
            res.suppressed_count += g[i].count;
            continue;
        }
        g[ng++] = g[i];
        res.bytes += g[i].bytes;
        res.count += g[i].count;
    }
    char header[200], kind[200];
    if (ng > 0) {
        fprintf(f, "\n=================================================================\n"
                   "==%d==ERROR: vramtrace: detected GPU memory leaks\n", pid);
        if (place && place[0]) fprintf(f, "==%d==vramtrace: %s\n", pid, place);
        for (size_t i = 0; i < ng; i++) {
            snprintf(header, sizeof header, "Direct leak of %" PRIu64 " byte(s) in %" PRIu64 " object(s) allocated from:",
                     g[i].bytes, (uint64_t)g[i].count);
            put_entry(f, header, g[i].stack, kind_line(s, &g[i], kind, sizeof kind), sym, rel, nr);
        }
        fputc('\n', f);
    }
    if (nipc > 0) {
        fprintf(f, "%s==%d==vramtrace: IPC mappings of other processes' memory still open at exit (not leaks: this "
                   "process did not allocate that memory; cudaIpcCloseMemHandle or cuIpcCloseMemHandle closes them)\n",
                ng ? "" : "\n", pid);
        for (size_t i = 0; i < nipc; i++) {
            snprintf(header, sizeof header, "Open IPC mapping of %" PRIu64 " byte(s) in %" PRIu64
                     " mapping(s) (another process's memory) opened from:", ipc[i].bytes, (uint64_t)ipc[i].count);
            put_entry(f, header, ipc[i].stack, NULL, sym, rel, nr);
        }
        fputc('\n', f);
    }
    if (sup && res.suppressed_count > 0) {
        fputs("-----------------------------------------------------\nSuppressions used:\n"
              "  count      bytes template\n", f);
        for (size_t r = 0; r < sup->n; r++)
            if (sup->rules[r].count)
                fprintf(f, "%7" PRIu64 " %10" PRIu64 " %s\n", sup->rules[r].count, sup->rules[r].bytes,
                        sup->rules[r].pattern);
        fputs("-----------------------------------------------------\n\n", f);
    }
    if (ng > 0)
        fprintf(f, "SUMMARY: vramtrace: %" PRIu64 " byte(s) leaked in %" PRIu64 " allocation(s).\n", res.bytes,
                res.count);
    /* The counts are known even where the list is not whole: a SUMMARY
     * that CI reads is never short without saying so. */
    if (s->live_lost)
        fprintf(f, "vramtrace: this leak report is partial: %" PRIu64 " live allocation(s) of the %" PRIu64
                   " at exit could not be kept for it (memory was short in the traced process)\n",
                s->live_lost, s->totals.live_count + s->totals.host_live_count + s->totals.imported_live_count);
    fflush(f);
    free(g);
    free(ipc);
    free(rel);
    return res;
}
