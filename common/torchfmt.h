/* torchfmt.h -- the lines that say what PyTorch holds on a device, the same
 * in the library's post-mortem and exit summary and in `vramtrace report`.
 * `prefix` begins every line ("vramtrace: " in the library, "" in the
 * CLI); `put` writes a text taken from the program (NULL: as it is). */
#ifndef VT_TORCHFMT_H
#define VT_TORCHFMT_H

#include <stdint.h>
#include <stdio.h>

/* The device's figures, given as values (a pointer NULL: not known).
 * "PREFIXPyTorch on device D: A allocated by PyTorch, R reserved but
 * unallocated (largest free block L[, the failed request Q does not fit
 * in it]), O outside PyTorch[; N steps]", then "PREFIX  by category: ..."
 * with each of the ncat names and bytes. With settings (the allocator's,
 * may be NULL) naming backend:cudaMallocAsync, "(in its cudaMallocAsync
 * pool, whose free blocks are not known)" in place of the largest block. */
void vt_put_torch_device(FILE *f, const char *prefix, int device, uint64_t allocated, uint64_t reserved,
                         uint64_t largest_free, const uint64_t *request, const uint64_t *outside, uint64_t steps,
                         const char *const *cat_names, const uint64_t *cat_bytes, int ncat, const char *settings);

/* "PREFIX  growth: RATE in SITE": the growing site whose memory the
 * device's tensors hold, RATE its growth and holder as every report says
 * them ("+256.00 MiB per step over the last 30 steps (+7.50 GiB in 1.2 s),
 * held by `history`"), SITE its call site ("" leaves " in SITE" out); both
 * written as given. With HOLDER (the object that holds the site's
 * tensors; NULL or "" for none), a line of what to do next: free what it
 * keeps; under PyTorch's caching allocator (SETTINGS without
 * backend:cudaMallocAsync) SITE is where the cache made the segments the
 * tensors lie in, not where they were made, and it says so. */
void vt_put_torch_growth(FILE *f, const char *prefix, const char *rate, const char *site, const char *holder,
                         const char *settings, void (*put)(FILE *, const char *));

/* One tensor: "PREFIX    BYTES  DTYPE SHAPE  CATEGORY  NAME[ (held by HOLDER)][  SITE]". */
void vt_put_torch_tensor(FILE *f, const char *prefix, uint64_t bytes, const char *dtype, const char *shape,
                         const char *category, const char *name, const char *holder, const char *site,
                         void (*put)(FILE *, const char *));

/* After the largest tensors, unless settings name backend:cudaMallocAsync
 * (vramtrace run --tensors' backend, where each tensor is its own
 * allocation): that a tensor's line is its cache segment's. */
void vt_put_torch_segment_note(FILE *f, const char *prefix, const char *settings);

#endif
