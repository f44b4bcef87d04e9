/* holders.c -- who holds the memory: the tracker's holders by stack, and
 * those merged by call site. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../common/labels.h"
#include "holders.h"

struct vt_holder *vt_holders_of(const struct vt_snapshot *s, int device_only, size_t *n) {
    int device = device_only || s->all_is_device;
    const struct vt_holder *from = device ? s->holders : s->all_holders;
    size_t k = device ? s->nholders : s->nall_holders;
    *n = 0;
    struct vt_holder *h = from && k ? malloc(k * sizeof *h) : NULL;
    if (!h) return NULL;
    memcpy(h, from, k * sizeof *h);
    *n = k;
    return h;
}

struct vt_holder *vt_holders(const struct vt_snapshot *s, size_t *n) { return vt_holders_of(s, 1, n); }

struct vt_holder *vt_holders_less_taken(const struct vt_holder *h, size_t n, const struct vt_oom *o, size_t *nout) {
    *nout = 0;
    struct vt_holder *out = h && n ? malloc(n * sizeof *out) : NULL;
    if (!out) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        struct vt_holder x = h[i];
        if (o->taken_count && x.stack == o->stack) {
            x.bytes = x.bytes > o->taken_bytes ? x.bytes - o->taken_bytes : 0;
            x.count = x.count > o->taken_count ? x.count - (uint32_t)o->taken_count : 0;
        }
        if (x.bytes || x.count) out[k++] = x;
    }
    if (!k) {
        free(out);
        return NULL;
    }
    qsort(out, k, sizeof *out, vt_holder_order);
    *nout = k;
    return out;
}

/* Rows by common/labels.h's one order; a row's label is made only where
 * two rows hold equal bytes. */
static int by_rank(const void *a, const void *b, void *ctx) {
    const struct vt_holder *x = a, *y = b;
    const struct vt_symbols *sym = ctx;
    char la[512], lb[512];
    int tie = x->bytes == y->bytes;
    return vt_rank_order(x->bytes, tie ? vt_site_label(sym, x->stack, la, sizeof la) : NULL, x->stack, y->bytes,
                         tie ? vt_site_label(sym, y->stack, lb, sizeof lb) : NULL, y->stack);
}

struct vt_holder *vt_holders_by_site(const struct vt_holder *h, size_t n, const struct vt_symbols *sym,
                                     size_t *nout) {
    *nout = 0;
    size_t nstacks = sym ? sym->nstacks : 0, ngroups = 0;
    uint32_t *group = sym ? vt_site_groups(sym, nstacks, &ngroups, NULL) : NULL;
    size_t *row = group ? malloc((ngroups ? ngroups : 1) * sizeof *row) : NULL;
    struct vt_holder *out = n ? malloc(n * sizeof *out) : NULL;
    uint64_t *top = n ? malloc(n * sizeof *top) : NULL;   /* each row's largest holder */
    if (!out || !top || (sym && !row)) { free(group); free(row); free(out); free(top); return NULL; }
    for (size_t g = 0; g < ngroups; g++) row[g] = SIZE_MAX;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        /* Without symbols, or for a stack they do not cover, a holder is
         * its own row. */
        size_t *r = row && h[i].stack < nstacks ? &row[group[h[i].stack]] : NULL;
        if (!r || *r == SIZE_MAX) {
            if (r) *r = k;
            top[k] = h[i].bytes;
            out[k++] = h[i];
            continue;
        }
        struct vt_holder *x = &out[*r];
        if (h[i].bytes > top[*r] || (h[i].bytes == top[*r] && h[i].stack < x->stack)) {
            x->stack = h[i].stack;
            top[*r] = h[i].bytes;
        }
        x->bytes += h[i].bytes;
        x->count += h[i].count;
    }
    free(group);
    free(row);
    free(top);
    if (k > 1) qsort_r(out, k, sizeof *out, by_rank, (void *)sym);
    *nout = k;
    return out;
}

void vt_sort_live(struct vt_snapshot *s) { vt_snapshot_sort_live(s); }

static int by_stack(const void *a, const void *b) {
    const struct vt_holder *x = a, *y = b;
    return x->stack < y->stack ? -1 : x->stack > y->stack;
}

/* The live allocations of s that are device `device`'s own memory
 * (host 0), or pinned host memory (host 1), by stack, largest first. */
static struct vt_holder *held_where(const struct vt_snapshot *s, int device, int host, size_t *n) {
    *n = 0;
    struct vt_holder *h = s->nlive ? malloc(s->nlive * sizeof *h) : NULL;
    struct vt_live_reader *rd = h ? vt_live_read(s, 0) : NULL;
    if (!rd) { free(h); return NULL; }
    size_t k = 0;
    for (const struct vt_live *a; k < s->nlive && (a = vt_live_next(rd));)
        if (host ? vt_kind_is_host(a->kind) : a->device == device && vt_kind_owned_device(a->kind))
            h[k++] = (struct vt_holder){.stack = a->stack, .count = 1, .bytes = a->bytes};
    vt_live_read_end(rd);
    qsort(h, k, sizeof *h, by_stack);
    size_t m = 0;
    for (size_t i = 0; i < k; i++) {
        if (m && h[m - 1].stack == h[i].stack) { h[m - 1].bytes += h[i].bytes; h[m - 1].count++; }
        else h[m++] = h[i];
    }
    qsort(h, m, sizeof *h, vt_holder_order);
    if (!m) { free(h); return NULL; }
    *n = m;
    return h;
}

struct vt_holder *vt_holders_on_device(const struct vt_snapshot *s, int device, size_t *n) {
    return held_where(s, device, 0, n);
}

struct vt_holder *vt_holders_of_host(const struct vt_snapshot *s, size_t *n) { return held_where(s, -1, 1, n); }

int vt_other_devices_hold(const struct vt_snapshot *s, int device) {
    for (int d = 0; d < s->ndevices; d++)
        if (d != device && s->devices[d].live_bytes) return 1;
    return 0;
}
