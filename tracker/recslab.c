/* recslab.c -- new records carved from a thread's slabs (recslab.h). */
#include "recslab.h"
#include "slab.h"

static struct vt_slab_kind recs = VT_SLAB_KIND(4 << 10, 64 << 10);
static uint64_t made;

/* This thread's slab of records. */
static __thread struct vt_slab_cursor cursor __attribute__((tls_model("initial-exec")));

struct vt_rec *vt_rec_carve(void) {
    struct vt_rec *r = vt_slab_carve(&recs, &cursor, sizeof *r);
    if (r) __atomic_fetch_add(&made, 1, __ATOMIC_RELAXED);
    return r;
}

uint64_t vt_rec_made(void) { return __atomic_load_n(&made, __ATOMIC_RELAXED); }
unsigned vt_rec_slab_left(void) { return cursor.left / sizeof(struct vt_rec); }

void vt_rec_slabs_lock(void) { vt_slab_lock(&recs); }
void vt_rec_slabs_unlock(void) { vt_slab_unlock(&recs); }
