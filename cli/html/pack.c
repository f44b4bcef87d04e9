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

/* The name of entry e (whole's ref), remade by the caller's name_of. */
static size_t remake_name(void *ctx, uint64_t e, char *buf, size_t size) {
    const struct vh_names *t = ctx;
    return e < t->n ? t->name_of(t->ctx, t->src[e], buf, size) : SIZE_MAX;
}

/* A string: the head (ref 2e) or the rest (2e + 1) of entry e's name. */
static size_t remake_piece(void *ctx, uint64_t ref, char *buf, size_t size) {
    char name[VH_NAME_MAX], head[VH_NAME_MAX], rest[VH_NAME_MAX];
    if (remake_name(ctx, ref >> 1, name, sizeof name) >= sizeof name) return SIZE_MAX;
    int has_rest;
    unsigned long line;
    split_where(name, head, rest, &has_rest, &line, sizeof head);
    return (size_t)snprintf(buf, size, "%s", ref & 1 ? rest : head);
}

void vh_names_init(struct vh_names *t, vr_remake_fn *name_of, void *ctx) {
    memset(t, 0, sizeof *t);
    t->name_of = name_of;
    t->ctx = ctx;
    vr_refset_init(&t->whole, remake_name, t, VH_NAME_MAX - 1);
    vr_refset_init(&t->strings, remake_piece, t, VH_NAME_MAX - 1);
}

/* Appends name, remade from src, as entry t->n: made before its name and
 * pieces are looked for, so that they can be remade from it. */
static long add_entry(struct vh_names *t, const char *name, uint64_t src) {
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 256;
        uint64_t *v = realloc(t->triples, 3 * cap * sizeof *v);
        if (v) t->triples = v;
        uint64_t *w = v ? realloc(t->src, cap * sizeof *w) : NULL;
        if (!w) return -1;
        t->src = w;
        t->cap = cap;
    }
    size_t e = t->n++;
    t->src[e] = src;
    char head[VH_NAME_MAX], rest[VH_NAME_MAX];
    int has_rest;
    unsigned long line;
    split_where(name, head, rest, &has_rest, &line, sizeof head);
    uint32_t a = vr_refset_add(&t->strings, head, strlen(head), (uint64_t)e << 1, NULL);
    uint32_t b = has_rest ? vr_refset_add(&t->strings, rest, strlen(rest), (uint64_t)e << 1 | 1, NULL) : 0;
    if (a == UINT32_MAX || b == UINT32_MAX) return -1;
    t->triples[3 * e] = a;
    t->triples[3 * e + 1] = has_rest ? (uint64_t)b + 1 : 0;
    t->triples[3 * e + 2] = line;
    return (long)e;
}

long vh_names_add(struct vh_names *t, const char *name, int fresh, uint64_t src) {
    size_t len = strlen(name);
    if (len >= VH_NAME_MAX) return -1;
    if (!fresh) {
        int added = 0;
        uint32_t m = vr_refset_add(&t->whole, name, len, t->n, &added);
        if (m == UINT32_MAX) return -1;
        if (!added) return (long)vr_refset_ref(&t->whole, m);
        return add_entry(t, name, src);   /* entry t->n, which whole's new member names */
    }
    long e = add_entry(t, name, src);
    if (e < 0 || vr_refset_add(&t->whole, name, len, (uint64_t)e, NULL) == UINT32_MAX) return -1;
    return e;
}

void vh_names_write(FILE *f, struct vh_names *t) {
    char s[VH_NAME_MAX];
    fputs(",\"strs\":[", f);
    for (uint32_t i = 0; i < t->strings.n; i++) {
        if (i) fputc(',', f);
        vh_json_string(f, remake_piece(t, vr_refset_ref(&t->strings, i), s, sizeof s) < sizeof s ? s : "");
    }
    fputc(']', f);
    struct vh_pack p;
    vh_pack_init(&p, 'u');
    for (size_t i = 0; i < 3 * t->n; i++) vh_pack(&p, (int64_t)t->triples[i]);
    vh_pack_write(f, "names", &p);
}

void vh_names_free(struct vh_names *t) {
    vr_refset_free(&t->strings);
    vr_refset_free(&t->whole);
    free(t->triples);
    free(t->src);
    vh_names_init(t, t->name_of, t->ctx);
}
