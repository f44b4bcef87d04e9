/* table.c -- growing a live table (table.h): the one step of it that is
 * not in the hot path. */
#include <stdlib.h>

#include "table.h"

int vt_table_grow(struct live_table *t) {
    size_t cap = t->cap ? t->cap * 2 : 64;
    struct live_entry *e = calloc(cap, sizeof *e);
    if (!e) return 0;
    for (size_t i = 0; i < t->cap; i++) {
        struct vt_rec *r = t->e[i].rec;
        if (!r) continue;
        size_t j = key_hash(&r->key) & (cap - 1);
        while (e[j].rec) j = (j + 1) & (cap - 1);
        e[j] = t->e[i];
    }
    free(t->e);
    t->e = e;
    t->cap = cap;
    return 1;
}
