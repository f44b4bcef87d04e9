/* dump_put.h -- numbers into a buffer for the dump's tables, without
 * printf: most of a big dump's bytes are the decimal and hex numbers of
 * its live allocations, nodes and stacks. */
#ifndef VT_DUMP_PUT_H
#define VT_DUMP_PUT_H

#include <stdint.h>
#include <string.h>

/* v in decimal at o; returns the end. */
static inline char *vt_put_u64(char *o, uint64_t v) {
    char t[20];
    int n = 0;
    do t[n++] = (char)('0' + v % 10); while ((v /= 10) != 0);
    while (n) *o++ = t[--n];
    return o;
}

static inline char *vt_put_i64(char *o, int64_t v) {
    if (v < 0) {
        *o++ = '-';
        return vt_put_u64(o, 0 - (uint64_t)v);
    }
    return vt_put_u64(o, (uint64_t)v);
}

/* v as the JSON string "0x..." (lower-case hex, no leading zeros). */
static inline char *vt_put_hex(char *o, uint64_t v) {
    char t[16];
    int n = 0;
    do t[n++] = "0123456789abcdef"[v & 15]; while ((v >>= 4) != 0);
    *o++ = '"';
    *o++ = '0';
    *o++ = 'x';
    while (n) *o++ = t[--n];
    *o++ = '"';
    return o;
}

static inline char *vt_put_str(char *o, const char *s) {
    size_t n = strlen(s);
    memcpy(o, s, n);
    return o + n;
}

#endif
