/* live.h -- the traced process's live segment (common/live.h), written
 * from a publisher thread of its own.
 *
 * Started at the process's first GPU record (interpose/hook.c), when
 * VRAMTRACE_LIVE is 1: every VT_LIVE_INTERVAL_NS the thread asks the
 * tracker for its view (vt_tracker_view, which applies the logs), and when
 * anything was applied since the last time, or a growth window closed,
 * publishes it under the segment's sequence lock, the call sites named
 * (symbolized once per stack). It samples the forecast (forecast.h) and
 * prints its one warning. A hooked call never waits for it beyond the
 * tracker's own lock, held for one bounded copy. */
#ifndef VT_LIVE_H
#define VT_LIVE_H

#include <stddef.h>
#include <stdint.h>

struct vt_live_segment;

#define VT_LIVE_INTERVAL_NS 250000000ull

/* Start the publisher (once; later calls do nothing). */
void vt_live_start(void);

/* At exit: the segment is removed. */
void vt_live_stop(void);

/* Around fork: no publication is under way while the process forks (one
 * under way is waited for), so that the child finds no lock the publisher
 * held (the loader's, the symbolizer's, an allocator's). */
void vt_live_fork_prepare(void);
void vt_live_fork_parent(void);

/* After fork, in the child: the parent's segment let go (never written
 * from the child), the publisher startable again. */
void vt_live_reset_child(void);

/* PyTorch's caching allocator as the PyTorch companion sees it at an
 * optimizer step (python/vramtrace_torch): bytes in tensors and reserved
 * on `device`, and the optimizer steps so far. Exported (ctypes calls it);
 * kept until the next call and published with the next round
 * (VT_LIVE_DEV_TORCH, VT_LIVE_STEPS). Never blocks beyond a copy. */
void vt_torch_live(int device, uint64_t allocated, uint64_t reserved, uint64_t steps)
    __attribute__((visibility("default")));

/* PyTorch's allocated bytes on `device` at the optimizer steps the
 * companion sampled: how far apart the least and the most were, and when
 * the last sample came (vt_now_ns). 0 when none came. */
int vt_torch_live_range(int device, uint64_t *spread, uint64_t *last_ns);

/* PyTorch's allocated and reserved bytes on `device` at the newest
 * optimizer step the companion sampled; 0 when none came. */
int vt_torch_live_last(int device, uint64_t *allocated, uint64_t *reserved);

/* The publisher's half (live_torch.c): PyTorch's figures put into the
 * devices of n that have them, and n's steps; 1 when the companion gave
 * anything since the last call. */
int vt_live_torch_fill(struct vt_live_segment *n);

/* After fork, in the child: PyTorch's figures are the parent's; gone. */
void vt_live_torch_reset_child(void);

/* The forecast's line that holds at the newest round (the device that
 * fills first), "" when none holds: copied into buf. */
const char *vt_live_forecast(char *buf, size_t size);

/* The same for a dump of snapshot s: "" too where a step boundary after
 * the round that made it shows its device's live bytes fell (the growth
 * ended since: a buffer emptied at the last step, then the exit, within
 * a round). */
struct vt_snapshot;
const char *vt_live_forecast_at(const struct vt_snapshot *s, char *buf, size_t size);

#endif
