/* refset.c -- distinct texts kept by reference (refset.h): an
 * open-addressed index of members by hash, each member's text remade by
 * its owner to tell two texts of one hash apart. */
#include <stdlib.h>
#include <string.h>

#include "refset.h"

/* FNV-1a: a text is hashed once when it is looked for. */
static uint64_t text_hash(const char *s, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return h ^ h >> 29;
}

void vr_refset_init(struct vr_refset *s, vr_remake_fn *remake, void *ctx, size_t max) {
    *s = (struct vr_refset){.remake = remake, .ctx = ctx, .max = max};
}

/* The slot table remade with twice the room; 0 when memory ran out. */
static int regrow(struct vr_refset *s) {
    size_t n = s->nslots ? 2 * s->nslots : 1024;
    uint32_t *slot = calloc(n, sizeof *slot);
    if (!slot) return 0;
    for (size_t m = 0; m < s->n; m++) {
        size_t j = s->hash[m] & (n - 1);
        while (slot[j]) j = (j + 1) & (n - 1);
        slot[j] = (uint32_t)m + 1;
    }
    free(s->slot);
    s->slot = slot;
    s->nslots = n;
    return 1;
}

uint32_t vr_refset_add(struct vr_refset *s, const char *text, size_t len, uint64_t ref, int *added) {
    if (added) *added = 0;
    if (len > s->max || s->n >= UINT32_MAX - 1) return UINT32_MAX;
    if (!s->buf && !(s->buf = malloc(s->max + 1))) return UINT32_MAX;
    if (4 * (s->n + 1) > 3 * s->nslots && !regrow(s)) return UINT32_MAX;
    uint64_t h = text_hash(text, len);
    size_t j = h & (s->nslots - 1);
    for (; s->slot[j]; j = (j + 1) & (s->nslots - 1)) {
        uint32_t m = s->slot[j] - 1;
        if (s->hash[m] != h) continue;
        size_t k = s->remake(s->ctx, s->ref[m], s->buf, s->max + 1);
        if (k == len && memcmp(s->buf, text, len) == 0) return m;
    }
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 256;
        uint64_t *hash = realloc(s->hash, cap * sizeof *hash);
        if (hash) s->hash = hash;
        uint64_t *refs = hash ? realloc(s->ref, cap * sizeof *refs) : NULL;
        if (!refs) return UINT32_MAX;
        s->ref = refs;
        s->cap = cap;
    }
    s->hash[s->n] = h;
    s->ref[s->n] = ref;
    s->slot[j] = (uint32_t)s->n + 1;
    if (added) *added = 1;
    return (uint32_t)s->n++;
}

void vr_refset_free(struct vr_refset *s) {
    free(s->slot);
    free(s->hash);
    free(s->ref);
    free(s->buf);
    vr_refset_init(s, s->remake, s->ctx, s->max);
}
