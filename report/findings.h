/* findings.h -- what an out-of-memory failure's numbers say, in order.
 *
 * The questions a good guide asks, each answered only when the numbers
 * support it, most likely first, each with the numbers behind it and one
 * concrete next step:
 *
 *   budget                  the failure is VRAMTRACE_LIMIT's, not the device's
 *   request_exceeds_device  the request alone is larger than the device
 *                           (PyTorch's request, where its record says it
 *                           asked more than the call that failed)
 *   other_processes         other processes hold a large share of the GPU
 *   kept_exception          PyTorch's record: a caught exception's traceback
 *                           keeps the tensors of a failed attempt
 *   request_takes_most      the failing request's own handles, made
 *                           before it, are no less than all the program
 *                           holds besides (tracker/handlerun.h)
 *   growing_site            a call site grew through the run (leak suspect)
 *   one_site_dominates      one call site holds most of the tracked memory
 *   outside_tracked         much is held outside tracked allocations
 *   fragmentation           more was free than asked for, yet it failed
 *   fragmented_cache        PyTorch's record: its cache holds more than the
 *                           request unallocated, in no block as large
 *   allocator_retry         the failing call is a caching allocator's retry
 *                           after it released its cache
 *
 * Where the numbers tell how much a finding's next step would free (a
 * holder's bytes, a pool's unused reserve, other processes' memory) and
 * so whether the request would then fit, a finding whose step would make
 * it fit comes before one whose step cannot; the order is kept otherwise.
 */
#ifndef VT_FINDINGS_H
#define VT_FINDINGS_H

#include <stddef.h>

#include "../tracker/tracker.h"
#include "growth.h"
#include "symbolize.h"

#define VT_MAX_FINDINGS 8

struct vt_finding {
    const char *id;
    char text[640];   /* the finding, with its numbers */
    char next[640];   /* one concrete next step */
    int from_record;  /* it comes from PyTorch's record, which arrives
                         after the post-mortem is written: said again
                         once the record came (vt_torch_print_oom_findings) */
    int fits;         /* whether acting on it alone frees enough for the
                         request: 1 it does, -1 it cannot, 0 not known */
};

/* " pid 12 (python) 3.00 GiB, pid 40 ?": the other processes of an OOM as
 * every in-process report lists them (n of them; "?" where NVML did not
 * say). Writes into buf, cut to size; returns buf. */
const char *vt_procs_text(const struct vt_proc *procs, uint32_t n, char *buf, size_t size);

/* The findings for OOM number `index` of s. Returns how many were written
 * to out. The growing site the growing_site finding speaks of, its holder
 * named from PyTorch's record of that failure when one came, goes to
 * *grew (allocs 0 when there is none). `holders` (by stack, largest first;
 * NULL: the OOM's own, of every device) are those of the failing device's
 * memory when the process holds memory on others too. */
int vt_findings(const struct vt_snapshot *s, size_t index, const struct vt_symbols *sym,
                const struct vt_holder *holders, size_t nholders, struct vt_finding *out, struct vt_growth *grew);

#endif
