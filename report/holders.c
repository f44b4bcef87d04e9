/* holders.c -- grouping live allocations by call site. */
#include <stdlib.h>

#include <uthash.h>

#include "holders.h"

struct group {
    uint32_t stack;
    struct vt_holder h;
    UT_hash_handle hh;
};

struct vt_holder *vt_holders(const struct vt_snapshot *s, size_t *n) {
    struct group *groups = NULL, *g, *tmp;
    *n = 0;
    for (size_t i = 0; i < s->nlive; i++) {
        const struct vt_alloc *a = &s->live[i];
        if (!vt_kind_owned_device(a->kind)) continue;
        HASH_FIND(hh, groups, &a->stack, sizeof a->stack, g);
        if (!g) {
            g = calloc(1, sizeof *g);
            if (!g) break;
            g->stack = a->stack;
            g->h.stack = a->stack;
            HASH_ADD(hh, groups, stack, sizeof g->stack, g);
        }
        g->h.bytes += a->bytes;
        g->h.count++;
    }
    size_t count = HASH_COUNT(groups);
    struct vt_holder *out = count ? malloc(count * sizeof *out) : NULL;
    size_t k = 0;
    HASH_ITER(hh, groups, g, tmp) {
        if (out) out[k++] = g->h;
        HASH_DEL(groups, g);
        free(g);
    }
    if (!out) return NULL;
    vt_sort_holders(out, k);
    *n = k;
    return out;
}

void vt_sort_holders(struct vt_holder *h, size_t n) {
    if (n > 1) qsort(h, n, sizeof *h, vt_holder_order);
}

static int live_by_bytes(const void *a, const void *b) {
    const struct vt_alloc *x = a, *y = b;
    if (x->bytes != y->bytes) return x->bytes < y->bytes ? 1 : -1;
    if (x->time_ns != y->time_ns) return x->time_ns < y->time_ns ? -1 : 1;
    return x->address < y->address ? -1 : x->address > y->address;
}

void vt_sort_live(struct vt_snapshot *s) {
    if (s->nlive > 1) qsort(s->live, s->nlive, sizeof *s->live, live_by_bytes);
}
