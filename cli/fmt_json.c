/* fmt_json.c -- the dumps normalized and symbolized for jq and CI: every
 * stack reference resolved to its call site and frames, holders at the
 * chosen moment, and call sites combined across processes. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "../common/summary.h"
#include "fleet.h"
#include "model_torch.h"
#include "runs.h"
#include "reporters.h"

static json_t *hex(uint64_t v) {
    char b[32];
    snprintf(b, sizeof b, "0x%" PRIx64, v);
    return json_string(b);
}

static json_t *str_or_null(const char *s) { return s ? json_string(s) : json_null(); }

/* A count as a value for put(): jansson's integers stop at INT64_MAX, so
 * one above it (a request of (size_t)-1) goes in as a string of a NUL and
 * its digits, which put() writes as the bare number. No other string
 * written holds a NUL: the model's strings are C strings. */
static json_t *count(uint64_t v) {
    if (v <= (uint64_t)INT64_MAX) return json_integer((json_int_t)v);
    char b[24];
    int n = snprintf(b + 1, sizeof b - 1, "%" PRIu64, v);
    b[0] = '\0';
    return json_stringn(b, (size_t)n + 1);
}

/* The document is written as it goes, a value at a time, as json_dumpf of
 * the whole with these flags would write it: built whole in jansson, 10,000
 * holders of 240 frames took 2.9 GB and 100,000 did not finish in 24 GB. */
#define FLAGS (JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII | JSON_ENCODE_ANY)

/* v (taken) at nesting depth `depth`: each of its lines after the first
 * indented by depth spaces more. */
static void put(FILE *f, json_t *v, int depth) {
    char *text = v ? json_dumps(v, FLAGS) : NULL;
    json_decref(v);
    if (!text) {
        fputs("null", f);
        return;
    }
    for (const char *p = text; *p; p++) {
        if (p[0] == '"' && p[1] == '\\' && strncmp(p, "\"\\u0000", 7) == 0) { /* count()'s: its digits alone */
            for (p += 7; *p != '"'; p++) fputc(*p, f);
            continue;
        }
        fputc(*p, f);
        if (*p == '\n') fprintf(f, "%*s", depth, "");
    }
    free(text);
}

/* An object's or array's next member at depth `depth` (its parent's + 1):
 * the separator from the one before, the line break, the key. */
static void member(FILE *f, int depth, int *first, const char *key) {
    fprintf(f, "%s\n%*s", *first ? "" : ",", depth, "");
    *first = 0;
    if (key) {
        put(f, json_string(key), depth);
        fputs(": ", f);
    }
}

/* The end of an object or array at `depth` that had members (else it
 * closes as {} or [], as jansson writes an empty one). */
static void close_at(FILE *f, int depth, int first, char c) {
    if (!first) fprintf(f, "\n%*s", depth, "");
    fputc(c, f);
}

static json_t *frames(const struct vm_dump *d, size_t stack) {
    json_t *a = json_array();
    const struct vm_stack *s = &d->stacks[stack];
    const struct vt_frame *const *fr = vm_stack_frames(d, stack);
    for (size_t i = 0; i < s->nframes; i++) {
        const struct vt_frame *f = fr[i];
        json_t *o = json_pack("{s:o,s:o,s:I,s:o,s:o,s:o}", "function", str_or_null(f->function), "file",
                              str_or_null(f->file), "line", (json_int_t)f->line, "module", str_or_null(f->module),
                              "offset", hex(f->offset), "address", hex(f->address));
        if (o && f->inlined) json_object_set_new(o, "inlined", json_true());
        json_array_append_new(a, o);
    }
    return a;
}

static json_t *site(const struct vm_dump *d, size_t stack) {
    char where[1024];
    return vm_site(d, stack) ? json_string(vm_site_label(d, stack, where, sizeof where)) : json_null();
}


/* The strings of the live list, each as put() writes a json_string of it
 * (quoted, escaped), worked out once: its sites by stack, and the last
 * kind and API seen. A live list of 10,000,000 built and written through
 * jansson a value at a time took 34 s for 2.4 GB; these entries are
 * written directly, byte for byte as put() writes them. */
struct encodings {
    char **site;             /* by stack; NULL: not yet */
    const char *kind_of, *api_of;
    char *kind, *api;
    struct frame_text *frame; /* by index in d->frames */
    struct frame_blocks *blocks;
};

/* Each frame's object as put_holder writes it in a holders list, its
 * indent included, made once: a frame is in many stacks, and the frames
 * of a million holders (45 frames each, 10 GB of JSON) took 78 s, most of
 * it fprintf making the same text again. For frame i of the dump's table,
 * at[i] is its text's offset in `room` + 1 (0: not made yet) and len[i]
 * its length, made at indent `depth` (the holders lists of one process
 * are at one). The room is bounded (FRAMES_ROOM): once a frame's text does
 * not fit, the frames not yet in it are made at each use, as before, so
 * that the cache never adds more than the bound and 8 bytes a frame to the
 * report's memory. */
#ifndef VR_JSON_FRAMES_ROOM
#define VR_JSON_FRAMES_ROOM (16u << 20)
#endif
#define FRAMES_ROOM ((size_t)VR_JSON_FRAMES_ROOM)

struct frame_blocks {
    uint32_t *at, *len;
    char *room;
    size_t used;
    int depth;
};

/* The cache of d's frames' objects at indent depth, made at its first use;
 * NULL when out of memory (each frame made at each use). */
static struct frame_blocks *blocks_of(struct encodings *e, const struct vm_dump *d, int depth) {
    if (!e->blocks && d->nframes && (e->blocks = calloc(1, sizeof *e->blocks))) {
        struct frame_blocks *b = e->blocks;
        b->at = calloc(d->nframes, sizeof *b->at);
        b->len = malloc(d->nframes * sizeof *b->len);
        b->room = malloc(FRAMES_ROOM);
        b->depth = depth;
        if (!b->at || !b->len || !b->room) {
            free(b->at);
            free(b->len);
            free(b->room);
            *b = (struct frame_blocks){.depth = -1};
        }
    }
    return e->blocks && e->blocks->at && e->blocks->depth == depth ? e->blocks : NULL;
}

/* A frame's strings as put() writes them: each is "null" for none, the
 * model's own string between quotes where jansson writes it as it is (text
 * of printable ASCII without a quote or backslash: nearly every name), or
 * its encoding, kept. A copy of every frame's strings took as much as the
 * dump's own strings: 20 MB more for 10,000 Python functions of 1,000-
 * character names in files of 2,000-character paths (a 22 MB dump). state
 * 0 not worked out yet, 1 done, 2 a string jansson refuses (the frame is
 * left out of its array, as json_array_append_new of a failed pack leaves
 * it). */
enum { TEXT_NULL, TEXT_PLAIN, TEXT_ENCODED };
struct text {
    char *encoded;           /* TEXT_ENCODED's, owned */
    uint8_t how;
};
struct frame_text {
    struct text function, file, module;
    int state;
};

/* s as put(json_string(s)) writes it at any depth (no line breaks in a
 * string), or NULL where jansson refuses it (not UTF-8, or NULL). */
static char *encoded(const char *s) {
    json_t *j = s ? json_string(s) : NULL;
    char *t = j ? json_dumps(j, FLAGS) : NULL;
    json_decref(j);
    return t;
}

/* The encoding of s, kept in *have for *of (the same text again reuses
 * it). NULL where jansson refuses it. */
static const char *encoded_as(const char *s, const char **of, char **have) {
    if (*have && s && (s == *of || strcmp(s, *of) == 0)) return *have;
    free(*have);
    *have = encoded(s);
    *of = *have ? s : NULL;
    return *have;
}

static void encodings_free(struct encodings *e, const struct vm_dump *d) {
    if (e->site)
        for (size_t i = 0; i < d->nstacks; i++) free(e->site[i]);
    free(e->site);
    if (e->frame)
        for (size_t i = 0; i < d->nframes; i++) {
            free(e->frame[i].function.encoded);
            free(e->frame[i].file.encoded);
            free(e->frame[i].module.encoded);
        }
    free(e->frame);
    free(e->kind);
    free(e->api);
    if (e->blocks) {
        free(e->blocks->at);
        free(e->blocks->len);
        free(e->blocks->room);
        free(e->blocks);
    }
}

/* The site of `stack` as put(site(d, stack)) writes it: "null" where it
 * has none; NULL where jansson refuses it. Kept by stack, or in *own
 * (for the caller to free) where there is no room for it. */
static const char *site_text(const struct vm_dump *d, size_t stack, struct encodings *e, char **own) {
    if (!vm_site(d, stack)) return "null";
    char label[1024];
    char **at = e->site && stack < d->nstacks ? &e->site[stack] : own;
    if (!*at) *at = encoded(vm_site_label(d, stack, label, sizeof label));
    return *at;
}

/* How s is written as str_or_null(s) writes it, into *t; 0 where jansson
 * refuses it. */
static int text_of(const char *s, struct text *t) {
    *t = (struct text){NULL, TEXT_NULL};
    if (!s) return 1;
    const char *p = s;
    while ((unsigned char)*p >= 0x20 && (unsigned char)*p < 0x7f && *p != '"' && *p != '\\') p++;
    if (*p == '\0') {
        t->how = TEXT_PLAIN;
        return 1;
    }
    t->how = TEXT_ENCODED;
    return (t->encoded = encoded(s)) != NULL;
}

/* n spaces. */
static void indent(FILE *f, int n) {
    static const char spaces[] = "                                                                ";
    const int most = (int)sizeof spaces - 1;
    for (; n > 0; n -= most) fwrite(spaces, 1, (size_t)(n < most ? n : most), f);
}

/* A frame's member: a line break, `depth` spaces, "key": and its string s
 * (t says how) as put() writes it. */
static void put_text(FILE *f, int depth, const char *key, const char *s, const struct text *t) {
    fputc('\n', f);
    indent(f, depth);
    fputs(key, f);
    if (t->how == TEXT_PLAIN) {
        fputc('"', f);
        fputs(s, f);
        fputc('"', f);
    } else {
        fputs(t->how == TEXT_NULL ? "null" : t->encoded, f);
    }
}

/* The frame's strings, worked out once, into *t (NULL: the frame is left
 * out of its array); 0 where they cannot be kept (no memory for the table). */
static int frame_text(const struct vm_dump *d, const struct vt_frame *f, struct encodings *e,
                      const struct frame_text **t) {
    if (!e->frame || f < d->frames || f >= d->frames + d->nframes) return 0;
    struct frame_text *x = &e->frame[f - d->frames];
    if (x->state == 0) {
        int ok = text_of(f->function, &x->function);
        ok = text_of(f->file, &x->file) && ok;
        ok = text_of(f->module, &x->module) && ok;
        x->state = ok ? 1 : 2;
    }
    *t = x->state == 1 ? x : NULL;
    return 1;
}

/* Frame fr's object in a holder's frames at `depth`, its indent first,
 * its strings as t says. */
static void write_frame(FILE *f, const struct vt_frame *fr, const struct frame_text *t, int depth) {
    indent(f, depth);
    fputc('{', f);
    put_text(f, depth + 1, "\"function\": ", fr->function, &t->function);
    fputc(',', f);
    put_text(f, depth + 1, "\"file\": ", fr->file, &t->file);
    fprintf(f, ",\n%*s\"line\": %" JSON_INTEGER_FORMAT ",", depth + 1, "", (json_int_t)fr->line);
    put_text(f, depth + 1, "\"module\": ", fr->module, &t->module);
    fprintf(f, ",\n%*s\"offset\": \"0x%" PRIx64 "\",\n%*s\"address\": \"0x%" PRIx64 "\"%s%*s%s\n%*s}",
            depth + 1, "", fr->offset, depth + 1, "", fr->address, fr->inlined ? ",\n" : "",
            fr->inlined ? depth + 1 : 0, "", fr->inlined ? "\"inlined\": true" : "", depth, "");
}

/* write_frame's text, from the cache where it has it (made and kept
 * there at its first use while there is room). */
static void put_frame(FILE *f, const struct vm_dump *d, const struct vt_frame *fr, const struct frame_text *t,
                      struct encodings *e, int depth) {
    struct frame_blocks *b = blocks_of(e, d, depth);
    size_t i = (size_t)(fr - d->frames);
    if (b && b->at[i]) {
        fwrite(b->room + b->at[i] - 1, 1, b->len[i], f);
        return;
    }
    char *text = NULL;
    size_t n = 0;
    FILE *m = b && b->used < FRAMES_ROOM ? open_memstream(&text, &n) : NULL;
    if (m) {
        write_frame(m, fr, t, depth);
        if (fclose(m) == 0 && text) {
            if (n <= FRAMES_ROOM - b->used) {
                memcpy(b->room + b->used, text, n);
                b->at[i] = (uint32_t)b->used + 1;
                b->len[i] = (uint32_t)n;
                b->used += n;
            } else {
                b->used = FRAMES_ROOM; /* full: the frames left are made as they are written */
            }
            fwrite(text, 1, n, f);
            free(text);
            return;
        }
        free(text);
    }
    write_frame(f, fr, t, depth);
}

/* Holder h as put() of its object at `depth` writes it; 0 when its site is
 * one jansson refuses or its frames' strings cannot be kept (then the
 * caller writes it the general way). */
static int put_holder(FILE *f, const struct vm_dump *d, const struct vm_holder *h, struct encodings *e, int depth) {
    char *own = NULL;
    const char *where = site_text(d, h->stack, e, &own);
    if (!where) return 0;
    const struct vt_frame *const *fr = vm_stack_frames(d, h->stack);
    size_t n = fr ? d->stacks[h->stack].nframes : 0;
    const struct frame_text *t;
    for (size_t i = 0; i < n; i++)
        if (!frame_text(d, fr[i], e, &t)) {
            free(own);
            return 0;
        }
    fprintf(f, "{\n%*s\"bytes\": %" PRIu64 ",\n%*s\"count\": %" JSON_INTEGER_FORMAT
               ",\n%*s\"site\": %s,\n%*s\"frames\": [",
            depth + 1, "", h->bytes, depth + 1, "", (json_int_t)h->count, depth + 1, "", where,
            depth + 1, "");
    free(own);
    int any = 0;
    for (size_t i = 0; i < n; i++) {
        if (!frame_text(d, fr[i], e, &t) || !t) continue; /* left out, as before */
        fputs(any ? ",\n" : "\n", f);
        put_frame(f, d, fr[i], t, e, depth + 2);
        any = 1;
    }
    if (any) fprintf(f, "\n%*s]", depth + 1, "");
    else fputc(']', f);
    fprintf(f, "\n%*s}", depth, "");
    return 1;
}

/* Live allocation a as put() of its object at `depth` writes it; 0 when a
 * string of it is one jansson refuses (then the caller writes the entry
 * the general way, as before: as null). */
static int put_live(FILE *f, const struct vm_dump *d, const struct vm_alloc *a, struct encodings *e, int depth) {
    const char *kind = encoded_as(vm_alloc_kind(d, a), &e->kind_of, &e->kind);
    if (!kind) return 0;
    const char *api = encoded_as(vm_alloc_api(d, a), &e->api_of, &e->api);
    if (!api) return 0;
    char *own = NULL;
    const char *where = site_text(d, a->stack, e, &own);
    if (!where) return 0;
    fprintf(f, "{\n%*s\"address\": \"0x%" PRIx64 "\",\n%*s\"bytes\": %" PRIu64
               ",\n%*s\"kind\": %s,\n%*s\"api\": %s,\n%*s\"device\": %d,\n%*s\"thread\": %d,\n%*s"
               "\"time_ns\": %" PRIu64 ",\n%*s\"site\": %s",
            depth + 1, "", a->address, depth + 1, "", a->bytes, depth + 1, "", kind, depth + 1, "", api,
            depth + 1, "", a->device, depth + 1, "", a->thread, depth + 1, "", a->time_ns, depth + 1, "",
            where);
    free(own);
    if (a->has_handle) fprintf(f, ",\n%*s\"handle\": \"0x%" PRIx64 "\"", depth + 1, "", vm_alloc_handle(d, a));
    fprintf(f, "\n%*s}", depth, "");
    return 1;
}

static void holders(FILE *f, const struct vm_dump *d, const struct vm_holder *h, size_t n, int depth,
                    struct encodings *e) {
    int first = 1;
    fputc('[', f);
    for (size_t i = 0; i < n; i++) {
        member(f, depth + 1, &first, NULL);
        if (put_holder(f, d, &h[i], e, depth + 1)) continue;
        put(f, json_pack("{s:o,s:I,s:o,s:o}", "bytes", count(h[i].bytes), "count", (json_int_t)h[i].count,
                         "site", site(d, h[i].stack), "frames", frames(d, h[i].stack)), depth + 1);
    }
    close_at(f, depth, first, ']');
}

/* A holder list h[0..n) as the member's value, in the one order of the
 * formats (vr_holders_ranked); with --top, the stacks of its --top call
 * sites alone (the --top largest of each) and then the member `left_key`
 * with how many it left out. */
static void ranked_holders(FILE *f, const struct vm_dump *d, const struct vm_holder *h, size_t n,
                           const struct vr_opts *o, const char *left_key, int *first, int depth, struct encodings *e) {
    size_t k, left;
    struct vm_holder *r = vr_holders_ranked(d, h, n, o->top_given ? (size_t)o->top : 0, &k, &left);
    if (!r && n) { /* out of memory: as the dump lists them, the first --top */
        k = o->top_given && n > (size_t)o->top ? (size_t)o->top : n;
        left = n - k;
    }
    holders(f, d, r ? r : h, k, depth + 1, e);
    free(r);
    if (left) {
        member(f, depth + 1, first, left_key);
        put(f, count(left), depth + 1);
    }
}

/* PyTorch's own view (the dump's "torch", model_torch.h), as the dump has
 * it but for its stacks, resolved to their call sites as everywhere here:
 * an array of one object per device. */
static json_t *torch_view(const struct vm_dump *d, const struct vm_torch *t) {
    json_t *devs = json_array();
    for (size_t i = 0; i < t->ndevices; i++) {
        const struct vm_torch_device *v = &t->devices[i];
        json_t *j = json_pack("{s:i,s:o,s:o,s:o,s:o}", "device", v->device, "allocated_bytes", count(v->allocated),
                              "reserved_bytes", count(v->reserved), "largest_free_block_bytes",
                              count(v->largest_free), "steps", count(v->steps));
        if (v->has_request) json_object_set_new(j, "request_bytes", count(v->request));
        if (v->has_request && v->request_rounded) json_object_set_new(j, "request_rounded", json_true());
        json_object_set_new(j, "free_bytes", v->has_free ? count(v->free_bytes) : json_null());
        json_object_set_new(j, "total_bytes", v->has_free ? count(v->total_bytes) : json_null());
        json_object_set_new(j, "outside_bytes", v->has_outside ? count(v->outside) : json_null());
        json_t *cats = json_object();
        for (int c = 0; c < VM_TORCH_NCAT; c++) json_object_set_new(cats, vm_torch_categories[c], count(v->cat[c]));
        json_object_set_new(j, "categories", cats);
        if (v->settings) json_object_set_new(j, "settings", json_string(v->settings));
        if (v->has_growth) {
            json_t *g = json_pack("{s:o,s:s,s:o,s:o,s:o,s:o}", "site", site(d, v->growth_stack), "unit",
                                  v->growth_unit, "units", count(v->growth_units), "bytes_per_unit",
                                  count(v->growth_per_unit), "rise_bytes", count(v->growth_rise), "span_ns",
                                  count(v->growth_span_ns));
            json_object_set_new(g, "holder", str_or_null(v->growth_holder));
            json_object_set_new(j, "growth", g);
        }
        json_t *ts = json_array();
        for (size_t k = 0; k < v->ntensors; k++) {
            const struct vm_torch_tensor *x = &v->tensors[k];
            json_t *e = json_pack("{s:o,s:o,s:o,s:o,s:o,s:o}", "bytes", count(x->bytes), "shape",
                                  str_or_null(x->shape), "dtype", str_or_null(x->dtype), "category",
                                  str_or_null(x->category), "name", str_or_null(x->name), "holder",
                                  str_or_null(x->holder));
            json_object_set_new(e, "block_address", hex(x->block));
            json_object_set_new(e, "segment_address", hex(x->segment));
            if (x->has_stack) json_object_set_new(e, "site", site(d, x->stack));
            json_array_append_new(ts, e);
        }
        json_object_set_new(j, "tensors", ts);
        json_array_append_new(devs, j);
    }
    return devs;
}

static void process(FILE *f, const struct vm_dump *d, const struct vr_opts *o, int depth) {
    int first = 1;
    struct encodings enc = {0};
    if (d->nstacks) enc.site = calloc(d->nstacks, sizeof *enc.site);
    if (d->nframes) enc.frame = calloc(d->nframes, sizeof *enc.frame);
    fputc('{', f);
    /* A path is bytes: one that is not UTF-8 is written in its display form. */
    char safe[4096];
    json_t *path = json_string(d->path);
    member(f, depth + 1, &first, "dump");
    put(f, path ? path : json_string(vr_safe(d->path, safe, sizeof safe)), depth + 1);
    member(f, depth + 1, &first, "reason");
    put(f, json_string(d->reason), depth + 1);
    member(f, depth + 1, &first, "pid");
    put(f, json_integer(d->pid), depth + 1);
    member(f, depth + 1, &first, "rank");
    put(f, json_integer(d->rank), depth + 1);
    member(f, depth + 1, &first, "local_rank");
    put(f, json_integer(d->local_rank), depth + 1);
    if (d->rank_from) {   /* the variable that gave the rank, as the dump says it */
        member(f, depth + 1, &first, "rank_from");
        put(f, json_string(d->rank_from), depth + 1);
    }
    if (d->world_size) {   /* the job's size, where the dump says it */
        member(f, depth + 1, &first, "world_size");
        put(f, json_integer(d->world_size), depth + 1);
    }
    if (d->ended_signal) { /* as the dump says it */
        json_t *e = json_object();
        json_object_set_new(e, "signal", json_string(d->ended_signal));
        if (d->ended_from_pid) json_object_set_new(e, "from_pid", json_integer(d->ended_from_pid));
        if (d->ended_from) json_object_set_new(e, "from", json_string(d->ended_from));
        member(f, depth + 1, &first, "ended_by");
        put(f, e, depth + 1);
    }
    if (d->dump_number) {   /* an on-demand dump's number, as the dump says it */
        member(f, depth + 1, &first, "dump_number");
        put(f, json_integer(d->dump_number), depth + 1);
    }
    if (d->exit_status_known) {   /* as the dump says it */
        member(f, depth + 1, &first, "exit_status");
        put(f, json_integer(d->exit_status), depth + 1);
    }
    /* The library's forecast line, as the text report prints it. */
    const char *fc = d->json ? json_string_value(json_object_get((const json_t *)d->json, "forecast")) : NULL;
    if (fc && fc[0]) {
        member(f, depth + 1, &first, "forecast");
        put(f, json_string(fc), depth + 1);
    }
    member(f, depth + 1, &first, "host");
    put(f, str_or_null(d->host), depth + 1);
    json_t *argv = json_array();
    for (size_t i = 0; i < d->argc; i++) json_array_append_new(argv, json_string(d->argv[i]));
    member(f, depth + 1, &first, "argv");
    put(f, argv, depth + 1);
    json_t *devs = json_array();
    for (size_t i = 0; i < d->ndevices; i++) {
        const struct vm_device *v = &d->devices[i];
        json_array_append_new(devs, json_pack("{s:i,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}",
            "ordinal", v->ordinal, "name", str_or_null(v->name), "uuid", str_or_null(v->uuid),
            "total_bytes", count(v->total_bytes), "live_bytes", count(v->live_bytes),
            "live_count", count(v->live_count), "peak_bytes", count(v->peak_bytes),
            "peak_time_ns", count(v->peak_time_ns), "alloc_count", count(v->alloc_count),
            "free_count", count(v->free_count), "failed_count", count(v->failed_count),
            "oom_count", count(v->oom_count)));
    }
    member(f, depth + 1, &first, "devices");
    put(f, devs, depth + 1);
    const struct vm_totals *t = &d->totals;
    member(f, depth + 1, &first, "totals");
    json_t *tot = json_pack("{s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}",
        "live_bytes", count(t->live_bytes), "live_count", count(t->live_count),
        "peak_bytes", count(t->peak_bytes), "peak_time_ns", count(t->peak_time_ns),
        "alloc_count", count(t->alloc_count), "free_count", count(t->free_count),
        "failed_count", count(t->failed_count), "oom_count", count(t->oom_count),
        "oom_survived", count(t->oom_survived), "unknown_frees", count(t->unknown_frees));
    if (tot && t->last_oom_survived >= 0) json_object_set_new(tot, "last_oom_survived", json_boolean(t->last_oom_survived));
    /* What the dump could not hold, by its cause, where there was any. */
    if (tot && t->records_lost) json_object_set_new(tot, "records_lost", count(t->records_lost));
    if (tot && t->events_dropped_while_read)
        json_object_set_new(tot, "events_dropped_while_read", count(t->events_dropped_while_read));
    put(f, tot, depth + 1);
    member(f, depth + 1, &first, "host_memory");
    put(f, json_pack("{s:o,s:o,s:o}", "live_bytes",
        count(t->host_live_bytes), "live_count", count(t->host_live_count), "peak_bytes",
        count(t->host_peak_bytes)), depth + 1);
    /* Other processes' memory opened through IPC, apart as the text's line
     * and the dump have it: not this process's, so in no figure above. */
    member(f, depth + 1, &first, "imported_memory");
    put(f, json_pack("{s:o,s:o}", "live_bytes", count(t->imported_live_bytes), "live_count",
        count(t->imported_live_count)), depth + 1);
    if (d->torch) {   /* PyTorch's own view at the dump's moment, as text and HTML show it */
        member(f, depth + 1, &first, "torch");
        put(f, torch_view(d, d->torch), depth + 1);
    }
    member(f, depth + 1, &first, "ooms");
    fputc('[', f);
    int afirst = 1; /* the array's members */
    for (size_t i = 0; i < d->nooms; i++) {
        const struct vm_oom *x = &d->ooms[i];
        json_t *j = json_pack("{s:o,s:o,s:s,s:s,s:i,s:i,s:o,s:o,s:o,s:o}", "number", count(x->number),
            "requested_bytes", count(x->requested), "api", x->api, "kind", x->kind, "device", x->device, "thread",
            x->thread, "live_bytes", count(x->live_bytes), "time_ns", count(x->time_ns),
            "site", site(d, x->stack), "frames", frames(d, x->stack));
        json_object_set_new(j, "budget", json_boolean(x->budget));
        if (x->requested_rounded) json_object_set_new(j, "requested_rounded", json_true());
        json_t *fs = json_array();
        for (size_t k = 0; k < x->nfindings; k++)
            json_array_append_new(fs, json_pack("{s:s,s:s,s:s}", "id", x->findings[k].id, "finding",
                                                x->findings[k].finding, "next", x->findings[k].next));
        json_object_set_new(j, "findings", fs);
        if (x->procs) {
            json_t *ps = json_array();
            for (size_t k = 0; k < x->nprocs; k++)
                json_array_append_new(ps, json_pack("{s:i,s:o,s:o}", "pid", x->procs[k].pid, "name",
                                                    str_or_null(x->procs[k].name), "used_bytes",
                                                    x->procs[k].used_known ? count(x->procs[k].used_bytes)
                                                                           : json_null()));
            json_object_set_new(j, "other_processes", ps);
        } else {
            json_object_set_new(j, "other_processes", json_null());
        }
        json_object_set_new(j, "free_bytes", x->have_info ? count(x->free_bytes) : json_null());
        if (x->have_counts) { /* the failing device's, at the failure */
            json_object_set_new(j, "live_count", count(x->live_count));
            json_object_set_new(j, "peak_bytes", count(x->peak_bytes));
            json_object_set_new(j, "peak_time_ns", count(x->peak_time_ns));
        }
        if (x->raised_allocated) json_object_set_new(j, "raised_allocated_bytes", count(x->raised_allocated));
        if (x->taken_count) { /* the request's own handles, made before the call that failed */
            json_object_set_new(j, "taken_bytes", count(x->taken_bytes));
            json_object_set_new(j, "taken_count", count(x->taken_count));
        }
        if (x->pool_reserved || x->pool_used) {
            json_object_set_new(j, "pool_reserved_bytes", count(x->pool_reserved));
            json_object_set_new(j, "pool_used_bytes", count(x->pool_used));
        }
        if (x->graph_reserved || x->graph_used) {
            json_object_set_new(j, "graph_reserved_bytes", count(x->graph_reserved));
            json_object_set_new(j, "graph_used_bytes", count(x->graph_used));
        }
        json_object_set_new(j, "total_bytes", x->have_info ? count(x->total_bytes) : json_null());
        if (x->torch) json_object_set_new(j, "torch", torch_view(d, x->torch));
        member(f, depth + 2, &afirst, NULL);
        put(f, j, depth + 2);
    }
    close_at(f, depth + 1, afirst, ']');
    if (d->oom_requests) { /* every failed request, counted (absent from older dumps) */
        member(f, depth + 1, &first, "oom_requests");
        fputc('[', f);
        afirst = 1;
        for (size_t i = 0; i < d->noom_requests; i++) {
            const struct vm_oom_request *r = &d->oom_requests[i];
            json_t *j = json_pack("{s:o,s:s,s:s,s:i,s:o,s:o,s:o,s:o,s:i,s:o,s:o,s:i}", "requested_bytes",
                count(r->requested), "api", r->api, "kind", r->kind, "device", r->device, "site", site(d, r->stack),
                "count", count(r->count), "first_number", count(r->first_number), "first_ns", count(r->first_ns),
                "first_thread", r->first_thread, "last_number", count(r->last_number), "last_ns", count(r->last_ns),
                "last_thread", r->last_thread);
            member(f, depth + 2, &afirst, NULL);
            put(f, j, depth + 2);
        }
        close_at(f, depth + 1, afirst, ']');
        member(f, depth + 1, &first, "oom_requests_other");
        put(f, count(d->oom_requests_other), depth + 1);
    }
    size_t n;
    int missing;
    const struct vm_holder *h = vr_holders_at(d, o->at, &n, &missing);
    /* With --top, the holders and released of the N call sites the text
     * report lists (each site's N largest stacks), the live list its N
     * largest, and how many each left out: a holder's frames are about
     * 10 KB of JSON at 45 frames, and a dump of a million stacks made
     * 10 GB. */
    size_t limit = o->top_given ? (size_t)o->top : SIZE_MAX;
    member(f, depth + 1, &first, "holders");
    if (missing) put(f, json_null(), depth + 1);
    else ranked_holders(f, d, h, n, o, "holders_left_out", &first, depth, &enc);
    if (vr_holders_device(d, o->at) >= 0) { /* the failing device's alone */
        member(f, depth + 1, &first, "holders_device");
        put(f, json_integer(vr_holders_device(d, o->at)), depth + 1);
    }
    if (d->nreleased) {   /* dumps of a run that reset a device with memory unfreed */
        member(f, depth + 1, &first, "released");
        ranked_holders(f, d, d->released, d->nreleased, o, "released_left_out", &first, depth, &enc);
    }
    if (d->nreleased_host) {   /* pinned host memory, apart as in the dump */
        member(f, depth + 1, &first, "released_host");
        ranked_holders(f, d, d->released_host, d->nreleased_host, o, "released_host_left_out", &first, depth, &enc);
    }
    member(f, depth + 1, &first, "growing");
    fputc('[', f);
    afirst = 1;
    for (size_t i = 0; i < d->ngrowing; i++) {
        const struct vm_growth *g = &d->growing[i];
        json_t *j = json_pack("{s:o,s:o,s:o,s:o,s:f}", "site", site(d, g->stack), "first_bytes",
                              count(g->first_bytes), "end_bytes", count(g->end_bytes),
                              "allocations", count(g->allocations), "bytes_per_second",
                              g->bytes_per_second);
        if (j && g->have_rate) {
            json_object_set_new(j, "since_ns", count(g->since_ns));
            json_object_set_new(j, "last_ns", count(g->last_ns));
            json_object_set_new(j, "bytes_per_allocation", count(g->bytes_per_allocation));
        }
        if (j && strcmp(g->unit, "step") == 0) {   /* the program marked steps */
            json_object_set_new(j, "steps", count(g->units));
            json_object_set_new(j, "bytes_per_step", count(g->bytes_per_unit));
        }
        if (j && g->holder) json_object_set_new(j, "holder", json_string(g->holder));
        if (j && g->cache_bytes) {   /* PyTorch's record bounded its cache */
            json_object_set_new(j, "cache_bytes", count(g->cache_bytes));
            json_object_set_new(j, "mostly_cache",
                                json_boolean(vt_growth_mostly_cache(g->first_bytes, g->end_bytes, g->cache_bytes)));
        }
        member(f, depth + 2, &afirst, NULL);
        put(f, j, depth + 2);
    }
    close_at(f, depth + 1, afirst, ']');
    member(f, depth + 1, &first, "live");
    fputc('[', f);
    afirst = 1;
    for (size_t i = 0; i < d->nlive && i < limit; i++) {
        const struct vm_alloc *a = &d->live[i];
        member(f, depth + 2, &afirst, NULL);
        if (put_live(f, d, a, &enc, depth + 2)) continue;
        json_t *j = json_pack("{s:o,s:o,s:s,s:s,s:i,s:i,s:o,s:o}", "address", hex(a->address), "bytes",
            count(a->bytes), "kind", vm_alloc_kind(d, a), "api", vm_alloc_api(d, a), "device", a->device, "thread", a->thread,
            "time_ns", count(a->time_ns), "site", site(d, a->stack));
        if (a->has_handle) json_object_set_new(j, "handle", hex(vm_alloc_handle(d, a)));
        put(f, j, depth + 2);
    }
    encodings_free(&enc, d);
    close_at(f, depth + 1, afirst, ']');
    if (d->nlive > limit) {
        member(f, depth + 1, &first, "live_left_out");
        put(f, count(d->nlive - limit), depth + 1);
    }
    close_at(f, depth, first, '}');
}

int vr_json(FILE *f, const struct vr_input *in, const struct vr_opts *o, char *err, size_t errsize) {
    int first = 1;
    fputc('{', f);
    member(f, 1, &first, "format");
    put(f, json_string("vramtrace-report"), 1);
    member(f, 1, &first, "version");
    put(f, json_integer(1), 1);
    member(f, 1, &first, "at");
    put(f, json_string(vr_moment_name(o->at)), 1);
    struct vr_first w;   /* the process that failed first, as the text report names it (its place in processes) */
    if (in->n > 1 && vr_first_to_fail(in, &w)) {
        member(f, 1, &first, "first_to_fail");
        put(f, json_integer((json_int_t)w.dump), 1);
        if (w.said) {   /* which of its failures, and why it was chosen, where the dumps say how they ended */
            char why[128];
            member(f, 1, &first, "first_to_fail_oom");
            put(f, json_integer((json_int_t)w.oom), 1);
            member(f, 1, &first, "first_to_fail_why");
            put(f, json_string(vr_first_why(in, &w, why, sizeof why)), 1);
        }
    }
    if (in->nearlier) {   /* the dumps of earlier runs left out (runs.h) */
        json_t *paths = json_array();
        for (size_t i = 0; i < in->nearlier; i++) json_array_append_new(paths, json_string(in->earlier[i].path));
        member(f, 1, &first, "earlier_runs");
        put(f, json_pack("{s:I,s:I,s:o}", "runs", (json_int_t)in->earlier_runs, "began_before_ns",
                         (json_int_t)vr_earlier_ago_ns(in), "dumps", paths), 1);
    }
    member(f, 1, &first, "processes");
    fputc('[', f);
    int pfirst = 1;
    for (size_t i = 0; i < in->n; i++) {
        member(f, 2, &pfirst, NULL);
        process(f, &in->dumps[i], o, 2);
    }
    close_at(f, 1, pfirst, ']');
    size_t n;
    struct vr_combined *c = vr_combine(in, o->at, &n);
    member(f, 1, &first, "combined_holders");
    fputc('[', f);
    int cfirst = 1;
    for (size_t i = 0; c && i < n && (!o->top_given || i < (size_t)o->top); i++) {
        member(f, 2, &cfirst, NULL);
        put(f, json_pack("{s:s,s:o,s:o,s:I}", "site", c[i].where, "bytes", count(c[i].bytes), "count",
                         count(c[i].count), "processes", (json_int_t)c[i].processes), 2);
    }
    close_at(f, 1, cfirst, ']');
    vr_combined_free(c, n);
    close_at(f, 0, first, '}');
    fputc('\n', f);
    (void)err; (void)errsize; /* a failed write: the caller names the reason (ferror) */
    return ferror(f) ? -1 : 0;
}
