/* dump_tables.c -- the string table, the frame table and the stack tree
 * of a version 2 dump (dump_tables.h). */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "dump_put.h"
#include "dump_tables.h"
#include "../common/format.h"
#include "../tracker/departed.h"

/* An open-addressing map from 64-bit keys to 32-bit values, doubling past
 * half full; UINT32_MAX marks an empty slot. 12 bytes a slot. */
struct u64map {
    uint64_t *keys;
    uint32_t *vals;
    size_t cap, n;
};

static uint64_t mix(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ULL;
    return k ^ (k >> 33);
}

static int map_grow(struct u64map *m) {
    size_t cap = m->cap ? m->cap * 2 : 1024;
    uint64_t *keys = malloc(cap * sizeof *keys);
    uint32_t *vals = malloc(cap * sizeof *vals);
    if (!keys || !vals) { free(keys); free(vals); return -1; }
    memset(vals, 0xff, cap * sizeof *vals);
    for (size_t i = 0; i < m->cap; i++) {
        if (m->vals[i] == UINT32_MAX) continue;
        size_t h = mix(m->keys[i]) & (cap - 1);
        while (vals[h] != UINT32_MAX) h = (h + 1) & (cap - 1);
        keys[h] = m->keys[i];
        vals[h] = m->vals[i];
    }
    free(m->keys);
    free(m->vals);
    m->keys = keys;
    m->vals = vals;
    m->cap = cap;
    return 0;
}

/* The value of key, or `fresh` stored as it when key is new (*added 1).
 * UINT32_MAX when memory ran out. */
static uint32_t map_get_or_add(struct u64map *m, uint64_t key, uint32_t fresh, int *added) {
    *added = 0;
    if ((m->n + 1) * 2 > m->cap && map_grow(m) != 0) return UINT32_MAX;
    size_t h = mix(key) & (m->cap - 1);
    while (m->vals[h] != UINT32_MAX) {
        if (m->keys[h] == key) return m->vals[h];
        h = (h + 1) & (m->cap - 1);
    }
    m->keys[h] = key;
    m->vals[h] = fresh;
    m->n++;
    *added = 1;
    return fresh;
}

static void map_free(struct u64map *m) {
    free(m->keys);
    free(m->vals);
}

/* ---------------------------------------------------------- strings */

struct vt_strtab {
    const char **strs;       /* by index */
    size_t n, cap;
    uint32_t *slots;         /* open addressing: index + 1, 0 empty */
    size_t nslots;
};

struct vt_strtab *vt_strtab_new(void) { return calloc(1, sizeof(struct vt_strtab)); }

void vt_strtab_free(struct vt_strtab *t) {
    if (!t) return;
    free(t->strs);
    free(t->slots);
    free(t);
}

static uint64_t str_hash(const char *s) {
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

static int strtab_rehash(struct vt_strtab *t) {
    size_t ns = t->nslots ? t->nslots * 2 : 256;
    uint32_t *slots = calloc(ns, sizeof *slots);
    if (!slots) return -1;
    for (size_t i = 0; i < t->n; i++) {
        size_t h = str_hash(t->strs[i]) & (ns - 1);
        while (slots[h]) h = (h + 1) & (ns - 1);
        slots[h] = (uint32_t)i + 1;
    }
    free(t->slots);
    t->slots = slots;
    t->nslots = ns;
    return 0;
}

int64_t vt_strtab_index(struct vt_strtab *t, const char *s) {
    if (!s) return -1;
    if ((t->n + 1) * 2 > t->nslots && strtab_rehash(t) != 0) return -2;
    size_t h = str_hash(s) & (t->nslots - 1);
    while (t->slots[h]) {
        uint32_t i = t->slots[h] - 1;
        if (strcmp(t->strs[i], s) == 0) return i;
        h = (h + 1) & (t->nslots - 1);
    }
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 256;
        const char **strs = realloc(t->strs, cap * sizeof *strs);
        if (!strs) return -2;
        t->strs = strs;
        t->cap = cap;
    }
    t->strs[t->n] = s;
    t->slots[h] = (uint32_t)++t->n;
    return (int64_t)t->n - 1;
}

void vt_strtab_write(FILE *f, const struct vt_strtab *t) {
    fputs(",\n\"strings\":[", f);
    for (size_t i = 0; i < t->n; i++) {
        if (i) fputs(i % 16 ? "," : ",\n", f);
        vt_json_string(f, t->strs[i]);
    }
    fputc(']', f);
}

/* ---------------------------------------------------------- frames, stacks */

/* A distinct frame: its code key (tracker/departed.h: the return address,
 * tagged where its library has left) and its symbols (NULL: none). */
struct frame_ref {
    uint64_t address;
    const struct vt_frame *fr;
};

struct tables {
    struct u64map frame_of;
    struct frame_ref *frames;
    size_t nframes, cap;
    uint32_t nnodes;
};

/* The index of the first frame at return address a (the innermost
 * function inlined there), added with its symbols in sym when new, with
 * the frames it is inlined into after it (*count of them in all);
 * UINT32_MAX when memory ran out. */
static uint32_t frame_index(struct tables *t, uint64_t a, const struct vt_symbols *sym, uint32_t *count) {
    int added;
    const struct vt_frame *fr = vt_symbols_frame(sym, (uintptr_t)a);
    size_t at = fr ? vt_frames_at(fr) : 1;
    *count = (uint32_t)at;
    uint32_t i = map_get_or_add(&t->frame_of, a, (uint32_t)t->nframes, &added);
    if (i == UINT32_MAX || !added) return i;
    if (t->nframes + at > t->cap) {
        size_t cap = t->cap ? t->cap : 1024;
        while (t->nframes + at > cap) cap *= 2;
        struct frame_ref *v = realloc(t->frames, cap * sizeof *v);
        if (!v) return UINT32_MAX;
        t->frames = v;
        t->cap = cap;
    }
    for (size_t k = 0; k < at; k++) t->frames[t->nframes++] = (struct frame_ref){a, fr ? fr + k : NULL};
    return i;
}

/* Two stacks (indexes into the snapshot's, through `ctx`) in the order of
 * their frames outermost first, a stack before those it is the callers
 * of; equal stacks by index. Sorted as 4-byte indexes: a 16-byte key a
 * stack, and glibc's merge sort's copy of the keys, were 32 of the 153 MB
 * a dump added at 1,000,000 stacks. */
static int by_callers(const void *a, const void *b, void *ctx) {
    const struct vt_stack *const *st = ctx;
    uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;
    const struct vt_stack *x = st[i], *y = st[j];
    uint32_t n = x->depth < y->depth ? x->depth : y->depth;
    const uintptr_t *p = x->frames + x->depth, *q = y->frames + y->depth;
    for (uint32_t k = 0; k < n; k++) {
        --p, --q;
        if (*p != *q) return *p < *q ? -1 : 1;
    }
    if (x->depth != y->depth) return x->depth < y->depth ? -1 : 1;
    return i < j ? -1 : i > j;
}

/* Write ,"nodes":[parent,frame,...] while finding each stack's innermost
 * node (-1 for an empty stack) into node_of_stack. The stacks are walked
 * sorted by their frames outermost first, so that the callers a stack
 * shares with any other it shares with the one walked before it: a node
 * is new exactly where a stack leaves the one before, and no table of
 * nodes is kept (what is kept is 8 bytes a stack and the path walked). */
static int write_nodes(FILE *f, struct tables *t, const struct vt_snapshot *s, const struct vt_symbols *sym,
                       int32_t *node_of_stack) {
    uint32_t *order = malloc((s->nstacks ? s->nstacks : 1) * sizeof *order);
    if (!order) return -1;
    for (size_t i = 0; i < s->nstacks; i++) order[i] = (uint32_t)i;
    qsort_r(order, s->nstacks, sizeof *order, by_callers, (void *)s->stacks);
    fputs(",\n\"nodes\":[", f);
    uint64_t *prev_addr = NULL;
    uint32_t *prev_node = NULL, prev_depth = 0, cap = 0;
    int rc = 0;
    for (size_t o = 0; o < s->nstacks && rc == 0; o++) {
        const struct vt_stack *st = s->stacks[order[o]];
        if (st->depth > cap) {
            uint64_t *a = realloc(prev_addr, st->depth * sizeof *a);
            uint32_t *n = a ? realloc(prev_node, st->depth * sizeof *n) : NULL;
            if (a) prev_addr = a;
            if (!a || !n) { rc = -1; break; }
            prev_node = n;
            cap = st->depth;
        }
        int64_t parent = -1;
        uint32_t k = 0;
        /* Outermost first: a node's caller is always written before it. */
        for (uint32_t j = st->depth; j-- > 0; k++) {
            uint64_t a = vt_code_key(st, j);
            if (k < prev_depth && prev_addr[k] == a) {
                parent = prev_node[k];
                continue;
            }
            prev_depth = 0;   /* what follows differs from the stack before */
            uint32_t at, fi = frame_index(t, a, sym, &at);
            if (fi == UINT32_MAX) { rc = -1; break; }
            /* A node for each function at the address, the outermost (the
             * one the others were inlined into) first. */
            for (uint32_t c = at; c-- > 0;) {
                char b[48], *w = b;
                if (t->nnodes) *w++ = ',';
                if (t->nnodes && t->nnodes % 16 == 0) *w++ = '\n';
                w = vt_put_i64(w, parent);
                *w++ = ',';
                w = vt_put_u64(w, fi + c);
                fwrite(b, 1, (size_t)(w - b), f);
                parent = t->nnodes++;
            }
            prev_addr[k] = a;
            prev_node[k] = (uint32_t)parent;
        }
        prev_depth = st->depth;
        node_of_stack[order[o]] = (int32_t)parent;
    }
    free(order);
    free(prev_addr);
    free(prev_node);
    if (rc == 0) fputc(']', f);
    return rc;
}

static int write_frames(FILE *f, const struct tables *t, struct vt_strtab *strs) {
    fputs(",\n\"frames\":[", f);
    for (size_t i = 0; i < t->nframes; i++) {
        const struct vt_frame *fr = t->frames[i].fr;
        int64_t fn = vt_strtab_index(strs, fr ? fr->function : NULL);
        int64_t file = vt_strtab_index(strs, fr ? fr->file : NULL);
        int64_t mod = vt_strtab_index(strs, fr ? fr->module : NULL);
        if (fn < -1 || file < -1 || mod < -1) return -1;
        int python = fr && fr->python;
        fprintf(f, "%s[%" PRId64 ",%" PRId64 ",%ld,%" PRId64 ",%" PRIu64 ",\"0x%" PRIx64 "\",%d]", i ? ",\n" : "",
                fn, file, fr ? fr->line : 0L, mod, fr ? fr->offset : 0, python ? 0 : (uint64_t)vt_code_address(t->frames[i].address),
                python | (python && fr->borrowed ? 2 : 0) | (!python && fr && fr->inlined ? 4 : 0));
    }
    fputc(']', f);
    return 0;
}

int vt_dump_write_stacks(FILE *f, const struct vt_snapshot *s, const struct vt_symbols *sym, struct vt_strtab *strs) {
    struct tables t = {0};
    int32_t *node_of_stack = malloc((s->nstacks ? s->nstacks : 1) * sizeof *node_of_stack);
    int rc = node_of_stack ? write_nodes(f, &t, s, sym, node_of_stack) : -1;
    if (rc == 0) {
        /* The call site's frames as this process chose them
         * (common/callsite.h: its VRAMTRACE_APP and VRAMTRACE_LIBRARY). */
        fputs(",\n\"stacks\":[", f);
        for (size_t i = 0; i < s->nstacks; i++) {
            int site = vt_sym_site(sym, i);
            char b[48], *o = b;
            if (i) *o++ = ',';
            if (i && i % 16 == 0) *o++ = '\n';
            o = vt_put_i64(o, node_of_stack[i]);
            *o++ = ',';
            o = vt_put_i64(o, site);
            *o++ = ',';
            o = vt_put_i64(o, site >= 0 ? vt_sym_through(sym, i) : -1);
            fwrite(b, 1, (size_t)(o - b), f);
        }
        fputc(']', f);
        rc = write_frames(f, &t, strs);
    }
    free(node_of_stack);
    free(t.frames);
    map_free(&t.frame_of);
    return rc;
}
