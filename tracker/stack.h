/* stack.h -- capture the calling thread's native stack, cheaply.
 *
 * Raw return addresses only; symbols are resolved when a report is written
 * (report/symbolize.c). Frames inside libvramtrace itself are dropped. */
#ifndef VT_STACK_H
#define VT_STACK_H

#include <stdint.h>

#define VT_STACK_MAX 256

/* Prepare the walker's rule table and libunwind (per-thread caching), and
 * learn the address range of this library so its frames can be skipped.
 * Called once at start. `mode`: the walker, libunwind only, or both at
 * every capture, compared (VRAMTRACE_UNWIND). */
enum { VT_STACK_WALKER, VT_STACK_LIBUNWIND, VT_STACK_CHECK };
void vt_stack_init(int mode);

/* Fill `out` with up to `max` return addresses of the caller's stack,
 * innermost first, without this library's own frames. Returns how many.
 * Takes a lock and allocates only the first time it meets a return
 * address (to read that code's CFI). */
int vt_stack_capture(uintptr_t *out, int max);

/* The same, unless this thread's stack is the one it had at the capture
 * whose vt_stack_serial was `since` (no other stack captured in between):
 * then VT_STACK_SAME, and `out` is not written. A caller that keeps what it
 * made of that capture (an interned id) needs nothing more. */
#define VT_STACK_SAME (-2)
int vt_stack_capture_since(uintptr_t *out, int max, uint64_t since);

/* Changes whenever a capture of this thread may differ from the one before. */
uint64_t vt_stack_serial(void);

/* The same, always with libunwind (the walker's reference, for tests). */
int vt_stack_capture_libunwind(uintptr_t *out, int max);

/* How this thread's captures went: walked, replayed (the last walk's
 * frames, checked still valid), or handed to libunwind. */
struct vt_stack_counts {
    uint64_t walks, replays, fallbacks;
    uint64_t resumes, rejoins, steps; /* walks resumed past their first frame, walks that rejoined the last one, frames stepped */
};
struct vt_stack_counts vt_stack_thread_counts(void);

/* With VRAMTRACE_UNWIND=check (captures then come from libunwind, and the
 * walker's answer is compared with it): how many stacks were compared, how
 * many differed, how many the walker handed over. Returns whether the check
 * is on. */
int vt_stack_check(uint64_t *stacks, uint64_t *differ, uint64_t *fallbacks);

/* Drop every cached unwind rule: code was unloaded (dlclose). */
void vt_stack_forget(void);

/* Around fork: the rule lock is held across it. */
void vt_stack_fork_prepare(void);
void vt_stack_fork_done(void);

#endif
