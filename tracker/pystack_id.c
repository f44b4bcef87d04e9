/* pystack_id.c -- the id of a thread's merged stack, remembered. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "pystack.h"
#include "pystack_id.h"
#include "stack.h"
#include "tracker.h"

/* What the thread's last capture was made of. `serial` is the native
 * capture's vt_stack_serial (UINT64_MAX: nothing kept, or interning
 * failed), `native` its frames, written by that capture itself, `trail`
 * the Python frames its read met, `merged` the stack interned (with
 * `trail` placed in it, or trail.placed 0). */
struct last_stack {
    uint64_t serial, generation;
    uint32_t id;
    uint32_t misses; /* captures in a row the memo did not answer */
    int nnative, nmerged;
    uintptr_t native[VT_STACK_MAX];
    uintptr_t merged[VT_MAX_FRAMES];
    struct vt_pyframes py; /* the Python frames of `merged` */
    struct vt_pytrail trail;
};

static __thread struct last_stack *last __attribute__((tls_model("initial-exec")));
static pthread_key_t last_key;
static pthread_once_t last_once = PTHREAD_ONCE_INIT;

/* At thread exit: a hook later in the exit (another key's destructor
 * freeing GPU memory) finds no memo and makes a new one. */
static void last_free(void *p) {
    last = NULL;
    free(p);
}

static void last_key_make(void) { pthread_key_create(&last_key, last_free); }

static struct last_stack *thread_last(void) {
    if (__builtin_expect(last != NULL, 1)) return last;
    pthread_once(&last_once, last_key_make);
    struct last_stack *l = malloc(sizeof *l);
    if (!l) return NULL;
    l->serial = UINT64_MAX;
    l->misses = 0;
    l->trail.n = -1;
    l->trail.placed = 0;
    if (pthread_setspecific(last_key, l) != 0) {
        free(l);
        return NULL;
    }
    return last = l;
}

/* Splice and intern, without the memo (no memory for it). */
static uint32_t merged_id(const uintptr_t *native, int n, const struct vt_pyframes *py) {
    uintptr_t frames[VT_MAX_FRAMES];
    return vt_tracker_stack_id(frames, vt_pystack_splice(native, n, py, frames, VT_MAX_FRAMES));
}

/* id, the thread's last; a failed interning (intern.c's UINT32_MAX) is not
 * remembered: the next call reads and tries again. */
static uint32_t remember(struct last_stack *l, uint32_t id) {
    l->id = id;
    if (id == UINT32_MAX) {
        l->serial = UINT64_MAX;
        l->trail.n = -1;
    }
    return id;
}

uint32_t vt_pystack_id(int max) {
    struct last_stack *l = thread_last();
    if (!l) {
        struct vt_pyframes py;
        uintptr_t native[VT_STACK_MAX];
        int n = vt_stack_capture(native, max);
        vt_pystack_read(&py, NULL);
        return merged_id(native, n, &py);
    }
    uint64_t gen = vt_tracker_generation();
    if (l->generation != gen) l->serial = UINT64_MAX;
    int n = vt_stack_capture_since(l->native, max, l->serial);
    if (n == VT_STACK_SAME) {
        /* The same native frames: the Python frames that changed (a loop
         * allocating from line after line), if nothing else did, patched
         * into the last merged stack, which is interned again; none
         * changed: the last id. */
        int changed = l->trail.placed ? vt_pystack_patch(&l->trail, &l->py, l->merged)
                                      : vt_pystack_same(&l->trail) ? 0 : -1; /* a cut stack, say */
        if (changed == 0) {
            l->misses = 0;
            return l->id;
        }
        if (changed > 0) {
            l->misses = 0;
            return remember(l, vt_tracker_stack_id(l->merged, l->nmerged));
        }
        n = l->nnative;
    } else {
        l->nnative = n;
        l->serial = vt_stack_serial();
        l->generation = gen;
        /* Other native frames (another op's way to the allocator): the
         * Python frames of the last read, those that changed patched, are
         * spliced into them. */
        if (vt_pystack_patch(&l->trail, &l->py, NULL) >= 0) {
            l->misses = 0;
            l->nmerged = vt_pystack_splice_placed(l->native, n, &l->py, l->merged, VT_MAX_FRAMES, &l->trail);
            return remember(l, vt_tracker_stack_id(l->merged, l->nmerged));
        }
    }
    /* Keeping the trail costs a few instructions a frame. A thread whose
     * stack keeps changing (allocations from line after line) keeps it at
     * one capture in 8 only, to find out when a run of one stack begins. */
    uint32_t misses = l->misses++;
    if (misses < 4 || misses % 8 == 0) {
        vt_pystack_read(&l->py, &l->trail);
    } else {
        vt_pystack_read(&l->py, NULL);
        l->trail.n = -1;
    }
    l->nmerged = vt_pystack_splice_placed(l->native, n, &l->py, l->merged, VT_MAX_FRAMES, &l->trail);
    return remember(l, vt_tracker_stack_id(l->merged, l->nmerged));
}
