/* display.c -- a text's display form: what a terminal may be shown
 * (display.h). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "display.h"

/* Length of the valid UTF-8 sequence at s (shortest form, no surrogates),
 * or 0. */
static size_t utf8_len(const unsigned char *s) {
    size_t n;
    if (s[0] < 0x80) return 1;
    if (s[0] >= 0xc2 && s[0] <= 0xdf) n = 2;
    else if ((s[0] & 0xf0) == 0xe0) n = 3;
    else if (s[0] >= 0xf0 && s[0] <= 0xf4) n = 4;
    else return 0;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    if (n == 3 && s[0] == 0xe0 && s[1] < 0xa0) return 0;
    if (n == 3 && s[0] == 0xed && s[1] >= 0xa0) return 0;
    if (n == 4 && s[0] == 0xf0 && s[1] < 0x90) return 0;
    if (n == 4 && s[0] == 0xf4 && s[1] >= 0x90) return 0;
    return n;
}

static uint32_t utf8_code(const unsigned char *s, size_t n) {
    if (n == 1) return s[0];
    uint32_t c = s[0] & (0x7f >> n);
    for (size_t i = 1; i < n; i++) c = (c << 6) | (s[i] & 0x3f);
    return c;
}

size_t vt_display_char(const char *p, char out[VT_CHAR_MAX + 1]) {
    const unsigned char *s = (const unsigned char *)p;
    out[0] = '\0';
    if (!s || !*s) return 0;
    size_t n = utf8_len(s);
    if (n == 0) {
        snprintf(out, VT_CHAR_MAX + 1, "\\x%02x", s[0]);
        return 1;
    }
    uint32_t c = utf8_code(s, n);
    if (c < 0x20 || c == 0x7f) snprintf(out, VT_CHAR_MAX + 1, "\\x%02x", (unsigned)c);
    else if ((c >= 0x80 && c <= 0x9f) || (c >= 0x202a && c <= 0x202e) || (c >= 0x2066 && c <= 0x2069) ||
             c == 0x2028 || c == 0x2029)
        snprintf(out, VT_CHAR_MAX + 1, "\\u%04x", (unsigned)c & 0xffffu); /* c <= 0x2069 here */
    else {
        memcpy(out, s, n);
        out[n] = '\0';
    }
    return n;
}

const char *vt_display(const char *s, char *buf, size_t size) {
    size_t len = 0;
    char ch[VT_CHAR_MAX + 1];
    if (size == 0) return buf;
    buf[0] = '\0';
    for (size_t n; s && *s; s += n) {
        /* Printable ASCII, nearly every byte of a name, is its own display
         * form: copied without a call for each (at names of 600 bytes,
         * the call's strlen was a third of an HTML report's time). */
        if ((unsigned char)*s >= 0x20 && (unsigned char)*s < 0x7f) {
            if (len + 1 >= size) break;
            buf[len++] = *s;
            n = 1;
            continue;
        }
        if ((n = vt_display_char(s, ch)) == 0) break;
        size_t w = strlen(ch);
        if (len + w >= size) break;
        memcpy(buf + len, ch, w);
        len += w;
    }
    buf[len] = '\0';
    return buf;
}

void vt_put_display(FILE *f, const char *s) {
    char ch[VT_CHAR_MAX + 1];
    for (size_t n; s && (n = vt_display_char(s, ch)) > 0; s += n) fputs(ch, f);
}
