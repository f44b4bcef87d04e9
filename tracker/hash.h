/* hash.h -- the word-at-a-time hash of interned stacks.
 *
 * vt_hash_words promises the same 32-bit value for the same bytes, reads
 * whole 8-byte words where it can (frame arrays are whole words), and is
 * computed before the tracker's lock is taken (uthash's own byte-wise hash
 * is replaced by it). Internal to tracker/. */
#ifndef VT_HASH_H
#define VT_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Four independent lanes, so that the multiplies overlap; the lanes are
 * locals so that they stay in registers. */
static inline uint32_t vt_hash_words(const void *key, size_t len) {
    const unsigned char *p = key;
    const uint64_t m = 0xff51afd7ed558ccdull;
    uint64_t h0 = 0x9e3779b97f4a7c15ull ^ len, h1 = 0xc2b2ae3d27d4eb4full;
    uint64_t h2 = 0x165667b19e3779f9ull, h3 = 0x27d4eb2f165667c5ull;
    size_t i = 0;
    for (; i + 32 <= len; i += 32) {
        uint64_t w[4];
        memcpy(w, p + i, 32);
        h0 = (h0 ^ w[0]) * m;
        h1 = (h1 ^ w[1]) * m;
        h2 = (h2 ^ w[2]) * m;
        h3 = (h3 ^ w[3]) * m;
    }
    for (; i + 8 <= len; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h0 = (h0 ^ w) * m;
    }
    for (; i < len; i++) h1 = (h1 ^ p[i]) * 0x100000001b3ull;
    uint64_t x = h0 ^ (h1 >> 7) ^ (h2 << 3) ^ (h3 >> 11) ^ (h1 * m) ^ (h3 * 0x9e3779b97f4a7c15ull);
    x ^= x >> 29;
    x *= m;
    return (uint32_t)(x ^ (x >> 32));
}


#endif
