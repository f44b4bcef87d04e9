/* labels.c -- grouping by label (labels.h): a hash of the labels seen, and
 * their list in group order. */
#include <stdlib.h>
#include <string.h>

#include <uthash.h>

#include "labels.h"

struct entry {
    uint32_t group;
    UT_hash_handle hh;
    char label[]; /* the key */
};

struct vt_labels {
    struct entry *table;
    struct entry **list; /* by group number */
    size_t n, cap;
};

struct vt_labels *vt_labels_new(void) { return calloc(1, sizeof(struct vt_labels)); }

uint32_t vt_label_group(struct vt_labels *l, const char *label, int *added) {
    struct entry *e;
    size_t len = strlen(label);
    if (added) *added = 0;
    HASH_FIND(hh, l->table, label, len, e);
    if (e) return e->group;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        struct entry **list = realloc(l->list, cap * sizeof *list);
        if (!list) return UINT32_MAX;
        l->list = list;
        l->cap = cap;
    }
    if (!(e = malloc(sizeof *e + len + 1))) return UINT32_MAX;
    memcpy(e->label, label, len + 1);
    e->group = (uint32_t)l->n;
    HASH_ADD_KEYPTR(hh, l->table, e->label, len, e);
    l->list[l->n++] = e;
    if (added) *added = 1;
    return e->group;
}

size_t vt_labels_count(const struct vt_labels *l) { return l->n; }

const char *vt_label_of(const struct vt_labels *l, uint32_t g) { return g < l->n ? l->list[g]->label : NULL; }

void vt_labels_free(struct vt_labels *l) {
    if (!l) return;
    struct entry *e, *tmp;
    HASH_ITER(hh, l->table, e, tmp) {
        HASH_DEL(l->table, e);
        free(e);
    }
    free(l->list);
    free(l);
}

int vt_rank_order(uint64_t bytes_a, const char *label_a, uint64_t id_a, uint64_t bytes_b, const char *label_b,
                  uint64_t id_b) {
    if (bytes_a != bytes_b) return bytes_a < bytes_b ? 1 : -1;
    int c = strcmp(label_a ? label_a : "", label_b ? label_b : "");
    if (c) return c < 0 ? -1 : 1;
    return id_a < id_b ? -1 : id_a > id_b;
}
