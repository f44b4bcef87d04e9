/* model_u64.c -- integers above INT64_MAX through jansson (model_u64.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_u64.h"

/* The digits [d, e) as a value above INT64_MAX and at most UINT64_MAX into
 * *v; 0 when they are not one (jansson takes the smaller ones itself and
 * refuses the larger). */
static int above_int64(const char *d, const char *e, uint64_t *v) {
    if (e - d < 19 || e - d > 20 || *d == '0') return 0;
    uint64_t u = 0;
    for (; d < e; d++) {
        unsigned k = (unsigned)(*d - '0');
        if (k > 9 || u > (UINT64_MAX - k) / 10) return 0;
        u = u * 10 + k;
    }
    *v = u;
    return u > (uint64_t)INT64_MAX;
}

/* Room for `more` bytes at the end of *o (*n used, *cap allocated). */
static int grow(char **o, size_t n, size_t *cap, size_t more) {
    if (n + more <= *cap) return 1;
    size_t c = (n + more) * 2;
    char *g = realloc(*o, c);
    if (!g) return 0;
    *o = g;
    *cap = c;
    return 1;
}

/* The text with each integer above INT64_MAX replaced by its marker,
 * malloc'd into *out (*outn bytes): 1. 0 when it holds none; -1 when
 * memory ran out; -2 with *nul at the "\u0000" of a string that holds one
 * (a marker could not be told from that string). A lexer of tokens only:
 * whatever else is wrong with the text, jansson says. */
static int rewrite(const char *buf, size_t n, char **out, size_t *outn, const char **nul) {
    const char *s = buf, *e = buf + n, *copied = buf;
    char *o = NULL;
    size_t on = 0, cap = 0;
    int found = 0;
    while (s < e) {
        if (*s == '"') {
            for (s++; s < e && *s != '"'; s++) {
                if (*s != '\\') continue;
                if (e - s >= 6 && memcmp(s, "\\u0000", 6) == 0) {
                    *nul = s;
                    free(o);
                    return -2;
                }
                s++;
            }
            s++;
            continue;
        }
        if (*s != '-' && (*s < '0' || *s > '9')) {
            s++;
            continue;
        }
        const char *t = s;
        while (s < e && strchr("0123456789+-.eE", *s)) s++;
        uint64_t v;
        if (!above_int64(t, s, &v)) continue;
        char marker[32];
        int m = snprintf(marker, sizeof marker, "[\"\\u0000%.*s\"]", (int)(s - t), t);
        if (!grow(&o, on, &cap, (size_t)(t - copied) + (size_t)m)) {
            free(o);
            return -1;
        }
        memcpy(o + on, copied, (size_t)(t - copied));
        on += (size_t)(t - copied);
        memcpy(o + on, marker, (size_t)m);
        on += (size_t)m;
        copied = s;
        found = 1;
    }
    if (!found) return 0;
    if (!grow(&o, on, &cap, (size_t)(e - copied) + 1)) {
        free(o);
        return -1;
    }
    memcpy(o + on, copied, (size_t)(e - copied));
    *out = o;
    *outn = on + (size_t)(e - copied);
    return 1;
}

static void refuse(json_error_t *je, int line, int column, enum json_error_code code, const char *text) {
    memset(je, 0, sizeof *je);
    je->line = line;
    je->column = column;
    snprintf(je->text, sizeof je->text - 1, "%s", text);
    je->text[sizeof je->text - 1] = (char)code;
}

/* A text that jansson refused for an integer out of its range is read again
 * rewritten. An error jansson finds then past a marker is said at a column
 * 10 further on its line, per marker before it there. */
json_t *vm_json_load(const char *buf, size_t n, json_error_t *je) {
    json_t *root = json_loadb(buf, n, JSON_REJECT_DUPLICATES, je);
    if (root || json_error_code(je) != json_error_numeric_overflow) return root;
    char *text;
    size_t tn;
    const char *nul = NULL;
    int r = rewrite(buf, n, &text, &tn, &nul);
    if (r == 0) return NULL; /* jansson's refusal stands */
    if (r == -1) {
        refuse(je, -1, -1, json_error_out_of_memory, "out of memory");
        return NULL;
    }
    if (r == -2) {
        /* Where it is, as jansson counts: lines, and characters in one. */
        int line = 1, column = 1;
        for (const char *s = buf; s < nul; s++) {
            if (*s == '\n') line++, column = 1;
            else if ((*s & 0xc0) != 0x80) column++;
        }
        refuse(je, line, column, json_error_null_character, "\\u0000 is not allowed");
        return NULL;
    }
    root = json_loadb(text, tn, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, je);
    free(text);
    return root;
}

/* A marker's digits: the string inside it after its NUL. */
static const char *marker_digits(const json_t *v) {
    if (!json_is_array(v) || json_array_size(v) != 1) return NULL;
    const json_t *s = json_array_get(v, 0);
    if (!json_is_string(s)) return NULL;
    const char *t = json_string_value(s);
    size_t len = json_string_length(s);
    return len >= 2 && t[0] == '\0' ? t + 1 : NULL;
}

int vm_json_u64(const json_t *v, uint64_t *out) {
    if (json_is_integer(v)) {
        if (json_integer_value(v) < 0) return 0;
        *out = (uint64_t)json_integer_value(v);
        return 1;
    }
    const char *d = marker_digits(v);
    return d && above_int64(d, d + strlen(d), out);
}

int vm_json_is_big(const json_t *v) {
    uint64_t u;
    return !json_is_integer(v) && vm_json_u64(v, &u);
}
