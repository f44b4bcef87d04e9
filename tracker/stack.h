/* stack.h -- capture the calling thread's native stack, cheaply.
 *
 * Raw return addresses only; symbols are resolved when a report is written
 * (report/symbolize.c). Frames inside libvramtrace itself are dropped. */
#ifndef VT_STACK_H
#define VT_STACK_H

#include <stdint.h>

#define VT_STACK_MAX 256

/* Prepare libunwind (per-thread caching) and learn the address range of
 * this library so its frames can be skipped. Called once at start. */
void vt_stack_init(void);

/* Fill `out` with up to `max` return addresses of the caller's stack,
 * innermost first, without this library's own frames. Returns how many.
 * Takes no lock and allocates nothing of its own. */
int vt_stack_capture(uintptr_t *out, int max);

#endif
