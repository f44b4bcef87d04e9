/* slab.c -- a thread's slabs, made (slab.h). */
#include <stdlib.h>

#include "slab.h"

/* A slab: the kind's list's link, then what is carved from it (8-byte
 * aligned, as malloc's block is 16). */
struct vt_slab_head {
    struct vt_slab_head *next;
    uint64_t pad;
};

int vt_slab_refill(struct vt_slab_kind *k, struct vt_slab_cursor *c, size_t need) {
    size_t bytes = c->bytes ? c->bytes : k->first;
    if (bytes < need + sizeof(struct vt_slab_head)) bytes = need + sizeof(struct vt_slab_head);
    struct vt_slab_head *s = malloc(bytes);
    if (!s) return 0;
    pthread_mutex_lock(&k->lock);
    s->next = k->list;
    k->list = s;
    pthread_mutex_unlock(&k->lock);
    c->next = (char *)(s + 1);
    c->left = (uint32_t)(bytes - sizeof *s);
    size_t after = c->bytes ? c->bytes : k->first;
    c->bytes = (uint32_t)(after < k->most ? after * 2 : k->most);
    return 1;
}
