/* fleet.c -- many ranks at once (fleet.h). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "../common/labels.h"
#include "fleet.h"

static int by_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static int by_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* A sorted list of ranks as ranges: "0-255, 300". At most `most` ranges
 * are written, then ", ..." */
static void put_ranges(FILE *f, const int *r, size_t n, int most) {
    int shown = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j + 1 < n && r[j + 1] == r[j] + 1) j++;
        if (shown++ == most) { fputs(", ...", f); return; }
        if (j == i) fprintf(f, "%s%d", i ? ", " : "", r[i]);
        else fprintf(f, "%s%d-%d", i ? ", " : "", r[i], r[j]);
        i = j + 1;
    }
}

/* The ranks from 0 up to r[n - 1] that sorted, distinct r[0..n) lacks,
 * as put_ranges writes them (at most `most` ranges, then ", ..."). */
static void put_gaps(FILE *f, const int *r, size_t n, int most) {
    int shown = 0;
    long long next = 0; /* the lowest rank not yet passed */
    for (size_t k = 0; k < n; k++) {
        if (r[k] < next) continue;
        if (r[k] > next) {
            if (shown++ == most) { fputs(", ...", f); return; }
            if (r[k] - 1 == next) fprintf(f, "%s%lld", shown > 1 ? ", " : "", next);
            else fprintf(f, "%s%lld-%d", shown > 1 ? ", " : "", next, r[k] - 1);
        }
        next = (long long)r[k] + 1;
    }
}

/* The dumps are compared by process, not by rank, where some dump says no
 * launcher gave its process a rank (rank_known false: the workers of
 * torch.multiprocessing.spawn all read rank 0, and one "rank" of four
 * processes made nothing differ across them), or only a local rank (two
 * hosts' local rank 0 are two processes of the job, not one rank with two
 * dumps, and the job's other ranks are not missing). */
static int by_pid(const struct vr_input *in) {
    for (size_t i = 0; i < in->n; i++)
        if (!in->dumps[i].rank_known || in->dumps[i].rank_local) return 1;
    return 0;
}

/* What the comparison counts a dump under: its rank, or its pid. */
static int unit_of(const struct vm_dump *d, int procs) { return procs ? d->pid : d->rank; }

/* One call site across the ranks: the bytes it holds on each rank that
 * holds some, and which ranks those are. */
struct site {
    uint64_t min, max, sum;
    int max_rank;          /* the (first) rank that holds max there */
    size_t max_ranks;      /* how many ranks hold max there */
    int *ranks;
    size_t nranks, cap;
    uint64_t in_dump;      /* in the dump being read */
    size_t cur_dump;       /* that dump's index + 1, 0 for none */
    uint64_t cur;          /* in the rank being read: the most of its dumps' */
    size_t cur_rank;       /* that rank's place among the ranks + 1, 0 for none */
};

static int add_rank(struct site *s, int rank, uint64_t bytes) {
    if (s->nranks == s->cap) {
        size_t want = s->cap ? s->cap * 2 : 8;
        int *r = realloc(s->ranks, want * sizeof *r);
        if (!r) return -1;
        s->ranks = r;
        s->cap = want;
    }
    s->ranks[s->nranks++] = rank;
    if (s->nranks == 1 || bytes < s->min) s->min = bytes;
    if (s->nranks == 1 || bytes > s->max) s->max = bytes, s->max_rank = rank, s->max_ranks = 1;
    else if (bytes == s->max) s->max_ranks++;
    s->sum = s->sum > UINT64_MAX - bytes ? UINT64_MAX : s->sum + bytes;
    return 0;
}

struct order { size_t g; uint64_t spread; };
static int by_spread(const void *a, const void *b) {
    const struct order *x = a, *y = b;
    if (x->spread != y->spread) return x->spread < y->spread ? 1 : -1;
    return (x->g > y->g) - (x->g < y->g);
}

/* The call sites whose bytes differ across the ranks (held on some ranks
 * only, or in other amounts), grouped as the report groups them: by
 * vm_site_label through common/labels.h's vt_label_group, each dump's sum
 * at a site counted as one rank. It does not go through vr_combine_each
 * because that keeps, for every site, a bytes and a count for every dump
 * (16 bytes times the number of dumps): over 512 ranks whose sites are
 * mostly their own (held on few ranks each) that is 8 KiB per site where
 * this keeps one int per rank that holds it, and the rows it returns are
 * in the report's order, not in the order first seen that breaks ties of
 * spread here. */
static const struct vr_input *by_rank_in;
static int by_rank_procs;
static int by_dump_rank(const void *a, const void *b) {
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    int rx = unit_of(&by_rank_in->dumps[x], by_rank_procs), ry = unit_of(&by_rank_in->dumps[y], by_rank_procs);
    if (rx != ry) return rx < ry ? -1 : 1;
    return (x > y) - (x < y);
}

static void differing(FILE *f, const struct vr_input *in, const struct vr_opts *o, int procs) {
    struct vt_labels *labels = vt_labels_new();
    struct site *sites = NULL;
    size_t cap = 0, ntouched = 0, touched_cap = 0, rank_at = 1;
    uint32_t *touched = NULL; /* the groups this rank holds at, each once: not every group seen so far */
    /* The dumps by rank: a rank with several dumps (restarts, named dumps)
     * is one rank, holding at a site the most any of its dumps held. */
    size_t *order = malloc(in->n * sizeof *order);
    /* The ranks none of whose dumps has holders at the moment (--at oom: a
     * rank without a failure): left out of the comparison, not counted as
     * holding nothing. */
    int *none = malloc(in->n * sizeof *none);
    size_t nnone = 0, nranks = 0;
    int unit_has = 0;
    if (!labels || !order || !none) { free(order); free(none); vt_labels_free(labels); return; }
    for (size_t i = 0; i < in->n; i++) order[i] = i;
    by_rank_in = in;
    by_rank_procs = procs;
    qsort(order, in->n, sizeof *order, by_dump_rank);
    for (size_t oi = 0; oi < in->n; oi++) {
        size_t i = order[oi];
        const struct vm_dump *d = &in->dumps[i];
        size_t nh;
        int missing;
        /* A process's earlier dumps (on-demand, named) hold what its newest
         * holds or held (its failures and peak too): the newest alone, as
         * the holders combined take it (a site freed before exit was
         * named as differing "at exit" from an on-demand dump). */
        const struct vm_holder *h = NULL;
        nh = 0;
        missing = 1;
        if (vr_newest_of_process(in, i)) h = vr_holders_at(d, o->at, &nh, &missing);
        if (!missing) unit_has = 1;
        for (size_t j = 0; j < nh; j++) {
            char where[1024];
            uint32_t g = vt_label_group(labels, vm_site_label(d, h[j].stack, where, sizeof where), NULL);
            if (g == UINT32_MAX) goto done;
            if (g >= cap) {
                size_t want = cap ? cap * 2 : 64;
                while (want <= g) want *= 2;
                struct site *more = realloc(sites, want * sizeof *more);
                if (!more) goto done;
                memset(more + cap, 0, (want - cap) * sizeof *more);
                sites = more;
                cap = want;
            }
            struct site *s = &sites[g];
            if (s->cur_dump != i + 1) {
                s->cur_dump = i + 1;
                s->in_dump = 0;
            }
            if (s->cur_rank != rank_at) {
                s->cur_rank = rank_at;
                s->cur = 0;
                if (ntouched == touched_cap) {
                    size_t want = touched_cap ? touched_cap * 2 : 64;
                    uint32_t *more = realloc(touched, want * sizeof *more);
                    if (!more) goto done;
                    touched = more;
                    touched_cap = want;
                }
                touched[ntouched++] = g;
            }
            s->in_dump = s->in_dump > UINT64_MAX - h[j].bytes ? UINT64_MAX : s->in_dump + h[j].bytes;
            if (s->in_dump > s->cur) s->cur = s->in_dump;
        }
        /* The rank's sums go in once its last dump is read (a pass over
         * every group seen so far did this: 200 dumps of 4,000 sites each
         * made it 80 million steps). */
        if (oi + 1 < in->n && unit_of(&in->dumps[order[oi + 1]], procs) == unit_of(d, procs)) continue;
        if (unit_has) nranks++;
        else none[nnone++] = unit_of(d, procs);
        unit_has = 0;
        for (size_t t = 0; t < ntouched; t++)
            if (add_rank(&sites[touched[t]], unit_of(d, procs), sites[touched[t]].cur) != 0) goto done;
        ntouched = 0;
        rank_at++;
    }
    size_t ng = vt_labels_count(labels), nd = 0;
    struct order *ord = calloc(ng ? ng : 1, sizeof *ord);
    if (!ord) goto done;
    for (size_t g = 0; g < ng; g++) {
        const struct site *s = &sites[g];
        if (s->nranks == nranks && s->min == s->max) continue;
        ord[nd++] = (struct order){g, s->nranks == nranks ? s->max - s->min : s->max};
    }
    qsort(ord, nd, sizeof *ord, by_spread);
    char a[32], b[32];
    const char *unit = procs ? "pid" : "rank", *units = procs ? "processes" : "ranks";
    fprintf(f, "call sites that differ across %s (at %s): %zu", units, vr_moment_name(o->at), nd);
    if (nnone) {   /* sorted already: the dumps were read in their order */
        fprintf(f, ", over the %zu %s with holders at %s; none at %s ", nranks, nranks == 1 ? unit : units,
                vr_moment_name(o->at), nnone == 1 ? unit : procs ? "pids" : "ranks");
        put_ranges(f, none, nnone, 8);
    }
    fputc('\n', f);
    for (size_t k = 0; k < nd && k < (size_t)o->top; k++) {
        struct site *s = &sites[ord[k].g];
        fputs("  ", f);
        vr_put_safe(f, vt_label_of(labels, (uint32_t)ord[k].g));
        if (s->min == s->max) fprintf(f, ": %s", vr_bytes(s->max, a, sizeof a));
        else if (s->max_ranks > 1)   /* not one rank's: the first of those that hold it */
            fprintf(f, ": %s to %s (%s %d and %zu more)", vr_bytes(s->min, a, sizeof a), vr_bytes(s->max, b, sizeof b),
                    unit, s->max_rank, s->max_ranks - 1);
        else fprintf(f, ": %s to %s (%s %d)", vr_bytes(s->min, a, sizeof a), vr_bytes(s->max, b, sizeof b), unit,
                     s->max_rank);
        qsort(s->ranks, s->nranks, sizeof *s->ranks, by_int);
        fprintf(f, " on %zu of %zu %s (%s", s->nranks, nranks, units, procs ? "pids " : "");
        put_ranges(f, s->ranks, s->nranks, 8);
        fputs(")\n", f);
    }
    free(ord);
done:
    free(order);
    free(none);
    free(touched);
    for (size_t g = 0; g < cap; g++) free(sites[g].ranks);
    free(sites);
    vt_labels_free(labels);
}

/* Each process's peak, that of its newest dump (vr_newest_of_process: a
 * process's on-demand dumps and its exit dump are one process, not an
 * imbalance of it against itself; a rank's restarts are processes of
 * their own), into peaks[]; *hi the dump with the highest. Returns how
 * many processes. */
static size_t process_peaks(const struct vr_input *in, uint64_t *peaks, size_t *hi) {
    size_t n = 0;
    *hi = SIZE_MAX;
    for (size_t i = 0; i < in->n; i++) {
        if (!vr_newest_of_process(in, i)) continue;
        peaks[n++] = in->dumps[i].totals.peak_bytes;
        if (*hi == SIZE_MAX || in->dumps[i].totals.peak_bytes > in->dumps[*hi].totals.peak_bytes) *hi = i;
    }
    return n;
}

/* "peak imbalance: highest ... over the median ..." of the processes'
 * peaks (process_peaks; none for one process); the highest's dump named by its rank
 * (who 0), its rank and pid (2: a rank is not one process here) or its
 * pid (1). */
static void imbalance(FILE *f, const struct vr_input *in, uint64_t *peaks, int who) {
    size_t hi, n = process_peaks(in, peaks, &hi);
    if (n < 2) return;
    qsort(peaks, n, sizeof *peaks, by_u64);
    uint64_t median = n % 2 ? peaks[n / 2] : peaks[n / 2 - 1] / 2 + peaks[n / 2] / 2 +
                                                 (peaks[n / 2 - 1] % 2 + peaks[n / 2] % 2) / 2;
    char a[32], b[32];
    fprintf(f, "peak imbalance: highest %s (", vr_bytes(peaks[n - 1], a, sizeof a));
    if (who == 1 && in->dumps[hi].rank_local) {
        char host[256];
        fprintf(f, "local rank %d on %s, pid %d", in->dumps[hi].rank,
                in->dumps[hi].host ? vr_safe(in->dumps[hi].host, host, sizeof host) : "?", in->dumps[hi].pid);
    } else if (who == 1) fprintf(f, "pid %d", in->dumps[hi].pid);
    else fprintf(f, "rank %d", in->dumps[hi].rank);
    if (who == 2) fprintf(f, ", pid %d", in->dumps[hi].pid);
    fprintf(f, ") over the median %s", vr_bytes(median, b, sizeof b));
    if (median) fprintf(f, " = %.2fx", (double)peaks[n - 1] / (double)median);
    fputc('\n', f);
}

/* Dumps compared by process (by_pid): how many processes, how many dumps
 * say no rank or only a local one, then the imbalance and the differing
 * sites by pid. */
static void fleet_by_pid(FILE *f, const struct vr_input *in, const struct vr_opts *o, int *pids, uint64_t *peaks) {
    size_t without = 0, local = 0, distinct = 0;
    for (size_t i = 0; i < in->n; i++) {
        without += !in->dumps[i].rank_known;
        local += in->dumps[i].rank_local;
    }
    /* Processes, not pids: containers' programs are each pid 1. */
    distinct = vr_process_count(in);
    fputs("ranks: ", f);
    if (without)
        fprintf(f, "%zu of these %zu dumps say no rank (no RANK, LOCAL_RANK or the like held a rank)%s", without,
                in->n, local ? ", " : ": ");
    if (local && !without) fprintf(f, "%zu of these %zu dumps say", local, in->n);
    else if (local) fprintf(f, "%zu say", local);
    if (local)   /* the table's L0, L1: the node's ranks, not the job's */
        fputs(" only a local rank (LOCAL_RANK or the like, L in the table; no RANK or the like held the job's "
              "rank): ", f);
    /* Dumps of one process (an on-demand dump and the exit's) are one pid
     * in the comparison, though the table above lists each: the count of
     * processes is the table's, so the comparison's is said in pids
     * ("compared as 1 processes" under "2 processes" read as a
     * contradiction). */
    if (distinct == in->n) fprintf(f, "compared as %zu processes, by pid\n", distinct);
    else fprintf(f, "compared by pid, the dumps of one process as one: %zu process%s\n", distinct,
                 distinct == 1 ? "" : "es");
    if (distinct < 2) return;   /* one process: nothing to compare it with */
    imbalance(f, in, peaks, 1);
    differing(f, in, o, 1);
}

void vr_fleet_text(FILE *f, const struct vr_input *in, const struct vr_opts *o) {
    /* One dump of a job of several ranks (the one that failed, when the
     * launcher ended the others): the rest of the job is said to be
     * elsewhere, not left to be guessed. */
    if (in->n == 1 && in->dumps[0].world_size > 1 && !in->dumps[0].rank_known)
        fprintf(f, "ranks: this dump is of a job of %d but says no rank (no RANK, LOCAL_RANK or the like held a rank); "
                   "the job's other dumps are not among these\n", in->dumps[0].world_size);
    else if (in->n == 1 && in->dumps[0].world_size > 1 && in->dumps[0].rank_local) {
        char host[256];
        fprintf(f, "ranks: this dump is local rank %d's on %s, of a job of %d (no RANK or the like held the job's "
                   "rank); the job's other dumps are not among these\n", in->dumps[0].rank,
                in->dumps[0].host ? vr_safe(in->dumps[0].host, host, sizeof host) : "?", in->dumps[0].world_size);
    } else if (in->n == 1 && in->dumps[0].world_size > 1)
        fprintf(f, "ranks: this dump is rank %d's of a job of %d; the other ranks' dumps are not among these\n",
                in->dumps[0].rank, in->dumps[0].world_size);
    if (in->n < 2) return;
    int *ranks = malloc(in->n * sizeof *ranks);
    uint64_t *peaks = malloc(in->n * sizeof *peaks);
    if (!ranks || !peaks) { free(ranks); free(peaks); return; }
    if (by_pid(in)) {
        fleet_by_pid(f, in, o, ranks, peaks);
        free(ranks);
        free(peaks);
        return;
    }
    for (size_t i = 0; i < in->n; i++) ranks[i] = in->dumps[i].rank;
    qsort(ranks, in->n, sizeof *ranks, by_int);
    size_t distinct = 0, shared = 0; /* ranks, and those of them with more than one dump */
    for (size_t i = 1; i < in->n; i++)
        if (ranks[i] == ranks[i - 1] && (i < 2 || ranks[i - 2] != ranks[i])) shared++; /* a rank's second dump */
    for (size_t i = 0; i < in->n; i++)
        if (!distinct || ranks[i] != ranks[distinct - 1]) ranks[distinct++] = ranks[i];
    /* Missing: the ranks from 0 to the highest that no dump has, as the
     * gaps between the ranks there are (a dump of rank 2,147,483,646 does
     * not make a list of two billion). */
    int top = ranks[distinct - 1];
    /* The job's size where a dump says it (WORLD_SIZE and the like): the
     * ranks above the highest with a dump are missing too (a launcher
     * killed them before they wrote one). */
    int world = 0;
    for (size_t i = 0; i < in->n; i++)
        if (in->dumps[i].world_size > world) world = in->dumps[i].world_size;
    int last = (long long)world > (long long)top + 1 ? world - 1 : top;
    uint64_t nmissing = 0;
    for (size_t k = 0; k < distinct; k++)
        if (ranks[k] >= 0) nmissing += (uint64_t)ranks[k] - (k && ranks[k - 1] >= 0 ? (uint64_t)ranks[k - 1] + 1 : 0);
    nmissing += (uint64_t)(last - top);
    fprintf(f, "ranks: %zu dumps of %zu rank%s from %d to %d", in->n, distinct, distinct == 1 ? "" : "s", ranks[0],
            top);
    if (world) fprintf(f, " of a job of %d%s", world, top >= world ? " (the highest rank is past it)" : "");
    if (shared) fprintf(f, " (%zu rank%s more than one dump)", shared, shared == 1 ? " has" : "s have");
    if (nmissing) {
        fprintf(f, "; missing %llu of 0 to %d: ", (unsigned long long)nmissing, last);
        int *all = last > top ? malloc((distinct + 1) * sizeof *all) : ranks;
        if (all && all != ranks) {
            memcpy(all, ranks, distinct * sizeof *all);
            all[distinct] = last + 1; /* past the job's ranks: the gap up to it shown */
        }
        put_gaps(f, all ? all : ranks, all && all != ranks ? distinct + 1 : distinct, 16);
        if (all != ranks) free(all);
    }
    fputc('\n', f);
    imbalance(f, in, peaks, shared ? 2 : 0);
    if (distinct > 1) differing(f, in, o, 0);   /* one rank: no call site differs across ranks */
    free(ranks);
    free(peaks);
}

/* A dump's failure that speaks for it and its tier (fleet.h's vr_first). */
static int tier_of(const struct vm_dump *d, size_t *oom) {
    *oom = 0;
    int last = d->totals.last_oom_survived;
    if (last < 0) return 1;   /* an earlier vramtrace's dump: its first failure, as before */
    if (last == 0 && !d->ended_signal && (!d->exit_status_known || d->exit_status != 0)) {
        *oom = d->nooms - 1;   /* the last entry is the last failure (docs/dump-format.md) */
        return d->exit_status_known ? 2 : 1;
    }
    return 0;
}

static uint64_t oom_when(const struct vm_dump *d, size_t oom) { return d->start_unix_ns + d->ooms[oom].time_ns; }

int vr_first_to_fail(const struct vr_input *in, struct vr_first *out) {
    int found = 0;
    memset(out, 0, sizeof *out);
    out->said = 1;
    for (size_t i = 0; i < in->n; i++) {
        const struct vm_dump *d = &in->dumps[i];
        if (d->nooms == 0) continue;
        if (d->totals.last_oom_survived < 0) out->said = 0;
        size_t oom;
        int tier = tier_of(d, &oom);
        if (!found || tier > out->tier ||
            (tier == out->tier && oom_when(d, oom) < oom_when(&in->dumps[out->dump], out->oom))) {
            out->dump = i, out->oom = oom, out->tier = tier;
            found = 1;
        }
    }
    if (!found) return 0;
    uint64_t named = oom_when(&in->dumps[out->dump], out->oom), earliest = 0;
    for (size_t i = 0; i < in->n; i++) {
        const struct vm_dump *d = &in->dumps[i];
        size_t oom;
        if (i == out->dump || d->nooms == 0 || oom_when(d, 0) >= named || tier_of(d, &oom) >= out->tier) continue;
        if (!out->passed++ || oom_when(d, 0) < earliest) out->passed_dump = i, earliest = oom_when(d, 0);
    }
    return 1;
}

const char *vr_first_why(const struct vr_input *in, const struct vr_first *w, char *buf, size_t size) {
    const struct vm_dump *d = &in->dumps[w->dump];
    if (w->tier == 2) snprintf(buf, size, "its last failure, not got past; it exited with status %d", d->exit_status);
    else if (w->tier == 1) snprintf(buf, size, "its last failure, not got past");
    else snprintf(buf, size, "its first failure; no process ended with a failure it did not get past");
    return buf;
}

const char *vr_passed_why(const struct vr_input *in, const struct vr_first *w, char *buf, size_t size) {
    const struct vm_dump *d = &in->dumps[w->passed_dump];
    if (d->totals.last_oom_survived == 1) {
        if (d->totals.oom_survived >= d->totals.oom_count)
            snprintf(buf, size, "it got past its failures (%" PRIu64 " of %" PRIu64 ")", d->totals.oom_survived,
                     d->totals.oom_count);
        else snprintf(buf, size, "it got past its last failure");
    } else if (d->ended_signal) snprintf(buf, size, "it was ended by %s", d->ended_signal);
    else if (d->exit_status_known && d->exit_status == 0) snprintf(buf, size, "it exited with status 0");
    else snprintf(buf, size, "its end is not known");
    return buf;
}
