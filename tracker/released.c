/* released.c -- memory a context's reset gave back without a free.
 *
 * cuDevicePrimaryCtxReset (cudaDeviceReset reaches it) "destroys all
 * allocations" of the device's primary context. What the program never
 * freed is then neither live (the device has the memory back; a later
 * allocation may get the same address) nor freed by the program: it is
 * what compute-sanitizer's leak check reports at a reset. So the tracker
 * takes such records out of the live tables through the ordinary free
 * (the counts, the history and the tables stay as one free would leave
 * them) and keeps them here, by stack, for the leak check at exit and the
 * dump (`released`). A table of stacks, not of records: a program that
 * resets in a loop and leaks each time grows it by its call sites only. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <uthash.h>

#include "../common/warn.h"
#include "internal.h"
#include "released.h"

struct released_site {
    uint32_t stack;
    uint64_t bytes, count;
    UT_hash_handle hh;
};

static pthread_mutex_t released_lock = PTHREAD_MUTEX_INITIALIZER;
static struct released_site *released;

struct vt_release {
    size_t n;
    struct vt_release_rec { uint64_t address, bytes; uint32_t stack; int space; } rec[];
};

int vt_kind_in_context(int kind) {
    switch (kind) {
    case VT_KIND_DEVICE: case VT_KIND_PITCHED: case VT_KIND_MANAGED: case VT_KIND_ASYNC:
    case VT_KIND_ARRAY: case VT_KIND_IMPORTED:
        return 1;
    default:   /* cuMemCreate's handles, pinned and other host memory */
        return 0;
    }
}

struct vt_release *vt_tracker_release_begin(int device) {
    struct vt_snapshot *s = vt_tracker_snapshot();
    if (!s) return NULL;
    size_t n = 0, cap = 0;
    struct vt_release *rl = NULL;
    struct vt_live_reader *rd = vt_live_read(s, 0);
    for (const struct vt_live *a; rd && (a = vt_live_next(rd));) {
        if (a->device != device || !vt_kind_in_context(a->kind)) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            struct vt_release *m = realloc(rl, sizeof *rl + cap * sizeof rl->rec[0]);
            if (!m) { vt_records_lost("a reset's release"); break; }
            rl = m;
        }
        rl->rec[n++] = (struct vt_release_rec){a->address, a->bytes, a->stack, vt_kind_space(a->kind)};
    }
    vt_live_read_end(rd);
    vt_snapshot_free(s);
    if (rl) rl->n = n;
    return rl;
}

void vt_tracker_release_end(struct vt_release *rl, int ok) {
    if (!rl) return;
    for (size_t i = 0; ok && i < rl->n; i++) {
        const struct vt_release_rec *x = &rl->rec[i];
        struct vt_free f = vt_tracker_free_begin(x->space, x->address);
        int mine = f.rec != NULL;
        vt_tracker_free_end(&f, 1);
        if (!mine) continue;   /* freed since the list was made */
        pthread_mutex_lock(&released_lock);
        struct released_site *r;
        HASH_FIND(hh, released, &x->stack, sizeof x->stack, r);
        if (!r && (r = calloc(1, sizeof *r))) {
            r->stack = x->stack;
            HASH_ADD(hh, released, stack, sizeof r->stack, r);
        }
        if (r) { r->bytes += x->bytes; r->count++; }
        else vt_records_lost("a reset's release");
        pthread_mutex_unlock(&released_lock);
    }
    free(rl);
}

struct vt_holder *vt_tracker_released(size_t *n) {
    *n = 0;
    pthread_mutex_lock(&released_lock);
    size_t k = HASH_COUNT(released);
    struct vt_holder *h = k ? malloc(k * sizeof *h) : NULL;
    if (h) {
        struct released_site *r, *t;
        HASH_ITER(hh, released, r, t) h[(*n)++] = (struct vt_holder){.stack = r->stack, .bytes = r->bytes,
                                                                       .count = r->count > UINT32_MAX ? UINT32_MAX : (uint32_t)r->count};
    } else if (k) vt_records_lost("the released list");
    pthread_mutex_unlock(&released_lock);
    if (*n) qsort(h, *n, sizeof *h, vt_holder_order);
    return h;
}

void vt_released_reset_child(void) {
    pthread_mutex_init(&released_lock, NULL);
    struct released_site *r, *t;
    HASH_ITER(hh, released, r, t) {
        HASH_DEL(released, r);
        free(r);
    }
}
