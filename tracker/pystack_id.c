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
 * the Python frames its read met. */
struct last_stack {
    uint64_t serial, generation;
    uint32_t id;
    uint32_t misses; /* captures in a row the memo did not answer */
    int nnative;
    uintptr_t native[VT_STACK_MAX];
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

uint32_t vt_pystack_id(int max) {
    struct vt_pyframes py;
    struct last_stack *l = thread_last();
    if (!l) {
        uintptr_t native[VT_STACK_MAX];
        int n = vt_stack_capture(native, max);
        vt_pystack_read(&py, NULL);
        return merged_id(native, n, &py);
    }
    uint64_t gen = vt_tracker_generation();
    if (l->generation != gen) l->serial = UINT64_MAX;
    int n = vt_stack_capture_since(l->native, max, l->serial);
    if (n == VT_STACK_SAME) {
        if (vt_pystack_same(&l->trail)) {
            l->misses = 0;
            return l->id;
        }
        n = l->nnative;
    } else {
        l->nnative = n;
        l->serial = vt_stack_serial();
        l->generation = gen;
    }
    /* Keeping the trail costs a few instructions a frame. A thread whose
     * stack keeps changing (allocations from line after line) keeps it at
     * one capture in 8 only, to find out when a run of one stack begins. */
    uint32_t misses = l->misses++;
    if (misses < 4 || misses % 8 == 0) {
        vt_pystack_read(&py, &l->trail);
    } else {
        vt_pystack_read(&py, NULL);
        l->trail.n = -1;
    }
    uint32_t id = l->id = merged_id(l->native, n, &py);
    /* A failed interning (intern.c's UINT32_MAX) is not remembered: the
     * next call tries again. */
    if (id == UINT32_MAX) l->serial = UINT64_MAX;
    return id;
}
