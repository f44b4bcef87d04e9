/* pack.c -- the data block's integer arrays as packed varints in base64,
 * and its names as pieces of one string table.
 *
 * An array of integers is written as one JSON string: a letter saying how
 * its values were coded ('u' unsigned, 's' signed, 'd' signed differences
 * from the previous value, starting at 0), then the base64 of their
 * LEB128 varints (signed values zigzag-coded first). The script's unpack
 * (cli/html/util.js) turns it back into the same numbers. A million
 * events' times and sizes take 5.8 bytes an event this way against 9.9
 * as decimal JSON; names split into pieces let 100,000 frames that share
 * their files and functions write each of those once. */
#include <stdlib.h>
#include <string.h>

#include "../../common/labels.h"
#include "html.h"

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

void vh_pack_init(struct vh_pack *p, char kind) {
    memset(p, 0, sizeof *p);
    p->kind = kind;
}

static void put_byte(struct vh_pack *p, uint8_t b) {
    if (p->failed) return;
    if (p->n == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 256;
        uint8_t *v = realloc(p->bytes, cap);
        if (!v) { p->failed = 1; return; }
        p->bytes = v;
        p->cap = cap;
    }
    p->bytes[p->n++] = b;
}

static void put_varint(struct vh_pack *p, uint64_t v) {
    for (; v >= 0x80; v >>= 7) put_byte(p, (uint8_t)(v | 0x80));
    put_byte(p, (uint8_t)v);
}

static uint64_t zigzag(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); }

void vh_pack(struct vh_pack *p, int64_t v) {
    if (p->kind == 'u') {
        put_varint(p, (uint64_t)v);
    } else if (p->kind == 's') {
        put_varint(p, zigzag(v));
    } else {
        put_varint(p, zigzag((int64_t)((uint64_t)v - (uint64_t)p->last)));
        p->last = v;
    }
}

void vh_pack_print(FILE *f, const char *name, const struct vh_pack *p) {
    if (name) fprintf(f, ",\"%s\":", name);
    fputc('"', f);
    fputc(p->failed ? 'u' : p->kind, f);
    size_t n = p->failed ? 0 : p->n;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t w = (uint32_t)p->bytes[i] << 16 | (i + 1 < n ? (uint32_t)p->bytes[i + 1] << 8 : 0) |
                     (i + 2 < n ? p->bytes[i + 2] : 0);
        char out[4] = {B64[w >> 18], B64[(w >> 12) & 63], i + 1 < n ? B64[(w >> 6) & 63] : '=',
                       i + 2 < n ? B64[w & 63] : '='};
        fwrite(out, 1, 4, f);
    }
    fputc('"', f);
}

void vh_pack_write(FILE *f, const char *name, struct vh_pack *p) {
    vh_pack_print(f, name, p);
    free(p->bytes);
    vh_pack_init(p, p->kind);
}

/* Splits a display name into (head, rest, line) such that the name reads
 * head, then " " rest when rest is set, then ":" line when line > 0: a
 * frame's "function file:line" or "function (module+offset)". */
static void split_where(const char *s, char *head, char *rest, int *has_rest, unsigned long *line, size_t size) {
    const char *sp = strchr(s, ' ');
    *line = 0;
    *has_rest = sp != NULL;
    if (!sp) { snprintf(head, size, "%s", s); rest[0] = 0; return; }
    snprintf(head, size, "%.*s", (int)(sp - s), s);
    const char *r = sp + 1, *colon = strrchr(r, ':');
    size_t digits = colon ? strlen(colon + 1) : 0;
    if (colon && digits >= 1 && digits <= 9 && colon[1] >= '1' && colon[1] <= '9' &&
        strspn(colon + 1, "0123456789") == digits) {
        *line = strtoul(colon + 1, NULL, 10);
        snprintf(rest, size, "%.*s", (int)(colon - r), r);
    } else {
        snprintf(rest, size, "%s", r);
    }
}

/* Appends name as a new entry; its pieces are interned. */
static long add_entry(struct vh_names *t, const char *name) {
    size_t len = strlen(name) + 1;
    char *head = malloc(len), *rest = malloc(len);
    if (!head || !rest) { free(head); free(rest); return -1; }
    int has_rest;
    unsigned long line;
    split_where(name, head, rest, &has_rest, &line, len);
    uint32_t a = vt_label_group(t->strings, head, NULL);
    uint32_t b = has_rest ? vt_label_group(t->strings, rest, NULL) : 0;
    free(head);
    free(rest);
    if (a == UINT32_MAX || b == UINT32_MAX) return -1;
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 256;
        uint64_t *v = realloc(t->triples, 3 * cap * sizeof *v);
        if (!v) return -1;
        t->triples = v;
        t->cap = cap;
    }
    t->triples[3 * t->n] = a;
    t->triples[3 * t->n + 1] = has_rest ? (uint64_t)b + 1 : 0;
    t->triples[3 * t->n + 2] = line;
    return (long)t->n++;
}

long vh_names_add(struct vh_names *t, const char *name, int fresh) {
    if (!t->strings && !(t->strings = vt_labels_new())) return -1;
    if (!t->whole && !(t->whole = vt_labels_new())) return -1;
    int added = 0;
    uint32_t g = vt_label_group(t->whole, name, &added);
    if (g == UINT32_MAX) return -1;
    if (!added && !fresh) return (long)t->entry_of[g];
    long e = add_entry(t, name);
    if (e < 0 || !added) return e;
    if (g >= t->nentry_of) {
        size_t cap = t->nentry_of ? 2 * t->nentry_of : 256;
        uint32_t *v = realloc(t->entry_of, cap * sizeof *v);
        if (!v) return -1;
        t->entry_of = v;
        t->nentry_of = cap;
    }
    t->entry_of[g] = (uint32_t)e;
    return e;
}

void vh_names_write(FILE *f, struct vh_names *t) {
    fputs(",\"strs\":[", f);
    for (size_t i = 0; t->strings && i < vt_labels_count(t->strings); i++) {
        if (i) fputc(',', f);
        vh_json_string(f, vt_label_of(t->strings, (uint32_t)i));
    }
    fputc(']', f);
    struct vh_pack p;
    vh_pack_init(&p, 'u');
    for (size_t i = 0; i < 3 * t->n; i++) vh_pack(&p, (int64_t)t->triples[i]);
    vh_pack_write(f, "names", &p);
}

void vh_names_free(struct vh_names *t) {
    vt_labels_free(t->strings);
    vt_labels_free(t->whole);
    free(t->triples);
    free(t->entry_of);
    memset(t, 0, sizeof *t);
}
