/* model_u64.h -- a dump's unsigned 64-bit integers read through jansson.
 *
 * The library writes a count as the uint64_t it is: a program that asks
 * for (size_t)-1 bytes leaves "requested_bytes":18446744073709551615.
 * jansson's integers are long long, and it refuses a text holding one
 * above INT64_MAX. vm_json_load parses such a text again with each of
 * those integers (up to 2^64 - 1; past it the refusal stands) replaced by
 * a marker, ["\u0000<its digits>"], and vm_json_u64 is the one reader that
 * takes a marker, where a count is expected.
 *
 * A dump cannot forge a marker: the text is rewritten only when none of its
 * strings holds \u0000, which jansson refuses otherwise, so every NUL in
 * the parsed document is one the rewrite put there. And a marker is an
 * array, not a bare string, so that where a name, an address or a kind is
 * expected a number stays refused as any other number is, never read as
 * an empty string. */
#ifndef VT_MODEL_U64_H
#define VT_MODEL_U64_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

/* json_loadb of the n bytes at buf (JSON_REJECT_DUPLICATES), taking
 * integers up to 2^64 - 1 as said above. NULL with *je set as jansson sets
 * it when the text is refused. */
json_t *vm_json_load(const char *buf, size_t n, json_error_t *je);

/* Whether v is a count: an integer of at least 0, or a marker; its value
 * into *out. */
int vm_json_u64(const json_t *v, uint64_t *out);

/* Whether v is a marker: an integer above INT64_MAX (for the readers of
 * signed fields, to say "out of range" of it rather than "not an
 * integer"). */
int vm_json_is_big(const json_t *v);

#endif
