/* ipc.h -- an IPC mapping opened more than once.
 *
 * "If the memory handle has already been opened by the current context,
 * the reference count on the handle is incremented by 1 and the existing
 * device pointer is returned" (cuda.h, cuIpcOpenMemHandle), and
 * cuIpcCloseMemHandle "decrements the reference count ... When the
 * reference count reaches 0, this API unmaps the memory." So an open that
 * returns an address already live as imported memory is one more
 * reference to that mapping, not a new allocation; a close takes one away,
 * and only the last close frees the record. The references are counted on
 * the tracker's record (vt_tracker_ref), which a reset releases with the
 * mapping; one lock here keeps an open's "another reference, or a new
 * record" and a close's "one reference fewer, or the record out" from
 * running at once (two first opens of one handle would otherwise both
 * record it). The driver's calls run outside it. */
#ifndef VT_INTERPOSE_IPC_H
#define VT_INTERPOSE_IPC_H

#include "hook.h"

/* An open returned: as vt_hook_alloc (ok, oom, address, bytes), except
 * that an address live as imported memory gets one more reference. */
void vt_ipc_opened(const char *api, int ok, int oom, uint64_t address, uint64_t bytes);

/* A close of `address`, before the driver's call: one reference fewer
 * when the mapping has more than one (kept), else its record out as at a
 * free (f). After the call, vt_ipc_close_end with whether the driver took
 * it: a refused close puts the reference or the record back. */
struct vt_ipc_close {
    struct vt_free f;
    uint64_t address;
    int kept;
};
struct vt_ipc_close vt_ipc_close_begin(uint64_t address);
void vt_ipc_close_end(const struct vt_ipc_close *c, int ok);

void vt_ipc_fork_prepare(void);
void vt_ipc_fork_parent(void);

#endif
