/* reporters.c -- the format table and what the writers share. */
#define _GNU_SOURCE /* qsort_r */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../common/display.h"
#include "../common/format.h"
#include "../common/labels.h"
#include "../common/oomtext.h"
#include "reporters.h"

const struct vt_reporter vt_reporters[] = {
    {"text", "the post-mortem: devices, OOMs, holders with stacks, live allocations", vr_text, 0},
    {"json", "the dump normalized and symbolized, for jq and CI", vr_json, 0},
    {"folded", "one line per stack, outermost first, for flamegraph.pl, inferno, speedscope", vr_folded, 0},
    {"html", "one self-contained page: timeline, flame graph, sortable tables", vr_html, 1},
    {"torch", "a pickle in PyTorch's memory snapshot format (one dump), for pytorch.org/memory_viz", vr_torch, 1},
    {NULL, NULL, NULL, 0},
};

const char *vr_moment_name(enum vr_moment at) {
    return at == VR_AT_PEAK ? "peak" : at == VR_AT_OOM ? "oom" : "exit";
}

const char *vr_bytes(uint64_t v, char *buf, size_t size) { return vt_fmt_bytes(v, buf, size); }

const char *vr_plural(uint64_t n, const char *one, const char *many) { return n == 1 ? one : many; }

uint64_t vr_oom_count(const struct vm_dump *d) {
    return d->totals.oom_count > d->nooms ? d->totals.oom_count : d->nooms;
}

struct vr_history_counts vr_history_counts(const struct vm_dump *d) {
    struct vr_history_counts c = {d->event_counts.allocs, d->event_counts.frees, d->event_counts.ooms, 0};
    const struct vm_totals *t = &d->totals;
    if (d->events_dropped == 0 && c.allocs > t->alloc_count && c.frees >= t->free_count &&
        c.allocs - t->alloc_count == c.frees - t->free_count) {
        c.refused_frees = c.allocs - t->alloc_count;
        c.allocs -= c.refused_frees;
        c.frees -= c.refused_frees;
    }
    return c;
}

/* The requests of one size, device and call site (vr_oom_requests). */
struct request_group {
    const struct vm_oom_request *r; /* its first request */
    uint64_t count, first_ns, last_ns;
    char site[2048];
};

static int by_count(const void *a, const void *b) {
    const struct request_group *x = a, *y = b;
    if (x->count != y->count) return x->count < y->count ? 1 : -1;
    return x->first_ns < y->first_ns ? -1 : x->first_ns > y->first_ns;
}

size_t vr_oom_requests(const struct vm_dump *d, int top, void (*line)(void *ctx, const char *text), void *ctx) {
    if (!d->oom_requests) return 0;
    struct request_group *g = calloc(d->noom_requests ? d->noom_requests : 1, sizeof *g);
    if (!g) return 0;
    size_t ng = 0, lines = 0;
    char site[2048], where[1024], req[32], api[256], text[2560], dev[96];
    for (size_t i = 0; i < d->noom_requests; i++) {
        const struct vm_oom_request *r = &d->oom_requests[i];
        vr_safe(vm_site_label(d, r->stack, where, sizeof where), site, sizeof site);
        size_t k = 0;
        while (k < ng && !(g[k].r->requested == r->requested && g[k].r->device == r->device &&
                           strcmp(g[k].site, site) == 0))
            k++;
        if (k == ng) {
            g[ng++] = (struct request_group){r, 0, r->first_ns, r->last_ns, ""};
            memcpy(g[k].site, site, sizeof site);
        }
        g[k].count += r->count;
        if (r->first_ns < g[k].first_ns) g[k].first_ns = r->first_ns;
        if (r->last_ns > g[k].last_ns) g[k].last_ns = r->last_ns;
    }
    qsort(g, ng, sizeof *g, by_count);
    for (size_t k = 0; k < ng && k < (size_t)top; k++, lines++) {
        int n = snprintf(text, sizeof text, "%s by %s%s at %s: ",
                         vr_bytes(g[k].r->requested, req, sizeof req), vr_safe(g[k].r->api, api, sizeof api),
                         vt_oom_where(g[k].r->kind, g[k].r->device, dev, sizeof dev), g[k].site);
        size_t at = n < 0 ? 0 : (size_t)n < sizeof text ? (size_t)n : sizeof text - 1;
        if (g[k].count == 1) snprintf(text + at, sizeof text - at, "once, at %.3f s", (double)g[k].first_ns / 1e9);
        else snprintf(text + at, sizeof text - at, "%" PRIu64 " times, from %.3f s to %.3f s", g[k].count,
                      (double)g[k].first_ns / 1e9, (double)g[k].last_ns / 1e9);
        line(ctx, text);
    }
    uint64_t more = 0;
    for (size_t k = (size_t)top; k < ng; k++) more += g[k].count;
    if (more) {
        snprintf(text, sizeof text, "(%" PRIu64 " more %s of %zu other %s)", more,
                 vr_plural(more, "failure", "failures"), ng - (size_t)top,
                 vr_plural(ng - (size_t)top, "request", "requests"));
        line(ctx, text);
        lines++;
    }
    if (d->oom_requests_other) {
        snprintf(text, sizeof text, "(%" PRIu64 " %s of requests past the library's table, not told apart)",
                 d->oom_requests_other, vr_plural(d->oom_requests_other, "failure", "failures"));
        line(ctx, text);
        lines++;
    }
    free(g);
    return lines;
}

size_t vr_display_char(const char *p, char out[VR_CHAR_MAX + 1]) { return vt_display_char(p, out); }

const char *vr_safe(const char *s, char *buf, size_t size) { return vt_display(s, buf, size); }

void vr_put_safe(FILE *f, const char *s) { vt_put_display(f, s); }

const struct vm_holder *vr_holders_at(const struct vm_dump *d, enum vr_moment at, size_t *n,
                                      int *missing) {
    *missing = 0;
    *n = 0;
    if (at == VR_AT_EXIT) {
        *n = d->nholders;
        return d->holders;
    }
    if (at == VR_AT_PEAK) {
        if (!d->peak_holders) { *missing = 1; return NULL; }
        *n = d->npeak_holders;
        return d->peak_holders;
    }
    if (d->nooms == 0 || !d->ooms[0].have_holders) { *missing = 1; return NULL; }
    if (vr_holders_device(d, at) >= 0) {
        *n = d->ooms[0].ndevice_holders;
        return d->ooms[0].device_holders;
    }
    *n = d->ooms[0].nholders;
    return d->ooms[0].holders;
}

const char *vr_ended(const struct vm_dump *d, char *buf, size_t size) {
    buf[0] = 0;
    if (!d->ended_signal) return buf;
    char sig[64], from[256], e[512];
    vt_fmt_ended_by(vr_safe(d->ended_signal, sig, sizeof sig), d->ended_from_pid, d->pid,
                    d->ended_from ? vr_safe(d->ended_from, from, sizeof from) : NULL, e, sizeof e);
    snprintf(buf, size, ", %s", e);
    return buf;
}

const char *vr_written(const char *reason, char *buf, size_t size) {
    if (reason && strcmp(reason, "signal") == 0) return "on a signal";
    if (reason && strcmp(reason, "named") == 0) return "by vramtrace_dump";
    snprintf(buf, size, "at %s", reason ? reason : "?");
    return buf;
}

int vr_holders_device(const struct vm_dump *d, enum vr_moment at) {
    if (at != VR_AT_OOM || d->nooms == 0 || !d->ooms[0].have_holders || !d->ooms[0].have_device_holders) return -1;
    return d->ooms[0].device >= 0 ? d->ooms[0].device : -1;
}

static int by_rank(const void *a, const void *b) {
    const struct vr_combined *x = a, *y = b;
    return vt_rank_order(x->bytes, x->where, x->stack, y->bytes, y->where, y->stack);
}

/* a + b, held at UINT64_MAX: the sums of a hostile dump stay defined. */
static uint64_t add_sat(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

/* Whether dumps a and b are of one process: the same pid, host and start
 * (and rank: dumps that name two ranks are two processes to compare). */
static int same_process(const struct vm_dump *a, const struct vm_dump *b) {
    return a->pid == b->pid && a->start_unix_ns == b->start_unix_ns && a->rank == b->rank &&
           a->rank_known == b->rank_known &&
           strcmp(a->host ? a->host : "", b->host ? b->host : "") == 0;
}

/* Whether a is written after b: an exit dump after any other, else the
 * later written (its time since the process began). */
static int written_after(const struct vm_dump *a, const struct vm_dump *b) {
    int ax = a->reason && strcmp(a->reason, "exit") == 0, bx = b->reason && strcmp(b->reason, "exit") == 0;
    if (ax != bx) return ax;
    return a->time_ns > b->time_ns;
}

int vr_newest_of_process(const struct vr_input *in, size_t i) {
    for (size_t j = 0; j < in->n; j++)
        if (j != i && same_process(&in->dumps[j], &in->dumps[i]) &&
            (written_after(&in->dumps[j], &in->dumps[i]) ||
             (j > i && !written_after(&in->dumps[i], &in->dumps[j]))))
            return 0;
    return 1;
}

const char *vr_who(const struct vm_dump *d, char *buf, size_t size) {
    char host[256];
    if (d->rank_local)
        snprintf(buf, size, "local rank %d on %s (pid %d)", d->rank, d->host ? vr_safe(d->host, host, sizeof host) : "?",
                 d->pid);
    else if (d->rank_known) snprintf(buf, size, "rank %d (pid %d)", d->rank, d->pid);
    else snprintf(buf, size, "pid %d", d->pid);
    return buf;
}

const char *vr_dump_which(const struct vm_dump *d, char *buf, size_t size) {
    char reason[64];
    vr_safe(d->reason ? d->reason : "?", reason, sizeof reason);
    if (d->dump_number) snprintf(buf, size, "%s %d, %.3f s", reason, d->dump_number, (double)d->time_ns / 1e9);
    else snprintf(buf, size, "%s, %.3f s", reason, (double)d->time_ns / 1e9);
    return buf;
}

int vr_has_sibling(const struct vr_input *in, size_t i) {
    for (size_t j = 0; j < in->n; j++)
        if (j != i && same_process(&in->dumps[j], &in->dumps[i])) return 1;
    return 0;
}

const char *vr_began(const struct vr_input *in, const struct vm_dump *d, char *buf, size_t size) {
    buf[0] = '\0';
    for (size_t k = 0; k < in->n; k++) {
        const struct vm_dump *e = &in->dumps[k];
        if (e->pid != d->pid || e->start_unix_ns == d->start_unix_ns ||
            strcmp(e->host ? e->host : "", d->host ? d->host : "") != 0)
            continue;
        time_t t = (time_t)(d->start_unix_ns / 1000000000u);
        struct tm tm;
        char hms[32];
        strftime(hms, sizeof hms, "%Y-%m-%d %H:%M:%S", gmtime_r(&t, &tm));
        snprintf(buf, size, "begun %s.%03u UTC", hms, (unsigned)(d->start_unix_ns % 1000000000u / 1000000u));
        break;
    }
    return buf;
}

struct placed {
    const struct vm_dump *d;
    size_t group;            /* the first place of a dump of its pid on its host */
    size_t at;
};

/* Processes in the order given (their pid's first dump's place), those
 * of one pid on one host by when each began, a process's dumps by when
 * they were written (written_after), then as given. */
static int by_process_then_dump(const void *a, const void *b) {
    const struct placed *x = a, *y = b;
    if (x->group != y->group) return x->group < y->group ? -1 : 1;
    if (x->d->start_unix_ns != y->d->start_unix_ns) return x->d->start_unix_ns < y->d->start_unix_ns ? -1 : 1;
    if (same_process(x->d, y->d) && written_after(x->d, y->d) != written_after(y->d, x->d))
        return written_after(x->d, y->d) ? 1 : -1;
    return (x->at > y->at) - (x->at < y->at);
}

size_t *vr_dump_order(const struct vr_input *in) {
    size_t *order = malloc((in->n ? in->n : 1) * sizeof *order);
    struct placed *p = malloc((in->n ? in->n : 1) * sizeof *p);
    if (!order || !p) {
        free(order);
        free(p);
        return NULL;
    }
    for (size_t i = 0; i < in->n; i++) {
        const struct vm_dump *d = &in->dumps[i];
        size_t g = 0;
        while (g < i && (in->dumps[g].pid != d->pid ||
                         strcmp(in->dumps[g].host ? in->dumps[g].host : "", d->host ? d->host : "") != 0))
            g++;
        p[i] = (struct placed){d, g, i};
    }
    qsort(p, in->n, sizeof *p, by_process_then_dump);
    for (size_t i = 0; i < in->n; i++) order[i] = p[i].at;
    free(p);
    return order;
}

size_t vr_process_count(const struct vr_input *in) {
    size_t k = 0;
    for (size_t i = 0; i < in->n; i++) k += vr_newest_of_process(in, i);
    return k;
}

/* Holders of every dump grouped by call-site label (common/labels.h, the
 * library's rule): out[g] is group g, `last` the dump that added to it
 * last, so that each dump counts once in `processes`; without `each`, of
 * each process its newest dump alone (vr_newest_of_process); with `each`,
 * every dump, and a row's bytes and count per dump as well. */
static struct vr_combined *combine(const struct vr_input *in, enum vr_moment at, int each, size_t *n) {
    struct vt_labels *groups = vt_labels_new();
    struct vr_combined *out = NULL;
    const struct vm_dump **last = NULL;
    size_t cap = 0, k = 0;
    *n = 0;
    if (!groups) return NULL;
    for (size_t i = 0; i < in->n; i++) {
        const struct vm_dump *d = &in->dumps[i];
        size_t nh;
        int missing;
        /* A process's earlier dumps (an on-demand dump beside its exit
         * dump) hold what its newest holds or held: added once, as the
         * comparison by pid counts them. The diff's columns keep each. */
        if (!each && !vr_newest_of_process(in, i)) continue;
        const struct vm_holder *h = vr_holders_at(d, at, &nh, &missing);
        for (size_t j = 0; j < nh; j++) {
            char where[1024];
            int added;
            uint32_t g = vt_label_group(groups, vm_site_label(d, h[j].stack, where, sizeof where), &added);
            if (g == UINT32_MAX) goto out_of_memory;
            if (g >= cap) {
                size_t more = cap ? cap * 2 : 64;
                struct vr_combined *o = realloc(out, more * sizeof *o);
                if (o) out = o;
                const struct vm_dump **l = o ? realloc(last, more * sizeof *l) : NULL;
                if (l) last = l;
                if (!o || !l) goto out_of_memory;
                cap = more;
            }
            struct vr_combined *c = &out[g];
            if (added) {
                *c = (struct vr_combined){.first = d, .stack = h[j].stack};
                last[g] = NULL;
                k = g + 1;
                if (each && (!(c->bytes_in = calloc(in->n, sizeof *c->bytes_in)) ||
                             !(c->count_in = calloc(in->n, sizeof *c->count_in))))
                    goto out_of_memory;
            }
            c->bytes = add_sat(c->bytes, h[j].bytes);
            c->count = add_sat(c->count, h[j].count);
            if (each) {
                c->bytes_in[i] = add_sat(c->bytes_in[i], h[j].bytes);
                c->count_in[i] = add_sat(c->count_in[i], h[j].count);
            }
            if (last[g] != d) { c->processes++; last[g] = d; }
        }
    }
    if (!out && !(out = calloc(1, sizeof *out))) goto out_of_memory;
    for (size_t g = 0; g < k; g++)
        if (!(out[g].where = strdup(vt_label_of(groups, (uint32_t)g)))) goto out_of_memory;
    vt_labels_free(groups);
    free(last);
    qsort(out, k, sizeof *out, by_rank);
    *n = k;
    return out;
out_of_memory:
    vt_labels_free(groups);
    free(last);
    vr_combined_free(out, k);
    return NULL;
}

/* Stacks by bytes alone, more first, then by stack id: common/labels.h's
 * one order wherever no two hold equal bytes (rank_ties orders the rest). */
static int by_bytes(const void *a, const void *b) {
    const struct vm_holder *x = a, *y = b;
    return vt_rank_order(x->bytes, NULL, x->stack, y->bytes, NULL, y->stack);
}

/* Labels by strcmp, as vt_rank_order compares them: group numbers of ctx. */
static int by_label(const void *a, const void *b, void *ctx) {
    return strcmp(vt_label_of(ctx, *(const uint32_t *)a), vt_label_of(ctx, *(const uint32_t *)b));
}

/* Each group's rank among groups' labels in strcmp order: rank[g] <
 * rank[h] exactly when g's label comes before h's (the labels differ, so
 * no two ranks are equal). A malloc'd array, NULL when out of memory. */
static uint32_t *label_ranks(const struct vt_labels *groups) {
    size_t k = vt_labels_count(groups);
    uint32_t *by = malloc((k ? k : 1) * sizeof *by), *rank = malloc((k ? k : 1) * sizeof *rank);
    if (by && rank) {
        for (size_t i = 0; i < k; i++) by[i] = (uint32_t)i;
        qsort_r(by, k, sizeof *by, by_label, (void *)groups);
        for (size_t i = 0; i < k; i++) rank[by[i]] = (uint32_t)i;
    } else {
        free(rank);
        rank = NULL;
    }
    free(by);
    return rank;
}

/* A holder of a run of equal bytes: its call-site label's rank, its stack
 * and its place in the run, to order the run by label (16 bytes, not a
 * copy of the holder: a run can be every holder). */
struct tied {
    uint32_t rank, stack;
    size_t at;
};

static int by_tie(const void *a, const void *b) {
    const struct tied *x = a, *y = b;
    if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
    if (x->stack != y->stack) return x->stack < y->stack ? -1 : 1;
    return x->at < y->at ? -1 : x->at > y->at;
}

/* Moves h[0..n) so that h[j] becomes what h[t[j].at] was, in place, a
 * cycle at a time (each t[j].at is set to j as its place is filled). */
static void put_in_order(struct vm_holder *h, struct tied *t, size_t n) {
    for (size_t j = 0; j < n; j++) {
        if (t[j].at == j) continue;
        struct vm_holder first = h[j];
        size_t cur = j;
        while (t[cur].at != j) {
            size_t next = t[cur].at;
            h[cur] = h[next];
            t[cur].at = cur;
            cur = next;
        }
        h[cur] = first;
        t[cur].at = cur;
    }
}

/* Sorts the run h[0..n) of equal bytes, in by_bytes order, by its
 * holders' label ranks rank[0..n), then by stack, then as it is. 0, or
 * -1 when out of memory. */
static int rank_run(struct vm_holder *h, const uint32_t *rank, size_t n) {
    size_t j = 1;
    while (j < n && rank[j] == rank[0]) j++;
    if (j == n) return 0; /* one label: by_bytes's order is the order */
    struct tied *t = malloc(n * sizeof *t);
    if (!t) return -1;
    for (j = 0; j < n; j++) t[j] = (struct tied){rank[j], h[j].stack, j};
    qsort(t, n, sizeof *t, by_tie);
    put_in_order(h, t, n);
    free(t);
    return 0;
}

/* h[0..n), in by_bytes order, into common/labels.h's one order: each run
 * of equal bytes by call-site label, then by stack (the order by_bytes
 * left holders of one stack in kept). The label of each holder in such a
 * run is made once, not at each comparison (or its group taken from s
 * where given: vr_holders_ranked_by_site); holders of bytes no other
 * holds need none. 0, or -1 when out of memory. */
static int rank_ties(const struct vm_dump *d, struct vm_holder *h, size_t n, struct vr_sites *s) {
    struct vt_labels *groups = s ? NULL : vt_labels_new();
    uint32_t *group = NULL, *rank = NULL; /* group: of each holder in a run, in h's order */
    size_t m = 0;
    int rc = -1;
    if (!s && !groups) return -1;
    for (size_t i = 0, e; i < n; i = e) {
        for (e = i + 1; e < n && h[e].bytes == h[i].bytes; e++) {}
        if (e - i < 2) continue;
        if (!group && !(group = malloc((n - i) * sizeof *group))) goto out;
        for (size_t j = i; j < e; j++) {
            char where[1024];
            uint32_t g = s ? s->site_of[h[j].stack]
                           : vt_label_group(groups, vm_site_label(d, h[j].stack, where, sizeof where), NULL);
            if (g == UINT32_MAX) goto out;
            group[m++] = g;
        }
    }
    if (m && s && !s->rank && !(s->rank = label_ranks(s->sites))) goto out;
    if (m && !s && !(rank = label_ranks(groups))) goto out;
    const uint32_t *by = s ? s->rank : rank;
    for (size_t k = 0; k < m; k++) group[k] = by[group[k]];
    /* The runs again, in the same order: group[k] is the next holder's. */
    for (size_t i = 0, e, k = 0; i < n; i = e) {
        for (e = i + 1; e < n && h[e].bytes == h[i].bytes; e++) {}
        if (e - i < 2) continue;
        if (rank_run(h + i, group + k, e - i) < 0) goto out;
        k += e - i;
    }
    rc = 0;
out:
    vt_labels_free(groups);
    free(group);
    free(rank);
    return rc;
}

/* A call site's row, to rank the sites as vr_combine does. */
struct site_rank {
    uint64_t bytes;
    const char *label;
    size_t stack;            /* its first stack met, vr_combine's id */
    uint32_t group;
};

static int by_site_rank(const void *a, const void *b) {
    const struct site_rank *x = a, *y = b;
    return vt_rank_order(x->bytes, x->label, x->stack, y->bytes, y->label, y->stack);
}

/* A holder and its call site's group, to sort them together. */
struct grouped_holder {
    struct vm_holder h;
    uint32_t group;
};

/* By common/labels.h's one order, each label's rank (label_ranks) in ctx. */
static int by_grouped_rank(const void *a, const void *b, void *ctx) {
    const struct grouped_holder *x = a, *y = b;
    const uint32_t *rank = ctx;
    if (x->h.bytes != y->h.bytes) return x->h.bytes < y->h.bytes ? 1 : -1;
    if (rank[x->group] != rank[y->group]) return rank[x->group] < rank[y->group] ? -1 : 1;
    return x->h.stack < y->h.stack ? -1 : x->h.stack > y->h.stack;
}

/* Of h[0..n), into out (room for n) in the one order: the holders of the
 * `top` call sites ranked first, as vr_combine groups and ranks them, and
 * of each its `top` largest. Their number, or SIZE_MAX when out of
 * memory. */
static size_t top_sites(const struct vm_dump *d, const struct vm_holder *h, size_t n, size_t top,
                        struct vm_holder *out) {
    struct vt_labels *groups = vt_labels_new();
    struct grouped_holder *g = malloc(n * sizeof *g);
    struct site_rank *s = malloc(n * sizeof *s);
    size_t *room = NULL; /* by group: how many more of its stacks are kept */
    uint32_t *rank = NULL;
    size_t k = 0, kept = SIZE_MAX;
    if (!groups || !g || !s) goto out;
    for (size_t j = 0; j < n; j++) {
        char where[1024];
        int added;
        uint32_t x = vt_label_group(groups, vm_site_label(d, h[j].stack, where, sizeof where), &added);
        if (x == UINT32_MAX) goto out;
        if (added) s[k++] = (struct site_rank){0, NULL, h[j].stack, x};
        s[x].bytes = add_sat(s[x].bytes, h[j].bytes);
        g[j] = (struct grouped_holder){h[j], x};
    }
    for (size_t i = 0; i < k; i++) s[i].label = vt_label_of(groups, s[i].group);
    qsort(s, k, sizeof *s, by_site_rank);
    if (!(room = calloc(k ? k : 1, sizeof *room))) goto out;
    for (size_t i = 0; i < k && i < top; i++) room[s[i].group] = top;
    if (!(rank = label_ranks(groups))) goto out;
    qsort_r(g, n, sizeof *g, by_grouped_rank, rank);
    kept = 0;
    for (size_t j = 0; j < n; j++)
        if (room[g[j].group]) {
            room[g[j].group]--;
            out[kept++] = g[j].h;
        }
out:
    vt_labels_free(groups);
    free(g);
    free(s);
    free(room);
    free(rank);
    return kept;
}

/* vr_holders_ranked's copy of h[0..n) in the one order, every holder;
 * the call sites from s where given. NULL when n is 0 or memory ran out. */
static struct vm_holder *ranked_all(const struct vm_dump *d, const struct vm_holder *h, size_t n,
                                    struct vr_sites *s) {
    struct vm_holder *out = n ? malloc(n * sizeof *out) : NULL;
    if (!out) return NULL;
    memcpy(out, h, n * sizeof *out);
    qsort(out, n, sizeof *out, by_bytes);
    if (rank_ties(d, out, n, s) < 0) {
        free(out);
        return NULL;
    }
    return out;
}

struct vm_holder *vr_holders_ranked_by_site(const struct vm_dump *d, const struct vm_holder *h, size_t n,
                                            struct vr_sites *s) {
    for (size_t j = 0; j < n && s; j++)
        if (h[j].stack >= d->nstacks) s = NULL; /* a stack the dump lacks: its label made here */
    return ranked_all(d, h, n, s);
}

void vr_sites_free(struct vr_sites *s) {
    free(s->rank);
    s->rank = NULL;
}

struct vm_holder *vr_holders_ranked(const struct vm_dump *d, const struct vm_holder *h, size_t n, size_t top,
                                    size_t *nout, size_t *left) {
    *nout = 0;
    *left = 0;
    if (!top) {
        struct vm_holder *out = ranked_all(d, h, n, NULL);
        *nout = out ? n : 0;
        return out;
    }
    struct vm_holder *out = n ? malloc(n * sizeof *out) : NULL;
    if (!out) return NULL;
    size_t k = top_sites(d, h, n, top, out);
    if (k == SIZE_MAX) {
        free(out);
        return NULL;
    }
    *nout = k;
    *left = n - k;
    return out;
}

struct vr_combined *vr_combine(const struct vr_input *in, enum vr_moment at, size_t *n) {
    return combine(in, at, 0, n);
}

struct vr_combined *vr_combine_each(const struct vr_input *in, enum vr_moment at, size_t *n) {
    return combine(in, at, 1, n);
}

void vr_combined_free(struct vr_combined *c, size_t n) {
    for (size_t i = 0; c && i < n; i++) {
        free(c[i].where);
        free(c[i].bytes_in);
        free(c[i].count_in);
    }
    free(c);
}
