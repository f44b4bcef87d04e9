/* handlerun.h -- the handles a thread made one after another at one call
 * site and has not mapped: one request's, as PyTorch's expandable segments
 * make them.
 *
 * PyTorch maps a tensor's memory in pages (2 or 20 MiB): it makes every
 * page's handle first (cuMemCreate, in one loop, on the allocating
 * thread), then maps them, and when one cuMemCreate fails it releases
 * those it made and raises. At that failure the handles made before it
 * are live, unmapped, and the failing request's own: not memory the
 * program holds (a 9 GiB tensor on an 8 GiB device was told as a 7.6 GiB
 * holder). The run is this thread's: its VMM handles made in a row at one
 * stack on one device; any other allocation of the thread, a mapping it
 * makes or a handle it releases ends it, and so does a failure (what
 * comes next is another request). A handle another thread releases before
 * the run ends is not seen: no program does that to handles it has not
 * mapped yet. Internal to tracker/. */
#ifndef VT_HANDLERUN_H
#define VT_HANDLERUN_H

#include <stdint.h>

#include "internal.h"

struct vt_handle_run {
    uint64_t count, bytes;
    uint64_t first_ticks; /* the time stamp of its first handle's record */
    uint32_t stack;
    int device;
};

extern __thread struct vt_handle_run vt_handle_run __attribute__((tls_model("initial-exec"), visibility("hidden")));

/* A handle of `bytes` made by this thread at `stack` on `device` (its
 * record's time stamp `ticks`): the run goes on, or a new one begins. */
static inline void vt_handle_run_add(uint32_t stack, int device, uint64_t bytes, uint64_t ticks) {
    struct vt_handle_run *r = &vt_handle_run;
    if (r->count == 0 || r->stack != stack || r->device != device)
        *r = (struct vt_handle_run){0, 0, ticks, stack, device};
    r->count++;
    r->bytes += bytes;
}

/* Anything else this thread did with its memory: the run ends. */
static inline void vt_handle_run_end(void) {
    if (__builtin_expect(vt_handle_run.count != 0, 0)) vt_handle_run.count = 0;
}

/* At this thread's failed request at `stack` on `device` (of VMM handles,
 * `vmm`): the run, when it is that request's (the same stack and device),
 * into *out; 0 with *out zero otherwise. The run ends either way. */
int vt_handle_run_take(int vmm, uint32_t stack, int device, struct vt_handle_run *out) VT_HIDDEN;

#endif
