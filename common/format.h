/* format.h -- small text helpers shared by the report writers. */
#ifndef VT_FORMAT_H
#define VT_FORMAT_H

#include <stdint.h>
#include <stdio.h>

/* "1.50 GiB", "512 B": a byte count for people. Writes into buf. */
const char *vt_fmt_bytes(uint64_t bytes, char *buf, size_t size);

/* "+3.00 GiB over 6 allocations in 0.100 s, 512.00 MiB per allocation":
 * how a growing call site's figures read, in the library's reports and in
 * the CLI's alike (unit is singular: "allocation"; units == 1 reads "over
 * 1 allocation"). Writes into buf and returns it. */
const char *vt_fmt_growth(uint64_t rise, uint64_t units, const char *unit, uint64_t span_ns,
                          uint64_t per_unit, char *buf, size_t size);

/* "3 calls passed through unrecorded (...)": the one sentence for a dump's
 * totals.missed, in the library's reports and the CLI's text alike. NULL
 * when missed is 0 (nothing is said then). Writes into buf. */
const char *vt_fmt_missed(uint64_t missed, char *buf, size_t size);

/* Write s as a JSON string literal (quotes included); NULL becomes null.
 * Control characters and non-UTF-8 bytes are escaped, so any name taken from
 * a binary yields valid JSON. */
void vt_json_string(FILE *f, const char *s);

/* A text that snprintf cut to fit size bytes ends at a whole UTF-8
 * character: a character the cut split is taken off, so that the text
 * stays valid UTF-8 for the JSON, HTML and pickle writers. Returns buf. */
const char *vt_utf8_whole(char *buf, size_t size);

#endif
