/* pyline.c -- a code object's line at an instruction, from its line table
 * (tracker/pystack.c reads the table; these only decode it). */
#include <stdint.h>

#include "pylayout.h"

/* Read a varint (6 bits a byte, bit 6 = more) from a 3.11+ location table. */
static unsigned read_varint(const uint8_t **p, const uint8_t *end) {
    unsigned v = 0, shift = 0;
    while (*p < end) {
        uint8_t b = *(*p)++;
        v |= (unsigned)(b & 63) << shift;
        shift += 6;
        if (!(b & 64) || shift > 28) break;
    }
    return v;
}

static int read_svarint(const uint8_t **p, const uint8_t *end) {
    unsigned v = read_varint(p, end);
    return (v & 1) ? -(int)(v >> 1) : (int)(v >> 1);
}

/* The line of code unit `unit` from a 3.11+ location table p[0..size)
 * (PEP 626/657 format, the same in 3.11, 3.12 and 3.13). */
int vt_py_line_from_table(const uint8_t *p, int64_t size, int line, int unit) {
    const uint8_t *end = p + (size > 0 ? size : 0);
    int addr = 0;
    while (p < end) {
        uint8_t first = *p++;
        if (!(first & 0x80)) return line; /* lost sync: best effort */
        int code_kind = (first >> 3) & 15, len = (first & 7) + 1;
        int this_line = line;
        switch (code_kind) {
        case 15: this_line = -1; break;                        /* no location */
        case 14:                                               /* long form */
            line += read_svarint(&p, end); this_line = line;
            read_varint(&p, end); read_varint(&p, end); read_varint(&p, end);
            break;
        case 13: line += read_svarint(&p, end); this_line = line; break; /* no column */
        case 10: case 11: case 12:                             /* one-line forms */
            line += code_kind - 10; this_line = line; p += 2;
            break;
        default: p += 1; break;                                /* short forms */
        }
        if (unit < addr + len) return this_line < 0 ? 0 : this_line;
        addr += len;
    }
    return 0;
}

/* The line of byte offset `off` from a 3.10 line table p[0..size) (pairs
 * of byte delta and signed line delta, -128 for none), as
 * PyCode_Addr2Line reads it. */
int vt_py_line_from_310(const uint8_t *p, int64_t size, int line, int off) {
    int start, end = 0;
    for (int64_t i = 0; i + 1 < size; i += 2) {
        start = end;
        end += p[i];
        int delta = (signed char)p[i + 1], cur = -1;
        if (delta != -128) cur = (line += delta);
        if (off >= start && off < end) return cur < 0 ? 0 : cur;
    }
    return 0;
}

