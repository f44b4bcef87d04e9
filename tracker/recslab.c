/* recslab.c -- new records carved from a thread's slabs (recslab.h). */
#include <pthread.h>
#include <stdlib.h>

#include "recslab.h"

#define SLAB_FIRST ((size_t)4 << 10)
#define SLAB_MOST ((size_t)64 << 10)

/* A slab: the list's link, then its records. */
struct slab {
    struct slab *next;
    struct vt_rec recs[];
};

static struct slab *slabs; /* every slab made, newest first */
static pthread_mutex_t slabs_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t made;

/* This thread's slab: the next record to carve, how many are left, and
 * the size of the next slab. */
static __thread struct vt_rec *slab_next __attribute__((tls_model("initial-exec")));
static __thread unsigned slab_left __attribute__((tls_model("initial-exec")));
static __thread unsigned slab_bytes __attribute__((tls_model("initial-exec")));

struct vt_rec *vt_rec_carve(void) {
    if (!slab_left) {
        size_t bytes = slab_bytes ? slab_bytes : SLAB_FIRST;
        struct slab *s = malloc(bytes);
        if (!s) return NULL;
        pthread_mutex_lock(&slabs_lock);
        s->next = slabs;
        slabs = s;
        pthread_mutex_unlock(&slabs_lock);
        slab_next = s->recs;
        slab_left = (unsigned)((bytes - sizeof *s) / sizeof(struct vt_rec));
        slab_bytes = (unsigned)(bytes < SLAB_MOST ? bytes * 2 : SLAB_MOST);
    }
    slab_left--;
    __atomic_fetch_add(&made, 1, __ATOMIC_RELAXED);
    return slab_next++;
}

uint64_t vt_rec_made(void) { return __atomic_load_n(&made, __ATOMIC_RELAXED); }
unsigned vt_rec_slab_left(void) { return slab_left; }

void vt_rec_slabs_lock(void) { pthread_mutex_lock(&slabs_lock); }
void vt_rec_slabs_unlock(void) { pthread_mutex_unlock(&slabs_lock); }
