/* runs.c -- the newest run's dumps (runs.h). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runs.h"

struct proc {
    uint64_t start, end;
    size_t first;   /* its first dump's place */
    size_t run;
};

/* One process's dumps together: pid, start, host (fmt_text.c's note). */
static int same_process(const struct vm_dump *x, const struct vm_dump *y) {
    return x->pid == y->pid && x->start_unix_ns == y->start_unix_ns &&
           strcmp(x->host ? x->host : "", y->host ? y->host : "") == 0;
}

static int by_start(const void *a, const void *b) {
    const struct proc *x = a, *y = b;
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    return (x->first > y->first) - (x->first < y->first);
}

static int by_key(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* A rank as a run's ranks are told apart: the job's rank as it is; a
 * local rank (LOCAL_RANK alone) with its host, since each node has its
 * own 0 (8 processes on 2 nodes repeat local ranks 0 to 3 in one run). */
static uint64_t rank_key(const struct vm_dump *d) {
    if (!d->rank_local) return (uint32_t)d->rank;
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (const char *c = d->host ? d->host : ""; *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ull;
    return 1ull << 63 | (h & 0x7fffffffull) << 32 | (uint32_t)d->rank;
}

int vr_newest_run(struct vr_input *in) {
    size_t n = in->n;
    if (n < 2) return 0;
    struct proc *p = malloc(n * sizeof *p);
    size_t *of = malloc(n * sizeof *of);   /* each dump's process */
    uint64_t *ranks = malloc(n * sizeof *ranks), *group = malloc(n * sizeof *group);
    struct vm_dump *sorted = malloc(n * sizeof *sorted);
    if (!p || !of || !ranks || !group || !sorted) {
        free(p), free(of), free(ranks), free(group), free(sorted);
        return -1;
    }
    size_t np = 0;
    for (size_t i = 0; i < n; i++) {
        const struct vm_dump *d = &in->dumps[i];
        uint64_t end = d->start_unix_ns + d->time_ns;
        size_t k = 0;
        while (k < np && !same_process(&in->dumps[p[k].first], d)) k++;
        if (k == np) p[np++] = (struct proc){d->start_unix_ns, end, i, 0};
        else if (end > p[k].end) p[k].end = end;
        of[i] = k;
    }
    /* Sorting moves the processes: each dump finds its own again by its
     * first dump's place. */
    for (size_t i = 0; i < n; i++) of[i] = p[of[i]].first;
    qsort(p, np, sizeof *p, by_start);
    /* Groups of overlapping lifetimes, in time order; a group that repeats
     * a rank of the run so far begins a new run. */
    size_t nranks = 0, run = 0;
    for (size_t k = 0; k < np;) {
        size_t j = k + 1;
        uint64_t end = p[k].end;
        while (j < np && p[j].start <= end) {
            if (p[j].end > end) end = p[j].end;
            j++;
        }
        size_t ng = 0;
        for (size_t q = k; q < j; q++)   /* a rank a job gave (not the 0 of a process without one) */
            if (in->dumps[p[q].first].world_size > 0 && in->dumps[p[q].first].rank_known)
                group[ng++] = rank_key(&in->dumps[p[q].first]);
        qsort(ranks, nranks, sizeof *ranks, by_key);
        int repeats = 0;
        for (size_t g = 0; g < ng && !repeats; g++)
            repeats = bsearch(&group[g], ranks, nranks, sizeof *ranks, by_key) != NULL;
        if (repeats) run++, nranks = 0;
        for (size_t g = 0; g < ng; g++) ranks[nranks++] = group[g];
        for (size_t q = k; q < j; q++) p[q].run = run;
        k = j;
    }
    if (run > 0) {
        /* Each dump's run, through its process's first dump (of[i]). */
        size_t *run_at = malloc(n * sizeof *run_at);
        if (!run_at) {
            free(p), free(of), free(ranks), free(group), free(sorted);
            return -1;
        }
        for (size_t q = 0; q < np; q++) run_at[p[q].first] = p[q].run;
        size_t kept = 0, at = 0;
        for (size_t i = 0; i < n; i++)
            if (run_at[of[i]] == run) sorted[at++] = in->dumps[i];
        kept = at;
        for (size_t i = 0; i < n; i++)
            if (run_at[of[i]] != run) sorted[at++] = in->dumps[i];
        memcpy(in->dumps, sorted, n * sizeof *sorted);
        in->n = kept;
        in->earlier = in->dumps + kept;
        in->nearlier = n - kept;
        in->earlier_runs = run;
        in->earlier_by_ns = p[np - 1].start;
        for (size_t q = np; q-- > 0 && p[q].run == run;) in->earlier_by_ns = p[q].start;
        free(run_at);
    }
    free(p), free(of), free(ranks), free(group), free(sorted);
    return 0;
}

uint64_t vr_earlier_ago_ns(const struct vr_input *in) {
    uint64_t latest = 0;
    for (size_t i = 0; i < in->nearlier; i++)
        if (in->earlier[i].start_unix_ns > latest) latest = in->earlier[i].start_unix_ns;
    return in->earlier_by_ns > latest ? in->earlier_by_ns - latest : 0;
}

void vr_earlier_text(FILE *f, const struct vr_input *in, size_t most) {
    if (!in->nearlier) return;
    fprintf(f, "earlier runs: left out %zu dump%s of %zu earlier run%s of these ranks, the latest begun %.3f s before "
               "this one:", in->nearlier, in->nearlier == 1 ? "" : "s", in->earlier_runs,
            in->earlier_runs == 1 ? "" : "s", (double)vr_earlier_ago_ns(in) / 1e9);
    for (size_t i = 0; i < in->nearlier && i < most; i++) {
        fputs(i ? ", " : " ", f);
        vr_put_safe(f, in->earlier[i].path ? in->earlier[i].path : "?");
    }
    if (in->nearlier > most) fprintf(f, " and %zu more", in->nearlier - most);
    fputc('\n', f);
}
