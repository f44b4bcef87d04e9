/* sha256.h -- SHA-256 (FIPS 180-4) of a buffer, for the hashes the HTML
 * report's content policy names. */
#ifndef VT_SHA256_H
#define VT_SHA256_H

#include <stddef.h>
#include <stdint.h>

/* The SHA-256 digest of len bytes at data, into out. */
void vt_sha256(const void *data, size_t len, uint8_t out[32]);

/* The digest of the NUL-terminated string s in base64 (44 characters and a
 * NUL), as a Content-Security-Policy source 'sha256-...' spells it. */
void vt_sha256_base64(const char *s, char out[45]);

#endif
