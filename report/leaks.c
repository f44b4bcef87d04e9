/* leaks.c -- leak report, suppressions (their file: common/suppfile.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/display.h"
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

void vt_leak_holders(FILE *f, const struct vt_holder *h, size_t n, const struct vt_symbols *sym,
                     const char *lead, const struct vt_holder *released, size_t nreleased) {
    for (size_t i = 0; i < n; i++) {
        fprintf(f, "\n%s%" PRIu64 " byte(s) in %" PRIu64 " object(s) allocated from:\n", lead, h[i].bytes, (uint64_t)h[i].count);
        uint32_t st = h[i].stack;
        char site[2048];   /* as long as the holders table's */
        fprintf(f, "    call site: %s\n", vt_site_shown(sym, st, site, sizeof site));
        const struct vt_holder *r = nreleased ? bsearch(&h[i], released, nreleased, sizeof *released, by_stack) : NULL;
        if (r)
            fprintf(f, "    released by a context's reset or destruction without a free: %" PRIu64 " byte(s) in %" PRIu64
                       " object(s)\n", r->bytes, (uint64_t)r->count);
        struct vt_frame *frames = malloc(VT_SHOWN_FRAMES * sizeof *frames);
        size_t depth = frames ? vt_stack_frames(sym, st, frames) : 0;
        vt_put_frames(f, "    ", depth ? frames : NULL, depth, vt_put_display);
        free(frames);
    }
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
                                     struct vt_suppressions *sup, int pid, vt_leak_keep keep) {
    struct vt_leak_result res = {0, 0, 0, 0};
    size_t ns = 0, nr = 0;
    struct vt_holder *g = vt_holders_of(s, 0, &ns);
    if (!g && s->nlive) vt_records_lost("the leak report");
    keep_only(g, &ns, sym, keep);
    /* What a context's reset released without a free is leaked too (as
     * compute-sanitizer reports it at the reset): added to its stack's. */
    nr = s->nreleased;
    struct vt_holder *rel = nr ? malloc(nr * sizeof *rel) : NULL;   /* by stack, for bsearch */
    struct vt_holder *all = rel ? realloc(g, (ns + nr) * sizeof *g) : NULL;
    if (nr && !all) {
        vt_records_lost("the leak report");
        nr = 0;
    } else if (nr) {
        memcpy(rel, s->released, nr * sizeof *rel);
        keep_only(rel, &nr, sym, keep);
        qsort(rel, nr, sizeof *rel, by_stack);
        g = all;
        size_t live = ns;
        qsort(g, live, sizeof *g, by_stack);
        for (size_t i = 0; i < nr; i++) {
            struct vt_holder *x = bsearch(&rel[i], g, live, sizeof *g, by_stack);
            if (!x) {   /* a stack with nothing live now */
                x = &g[ns++];
                *x = (struct vt_holder){.stack = rel[i].stack};
            }
            x->bytes += rel[i].bytes;
            x->count = x->count + rel[i].count < x->count ? UINT32_MAX : x->count + rel[i].count;
        }
        qsort(g, ns, sizeof *g, vt_holder_order);
    }
    size_t ng = 0;
    for (size_t i = 0; i < ns; i++) {
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
    if (ng > 0) {
        fprintf(f, "\n=================================================================\n"
                   "==%d==ERROR: vramtrace: detected GPU memory leaks\n", pid);
        vt_leak_holders(f, g, ng, sym, "Direct leak of ", rel, nr);
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
    fflush(f);
    free(g);
    free(rel);
    return res;
}
