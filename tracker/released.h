/* released.h -- memory a context's reset gave back without a free
 * (released.c). */
#ifndef VT_RELEASED_H
#define VT_RELEASED_H

#include <stddef.h>
#include <stdint.h>

#include "tracker.h"

/* Whether memory of this kind, on a device, goes with the reset of that
 * device's primary context: device, pitched, managed, array and
 * IPC-opened memory. Not stream-ordered memory (cudaDeviceReset "will not
 * destroy memory allocations by cudaMallocAsync() and
 * cudaMallocFromPoolAsync()"), a CUDA graph's allocations among it (the
 * documentation does not name them; they are stream-ordered, from the
 * device's graph pool, and the simulated GPU keeps them), nor
 * cuMemCreate's handles. Pinned host
 * memory goes too ("memory allocations by cudaMalloc, cudaMallocHost,
 * cudaMallocManaged and cudaMallocPitch"), but is recorded on no device:
 * the driver is asked whose it is (vt_tracker_release_begin). */
int vt_kind_in_context(int kind);

/* The program made a context of its own on `device` (cuCtxCreate): from
 * then on a reset of its primary context releases nothing at once
 * (vramtrace's records do not say which context they were made in); a
 * record whose address the driver hands out again is released then. */
void vt_tracker_own_context(int device);

/* Before the reset of device `device`'s primary context: its records of
 * those kinds, and the pinned host memory (cuMemAllocHost, cuMemHostAlloc)
 * that `pinned_here` says was made on it (the driver asked, address by
 * address, with no lock of the tracker's held; NULL: none), leave the
 * live tables, as a free's record leaves before the driver's free (NULL:
 * none, or no memory to list them). After it,
 * vt_tracker_release_end with whether it succeeded: on success they are
 * kept, by stack, as released without a free (but IPC mappings, which the
 * reset closed: that memory is another process's); on failure they are
 * put back. Either way the list is freed. */
struct vt_release;
struct vt_release *vt_tracker_release_begin(int device, int (*pinned_here)(uint64_t address, void *arg), void *arg);

/* Before a context's destruction (cuCtxDestroy): the records of the
 * memory it takes that `owned` says is the context's (the driver asked,
 * address by address) leave the live tables, the same way; then
 * vt_tracker_release_end. `owned` is called with no lock of the
 * tracker's held; NULL, none (the driver cannot be asked). Device,
 * pitched, managed and pinned host memory, not arrays (vramtrace knows
 * them by handle, not by address): those are released when the driver
 * hands the same handle out again. */
struct vt_release *vt_tracker_release_context_begin(int (*owned)(uint64_t address, void *arg), void *arg);
void vt_tracker_release_end(struct vt_release *rl, int ok);

/* One allocation of `bytes` at `stack` of kind `kind` released without a
 * free, kept in the list below (an allocation at its address told of it:
 * account.h). */
void vt_released_add(uint32_t stack, uint64_t bytes, int kind) __attribute__((visibility("hidden")));

/* What resets released without a free so far, by stack, largest first
 * (malloc'd; NULL and *n 0 when nothing): with `host` 0, device memory;
 * with 1, host memory (pinned host memory; host memory of any kind whose
 * address the driver handed out again).
 * Two lists, as the live counts keep pinned host memory apart from the
 * device's: what a reset took of it is no device's usage. */
struct vt_holder *vt_tracker_released(int host, size_t *n);

/* In a forked child: nothing released (the parent's memory is not its). */
void vt_released_reset_child(void) __attribute__((visibility("hidden")));

#endif
