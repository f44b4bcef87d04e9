/* model_scan.c -- the JSON scanner of model_scan.h. */
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "model_scan.h"

static void ws(struct vm_scan *p) {
    while (p->s < p->e && (*p->s == ' ' || *p->s == '\n' || *p->s == '\r' || *p->s == '\t')) p->s++;
}

static int refuse(struct vm_scan *p, const char *why) {
    if (!p->err) p->err = why;
    return 0;
}

int vm_scan_lit(struct vm_scan *p, char c) {
    ws(p);
    if (p->s < p->e && *p->s == c) {
        p->s++;
        return 1;
    }
    return 0;
}

int vm_scan_null(struct vm_scan *p) {
    ws(p);
    if (p->e - p->s < 4 || memcmp(p->s, "null", 4) != 0) return 0;
    const char *s = p->s + 4;
    /* A literal runs to a delimiter: "nullx" is not null. */
    if (s < p->e && !strchr(",]} \n\r\t", *s)) return 0;
    p->s = s;
    return 1;
}

int vm_scan_int(struct vm_scan *p, int64_t *v) {
    ws(p);
    const char *s = p->s;
    int neg = s < p->e && *s == '-';
    if (neg) s++;
    if (s >= p->e || *s < '0' || *s > '9') return refuse(p, "not an integer");
    if (*s == '0' && s + 1 < p->e && s[1] >= '0' && s[1] <= '9') return refuse(p, "not an integer");
    uint64_t u = 0;
    /* 18 digits cannot pass 2^63: no check (a division a digit was a
     * third of the time a dump of 21,000,000 nodes took to read). */
    for (const char *fast = p->e - s > 18 ? s + 18 : p->e; s < fast && (unsigned)(*s - '0') <= 9; s++)
        u = u * 10 + (unsigned)(*s - '0');
    for (; s < p->e && *s >= '0' && *s <= '9'; s++) {
        unsigned d = (unsigned)(*s - '0');
        if (u > (UINT64_C(9223372036854775808) - d) / 10) return refuse(p, "an integer too big");
        u = u * 10 + d;
    }
    if (s < p->e && (*s == '.' || *s == 'e' || *s == 'E')) return refuse(p, "not an integer");
    if (!neg && u > (uint64_t)INT64_MAX) return refuse(p, "an integer too big");
    *v = neg ? (int64_t)(0 - u) : (int64_t)u;
    p->s = s;
    return 1;
}

int vm_scan_u64(struct vm_scan *p, uint64_t *v) {
    ws(p);
    const char *s = p->s;
    /* "-0" is jansson's integer 0, a count a version 1 dump may hold. */
    if (p->e - s >= 2 && s[0] == '-' && s[1] == '0' &&
        (p->e - s == 2 || ((unsigned)(s[2] - '0') > 9 && s[2] != '.' && s[2] != 'e' && s[2] != 'E'))) {
        *v = 0;
        p->s = s + 2;
        return 1;
    }
    if (s >= p->e || *s < '0' || *s > '9') return refuse(p, "not an integer");
    if (*s == '0' && s + 1 < p->e && s[1] >= '0' && s[1] <= '9') return refuse(p, "not an integer");
    uint64_t u = 0;
    /* 19 digits cannot pass 2^64: no check. */
    for (const char *fast = p->e - s > 19 ? s + 19 : p->e; s < fast && (unsigned)(*s - '0') <= 9; s++)
        u = u * 10 + (unsigned)(*s - '0');
    for (; s < p->e && *s >= '0' && *s <= '9'; s++) {
        unsigned d = (unsigned)(*s - '0');
        if (u > (UINT64_MAX - d) / 10) return refuse(p, "an integer too big");
        u = u * 10 + d;
    }
    if (s < p->e && (*s == '.' || *s == 'e' || *s == 'E')) return refuse(p, "not an integer");
    *v = u;
    p->s = s;
    return 1;
}

int vm_scan_hex(struct vm_scan *p, uint64_t *v) {
    ws(p);
    const char *s = p->s;
    if (p->e - s < 4 || s[0] != '"' || s[1] != '0' || s[2] != 'x') return refuse(p, "not a hex address");
    s += 3;
    uint64_t u = 0;
    int n = 0;
    for (; s < p->e && *s != '"'; s++, n++) {
        char c = *s;
        unsigned d = c >= '0' && c <= '9' ? (unsigned)(c - '0') : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                   : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10) : 16;
        if (d == 16 || n == 16) return refuse(p, "not a hex address");
        u = u << 4 | d;
    }
    if (s >= p->e || n == 0) return refuse(p, "not a hex address");
    *v = u;
    p->s = s + 1;
    return 1;
}

static int hex4(const char *s, unsigned *v) {
    *v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        unsigned d = c >= '0' && c <= '9' ? (unsigned)(c - '0') : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                   : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10) : 16;
        if (d == 16) return 0;
        *v = *v << 4 | d;
    }
    return 1;
}

static char *put_utf8(char *o, unsigned c) {
    if (c < 0x80) *o++ = (char)c;
    else if (c < 0x800) { *o++ = (char)(0xc0 | c >> 6); *o++ = (char)(0x80 | (c & 0x3f)); }
    else if (c < 0x10000) {
        *o++ = (char)(0xe0 | c >> 12); *o++ = (char)(0x80 | ((c >> 6) & 0x3f)); *o++ = (char)(0x80 | (c & 0x3f));
    } else {
        *o++ = (char)(0xf0 | c >> 18); *o++ = (char)(0x80 | ((c >> 12) & 0x3f));
        *o++ = (char)(0x80 | ((c >> 6) & 0x3f)); *o++ = (char)(0x80 | (c & 0x3f));
    }
    return o;
}

/* The length of the valid UTF-8 character at s (before e), or 0. */
static int utf8_len(const unsigned char *s, const unsigned char *e) {
    unsigned c = s[0];
    int n = c < 0x80 ? 1 : c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
    if (n == 0 || e - s < n) return 0;
    for (int i = 1; i < n; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    if (n == 3 && ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] >= 0xa0))) return 0;
    if (n == 4 && ((c == 0xf0 && s[1] < 0x90) || (c == 0xf4 && s[1] >= 0x90))) return 0;
    return n;
}

int vm_scan_string(struct vm_scan *p, char **out, const char **start) {
    ws(p);
    if (p->s >= p->e || *p->s != '"') return refuse(p, "not a string");
    const unsigned char *s = (const unsigned char *)p->s + 1, *e = (const unsigned char *)p->e;
    char *o = *out;
    *start = o;
    while (s < e && *s != '"') {
        if (*s == '\\') {
            if (e - s < 2) break;
            char c = (char)s[1];
            const char *simple = strchr("\"\\/bfnrt", c);
            if (c && simple) {
                *o++ = "\"\\/\b\f\n\r\t"[simple - "\"\\/bfnrt"];
                s += 2;
                continue;
            }
            unsigned u, lo;
            if (c != 'u' || e - s < 6 || !hex4((const char *)s + 2, &u)) return refuse(p, "a bad escape in a string");
            s += 6;
            if (u >= 0xd800 && u <= 0xdbff) {
                if (e - s < 6 || s[0] != '\\' || s[1] != 'u' || !hex4((const char *)s + 2, &lo) || lo < 0xdc00 ||
                    lo > 0xdfff)
                    return refuse(p, "a bad escape in a string");
                u = 0x10000 + ((u - 0xd800) << 10) + (lo - 0xdc00);
                s += 6;
            } else if ((u >= 0xdc00 && u <= 0xdfff) || u == 0) {
                return refuse(p, "a bad escape in a string");
            }
            o = put_utf8(o, u);
            continue;
        }
        if (*s < 0x20) return refuse(p, "a control character in a string");
        int n = utf8_len(s, e);
        if (!n) return refuse(p, "invalid UTF-8 in a string");
        memcpy(o, s, (size_t)n);
        o += n;
        s += n;
    }
    if (s >= e) return refuse(p, "an unterminated string");
    *o++ = '\0';
    *out = o;
    p->s = (const char *)s + 1;
    return 1;
}

int vm_scan_raw_string(struct vm_scan *p, const char **at, size_t *len) {
    ws(p);
    if (p->s >= p->e || *p->s != '"') return refuse(p, "not a string");
    /* In steps when p->passed is set, so that a long string's pages can
     * be given back as they are searched. */
    const char *q = NULL, *from = p->s + 1;
    while (!q && from < p->e) {
        size_t step = p->passed && (size_t)(p->e - from) > VM_SCAN_STEP ? VM_SCAN_STEP : (size_t)(p->e - from);
        q = memchr(from, '"', step);
        from += step;
        if (!q && p->passed && from < p->e) p->passed(p->arg, from);
    }
    if (!q) return refuse(p, "an unterminated string");
    *at = p->s + 1;
    *len = (size_t)(q - p->s - 1);
    p->s = q + 1;
    return 1;
}

/* The first of s..e that is a quote or a bracket (special), or e: sixteen
 * bytes at a time where SSE2 is (a byte at a time, a fifth of the time a
 * dump of 21,000,000 nodes took to read). */
static const unsigned char *to_special(const unsigned char *s, const unsigned char *e, const unsigned char *special) {
#ifdef __SSE2__
    const __m128i q = _mm_set1_epi8('"'), lb = _mm_set1_epi8('['), rb = _mm_set1_epi8(']');
    const __m128i lc = _mm_set1_epi8('{'), rc = _mm_set1_epi8('}');
    for (; e - s >= 16; s += 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)s);
        __m128i m = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, q), _mm_cmpeq_epi8(v, lb)),
                                 _mm_or_si128(_mm_cmpeq_epi8(v, rb),
                                              _mm_or_si128(_mm_cmpeq_epi8(v, lc), _mm_cmpeq_epi8(v, rc))));
        int bits = _mm_movemask_epi8(m);
        if (bits) return s + __builtin_ctz((unsigned)bits);
    }
#endif
    while (s < e && !special[*s]) s++;
    return s;
}

int vm_scan_skip(struct vm_scan *p) {
    ws(p);
    /* Characters that matter inside a value: quotes and brackets. */
    static unsigned char special[256];
    if (!special['"']) special['"'] = special['['] = special[']'] = special['{'] = special['}'] = 1;
    if (p->s < p->e && *p->s != '"' && *p->s != '[' && *p->s != '{') {
        /* A scalar runs to the next delimiter. */
        const char *s = p->s;
        while (s < p->e && !strchr(",]} \n\r\t:", *s)) s++;
        if (s == p->s) return refuse(p, "a value is missing");
        p->s = s;
        return 1;
    }
    size_t depth = 0;
    const unsigned char *s = (const unsigned char *)p->s, *e = (const unsigned char *)p->e;
    /* With p->passed, the text read so far is handed over every
     * VM_SCAN_STEP bytes, even inside one long string; mark is where it is
     * next (the end without a hook: the loops below then run as plain
     * scans). */
    const unsigned char *mark = p->passed && e - s > VM_SCAN_STEP ? s + VM_SCAN_STEP : e;
    while (s < e) {
        if (s >= mark) {
            p->passed(p->arg, (const char *)s);
            mark = e - s > VM_SCAN_STEP ? s + VM_SCAN_STEP : e;
        }
        s = to_special(s, mark, special);
        if (s >= mark) continue;
        unsigned char c = *s++;
        if (c == '"') {
            for (;;) {
                while (s < mark && *s != '"') s += *s == '\\' ? 2 : 1;
                if (s < mark || mark == e) break;
                p->passed(p->arg, (const char *)s);
                mark = e - s > VM_SCAN_STEP ? s + VM_SCAN_STEP : e;
            }
            if (s >= e) break;
            s++;
        } else if (c == '[' || c == '{') {
            depth++;
        } else if (depth-- == 0) {
            return refuse(p, "an unbalanced bracket");
        }
        if (depth == 0) {
            p->s = (const char *)s;
            return 1;
        }
    }
    return refuse(p, "the text ends inside a value");
}

int vm_scan_next(struct vm_scan *p) {
    if (vm_scan_lit(p, ',')) return 1;
    if (vm_scan_lit(p, ']')) return 0;
    refuse(p, "neither ',' nor ']' after an element");
    return -1;
}
