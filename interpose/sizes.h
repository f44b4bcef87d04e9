/* sizes.h -- a size the hooks work out from the program's arguments: a
 * pitched allocation's width times its height, an array's dimensions times
 * its element, a mipmapped array's levels summed.
 *
 * Such a product or sum can pass 2^64 - 1 (cudaMallocPitch of 1 MiB by
 * 2^44 + 1 rows is 2^64 + 1 MiB). The driver refuses it as out of memory;
 * the request is then recorded as 2^64 - 1 bytes, as a request of
 * (size_t)-1 is, more than any device holds, never as the remainder the
 * arithmetic wraps around to (which read as a 1 MiB request that failed
 * with 924 MiB free, and was taken for fragmentation). */
#ifndef VT_SIZES_H
#define VT_SIZES_H

#include <stdint.h>

/* a * b, or UINT64_MAX where the product passes it. */
static inline uint64_t vt_size_mul(uint64_t a, uint64_t b) {
    uint64_t r;
    return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

/* a + b, or UINT64_MAX where the sum passes it. */
static inline uint64_t vt_size_add(uint64_t a, uint64_t b) {
    uint64_t r;
    return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}

#endif
