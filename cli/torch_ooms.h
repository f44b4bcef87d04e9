/* torch_ooms.h -- the out-of-memory entries of the torch export's device
 * traces: one per request, as PyTorch's own snapshot has them, where the
 * dump knows which failed CUDA calls were one request of PyTorch's.
 *
 * PyTorch's caching allocator answers a failed cudaMalloc by freeing its
 * cache and asking again (twice in all by default, three times with
 * max_split_size_mb), and under expandable segments makes a tensor of
 * 20 MiB pages, giving back the pages it made when one is refused: each
 * try is a failure of the dump, and the companion's record of PyTorch's
 * OOM (its request, the segment size PyTorch asked for) sits on the last
 * of them. PyTorch's snapshot has one `oom` entry for all of it. */
#ifndef VT_TORCH_OOMS_H
#define VT_TORCH_OOMS_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

/* One OOM event's trace entry: whether it has one (an earlier try of a
 * request whose last try carries PyTorch's record has none), its size and
 * the device's free bytes it says (-1: unknown, no `device_free`). */
struct vr_torch_oom {
    int keep;
    uint64_t size;
    int64_t device_free;
};

/* The trace entries of d's n OOM events, at event indexes ev[0..n)
 * (ascending). An event is matched to its record of d->ooms by time and
 * device (the ring and the records keep different failures: the newest
 * events, the first and newest records). An event whose record carries
 * PyTorch's record of the failing device with its request is PyTorch's
 * OOM: its entry has that request as its size, and the tries before it
 * of the same request have none (the records just before it, numbered
 * one after another, of the same thread, device, API, kind, bytes and
 * call site and with no PyTorch record of their own, where the device
 * had no allocation between one try and the next but the later try's
 * own pages). Any other event keeps its own size. Every entry's free
 * bytes are its record's free bytes before the request's pages were
 * taken (free_bytes + taken_bytes, what PyTorch's observer sees once it
 * has given them back); an entry whose request made pages has them in
 * its size too where there is no PyTorch record (what it asked so far),
 * since the trace leaves pages never mapped out. NULL when out of
 * memory; the caller frees it. */
struct vr_torch_oom *vr_torch_ooms(const struct vm_dump *d, const uint32_t *ev, size_t n);

#endif
