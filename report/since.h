/* since.h -- what happened since a mark (tracker/mark.h), in the leak
 * report's words.
 *
 * The two reports a per-test check prints: the memory allocated since a
 * mark and still live, as the exit leak check prints its leaks (the same
 * printer, the same suppressions file, the same kinds: pinned host memory
 * too), and the device memory that was live since
 * the mark at its peak, by call site, with the same frames:
 *
 *   ==PID==vramtrace: peak of GPU memory since the mark: 4096 byte(s) in 1 allocation(s), held by:
 *
 *   4096 byte(s) in 1 object(s) allocated from:
 *       call site: make_buffer src/buf.c:12
 *       #0 0x55d0c2a1b1f3 in make_buffer src/buf.c:12
 *
 *   SUMMARY: vramtrace: peak of 4096 byte(s) in 1 allocation(s) since the mark.
 */
#ifndef VT_SINCE_H
#define VT_SINCE_H

#include <stdio.h>

#include "leaks.h"

/* The leak report of the mark's live allocations to f (nothing when there
 * are none); *res its figures. With outside_torch, only those that did
 * not go through PyTorch's CUDA allocator (report/traits.h): what a test
 * made through CuPy, ctypes or an extension and kept, without the
 * segments of PyTorch's cache (PyTorch counts its tensors itself). 0, or
 * -1 for a mark that is not open or a snapshot that could not be taken. */
int vt_since_leaks(FILE *f, int mark, int outside_torch, struct vt_leak_result *res);

/* The holders at the mark's peak to f (nothing when nothing was allocated
 * since the mark). 0, or -1 as vt_since_leaks. */
int vt_since_peak(FILE *f, int mark);

#endif
