/* postmortem.c -- the human post-mortem and exit summary. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "../common/display.h"
#include "../common/format.h"
#include "../common/oomtext.h"
#include "../common/summary.h"
#include "../common/warn.h"
#include "analysis.h"
#include "place.h"
#include "postmortem.h"

#define B(v, buf) vt_fmt_bytes((v), (buf), sizeof(buf))

/* The shapes of common/summary.h filled from the snapshot, its symbols and
 * its analysis: one context for the row functions. */
struct view {
    const struct vt_snapshot *s;
    const struct vt_symbols *sym;
    const struct vt_analysis *an;
    struct vt_live_reader *live; /* the live list, for live_row */
    int device;                  /* the rows of this device only; -1: all */
    const char *holders_when;    /* NULL: the holders are of the report's */
    const char *live_when;       /* moment; else when they are of (LATER) */
    int host;                    /* the rows of pinned host memory only */
};

/* The moment of a post-mortem's table that is not the failure's: the
 * snapshot's, where other threads allocated or freed in between. */
#define LATER "when this report was written, not at the failure"

/* The holders a view shows: the failing device's at a failure of a
 * process that holds memory on other devices too, else every device's. */
static const struct vt_holder *shown_holders(const struct view *v, size_t *n) {
    int own = v->device >= 0 || (v->host && v->an->per_device);
    *n = own ? v->an->ndevice_by_site : v->an->nby_site;
    return own ? v->an->device_by_site : v->an->by_site;
}

static void holder_row(const void *ctx, size_t i, struct vt_holder_row *r) {
    const struct view *v = ctx;
    size_t n;
    const struct vt_holder *h = &shown_holders(v, &n)[i];
    r->bytes = h->bytes;
    r->count = h->count;
    vt_site_shown(v->sym, h->stack, r->site, sizeof r->site);
}

/* Percentages of what the rows hold together, as `vramtrace report` takes
 * them from the dump's holders. */
static void holders_table(FILE *f, const struct view *v, int top) {
    uint64_t total = 0;
    size_t n;
    const struct vt_holder *by_site = shown_holders(v, &n);
    for (size_t i = 0; i < n; i++) total += by_site[i].bytes;
    char title[160], none[64], of[64] = "";
    if (v->host) snprintf(of, sizeof of, " of pinned host memory");
    else if (v->device >= 0) snprintf(of, sizeof of, " of device %d's memory", v->device);
    const char *when = v->holders_when;
    snprintf(title, sizeof title, "largest holders%s%s%s%s", of, when ? " " : "", when ? when : "", when ? "," : "");
    if (v->host) snprintf(none, sizeof none, "no pinned host memory is live");
    else snprintf(none, sizeof none, "nothing of device %d's is live", v->device);
    int own = v->device >= 0 || v->host;
    struct vt_holders_text h = {.title = own || v->holders_when ? title : NULL, .none = own ? none : NULL, .n = n,
                                .total = total, .row = holder_row, .ctx = v};
    vt_put_holders(f, "vramtrace: ", &h, (size_t)top, vt_put_display);
}

/* Row i of the live table: vt_put_live asks for the rows in turn, from
 * 0, so row i is the reader's next record. */
static int live_row(const void *ctx, size_t i, struct vt_live_row *r) {
    const struct view *v = ctx;
    const struct vt_live *a = vt_live_next(v->live);
    if (!a || (v->host ? !vt_kind_is_host(a->kind)
                       : !vt_kind_owned_device(a->kind) || (v->device >= 0 && a->device != v->device)))
        return 0;
    r->bytes = a->bytes;
    uint64_t mapped = vt_live_mapped(v->s, a);
    r->address = a->kind == VT_KIND_VMM && mapped ? mapped : a->address;
    r->time_ns = a->time_ns;
    r->device = a->device;
    snprintf(r->kind, sizeof r->kind, "%s", vt_kind_name(a->kind));
    snprintf(r->api, sizeof r->api, "%s", vt_live_api(v->s, a));
    vt_site_shown(v->sym, a->stack, r->site, sizeof r->site);
    return 1;
}

static void live_table(FILE *f, const struct view *v, int top) {
    struct view w = *v;
    w.live = vt_live_read(v->s, 1);
    uint64_t live = v->host ? v->s->totals.host_live_count
                    : v->device >= 0 && v->device < v->s->ndevices ? v->s->devices[v->device].live_count
                                                                   : v->s->totals.live_count;
    struct vt_live_text l = {.moment = v->live_when, .n = w.live ? v->s->nlive : 0, .live = live, .row = live_row,
                             .ctx = &w};
    vt_put_live(f, "vramtrace: ", &l, (size_t)top);
    vt_live_read_end(w.live);
}

static void growth_row(const void *ctx, size_t i, struct vt_growth_row *r) {
    const struct view *v = ctx;
    const struct vt_growth *g = &v->an->growth[i];
    vt_site_shown(v->sym, g->stack, r->site, sizeof r->site);
    r->first_bytes = g->first_floor;
    r->end_bytes = g->end_bytes;
    r->cache_bytes = g->cache_bytes;
    vt_growth_text(g, r->rate, sizeof r->rate);
}

/* A device as the dump names it: its name and uuid only where they were
 * read (have_facts). */
static int device_row(const void *ctx, size_t i, struct vt_device_row *r) {
    const struct view *v = ctx;
    const struct vt_device *d = &v->s->devices[i];
    if (!d->used) return 0;
    r->ordinal = (int)i;
    vt_display(d->have_facts ? d->name : "?", r->name, sizeof r->name);
    vt_utf8_whole(r->name, sizeof r->name);
    snprintf(r->uuid, sizeof r->uuid, "%s", d->have_facts && d->uuid[0] ? d->uuid : "?");
    r->total_bytes = d->total_bytes;
    VT_COPY_COUNTERS(r, d);
    return 1;
}

static const struct vt_device *dev(const struct vt_snapshot *s, int d) {
    return d >= 0 && d < s->ndevices ? &s->devices[d] : NULL;
}

/* What the numbers at this failure say, most likely first. */
static void findings(FILE *f, const struct vt_analysis *an) {
    const struct vt_oom_findings *fs = an->latest;
    if (!fs || fs->n == 0) return;
    fputs("vramtrace: " VT_FINDINGS_HEADING "\n", f);
    for (int i = 0; i < fs->n; i++)
        vt_put_finding(f, "vramtrace: ", i + 1, fs->f[i].text, fs->f[i].next, vt_put_display);
}

/* Calls passed through unrecorded (totals.missed), one line when any. */
static void missed_line(FILE *f, uint64_t missed) {
    char line[160];
    if (vt_fmt_missed(missed, line, sizeof line)) fprintf(f, "vramtrace:   %s\n", line);
}

static void header(FILE *f, const char *what, const struct vt_dump_meta *m) {
    fprintf(f, "vramtrace: %s in pid %d", what, m->pid);
    if (m->argc > 0) {
        fputs(" (", f);
        vt_put_display(f, m->argv[0]);
        fputc(')', f);
    }
    /* In a job of several ranks, which one: their reports share a log,
     * and every rank's command is the same (place.h). */
    char place[1200];
    if (*vt_job_place_of(m, place, sizeof place)) fprintf(f, ", %s", place);
    if (m->ended_signal) {
        char e[512];
        fputs(", ", f);
        vt_put_display(f, vt_fmt_ended_by(m->ended_signal, m->ended_from_pid, m->pid, m->ended_from, e, sizeof e));
    }
    fputc('\n', f);
}

/* A failure's request and the device's state then (vt_put_oom's lines). */
static void oom_lines(FILE *f, const struct vt_snapshot *s, const struct vt_symbols *sym, const struct vt_oom *o) {
    const struct vt_device *d = dev(s, o->device);
    char site[512], procs[VT_MAX_PROCS * 96], procs_shown[sizeof procs], name[256];
    vt_site_shown(sym, o->stack, site, sizeof site);
    int facts = d && d->have_facts;
    struct vt_oom_text t = {
        .requested = o->requested, .api = o->api, .host = vt_host_memory_label(vt_kind_name(o->kind)),
        .device = o->device, .budget = o->budget, .device_name = facts ? vt_display(d->name, name, sizeof name) : NULL,
        .device_uuid = facts ? d->uuid : NULL, .site = site, .have_info = o->have_info,
        .free_bytes = o->free_bytes, .total_bytes = o->total_bytes, .live_bytes = o->live_bytes,
        .raised_allocated = o->raised_allocated, .requested_rounded = o->requested_rounded,
        .graph_reserved = o->graph_reserved, .graph_used = o->graph_used,
        .pool_reserved = o->pool_reserved, .pool_used = o->pool_used,
        .taken_bytes = o->taken_bytes, .taken_count = o->taken_count,
        /* The device's counts at the failure, kept with it (the dump's). */
        .tracked = d && o->have_counts ? VT_TRACKED_COUNTS : d ? VT_TRACKED_BYTES : VT_TRACKED_NONE,
        .device_live_count = o->live_count, .device_peak_bytes = o->peak_bytes,
        .device_peak_time_ns = o->peak_time_ns,
        .procs = o->procs ? vt_display(vt_procs_text(o->procs, o->nprocs, procs, sizeof procs), procs_shown,
                                       sizeof procs_shown) : NULL,
        .nprocs = o->nprocs,
        .time_ns = o->time_ns, .start_unix_ns = s->start_unix_ns,
        .step = vt_step_at(o->time_ns, s->steps, s->nsteps, sizeof *s->steps, offsetof(struct vt_step, step),
                           offsetof(struct vt_step, time_ns), s->steps_total),
    };
    vt_put_oom(f, "vramtrace:   ", &t);
}

/* The failures numbered after told->failures and before `upto` (the
 * failure told in full) that no post-mortem told, a line for each
 * request, device and call site, with how many times it failed (a loop's
 * failures, a caching allocator's retry), the first few; leaving out
 * those that repeat `skip_a` or `skip_b` once or twice on its thread (a
 * failure told already, whose retries are told with it). The counts are the requests' (s's
 * oom_requests, less their counts when the last post-mortem was written
 * and the failure `upto`): exact however many failures the history did
 * not keep. Each line names the first failure of its group in that
 * range, from the records kept or its request's first; where neither has
 * it, the latest known ("last at"). Returns how many lines it wrote (f
 * NULL: would write). */
#define UNTOLD_SHOWN 5
#define UNTOLD_GROUPS 64
struct untold_group {
    const struct vt_oom_request *r; /* its first request */
    uint64_t count;
    char site[512];
};

static int same_failure(const struct vt_oom *a, const char *asite, const struct vt_oom *b, const char *bsite) {
    return a->requested == b->requested && a->device == b->device && strcmp(asite, bsite) == 0;
}

static int same_request(const struct vt_oom_request *r, const struct vt_oom *o) {
    return r->requested == o->requested && r->stack == o->stack && r->device == o->device && r->kind == o->kind &&
           r->api == o->api;
}

/* The entry of s->oom_requests that counts failure o, or -1 (the table
 * was full: counted among the others). */
static ptrdiff_t request_of(const struct vt_snapshot *s, const struct vt_oom *o) {
    for (size_t i = 0; i < s->noom_requests; i++)
        if (same_request(&s->oom_requests[i], o)) return (ptrdiff_t)i;
    return -1;
}

/* Failures of request i of s in the range untold_lines counts. */
static uint64_t in_range(const struct vt_snapshot *s, size_t i, const struct vt_oom_told *told, ptrdiff_t at_upto) {
    uint64_t before = told && i < told->ncounts ? told->counts[i] : 0, n = s->oom_requests[i].count;
    n = n > before ? n - before : 0;
    return (ptrdiff_t)i == at_upto && n ? n - 1 : n;
}

static int in_group(const struct vt_symbols *sym, const struct untold_group *g, uint64_t requested, int device,
                    uint32_t stack) {
    char site[512];
    return requested == g->r->requested && device == g->r->device &&
           strcmp(vt_site_shown(sym, stack, site, sizeof site), g->site) == 0;
}

/* The failure of group g to name: its first in the range (from, upto),
 * else the latest known there (*last set). Returns 0 when none is
 * known. */
static int untold_when(const struct vt_snapshot *s, const struct vt_symbols *sym, const struct untold_group *g,
                       const struct vt_oom_told *told, ptrdiff_t at_upto, uint64_t upto, int32_t *thread,
                       uint64_t *time_ns, int *last) {
    uint64_t from = told ? told->failures : 0;
    *last = 0;
    /* The records by number, while they follow one another from the
     * range's start: past a gap, one found need not be the first. */
    uint64_t expect = from + 1;
    for (size_t i = 0; i < s->nooms && expect < upto; i++) {
        const struct vt_oom *o = &s->ooms[i];
        if (o->number < expect) continue;
        if (o->number != expect++) break;
        if (!in_group(sym, g, o->requested, o->device, o->stack)) continue;
        *thread = o->thread;
        *time_ns = o->time_ns;
        return 1;
    }
    /* Its requests' first failures, when each of them that failed in the
     * range failed there first: the earliest. */
    int found = 0, whole = 1;
    uint64_t best = 0;
    for (size_t i = 0; whole && i < s->noom_requests; i++) {
        const struct vt_oom_request *r = &s->oom_requests[i];
        if (!in_range(s, i, told, at_upto) || !in_group(sym, g, r->requested, r->device, r->stack)) continue;
        if (r->first_number <= from) whole = 0;
        else if (!found || r->first_number < best) {
            found = 1;
            best = r->first_number;
            *thread = r->first_thread;
            *time_ns = r->first_ns;
        }
    }
    if (found && whole) return 1;
    /* Else the latest known: its requests' last failures in the range, or
     * a later record kept. */
    found = 0;
    for (size_t i = 0; i < s->noom_requests; i++) {
        const struct vt_oom_request *r = &s->oom_requests[i];
        if (r->last_number <= from || r->last_number >= upto || (found && r->last_number <= best) ||
            !in_range(s, i, told, at_upto) || !in_group(sym, g, r->requested, r->device, r->stack))
            continue;
        found = 1;
        best = r->last_number;
        *thread = r->last_thread;
        *time_ns = r->last_ns;
    }
    for (size_t i = s->nooms; i-- > 0;) {
        const struct vt_oom *o = &s->ooms[i];
        if (o->number >= upto) continue;
        if (o->number <= from || (found && o->number <= best)) break;
        if (!in_group(sym, g, o->requested, o->device, o->stack)) continue;
        found = 1;
        *thread = o->thread;
        *time_ns = o->time_ns;
        break;
    }
    *last = found;
    return found;
}

static int untold_lines(FILE *f, const struct vt_snapshot *s, const struct vt_symbols *sym,
                        const struct vt_oom_told *told, const struct vt_oom *upto, int upto_told,
                        const struct vt_oom *skip_a, const struct vt_oom *skip_b) {
    uint64_t from = told ? told->failures : 0;
    if (!upto || upto->number <= from + (upto_told ? 1 : 0)) return 0;
    /* The range ends before `upto` when it is told in full, else with it. */
    uint64_t end = upto->number + (upto_told ? 0 : 1);
    char site_a[512] = "", site_b[512] = "", site[512];
    if (skip_a) vt_site_shown(sym, skip_a->stack, site_a, sizeof site_a);
    if (skip_b) vt_site_shown(sym, skip_b->stack, site_b, sizeof site_b);
    struct untold_group *g = calloc(UNTOLD_GROUPS, sizeof *g);
    size_t ng = 0;
    ptrdiff_t at_upto = upto_told ? request_of(s, upto) : -1;
    uint64_t ungrouped = 0;
    for (size_t i = 0; g && i < s->noom_requests; i++) {
        const struct vt_oom_request *r = &s->oom_requests[i];
        uint64_t n = in_range(s, i, told, at_upto);
        if (!n) continue;
        vt_site_shown(sym, r->stack, site, sizeof site);
        struct vt_oom o = {.requested = r->requested, .device = r->device};
        /* A retry is a failure or two more on the failing thread: another
         * thread's, or thousands, are told (2,000 failures of another
         * thread went unsaid under "failures so far: 7001"). */
        if (n <= 2 && ((skip_a && same_failure(&o, site, skip_a, site_a) && r->first_thread == skip_a->thread &&
                        r->last_thread == skip_a->thread) ||
                       (skip_b && same_failure(&o, site, skip_b, site_b) && r->first_thread == skip_b->thread &&
                        r->last_thread == skip_b->thread)))
            continue;
        size_t k = 0;
        while (k < ng && !(g[k].r->requested == r->requested && g[k].r->device == r->device &&
                           strcmp(g[k].site, site) == 0))
            k++;
        if (k < ng) {
            g[k].count += n;
        } else if (ng < UNTOLD_GROUPS) {
            g[ng].r = r;
            g[ng].count = n;
            memcpy(g[ng].site, site, sizeof site);
            ng++;
        } else {
            ungrouped += n;
        }
    }
    /* Failures of requests past the table: counted, not told apart. */
    uint64_t other_before = told ? told->other : 0;
    if (g && s->oom_requests_other > other_before)
        ungrouped += s->oom_requests_other - other_before - (upto_told && at_upto < 0 ? 1 : 0);
    int lines = 0;
    uint64_t more = ungrouped;
    for (size_t k = 0; k < ng; k++) {
        if (k >= UNTOLD_SHOWN) {
            more += g[k].count;
            continue;
        }
        lines++;
        if (!f) continue;
        const struct vt_oom_request *r = g[k].r;
        char req[32], at[32], dev[96];
        int32_t thread = 0;
        uint64_t time_ns = 0;
        int last = 0;
        fprintf(f, "vramtrace:   also failed, without a post-mortem of its own: %s by %s%s at %s",
                vt_fmt_bytes(r->requested, req, sizeof req), r->api ? r->api : "?",
                vt_oom_where(vt_kind_name(r->kind), r->device, dev, sizeof dev), g[k].site);
        if (untold_when(s, sym, &g[k], told, at_upto, end, &thread, &time_ns, &last))
            fprintf(f, ", thread %d, %sat %s", thread, last ? "last " : "", vt_fmt_secs_cell(time_ns, at, sizeof at));
        if (g[k].count > 1) fprintf(f, ", %" PRIu64 " times", g[k].count);
        fputc('\n', f);
    }
    if (more) {
        lines++;
        if (f) fprintf(f, "vramtrace:   and %" PRIu64 " more failure%s without a post-mortem of %s own\n", more,
                       more == 1 ? "" : "s", more == 1 ? "its" : "their");
    }
    free(g);
    return lines;
}

/* The failure the last post-mortem told (its request), when one was. */
static const struct vt_oom *told_failure(const struct vt_oom_told *told) {
    return told && told->postmortems && told->have_last ? &told->last : NULL;
}

/* The latest failure, when its record is there (the newest are kept; a
 * snapshot that could not copy its records has none). */
static const struct vt_oom *latest(const struct vt_snapshot *s) {
    return s->nooms && s->ooms[s->nooms - 1].number == s->totals.oom_count ? &s->ooms[s->nooms - 1] : NULL;
}

void vt_postmortem_told_now(struct vt_oom_told *t, const struct vt_snapshot *s) {
    t->postmortems++;
    t->failures = s->totals.oom_count;
    const struct vt_oom *o = latest(s);
    t->have_last = o != NULL;
    if (o) {
        t->last = *o;
        t->last.holders = t->last.device_holders = NULL;
        t->last.procs = NULL;
        t->last.nholders = t->last.ndevice_holders = t->last.nprocs = 0;
    }
    uint64_t *c = malloc((s->noom_requests ? s->noom_requests : 1) * sizeof *c);
    free(t->counts);
    t->counts = c;
    t->ncounts = c ? s->noom_requests : 0;
    for (size_t i = 0; i < t->ncounts; i++) c[i] = s->oom_requests[i].count;
    t->other = s->oom_requests_other;
    if (!c) vt_records_lost("the counts of the failures told");
}

void vt_postmortem_told_reset(struct vt_oom_told *t) {
    free(t->counts);
    *t = (struct vt_oom_told){0};
}

int vt_postmortem_upto(struct vt_snapshot *s, uint64_t number) {
    size_t j = s->nooms;
    while (j > 0 && s->ooms[j - 1].number > number) j--;
    if (!j || s->ooms[j - 1].number != number || s->nooms - j != s->totals.oom_count - number) return 0;
    for (size_t i = j; i < s->nooms; i++) {
        ptrdiff_t r = request_of(s, &s->ooms[i]);
        if (r >= 0 && s->oom_requests[r].count) s->oom_requests[r].count--;
        else if (r < 0 && s->oom_requests_other) s->oom_requests_other--;
    }
    /* A request whose last failure was left out: its latest kept before,
     * else (rare: two threads failing past the records kept) its first. */
    for (size_t i = 0; i < s->noom_requests; i++) {
        struct vt_oom_request *r = &s->oom_requests[i];
        if (r->last_number <= number || !r->count) continue;
        size_t k = j;
        while (k > 0 && !same_request(r, &s->ooms[k - 1])) k--;
        const struct vt_oom *o = k ? &s->ooms[k - 1] : NULL;
        r->last_number = o ? o->number : r->first_number;
        r->last_ns = o ? o->time_ns : r->first_ns;
        r->last_thread = o ? o->thread : r->first_thread;
    }
    s->nooms = j;
    s->totals.oom_count = number;
    return 1;
}

void vt_postmortem_oom(FILE *f, const struct vt_snapshot *s, const struct vt_symbols *sym,
                       const struct vt_analysis *an, const struct vt_dump_meta *m, const char *dump_path,
                       int top, const struct vt_oom_told *told) {
    if (s->nooms == 0) return;
    header(f, "out of memory", m);
    oom_lines(f, s, sym, &s->ooms[s->nooms - 1]);
    if (s->totals.oom_count > 1)
        fprintf(f, "vramtrace:   out-of-memory failures so far: %" PRIu64 "\n", s->totals.oom_count);
    untold_lines(f, s, sym, told, &s->ooms[s->nooms - 1], 1, told_failure(told), &s->ooms[s->nooms - 1]);
    missed_line(f, s->totals.missed);
    /* Of the failure, as its lines above and its findings: where the
     * snapshot's live list is of a later moment, it says so. */
    struct view v = {s, sym, an, NULL, an->per_device && !an->host ? an->device : -1, an->sites_then ? NULL : LATER,
                     an->live_then ? NULL : LATER, an->host};
    holders_table(f, &v, top);
    live_table(f, &v, top);
    findings(f, an);
    if (dump_path) { /* a newline in the path would split the line launchers wait for */
        fputs("vramtrace: dump: ", f);
        vt_put_display(f, dump_path);
        fputc('\n', f);
    }
    fflush(f);
}

int vt_postmortem_told(const struct vt_snapshot *s, const struct vt_symbols *sym, const struct vt_oom_told *told) {
    const struct vt_oom *last = latest(s), *reported = told_failure(told);
    if (!told->postmortems || !last) return 0;
    if (told->failures == s->totals.oom_count) return 1;
    if (!told->failures || !reported) return 0;
    char a[512], b[512];
    return reported->requested == last->requested && reported->device == last->device &&
           strcmp(vt_site_shown(sym, reported->stack, a, sizeof a), vt_site_shown(sym, last->stack, b, sizeof b)) == 0;
}

/* The last failure had no post-mortem of its own: the pace of post-mortems
 * (one a second) left it without one, and it did not ask what the failure
 * reported asked, from the same call site (a caching allocator's retry). */
static int untold(const struct vt_snapshot *s, const struct vt_symbols *sym, const struct vt_oom_told *told) {
    return told->postmortems && s->totals.oom_count > told->failures && !vt_postmortem_told(s, sym, told);
}

/* That failure, often the one that ended the program after failures it
 * caught (a batch-size search): its request, the device then and its
 * findings, from its record. */
/* The failures before the last that no post-mortem told (after the last
 * post-mortem's; its retries left out). */
static int untold_others(FILE *f, const struct vt_snapshot *s, const struct vt_symbols *sym,
                         const struct vt_oom_told *told) {
    if (!told->postmortems || told->failures >= s->totals.oom_count) return 0;
    /* The last is told in full after these when no post-mortem told its
     * request; else it is one of them (a repeat of the request told). */
    return untold_lines(f, s, sym, told, latest(s), untold(s, sym, told), told_failure(told), NULL);
}

static void untold_last(FILE *f, const struct vt_snapshot *s, const struct vt_symbols *sym,
                        const struct vt_analysis *an, const struct vt_oom_told *told) {
    untold_others(f, s, sym, told);
    if (!untold(s, sym, told)) return;
    const struct vt_totals *t = &s->totals;
    fprintf(f, "vramtrace: out-of-memory failure #%" PRIu64 ", the last, had no post-mortem of its own (at most one "
               "a second is written; %" PRIu64 " of %" PRIu64 " failures got one)", t->oom_count,
            told->postmortems, t->oom_count);
    if (latest(s)) { /* always kept, but for want of memory */
        fputs(":\n", f);
        oom_lines(f, s, sym, latest(s));
        findings(f, an);
    } else {
        fputs("; its record was lost\n", f);
    }
}

void vt_postmortem_exit(FILE *f, const struct vt_snapshot *s, const struct vt_symbols *sym,
                        const struct vt_analysis *an, const struct vt_dump_meta *m, const char *dump_path,
                        int top, const struct vt_oom_told *told) {
    const struct vt_totals *t = &s->totals;
    struct vt_totals_text tt = {
        .moment = "exit", .live_bytes = t->live_bytes, .live_count = t->live_count, .peak_bytes = t->peak_bytes,
        .peak_time_ns = t->peak_time_ns, .alloc_count = t->alloc_count, .free_count = t->free_count,
        .failed_count = t->failed_count, .oom_count = t->oom_count, .missed = t->missed,
        .host_live_bytes = t->host_live_bytes, .host_live_count = t->host_live_count,
        .host_peak_bytes = t->host_peak_bytes, .imported_live_bytes = t->imported_live_bytes,
        .imported_live_count = t->imported_live_count, .records_lost = vt_records_lost_count(),
        .events_dropped_while_read = s->events_dropped_while_read,
        .oom_survived = an ? an->oom_survived : 0,
    };
    for (size_t i = 0; i < s->nreleased; i++) {
        tt.released_bytes += s->released[i].bytes;
        tt.released_count += s->released[i].count;
    }
    for (size_t i = 0; i < s->nreleased_host; i++) {
        tt.released_host_bytes += s->released_host[i].bytes;
        tt.released_host_count += s->released_host[i].count;
    }
    header(f, "exit", m);
    vt_put_totals(f, "vramtrace: ", &tt);
    struct view v = {s, sym, an, NULL, -1, NULL, NULL, 0};
    struct vt_devices_text dt = {.n = (size_t)s->ndevices, .row = device_row, .ctx = &v};
    vt_put_devices(f, "vramtrace: ", &dt);
    holders_table(f, &v, top);
    struct vt_growing_text g = {.n = an->ngrowth, .row = growth_row, .ctx = &v};
    vt_put_growing(f, "vramtrace: ", &g, (size_t)top);
    untold_last(f, s, sym, an, told);
    if (dump_path) { /* a newline in the path would split the line launchers wait for */
        fputs("vramtrace: dump: ", f);
        vt_put_display(f, dump_path);
        fputc('\n', f);
    }
    fflush(f);
}

void vt_postmortem_exit_brief(FILE *f, const struct vt_snapshot *s, const struct vt_symbols *sym,
                              const struct vt_analysis *an, const struct vt_dump_meta *m,
                              const struct vt_oom_told *told) {
    if (!m->ended_signal && !untold(s, sym, told) && !untold_others(NULL, s, sym, told)) return;
    header(f, "exit", m);
    untold_last(f, s, sym, an, told);
    fflush(f);
}
