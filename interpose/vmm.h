/* vmm.h -- when a virtual-memory handle's memory ends.
 *
 * "The memory allocation will be freed when all outstanding mappings to the
 * memory are unmapped and when all outstanding references to the handle
 * (including its shareable counterparts) are also released" (cuda.h,
 * cuMemRelease). A program may release a handle right after mapping it and
 * keep using the memory until cuMemUnmap: the record of the handle (made by
 * cuMemCreate) is freed only when the last of its references
 * (cuMemCreate's, and one for each cuMemRetainAllocationHandle) is released
 * and its last mapping is unmapped, whichever comes last.
 *
 * One table of the handles cuMemCreate made (references, mappings) and one
 * of the mappings (address, size, handle), under one lock; touched only by
 * the virtual-memory calls. A handle this table does not know (made before
 * vramtrace was on, or imported) is freed at its release, as any other
 * allocation is at its free. */
#ifndef VT_INTERPOSE_VMM_H
#define VT_INTERPOSE_VMM_H

#include <stddef.h>
#include <stdint.h>

/* The functions below are called with this lock held, taken before the
 * decision and let go after the driver's call and its bookkeeping. */
void vt_vmm_lock(void);
void vt_vmm_unlock(void);

/* cuMemCreate made `handle`: one reference, no mapping. */
void vt_vmm_created(uint64_t handle);

/* cuMemRetainAllocationHandle gave `handle` one more reference. */
void vt_vmm_retained(uint64_t handle);

/* What a release of `handle` does, asked before the driver's call; the
 * reference is taken off at once (vt_vmm_release_undo puts it back when
 * the driver refuses). */
enum vt_vmm_release {
    VT_VMM_UNKNOWN, /* not a handle of this table: its memory ends now */
    VT_VMM_LAST,    /* its last reference, no mapping: its memory ends now */
    VT_VMM_KEPT,    /* references or mappings remain: its memory stays */
    VT_VMM_NONE,    /* no reference left to release (the driver refuses) */
};
enum vt_vmm_release vt_vmm_release(uint64_t handle);
void vt_vmm_release_undo(uint64_t handle, enum vt_vmm_release what);

/* cuMemMap mapped `handle` at [address, address + size); `id` is the
 * mapping's in the tracker's history (vt_tracker_map; 0: none), told
 * vt_tracker_unmap when the mapping goes. */
void vt_vmm_mapped(uint64_t handle, uint64_t address, uint64_t size, uint64_t id);

/* An unmap of [address, address + size), asked before the driver's call:
 * the handles whose memory the unmap ends (released, and every mapping of
 * theirs inside the range), at most `max` of them written to `ending`;
 * returns how many there are (more than max: the caller asks again with
 * room for all). Nothing changes until vt_vmm_unmapped. */
size_t vt_vmm_unmap_ending(uint64_t address, uint64_t size, uint64_t *ending, size_t max);

/* The driver unmapped [address, address + size): its mappings are
 * forgotten (their end told to the tracker's history), and so is each
 * handle left with no reference nor mapping. */
void vt_vmm_unmapped(uint64_t address, uint64_t size);

void vt_vmm_fork_prepare(void);
void vt_vmm_fork_parent(void);
void vt_vmm_reset_child(void);

#endif
