/* model_v2.c -- the big arrays of a version 2 dump (model_v2.h). */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../common/callsite.h"
#include "demangle.h"
#include "model_scan.h"
#include "model_u64.h"
#include "model_v2.h"

/* What the tables of one dump own: the decoded strings and the demangled
 * names (the frame table and the tree, d->frames and d->nodes, are the
 * model's). */
struct tables {
    char *arena;
    const char **strs;
    size_t nstrs;
    char **names;
    size_t nnames;
    struct vm_dump *d;       /* the model being read */
    uint32_t *name_of;       /* while the live list is read: a string's
                                index in d->names plus one, 0 not yet */
};

/* How much of a big array's text is read between two vm_v2_release. */
#define RELEASE_EVERY (256 << 10)

static const char *const array_keys[V2_NARRAYS] = {"strings", "frames", "nodes",   "stacks",      "live",
                                                   "events",  "holders", "peak_holders", "mappings"};

void vm_v2_release(const struct vm_v2_spans *sp, const char *from, const char *to) {
    if (!sp->mapped || to <= from) return;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = ((uintptr_t)from + page - 1) & ~(page - 1), b = (uintptr_t)to & ~(page - 1);
    if (b > a) madvise((void *)a, b - a, MADV_DONTNEED);
}

/* A reading of a mapped dump so far, given back a page behind where it is
 * (struct vm_scan's passed). */
struct read_so_far {
    const struct vm_v2_spans *sp;
    const char *released;
};

static void give_back_read(void *arg, const char *upto) {
    struct read_so_far *r = arg;
    if (upto - r->released > RELEASE_EVERY) {
        vm_v2_release(r->sp, r->released, upto - 4096);
        r->released = upto - 4096;
    }
}

/* Whether the key [kat, kat + klen) is `want`, its escapes decoded as
 * jansson decodes them. */
static int key_is(const char *kat, size_t klen, const char *want) {
    char decoded[80], *o = decoded;
    const char *name = kat;
    size_t n = klen;
    if (memchr(kat, '\\', klen)) {
        /* None of the names is longer than 12 characters of 6 bytes each. */
        struct vm_scan s = {kat - 1, kat + klen + 1, NULL, NULL, NULL};
        if (klen > 72 || !vm_scan_string(&s, &o, &name)) return 0;
        n = strlen(name);
    }
    return n == strlen(want) && memcmp(name, want, n) == 0;
}

/* Which big array the key [kat, kat + klen) names, or -1. */
static int array_named(const char *kat, size_t klen) {
    for (int k = 0; k < V2_NARRAYS; k++)
        if (key_is(kat, klen, array_keys[k])) return k;
    return -1;
}

/* Where the key that ends at `end` (its closing quote) is, as jansson says
 * where an error is: its line, and its column in characters. */
static void where_is(const char *buf, const char *end, int *line, int *column) {
    *line = 1;
    *column = 1;
    for (const char *s = buf; s < end; s++) {
        if (*s == '\n') ++*line, *column = 1;
        else if ((*s & 0xc0) != 0x80) ++*column;
    }
}

/* A key: its raw text (escapes kept, each skipped whole, so that an
 * escaped quote does not end it) at *at, *len; p past its closing quote.
 * 0 when no string comes next. */
static int key_string(struct vm_scan *p, const char **at, size_t *len) {
    while (p->s < p->e && (*p->s == ' ' || *p->s == '\n' || *p->s == '\r' || *p->s == '\t')) p->s++;
    if (p->s >= p->e || *p->s != '"') return 0;
    const char *s = p->s + 1;
    while (s < p->e && *s != '"') s += *s == '\\' ? 2 : 1;
    if (s >= p->e) return 0;
    *at = p->s + 1;
    *len = (size_t)(s - p->s - 1);
    p->s = s + 1;
    return 1;
}

void vm_v2_spans_free(struct vm_v2_spans *sp) {
    free(sp->oom);
    sp->oom = NULL;
    sp->noom = sp->oom_cap = 0;
}

int vm_v2_oom_span(const struct vm_v2_spans *sp, size_t i, int device, const char **at, size_t *len) {
    if (!sp) return 0;
    size_t lo = 0, hi = sp->noom; /* the first span of failure i or later */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (sp->oom[mid].oom < i) lo = mid + 1;
        else hi = mid;
    }
    for (; lo < sp->noom && sp->oom[lo].oom == i; lo++)
        if (sp->oom[lo].device == device) {
            *at = sp->oom[lo].at;
            *len = sp->oom[lo].len;
            return 1;
        }
    return 0;
}

/* [s, s + len) appended to out (n bytes of cap); 0 when memory ran out. */
static int put_text(char **out, size_t *n, size_t *cap, const char *s, size_t len) {
    if (*n + len + 4 > *cap) {
        size_t c2 = (*n + len + 4) * 2;
        char *o2 = realloc(*out, c2);
        if (!o2) return 0;
        *out = o2;
        *cap = c2;
    }
    memcpy(*out + *n, s, len);
    *n += len;
    return 1;
}

/* The "ooms" array's text [val, val + vlen) appended to out with each
 * element's "holders" and "device_holders" arrays cut out into sp (see
 * vm_v2_spans). Anything not shaped as the writer writes it (not an array
 * of objects) is appended as it is, for jansson to judge. 0 when memory
 * ran out. */
static int put_ooms(const char *val, size_t vlen, struct vm_v2_spans *sp, char **out, size_t *n, size_t *cap) {
    size_t start = *n, kept = sp->noom;
    struct vm_scan p = {val, val + vlen, NULL, NULL, NULL};
    if (!vm_scan_lit(&p, '[')) goto as_is;
    if (!put_text(out, n, cap, "[", 1)) return 0;
    if (vm_scan_lit(&p, ']')) return put_text(out, n, cap, "]", 1);
    for (size_t el = 0;; el++) {
        int first = el == 0;
        if (!vm_scan_lit(&p, '{')) goto as_is;
        if (!put_text(out, n, cap, first ? "{" : ",{", first ? 1 : 2)) return 0;
        if (!vm_scan_lit(&p, '}')) {
            for (int f2 = 1;; f2 = 0) {
                const char *key = p.s, *kat;
                size_t klen;
                if (!key_string(&p, &kat, &klen) || !vm_scan_lit(&p, ':')) goto as_is;
                size_t keyend = (size_t)(p.s - key);
                while (p.s < p.e && (*p.s == ' ' || *p.s == '\n' || *p.s == '\r' || *p.s == '\t')) p.s++;
                const char *v = p.s;
                if (!vm_scan_skip(&p)) goto as_is;
                size_t vl = (size_t)(p.s - v);
                if ((!f2 && !put_text(out, n, cap, ",", 1)) || !put_text(out, n, cap, key, keyend)) return 0;
                int dev = key_is(kat, klen, "device_holders");
                if (vl && v[0] == '[' && (dev || key_is(kat, klen, "holders"))) {
                    if (sp->noom == sp->oom_cap) {
                        size_t c2 = sp->oom_cap ? sp->oom_cap * 2 : 16;
                        struct vm_v2_span *o2 = realloc(sp->oom, c2 * sizeof *o2);
                        if (!o2) return 0;
                        sp->oom = o2;
                        sp->oom_cap = c2;
                    }
                    sp->oom[sp->noom++] = (struct vm_v2_span){v, vl, el, dev};
                    if (!put_text(out, n, cap, "null", 4)) return 0;
                } else if (!put_text(out, n, cap, v, vl)) {
                    return 0;
                }
                int more = vm_scan_next(&p);
                if (more == 1) continue;
                if (more == -1 && p.s < p.e && *p.s == '}') { p.s++; break; }
                goto as_is;
            }
        }
        if (!put_text(out, n, cap, "}", 1)) return 0;
        int more = vm_scan_next(&p);
        if (more == 1) continue;
        if (more == 0) return put_text(out, n, cap, "]", 1);
        goto as_is;
    }
as_is:
    *n = start;
    sp->noom = kept;
    return put_text(out, n, cap, val, vlen);
}

int vm_v2_split(const char *buf, size_t len, int mapped, struct vm_v2_spans *sp, char **small, size_t *nsmall) {
    memset(sp, 0, sizeof *sp);
    sp->mapped = mapped;
    struct read_so_far read = {sp, buf};
    /* A big array's text is handed back while it is skipped, not after:
     * the events' string alone is most of an event-heavy dump. */
    struct vm_scan p = {buf, buf + len, NULL, give_back_read, &read};
    if (!vm_scan_lit(&p, '{')) return 0;
    char *out = malloc(len + 2 < 4096 ? len + 2 : 4096);
    size_t cap = len + 2 < 4096 ? len + 2 : 4096, n = 0;
    if (!out) return -1;
    out[n++] = '{';
    int version2 = 0, first = 1;
    if (vm_scan_lit(&p, '}')) goto not_v2;
    for (;;) {
        const char *key = p.s;
        const char *kat;
        size_t klen;
        if (!key_string(&p, &kat, &klen) || !vm_scan_lit(&p, ':')) goto not_v2;
        size_t keyend = (size_t)(p.s - key);
        const char *val = p.s;
        if (!vm_scan_skip(&p)) goto not_v2;
        size_t vlen = (size_t)(p.s - val);
        give_back_read(&read, p.s);
        int big = array_named(kat, klen);
        /* A second copy is refused, as jansson refuses one of any other
         * field: which copy a reader takes is not for it to choose. */
        if (big >= 0 && sp->at[big] && !sp->duplicate) {
            sp->duplicate = kat - 1;
            sp->duplicate_len = klen + 2;
            where_is(buf, kat + klen, &sp->duplicate_line, &sp->duplicate_column);
        }
        if (key_is(kat, klen, "version")) {
            struct vm_scan v = {val, val + vlen, NULL, NULL, NULL};
            int64_t ver;
            version2 = vm_scan_int(&v, &ver) && ver == 2;
        }
        if (big >= 0 && !sp->at[big]) {
            sp->at[big] = val;
            sp->len[big] = vlen;
        } else if (key_is(kat, klen, "ooms")) {
            if ((!first && !put_text(&out, &n, &cap, ",", 1)) || !put_text(&out, &n, &cap, key, keyend) ||
                !put_ooms(val, vlen, sp, &out, &n, &cap)) {
                free(out);
                vm_v2_spans_free(sp);
                return -1;
            }
            first = 0;
        } else {
            if (n + keyend + vlen + 4 > cap) {
                size_t c2 = (n + keyend + vlen + 4) * 2;
                char *o2 = realloc(out, c2);
                if (!o2) { free(out); return -1; }
                out = o2;
                cap = c2;
            }
            if (!first) out[n++] = ',';
            memcpy(out + n, key, keyend);
            n += keyend;
            memcpy(out + n, val, vlen);
            n += vlen;
            first = 0;
        }
        int more = vm_scan_next(&p);
        if (more == 1) continue;
        /* The object ends with '}' (vm_scan_next looked for ']'). */
        if (more == -1 && p.s < p.e && *p.s == '}') break;
        goto not_v2;
    }
    if (!version2) goto not_v2;
    /* Nothing but white space after the object: what follows is jansson's
     * to refuse ("end of file expected"), as it refuses it after any dump. */
    for (p.s++; p.s < p.e && (*p.s == ' ' || *p.s == '\n' || *p.s == '\r' || *p.s == '\t');) p.s++;
    if (p.s != p.e) goto not_v2;
    out[n++] = '}';
    *small = out;
    *nsmall = n;
    return 1;
not_v2:
    free(out);
    vm_v2_spans_free(sp);
    memset(sp, 0, sizeof *sp);
    sp->mapped = mapped;
    return 0;
}

static int bad(char *err, size_t errsize, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errsize, fmt, ap);
    va_end(ap);
    return -1;
}

/* An integer element in lo..hi, then ',' or ']' (*more: another follows). */
static int elem(struct vm_scan *p, int64_t *v, int64_t lo, int64_t hi) {
    return vm_scan_int(p, v) && *v >= lo && *v <= hi;
}

/* A count (0 to 2^64 - 1) element. */
static int count(struct vm_scan *p, uint64_t *v) { return vm_scan_u64(p, v); }

/* Room for one more element in the array *(T **)arrayp of *n used and
 * *cap allocated, each `each` bytes: doubled when full, `first` at the
 * start. 0 when memory ran out (the array is kept as it was). */
static int room(void *arrayp, size_t n, size_t *cap, size_t each, size_t first) {
    if (n < *cap) return 1;
    void *old;
    memcpy(&old, arrayp, sizeof old);
    size_t c = *cap ? *cap * 2 : first;
    void *grown = realloc(old, c * each);
    if (!grown) return 0;
    memcpy(arrayp, &grown, sizeof grown);
    *cap = c;
    return 1;
}

/* The scanner *p over the dump's array `which`, past its '[': 1 when it has
 * elements, 0 when it is empty, -1 with `notarray` in err when it is no
 * array. */
static int array_of(const struct vm_v2_spans *sp, int which, const char *notarray, struct vm_scan *p, char *err,
                    size_t errsize) {
    *p = (struct vm_scan){sp->at[which], sp->at[which] + sp->len[which], NULL, NULL, NULL};
    if (!vm_scan_lit(p, '[')) return bad(err, errsize, "%s", notarray);
    return vm_scan_lit(p, ']') ? 0 : 1;
}

static int load_strings(struct tables *t, const struct vm_v2_spans *sp, char *err, size_t errsize) {
    struct vm_scan p = {sp->at[V2_STRINGS], sp->at[V2_STRINGS] + sp->len[V2_STRINGS], NULL, NULL, NULL};
    if (!(t->arena = malloc(sp->len[V2_STRINGS] + 1))) return bad(err, errsize, "out of memory");
    size_t cap = 0;
    char *o = t->arena;
    if (!vm_scan_lit(&p, '[')) return bad(err, errsize, "\"strings\" is not an array");
    if (vm_scan_lit(&p, ']')) return 0;
    /* The text read is given back as the tables' is: the strings are
     * copied into the arena, and a dump of long names is mostly strings
     * (its text and the arena were both resident, 1.8x a dump of 60,000
     * Python functions with 300-character names and paths). */
    const char *released = p.s;
    for (int more = 1; more == 1; more = vm_scan_next(&p)) {
        if (p.s - released > RELEASE_EVERY) {
            vm_v2_release(sp, released, p.s);
            released = p.s;
        }
        if (!room(&t->strs, t->nstrs, &cap, sizeof *t->strs, 256)) return bad(err, errsize, "out of memory");
        if (!vm_scan_string(&p, &o, &t->strs[t->nstrs]))
            return bad(err, errsize, "strings[%zu]: %s", t->nstrs, p.err);
        vm_clamp_name((char *)t->strs[t->nstrs]); /* in the arena, which is ours */
        t->nstrs++;
    }
    return p.err ? bad(err, errsize, "strings: %s", p.err) : 0;
}

/* A string index in the dump: NULL for -1. */
static int strref(const struct tables *t, struct vm_scan *p, const char **out) {
    int64_t i;
    if (!elem(p, &i, -1, (int64_t)t->nstrs - 1)) return 0;
    *out = i < 0 ? NULL : t->strs[i];
    return 1;
}

/* One element of a table (a frame, a node) read from p into out; 0 when
 * it is malformed. */
typedef int table_elem_fn(const struct tables *t, struct vm_scan *p, void *out);

/* Each element of the dump's array `which` read by `one` into the array
 * *(T **)arrayp (each `each` bytes), *n counting them. Returns 0, or -1
 * with the reason in err. */
static int load_table(struct tables *t, const struct vm_v2_spans *sp, int which, void *arrayp, size_t *n,
                      size_t each, table_elem_fn *one, char *err, size_t errsize) {
    struct vm_scan p;
    char notarray[48];
    snprintf(notarray, sizeof notarray, "\"%s\" is not an array", array_keys[which]);
    int has = array_of(sp, which, notarray, &p, err, errsize);
    if (has <= 0) return has;
    size_t cap = 0;
    const char *released = p.s;
    for (int more = 1; more == 1; more = vm_scan_next(&p)) {
        if (p.s - released > RELEASE_EVERY) {
            vm_v2_release(sp, released, p.s);
            released = p.s;
        }
        if (!room(arrayp, *n, &cap, each, 1024)) return bad(err, errsize, "out of memory");
        char *base;
        memcpy(&base, arrayp, sizeof base);
        if (!one(t, &p, base + *n * each)) return bad(err, errsize, "%s[%zu] is malformed", array_keys[which], *n);
        (*n)++;
    }
    return p.err ? bad(err, errsize, "%s: %s", array_keys[which], p.err) : 0;
}

static int one_frame(const struct tables *t, struct vm_scan *p, void *out) {
    struct vt_frame *f = out;
    memset(f, 0, sizeof *f);
    int64_t line, flags;
    if (!vm_scan_lit(p, '[') || !strref(t, p, &f->function) || !vm_scan_lit(p, ',') || !strref(t, p, &f->file) ||
        !vm_scan_lit(p, ',') || !elem(p, &line, 0, 100000000) || !vm_scan_lit(p, ',') ||
        !strref(t, p, &f->module) || !vm_scan_lit(p, ',') || !count(p, &f->offset) ||
        !vm_scan_lit(p, ',') || !vm_scan_hex(p, &f->address) || !vm_scan_lit(p, ',') || !elem(p, &flags, 0, 7) ||
        !vm_scan_lit(p, ']'))
        return 0;
    f->line = (long)line;
    f->python = (int)(flags & 1);
    f->borrowed = f->python && (flags & 2);
    f->inlined = !f->python && (flags & 4);
    return 1;
}

static int load_frames(struct tables *t, const struct vm_v2_spans *sp, char *err, size_t errsize) {
    struct vm_dump *d = t->d;
    if (load_table(t, sp, V2_FRAMES, &d->frames, &d->nframes, sizeof *d->frames, one_frame, err, errsize))
        return -1;
    if (d->nframes >= VM_NO_NODE) return bad(err, errsize, "frames: more than 2^32 - 1");
    /* A process without a C++ runtime leaves names mangled: demangle each
     * distinct frame once. */
    if (!(t->names = calloc(d->nframes ? d->nframes : 1, sizeof *t->names))) return bad(err, errsize, "out of memory");
    for (size_t i = 0; i < d->nframes; i++) {
        struct vt_frame *f = &d->frames[i];
        if (f->python || !f->function) continue;
        char *dm = vm_demangle(f->function, strlen(f->function));
        if (dm) f->function = t->names[t->nnames++] = dm;
    }
    return 0;
}

/* A node: its caller's node (before it: the tree has no cycle) and its
 * frame; at most 2^32 - 1 of them. */
static int one_node(const struct tables *t, struct vm_scan *p, void *out) {
    struct vm_node *n = out;
    int64_t parent, frame;
    if (t->d->nnodes >= VM_NO_NODE || !elem(p, &parent, -1, (int64_t)t->d->nnodes - 1) || !vm_scan_lit(p, ',') ||
        !elem(p, &frame, 0, (int64_t)t->d->nframes - 1))
        return 0;
    *n = (struct vm_node){parent < 0 ? VM_NO_NODE : (uint32_t)parent, (uint32_t)frame};
    return 1;
}

static int load_nodes(struct tables *t, const struct vm_v2_spans *sp, char *err, size_t errsize) {
    return load_table(t, sp, V2_NODES, &t->d->nodes, &t->d->nnodes, sizeof *t->d->nodes, one_node, err, errsize);
}

/* Each stack: its node, its depth (its node's, counted up to the root)
 * and its call site. */
static int load_stack_list(struct tables *t, const struct vm_v2_spans *sp, struct vm_dump *d, char *err,
                           size_t errsize) {
    struct vm_scan p = {sp->at[V2_STACKS], sp->at[V2_STACKS] + sp->len[V2_STACKS], NULL, NULL, NULL};
    uint32_t *depth = malloc((d->nnodes ? d->nnodes : 1) * sizeof *depth);
    size_t cap = 0, total = 0;
    int rc = -1;
    if (!depth) return bad(err, errsize, "out of memory");
    for (size_t i = 0; i < d->nnodes; i++)
        depth[i] = d->nodes[i].parent == VM_NO_NODE ? 1 : depth[d->nodes[i].parent] + 1;
    if (!vm_scan_lit(&p, '[')) { bad(err, errsize, "\"stacks\" is not an array"); goto out; }
    int more = vm_scan_lit(&p, ']') ? 0 : 1;
    const char *released = p.s;
    for (; more == 1; more = vm_scan_next(&p)) {
        if (p.s - released > RELEASE_EVERY) {
            vm_v2_release(sp, released, p.s);
            released = p.s;
        }
        if (!room(&d->stacks, d->nstacks, &cap, sizeof *d->stacks, 1024)) {
            bad(err, errsize, "out of memory");
            goto out;
        }
        struct vm_stack *st = &d->stacks[d->nstacks];
        int64_t node, site, through;
        if (!elem(&p, &node, -1, (int64_t)d->nnodes - 1) || !vm_scan_lit(&p, ',') ||
            !elem(&p, &site, INT64_MIN, INT64_MAX) || !vm_scan_lit(&p, ',') ||
            !elem(&p, &through, INT64_MIN, INT64_MAX)) {
            bad(err, errsize, "stacks[%zu] is malformed", d->nstacks);
            goto out;
        }
        st->node = node < 0 ? VM_NO_NODE : (uint32_t)node;
        st->nframes = node < 0 ? 0 : depth[node];
        st->site = site >= 0 && (size_t)site < st->nframes ? (int)site : -1;
        st->through = st->site >= 0 && through >= 0 && through < site ? (int)through : -1;
        /* Bound what a hostile dump can make the writers walk: a real
         * stack costs at least a few bytes of the dump per frame it adds. */
        if ((total += st->nframes) > 16 * (sp->len[V2_NODES] + sp->len[V2_STACKS]) + 65536) {
            bad(err, errsize, "stacks: more frames than the dump's nodes can hold");
            goto out;
        }
        d->nstacks++;
    }
    if (p.err) { bad(err, errsize, "stacks: %s", p.err); goto out; }
    free(depth);
    depth = NULL;
    if (vm_tree_ready(d) != 0) { bad(err, errsize, "out of memory"); goto out; }
    /* The traced process's choice when the dump has one, else the rule's. */
    for (size_t i = 0; i < d->nstacks; i++) {
        struct vm_stack *st = &d->stacks[i];
        if (st->site >= 0 || !st->nframes) continue;
        const struct vt_frame *fr = vm_stack_flat(d, i);
        st->site = vt_site_index(fr, st->nframes);
        st->through = vt_site_through(fr, st->nframes, st->site);
    }
    rc = 0;
out:
    free(depth);
    return rc;
}

int vm_v2_load_stacks(const struct vm_v2_spans *sp, struct vm_dump *d, char *err, size_t errsize) {
    for (int k = V2_STRINGS; k <= V2_STACKS; k++)
        if (!sp->at[k]) return bad(err, errsize, "dump: field \"%s\" is missing", array_keys[k]);
    struct tables *t = calloc(1, sizeof *t);
    if (!t) return bad(err, errsize, "out of memory");
    d->v2 = t;
    t->d = d;
    if (load_strings(t, sp, err, errsize) || load_frames(t, sp, err, errsize) || load_nodes(t, sp, err, errsize) ||
        load_stack_list(t, sp, d, err, errsize))
        return -1;
    for (int k = V2_STRINGS; k <= V2_STACKS; k++) vm_v2_release(sp, sp->at[k], sp->at[k] + sp->len[k]);
    return 0;
}

/* The index in d->names of string k of the dump's table, remembered by
 * string so that each is looked up by its text once. */
static int name_of(const struct tables *t, struct vm_dump *d, int64_t k) {
    if (t->name_of[k]) return t->name_of[k] - 1;
    int n = vm_name_index(d, t->strs[k]);
    if (n >= 0) t->name_of[k] = n + 1;
    return n;
}

static int load_live(const struct tables *t, const struct vm_v2_spans *sp, struct vm_dump *d, char *err,
                     size_t errsize) {
    if (!sp->at[V2_LIVE]) return bad(err, errsize, "dump: field \"live\" is missing or not an array");
    struct vm_scan p;
    int has = array_of(sp, V2_LIVE, "dump: field \"live\" is missing or not an array", &p, err, errsize);
    if (has <= 0) return has;
    size_t cap = 0;
    const char *released = sp->at[V2_LIVE];
    for (int more = 1; more == 1; more = vm_scan_next(&p)) {
        if (p.s - released > RELEASE_EVERY) {
            vm_v2_release(sp, released, p.s);
            released = p.s;
        }
        if (!room(&d->live, d->nlive, &cap, sizeof *d->live, 4096)) return bad(err, errsize, "out of memory");
        struct vm_alloc *a = &d->live[d->nlive];
        memset(a, 0, sizeof *a);
        int64_t kind, api, device, stack, thread;
        int nstr = (int)t->nstrs;
        if (!vm_scan_lit(&p, '[') || !vm_scan_hex(&p, &a->address) || !vm_scan_lit(&p, ',') ||
            !count(&p, &a->bytes) || !vm_scan_lit(&p, ',') || !elem(&p, &kind, 0, nstr - 1) ||
            !vm_scan_lit(&p, ',') || !elem(&p, &api, 0, nstr - 1) || !vm_scan_lit(&p, ',') ||
            !elem(&p, &device, -1, 4095) || !vm_scan_lit(&p, ',') ||
            !elem(&p, &stack, 0, (int64_t)d->nstacks - 1) || !vm_scan_lit(&p, ',') ||
            !elem(&p, &thread, 0, INT32_MAX) || !vm_scan_lit(&p, ',') || !count(&p, &a->time_ns))
            return bad(err, errsize, "live[%zu] is malformed", d->nlive);
        if (vm_scan_lit(&p, ',')) {
            uint64_t h;
            if (!vm_scan_hex(&p, &h)) return bad(err, errsize, "live[%zu] is malformed", d->nlive);
            if (vm_add_handle(d, d->nlive, h) != 0) return bad(err, errsize, "out of memory");
            a->has_handle = 1;
        }
        if (!vm_scan_lit(&p, ']')) return bad(err, errsize, "live[%zu] is malformed", d->nlive);
        int k = name_of(t, d, kind), ap = name_of(t, d, api);
        if (k < 0 || ap < 0)
            return bad(err, errsize, "live: more than %d distinct kinds and APIs, or out of memory", VM_NAMES_MAX);
        a->kind = (uint16_t)k;
        a->api = (uint16_t)ap;
        a->device = (int16_t)device;
        a->stack = (uint32_t)stack;
        a->thread = (int)thread;
        d->nlive++;
    }
    vm_v2_release(sp, released, p.s);
    return p.err ? bad(err, errsize, "live: %s", p.err) : 0;
}

/* The bytes of a base64 text, decoded as they are read: what is read of
 * the text is given back every RELEASE_EVERY bytes (vm_v2_release), so that
 * neither the text nor its bytes are held whole. */
struct b64in {
    const struct vm_v2_spans *sp;
    const char *s, *e, *released;
    unsigned char out[3];
    int n, i, bad;
};

static signed char b64_val[256];

static void b64_init(struct b64in *b, const struct vm_v2_spans *sp, const char *text, size_t len) {
    if (!b64_val['B']) {
        memset(b64_val, -1, sizeof b64_val);
        const char *a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        for (int k = 0; k < 64; k++) b64_val[(unsigned char)a[k]] = (signed char)k;
    }
    *b = (struct b64in){.sp = sp, .s = text, .e = text + len, .released = text, .bad = len % 4 != 0};
}

/* The next group of 4 characters as up to 3 bytes; 0 at the end or when it
 * is not base64 (b->bad). */
static int b64_group(struct b64in *b) {
    if (b->bad || b->s >= b->e) return 0;
    int pad = 0;
    uint32_t v = 0;
    for (int k = 0; k < 4; k++) {
        unsigned char c = (unsigned char)b->s[k];
        if (c == '=' && b->s + 4 == b->e && k >= 2 && (k == 3 || b->s[3] == '=')) { pad++; v <<= 6; continue; }
        if (b64_val[c] < 0 || pad) { b->bad = 1; return 0; }
        v = v << 6 | (uint32_t)b64_val[c];
    }
    b->s += 4;
    if (b->s - b->released > RELEASE_EVERY) {
        vm_v2_release(b->sp, b->released, b->s);
        b->released = b->s;
    }
    b->out[0] = (unsigned char)(v >> 16);
    b->out[1] = (unsigned char)(v >> 8);
    b->out[2] = (unsigned char)v;
    b->n = 3 - pad;
    b->i = 0;
    return 1;
}

/* The next byte into *c; 0 at the end or when the text is not base64. */
static inline int b64_byte(struct b64in *b, unsigned char *c) {
    if (b->i == b->n && !b64_group(b)) return 0;
    *c = b->out[b->i++];
    return 1;
}

/* Whether every byte is read (and the text was base64). */
static int b64_done(struct b64in *b) { return b->i == b->n && !b64_group(b) && !b->bad; }

static int varint(struct b64in *b, uint64_t *v) {
    *v = 0;
    unsigned char c;
    for (int shift = 0; shift < 64 && b64_byte(b, &c); shift += 7) {
        *v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) return 1;
    }
    return 0;
}

static int zigzag(struct b64in *b, uint64_t *v) {
    uint64_t z;
    if (!varint(b, &z)) return 0;
    *v += (z >> 1) ^ (0 - (z & 1));
    return 1;
}

/* An event's kind as a static name when it is one of the library's
 * (vm_known_kind), so that the event keeps no pointer it need not; the
 * dump's own name else. */
static const char *kind_name(const char *k) {
    const char *known = vm_known_kind(k);
    return known ? known : k;
}

static int load_events(const struct vm_v2_spans *sp, json_t *root, struct vm_dump *d, char *err, size_t errsize) {
    json_t *types = json_object_get(root, "event_types"), *kinds = json_object_get(root, "event_kinds");
    uint64_t n, dropped;
    if (!sp->at[V2_EVENTS] || !json_is_array(types) || !json_is_array(kinds) ||
        !vm_json_u64(json_object_get(root, "nevents"), &n) ||
        !vm_json_u64(json_object_get(root, "events_dropped"), &dropped))
        return bad(err, errsize, "dump: the events' fields are missing or malformed");
    char type_of[16];
    size_t ntypes = json_array_size(types), nkinds = json_array_size(kinds);
    if (ntypes > 4 || nkinds > 16) return bad(err, errsize, "dump: too many event types or kinds");
    for (size_t i = 0; i < ntypes; i++) {
        const char *n = json_string_value(json_array_get(types, i));
        type_of[i] = !n ? 0 : !strcmp(n, "alloc") ? 'a' : !strcmp(n, "free") ? 'f' : !strcmp(n, "oom") ? 'o' : 0;
        if (!type_of[i]) return bad(err, errsize, "event_types[%zu] is unknown", i);
    }
    for (size_t i = 0; i < nkinds; i++) {
        const char *k = json_string_value(json_array_get(kinds, i));
        if (!k) return bad(err, errsize, "event_kinds[%zu] is not a string", i);
        d->event_kinds[i] = kind_name(k);
    }
    d->nevent_kinds = nkinds;
    d->events_dropped = dropped;
    struct read_so_far read = {sp, sp->at[V2_EVENTS]};
    struct vm_scan p = {sp->at[V2_EVENTS], sp->at[V2_EVENTS] + sp->len[V2_EVENTS], NULL, give_back_read, &read};
    const char *text;
    size_t len;
    if (!vm_scan_raw_string(&p, &text, &len)) return bad(err, errsize, "dump: \"events\" is not a string");
    /* Each event takes 5 bytes at least. */
    if (n > len / 4 * 3 / 5 + 1) return bad(err, errsize, "events: fewer than \"nevents\"");
    d->nevents = (size_t)n;
    struct b64in b;
    b64_init(&b, sp, text, len);
    uint64_t t = 0, address = 0, bytes = 0;
    for (size_t i = 0; i < d->nevents; i++) {
        struct vm_event one = {0}, *v = &one;
        uint64_t dev, stack;
        unsigned char c;
        if (!zigzag(&b, &t) || !b64_byte(&b, &c)) goto malformed;
        dev = c >> 6;
        if (dev == 3 && !varint(&b, &dev)) goto malformed;
        if (!zigzag(&b, &address) || !zigzag(&b, &bytes) || !varint(&b, &stack)) goto malformed;
        if ((c & 3) >= ntypes || ((c >> 2) & 15) >= nkinds || dev > 4096 || stack >= d->nstacks)
            goto malformed;
        v->time_ns = t;
        v->type = type_of[c & 3];
        v->kind = (uint8_t)((c >> 2) & 15);
        v->device = (int16_t)((int)dev - 1);
        v->address = address;
        v->bytes = bytes;
        v->stack = (uint32_t)stack;
        vm_count_event(d, v);
        if (!d->events_counted_only && vm_events_add(&d->events, v) != 0) return bad(err, errsize, "out of memory");
        continue;
    malformed:
        return bad(err, errsize, b.bad ? "events: not base64" : "events[%zu] is malformed", i);
    }
    vm_events_done(&d->events);
    int done = b64_done(&b);
    vm_v2_release(sp, b.released, text + len);
    if (b.bad) return bad(err, errsize, "events: not base64");
    if (!done) return bad(err, errsize, "events: more than \"nevents\"");
    return 0;
}

int vm_v2_load_live_events(const struct vm_v2_spans *sp, json_t *root, struct vm_dump *d, char *err,
                           size_t errsize) {
    /* The holders are read by now (model.c): their text is given back
     * before the biggest arrays are made. */
    for (int k = V2_HOLDERS; k <= V2_PEAK_HOLDERS; k++)
        if (sp->at[k]) vm_v2_release(sp, sp->at[k], sp->at[k] + sp->len[k]);
    struct tables *t = d->v2;
    if (!(t->name_of = calloc(t->nstrs ? t->nstrs : 1, sizeof *t->name_of))) return bad(err, errsize, "out of memory");
    int rc = load_live(t, sp, d, err, errsize);
    free(t->name_of);
    t->name_of = NULL;
    return rc ? -1 : load_events(sp, root, d, err, errsize);
}

struct vm_holder *vm_v2_holders(const char *at, size_t len, json_t *json, size_t nstacks, size_t *n, char *err,
                                size_t errsize) {
    struct vm_holder *h = NULL;
    size_t cap = 0;
    *n = 0;
    if (json) {
        size_t k = json_array_size(json);
        if (k % 3) { bad(err, errsize, " is not a list of (stack, bytes, count)"); return NULL; }
        if (!(h = calloc(k / 3 ? k / 3 : 1, sizeof *h))) { bad(err, errsize, "out of memory"); return NULL; }
        for (size_t i = 0; i < k; i += 3) {
            json_t *s = json_array_get(json, i), *c = json_array_get(json, i + 2);
            uint64_t bytes;
            if (!json_is_integer(s) || !vm_json_u64(json_array_get(json, i + 1), &bytes) || !json_is_integer(c) ||
                json_integer_value(s) < 0 || (uint64_t)json_integer_value(s) >= nstacks || json_integer_value(c) < 0 ||
                json_integer_value(c) > UINT32_MAX) {
                free(h);
                bad(err, errsize, "[%zu] is malformed", i / 3);
                return NULL;
            }
            h[i / 3] = (struct vm_holder){.stack = (uint32_t)json_integer_value(s),
                                          .count = (uint32_t)json_integer_value(c),
                                          .bytes = bytes};
        }
        *n = k / 3;
        return h;
    }
    struct vm_scan p = {at, at + len, NULL, NULL, NULL};
    if (!vm_scan_lit(&p, '[')) { bad(err, errsize, " is not an array"); return NULL; }
    int more = vm_scan_lit(&p, ']') ? 0 : 1;
    for (; more == 1; more = vm_scan_next(&p)) {
        if (!room(&h, *n, &cap, sizeof *h, 1024)) {
            free(h);
            bad(err, errsize, "out of memory");
            return NULL;
        }
        int64_t s, c;
        uint64_t b;
        if (!elem(&p, &s, 0, (int64_t)nstacks - 1) || !vm_scan_lit(&p, ',') || !count(&p, &b) ||
            !vm_scan_lit(&p, ',') || !elem(&p, &c, 0, UINT32_MAX)) {
            free(h);
            bad(err, errsize, "[%zu] is malformed", *n);
            return NULL;
        }
        h[(*n)++] = (struct vm_holder){.stack = (uint32_t)s, .count = (uint32_t)c, .bytes = b};
    }
    if (p.err) { free(h); bad(err, errsize, ": %s", p.err); return NULL; }
    if (!h && !(h = calloc(1, sizeof *h))) bad(err, errsize, "out of memory");
    return h;
}

void vm_v2_free(void *tables) {
    struct tables *t = tables;
    if (!t) return;
    for (size_t i = 0; i < t->nnames; i++) free(t->names[i]);
    free(t->names);
    free(t->arena);
    free(t->strs);
    free(t);
}
