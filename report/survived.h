/* survived.h -- out-of-memory failures the program got past: the same
 * request, asked again, succeeded (an allocator's retry after it gave
 * back what it kept, as PyTorch's caching allocator does before it
 * raises). */
#ifndef VT_SURVIVED_H
#define VT_SURVIVED_H

#include <stdint.h>

#include "../tracker/tracker.h"

struct vt_symbols;

/* How many of the failures in s's event history were followed, before
 * another failure of the same request, by a successful allocation of the
 * same bytes and kind on the same device, from the same call site
 * (vt_site_groups: a retry's native stack differs from the first try's
 * inside the allocator) or as the next allocation of all; a pitched
 * allocation or an array, whose bytes the driver pads, by its call site
 * and device alone, never as the next allocation. A failure of
 * the same request again after that success, before any other request's
 * allocation (pages of one size mapped one at a time: some got, the next
 * refused), is the same failure going on: it got past only if that later
 * failure did. Host memory, and another device's, do not end it (another
 * thread's pinned buffer between the pages); another allocation on the
 * device does, whichever thread made it (the history does not say). Failures whose events the ring overwrote are not counted,
 * nor those of requests past the first 65,536 distinct ones waiting at
 * once. *last_survived (when not NULL) is 1 when the last failure of the
 * history is one of those got past, 0 when it is not (still waiting for
 * its request's success at the end, or not followed). */
uint64_t vt_oom_survived(const struct vt_snapshot *s, const struct vt_symbols *sym, int *last_survived);

#endif
