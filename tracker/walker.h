/* walker.h -- the frame walker over cached CFI rules, as stack.c uses it.
 *
 * Internal to tracker/stack.c and tracker/walker.c: stack.h is the face the
 * rest of vramtrace sees. */
#ifndef VT_WALKER_H
#define VT_WALKER_H

#include <stdint.h>

#include "stack.h"

#define VT_HIDDEN __attribute__((visibility("hidden")))

/* The text of this library, whose frames a stack must not show; set by
 * vt_walker_init. */
extern uintptr_t vt_self_lo VT_HIDDEN, vt_self_hi VT_HIDDEN;

/* How this thread's captures went (vt_stack_thread_counts): the walker
 * counts walks and replays, stack.c the captures it gave to libunwind. */
extern __thread struct vt_stack_counts vt_walk_counts
    __attribute__((tls_model("initial-exec"), visibility("hidden")));

/* Learn this library's text range and, when `walk` is set, map the rule
 * table. Safe to call again. */
void vt_walker_init(int walk) VT_HIDDEN;

/* Walk the caller's stack into `out` (up to `max` frames, innermost first,
 * this library's frames dropped). Returns the number of frames; -1 when
 * libunwind must take the capture (a frame the walker cannot follow, a
 * stack other than the thread's own); VT_STACK_SAME when the stack is the
 * one of the capture whose vt_stack_serial was `since` (then `out` is not
 * written). Reads only this thread's stack, above its own frame. */
int vt_walk(uintptr_t *out, int max, uint64_t since) VT_HIDDEN;

/* Empty the rule table (code was unloaded); every thread's remembered
 * rules and replay are dropped at its next walk. */
void vt_walker_forget(void) VT_HIDDEN;

/* Around fork: the rule lock is held across it. */
void vt_walker_fork_prepare(void) VT_HIDDEN;
void vt_walker_fork_done(void) VT_HIDDEN;

#endif
