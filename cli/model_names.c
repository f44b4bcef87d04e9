/* model_names.c -- the live allocations' kinds and APIs as small indexes,
 * and their handles kept beside them.
 *
 * A dump of millions of live allocations names a few dozen kinds and APIs;
 * a pointer to each name in every allocation cost 16 of its 64 bytes, and
 * the handle, which only virtual-memory allocations have, 8 more. */
#include <stdlib.h>
#include <string.h>

#include <uthash.h>

#include "model.h"

struct name {
    const char *text;
    int index;
    UT_hash_handle hh;
};

int vm_name_index(struct vm_dump *d, const char *s) {
    struct name *table = d->name_index, *n;
    size_t len = strlen(s);
    HASH_FIND(hh, table, s, len, n);
    if (n) return n->index;
    if (d->nnames >= VM_NAMES_MAX) return -1;
    if ((d->nnames & (d->nnames - 1)) == 0) {   /* full at 0, 1, 2, 4, ...: double */
        const char **grown = realloc(d->names, (d->nnames ? 2 * d->nnames : 1) * sizeof *grown);
        if (!grown) return -1;
        d->names = grown;
    }
    if (!(n = malloc(sizeof *n))) return -1;
    n->text = s;
    n->index = (int)d->nnames;
    HASH_ADD_KEYPTR(hh, table, n->text, len, n);
    d->name_index = table;
    d->names[d->nnames++] = s;
    return n->index;
}

void vm_names_done(struct vm_dump *d) {
    struct name *table = d->name_index, *n, *tmp;
    HASH_ITER(hh, table, n, tmp) {
        HASH_DEL(table, n);
        free(n);
    }
    d->name_index = NULL;
}

int vm_add_handle(struct vm_dump *d, size_t live, uint64_t h) {
    if ((d->nhandles & (d->nhandles - 1)) == 0) {   /* 0, 1, 2, 4, ...: double */
        size_t cap = d->nhandles ? 2 * d->nhandles : 1;
        struct vm_live_handle *grown = realloc(d->handles, cap * sizeof *grown);
        if (!grown) return -1;
        d->handles = grown;
    }
    d->handles[d->nhandles++] = (struct vm_live_handle){live, h};
    return 0;
}

uint64_t vm_alloc_handle(const struct vm_dump *d, const struct vm_alloc *a) {
    if (!a->has_handle) return 0;
    size_t i = (size_t)(a - d->live), lo = 0, hi = d->nhandles;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (d->handles[mid].live < i) lo = mid + 1;
        else hi = mid;
    }
    return lo < d->nhandles && d->handles[lo].live == i ? d->handles[lo].handle : 0;
}
