/* varint.h -- LEB128 varints in memory the CLI packs itself: seven bits a
 * byte, the low ones first, the top bit set on every byte but the last (a
 * uint64_t takes 10 at most). The packed events (model_events.c), the
 * torch export's lists by device and the page's runs read and write them
 * here; what a dump or a page holds is decoded by its own reader, which
 * checks what it is given. */
#ifndef VT_VARINT_H
#define VT_VARINT_H

#include <stddef.h>
#include <stdint.h>

#define VM_VARINT_MAX 10

/* v written at p; returns the byte after it. */
static inline uint8_t *vm_varint_put(uint8_t *p, uint64_t v) {
    for (; v >= 0x80; v >>= 7) *p++ = (uint8_t)(v | 0x80);
    *p++ = (uint8_t)v;
    return p;
}

/* The varint at p into *v; returns the byte after it. p holds a whole
 * one (written by vm_varint_put). */
static inline const uint8_t *vm_varint_get(const uint8_t *p, uint64_t *v) {
    uint64_t x = 0;
    for (int shift = 0;; shift += 7) {
        uint8_t c = *p++;
        x |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) break;
    }
    *v = x;
    return p;
}

static inline size_t vm_varint_len(uint64_t v) {
    size_t n = 1;
    for (; v >= 0x80; v >>= 7) n++;
    return n;
}

#endif
