/* model_scan.h -- a small JSON scanner for the big arrays of a version 2
 * dump, read without building a tree.
 *
 * Accepts exactly what jansson's decoder accepts for the values it reads
 * (integers that fit in 64 signed bits, strings of valid UTF-8 without NUL),
 * and counts up to 2^64 - 1 as model_u64.h reads them through jansson,
 * and names the first thing it refuses. */
#ifndef VT_MODEL_SCAN_H
#define VT_MODEL_SCAN_H

#include <stddef.h>
#include <stdint.h>

struct vm_scan {
    const char *s, *e;       /* what is left to read */
    const char *err;         /* the first refusal (static text), or NULL */
    /* Optional: told by vm_scan_skip, every VM_SCAN_STEP bytes of a long
     * value, that the text before upto is read (a mapped dump gives its
     * pages back as it goes). */
    void (*passed)(void *arg, const char *upto);
    void *arg;
};

#define VM_SCAN_STEP (256 << 10)

/* Skip white space; then 1 and c consumed when the next character is c. */
int vm_scan_lit(struct vm_scan *p, char c);

/* 1 and `null` consumed when it comes next; 0 (err not set) else. */
int vm_scan_null(struct vm_scan *p);

/* An integer into *v; 0 (with err set) when the next value is not one. */
int vm_scan_int(struct vm_scan *p, int64_t *v);

/* An integer of 0 to 2^64 - 1 (a count: no sign) into *v. */
int vm_scan_u64(struct vm_scan *p, uint64_t *v);

/* A string "0x<1 to 16 hex digits>" into *v. */
int vm_scan_hex(struct vm_scan *p, uint64_t *v);

/* A string, decoded and NUL-terminated, at *out (room for the raw
 * string's length, quotes included, is enough); *out is moved past it. */
int vm_scan_string(struct vm_scan *p, char **out, const char **start);

/* The raw bytes of a string without escapes (base64 text): *at, *len. */
int vm_scan_raw_string(struct vm_scan *p, const char **at, size_t *len);

/* Skip one value of any kind (checked by jansson later); 0 when the text
 * ends first. */
int vm_scan_skip(struct vm_scan *p);

/* After an element of an array: 1 when another follows (','), 0 at the
 * end (']'), -1 (err set) else. */
int vm_scan_next(struct vm_scan *p);

#endif
