/* format.h -- small text helpers shared by the report writers. */
#ifndef VT_FORMAT_H
#define VT_FORMAT_H

#include <stdint.h>
#include <stdio.h>

/* "1.50 GiB", "512 B": a byte count for people. Writes into buf. */
const char *vt_fmt_bytes(uint64_t bytes, char *buf, size_t size);

/* Write s as a JSON string literal (quotes included); NULL becomes null.
 * Control characters and non-UTF-8 bytes are escaped, so any name taken from
 * a binary yields valid JSON. */
void vt_json_string(FILE *f, const char *s);

#endif
