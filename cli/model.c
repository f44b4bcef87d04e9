/* model.c -- reading and checking a dump. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "../common/callsite.h"
#include "../common/format.h"
#include "../common/freeall.h"
#include "../common/rankvars.h"
#include "demangle.h"
#include "model.h"
#include "model_torch.h"
#include "model_u64.h"
#include "model_v2.h"

/* Parsing state: the first error wins and stops the load. */
struct ctx {
    char *err;
    size_t errsize;
    int failed;
    const char *name;
    const struct vm_v2_spans *v2; /* a version 2 dump's spans, while it is read */
};

static void fail(struct ctx *c, const char *fmt, ...) {
    if (c->failed) return;
    c->failed = 1;
    va_list ap;
    va_start(ap, fmt);
    int n = snprintf(c->err, c->errsize, "%s: ", c->name);
    if (n >= 0 && (size_t)n < c->errsize) vsnprintf(c->err + n, c->errsize - (size_t)n, fmt, ap);
    va_end(ap);
}

/* calloc'd room for n elements of elem bytes (one at least), or NULL
 * after failing with "out of memory". */
static void *room(struct ctx *c, size_t n, size_t elem) {
    void *p = calloc(n ? n : 1, elem);
    if (!p) fail(c, "out of memory");
    return p;
}

static json_t *field(struct ctx *c, json_t *o, const char *key, json_type type, const char *where) {
    json_t *v = json_object_get(o, key);
    if (!v || json_typeof(v) != type) {
        fail(c, "%s: field \"%s\" is missing or not a%s %s", where, key,
             type == JSON_ARRAY || type == JSON_OBJECT || type == JSON_INTEGER ? "n" : "",
             type == JSON_ARRAY ? "array" : type == JSON_OBJECT ? "object" :
             type == JSON_INTEGER ? "integer" : "string");
        return NULL;
    }
    return v;
}

/* A count, up to 2^64 - 1 (model_u64.h). */
static uint64_t u64(struct ctx *c, json_t *o, const char *key, const char *where) {
    uint64_t u;
    if (vm_json_u64(json_object_get(o, key), &u)) return u;
    if (field(c, o, key, JSON_INTEGER, where)) fail(c, "%s: field \"%s\" is negative", where, key);
    return 0;
}

/* Whether v is a count as u64 reads it: 0 and up, or a negative integer
 * (which u64 refuses as negative). */
static int is_count(const json_t *v) { return json_is_integer(v) || vm_json_is_big(v); }

static int int_in(struct ctx *c, json_t *o, const char *key, long lo, long hi, const char *where) {
    if (vm_json_is_big(json_object_get(o, key))) {
        fail(c, "%s: field \"%s\" is out of range", where, key);
        return 0;
    }
    json_t *v = field(c, o, key, JSON_INTEGER, where);
    if (!v) return 0;
    json_int_t i = json_integer_value(v);
    if (i < lo || i > hi) { fail(c, "%s: field \"%s\" is out of range", where, key); return 0; }
    return (int)i;
}

/* A string, or NULL where the field is null and nullable. */
static const char *str(struct ctx *c, json_t *o, const char *key, int nullable, const char *where) {
    json_t *v = json_object_get(o, key);
    if (nullable && (v == NULL || json_is_null(v))) return NULL;
    if (!v || !json_is_string(v)) {
        fail(c, "%s: field \"%s\" is missing or not a string", where, key);
        return NULL;
    }
    return json_string_value(v);
}

static uint64_t hexval(struct ctx *c, json_t *o, const char *key, const char *where) {
    const char *s = str(c, o, key, 0, where);
    if (!s) return 0;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 16);
    if (strncmp(s, "0x", 2) != 0 || errno || *end != '\0') {
        fail(c, "%s: field \"%s\" is not a hex address", where, key);
        return 0;
    }
    return v;
}

static size_t stack_ref(struct ctx *c, json_t *o, const char *key, size_t nstacks, const char *where) {
    uint64_t s = u64(c, o, key, where);
    if (!c->failed && s >= nstacks) {
        fail(c, "%s: stack %" PRIu64 " does not exist (%zu stacks)", where, s, nstacks);
        return 0;
    }
    return (size_t)s;
}

/* How a field of an object is read into a struct: its key, its type and
 * checks (F_INT in lo..hi, F_STACK below the dump's number of stacks), and
 * where it goes. Fields are read in table order, so the first field
 * missing or wrong is the one an error names. */
enum { F_U64, F_U32, F_INT, F_I16, F_LONG, F_STR, F_NULLSTR, F_HEX, F_STACK, F_STACK32 };
struct spec {
    const char *key;
    int type;
    long lo, hi;
    size_t off;
};
#define U64(T, f) {#f, F_U64, 0, 0, offsetof(T, f)}
#define U32(T, f) {#f, F_U32, 0, 0, offsetof(T, f)}
#define U64_AS(key, T, f) {key, F_U64, 0, 0, offsetof(T, f)}
#define INT(T, f, lo, hi) {#f, F_INT, lo, hi, offsetof(T, f)}
#define I16(T, f, lo, hi) {#f, F_I16, lo, hi, offsetof(T, f)}
#define STR(T, f) {#f, F_STR, 0, 0, offsetof(T, f)}
#define NULLSTR(T, f) {#f, F_NULLSTR, 0, 0, offsetof(T, f)}
#define HEX(T, f) {#f, F_HEX, 0, 0, offsetof(T, f)}
#define STACK(T, f) {#f, F_STACK, 0, 0, offsetof(T, f)}
#define STACK32(T, f) {#f, F_STACK32, 0, 0, offsetof(T, f)}
#define NSPECS(a) (sizeof(a) / sizeof *(a))

/* Read the n fields of sp from object o into the struct at out. */
static void read_fields(struct ctx *c, json_t *o, const struct spec *sp, size_t n, void *out, size_t nstacks,
                        const char *where) {
    for (size_t i = 0; i < n && !c->failed; i++) {
        char *at = (char *)out + sp[i].off;
        switch (sp[i].type) {
        case F_U64: *(uint64_t *)at = u64(c, o, sp[i].key, where); break;
        case F_U32: {
            uint64_t v = u64(c, o, sp[i].key, where);
            if (!c->failed && v > UINT32_MAX) fail(c, "%s: field \"%s\" is out of range", where, sp[i].key);
            *(uint32_t *)at = (uint32_t)v;
            break;
        }
        case F_INT: *(int *)at = int_in(c, o, sp[i].key, sp[i].lo, sp[i].hi, where); break;
        case F_I16: *(int16_t *)at = (int16_t)int_in(c, o, sp[i].key, sp[i].lo, sp[i].hi, where); break;
        case F_LONG: *(long *)at = int_in(c, o, sp[i].key, sp[i].lo, sp[i].hi, where); break;
        case F_STR: *(const char **)at = str(c, o, sp[i].key, 0, where); break;
        case F_NULLSTR: *(const char **)at = str(c, o, sp[i].key, 1, where); break;
        case F_HEX: *(uint64_t *)at = hexval(c, o, sp[i].key, where); break;
        case F_STACK: *(size_t *)at = stack_ref(c, o, sp[i].key, nstacks, where); break;
        case F_STACK32: *(uint32_t *)at = (uint32_t)stack_ref(c, o, sp[i].key, nstacks, where); break;
        }
    }
}

/* The counters of common/counters.h, read from fields of their names. */
#define DEVICE_COUNTER(name) U64(struct vm_device, name),
#define TOTALS_COUNTER(name) U64(struct vm_totals, name),

static const struct spec frame_fields[] = {
    NULLSTR(struct vt_frame, function), NULLSTR(struct vt_frame, file), NULLSTR(struct vt_frame, module),
    {"line", F_LONG, 0, 100000000, offsetof(struct vt_frame, line)},
    HEX(struct vt_frame, offset), HEX(struct vt_frame, address),
};
static const struct spec holder_fields[] = {
    STACK32(struct vm_holder, stack), U64(struct vm_holder, bytes), U32(struct vm_holder, count),
};
static const struct spec device_fields[] = {
    INT(struct vm_device, ordinal, 0, 4095), NULLSTR(struct vm_device, name), NULLSTR(struct vm_device, uuid),
    U64(struct vm_device, total_bytes), VT_COUNTERS(DEVICE_COUNTER)
};
static const struct spec totals_fields[] = {VT_COUNTERS(TOTALS_COUNTER) U64(struct vm_totals, unknown_frees)};
static const struct spec host_fields[] = {
    U64_AS("live_bytes", struct vm_totals, host_live_bytes), U64_AS("live_count", struct vm_totals, host_live_count),
    U64_AS("peak_bytes", struct vm_totals, host_peak_bytes),
};
static const struct spec imported_fields[] = {
    U64_AS("live_bytes", struct vm_totals, imported_live_bytes),
    U64_AS("live_count", struct vm_totals, imported_live_count),
};
static const struct spec oom_fields[] = {
    U64_AS("requested_bytes", struct vm_oom, requested), STR(struct vm_oom, api), STR(struct vm_oom, kind),
    INT(struct vm_oom, device, -1, 4095), INT(struct vm_oom, thread, 0, INT32_MAX), STACK(struct vm_oom, stack),
};
static const struct spec oom_info_fields[] = {U64(struct vm_oom, free_bytes), U64(struct vm_oom, total_bytes)};
static const struct spec oom_graph_fields[] = {U64_AS("graph_reserved_bytes", struct vm_oom, graph_reserved),
                                               U64_AS("graph_used_bytes", struct vm_oom, graph_used)};
static const struct spec oom_pool_fields[] = {U64_AS("pool_reserved_bytes", struct vm_oom, pool_reserved),
                                              U64_AS("pool_used_bytes", struct vm_oom, pool_used)};
static const struct spec oom_raised_fields[] = {U64_AS("raised_allocated_bytes", struct vm_oom, raised_allocated)};
static const struct spec oom_taken_fields[] = {U64(struct vm_oom, taken_bytes), U64(struct vm_oom, taken_count)};
static const struct spec oom_end_fields[] = {U64(struct vm_oom, live_bytes), U64(struct vm_oom, time_ns)};
static const struct spec oom_count_fields[] = {U64(struct vm_oom, live_count), U64(struct vm_oom, peak_bytes),
                                               U64(struct vm_oom, peak_time_ns)};
static const struct spec finding_fields[] = {
    STR(struct vm_finding, id), STR(struct vm_finding, finding), STR(struct vm_finding, next),
};
static const struct spec proc_fields[] = {INT(struct vm_proc, pid, 0, INT32_MAX), NULLSTR(struct vm_proc, name)};
/* A live allocation's fields after its kind and API (live_rest reads
 * those, as names: vm_name_index). */
static const struct spec live_fields[] = {
    I16(struct vm_alloc, device, -1, 4095), STACK32(struct vm_alloc, stack),
    INT(struct vm_alloc, thread, 0, INT32_MAX), U64(struct vm_alloc, time_ns),
};
static const struct spec oom_request_fields[] = {
    U64_AS("requested_bytes", struct vm_oom_request, requested), STR(struct vm_oom_request, api),
    STR(struct vm_oom_request, kind), INT(struct vm_oom_request, device, -1, 4095),
    STACK(struct vm_oom_request, stack), U64(struct vm_oom_request, count),
    U64(struct vm_oom_request, first_number), U64(struct vm_oom_request, first_ns),
    INT(struct vm_oom_request, first_thread, 0, INT32_MAX), U64(struct vm_oom_request, last_number),
    U64(struct vm_oom_request, last_ns), INT(struct vm_oom_request, last_thread, 0, INT32_MAX),
};
static const struct spec growth_fields[] = {
    STACK(struct vm_growth, stack), U64(struct vm_growth, first_bytes), U64(struct vm_growth, end_bytes),
    U64(struct vm_growth, allocations),
};

/* How the objects of an array are read: each one's fields (sp, in the
 * struct of each element), then `each` when the element needs more;
 * `where` names the fields in errors, `nstacks` bounds its stack fields,
 * `d` is the dump for `each`. */
struct walk;
typedef void each_fn(struct ctx *c, json_t *o, void *elem, size_t i, const struct walk *w);
struct walk {
    const struct spec *sp;
    size_t nsp;
    const char *where;
    each_fn *each;
    struct vm_dump *d;
    size_t nstacks;
};

/* Every element of array arr, which must be an object ("ARRAY[i] is not an
 * object" else, ARRAY being `array`), read as w says into *n calloc'd
 * elements of elem bytes. Returns them; NULL when memory ran out. The walk
 * stops at the first failure. */
static void *objects(struct ctx *c, json_t *arr, size_t elem, size_t *n, const char *array, const struct walk *w) {
    *n = json_array_size(arr);
    char *v = room(c, *n, elem);
    if (!v) return NULL;
    for (size_t i = 0; i < *n && !c->failed; i++) {
        json_t *o = json_array_get(arr, i);
        if (!json_is_object(o)) { fail(c, "%s[%zu] is not an object", array, i); break; }
        read_fields(c, o, w->sp, w->nsp, v + i * elem, w->nstacks, w->where);
        if (w->each && !c->failed) w->each(c, o, v + i * elem, i, w);
    }
    return v;
}

/* The name of array `inner` of element i of array `outer` in errors. */
static const char *inner_name(char *buf, size_t size, const char *outer, size_t i, const char *inner) {
    snprintf(buf, size, "%s[%zu].%s", outer, i, inner);
    return buf;
}

/* Replace the string at key in object o by text, where text is valid UTF-8
 * (the model's strings always are); returns the new value, owned by o, or
 * NULL with nothing changed. */
static const char *replace_string(json_t *o, const char *key, const char *text) {
    json_t *v = json_string(text);
    if (!v || json_object_set_new(o, key, v) != 0) return NULL;
    return json_string_value(json_object_get(o, key));
}

/* Demangle the string at key in place, word by word. */
static const char *demangled_field(json_t *o, const char *key, const char *s) {
    if (!s || !strstr(s, "_Z")) return s;
    char *dm = vm_demangle_words(s);
    const char *r = dm ? replace_string(o, key, dm) : NULL;
    free(dm);
    return r ? r : s;
}

/* A frame's python flag, and its function demangled. */
/* A name longer than VM_NAME_MAX replaced by its cut copy (vm_clamp_name). */
static const char *clamped_field(json_t *o, const char *key, const char *s) {
    if (!s || strnlen(s, VM_NAME_MAX) < VM_NAME_MAX) return s;
    char cut[VM_NAME_MAX + 1]; /* VM_NAME_MAX bytes of it: long enough to be cut */
    memcpy(cut, s, sizeof cut - 1);
    cut[sizeof cut - 1] = '\0';
    const char *r = replace_string(o, key, vm_clamp_name(cut));
    return r ? r : s;
}

static void frame_rest(struct ctx *c, json_t *f, void *elem, size_t j, const struct walk *w) {
    struct vt_frame *m = elem;
    m->function = clamped_field(f, "function", m->function);
    m->file = clamped_field(f, "file", m->file);
    m->module = clamped_field(f, "module", m->module);
    json_t *py = json_object_get(f, "python");
    m->python = py && json_is_true(py);
    json_t *borrowed = json_object_get(f, "borrowed");
    m->borrowed = m->python && borrowed && json_is_true(borrowed);
    /* A process without a C++ runtime leaves names mangled. */
    if (!m->python && m->function) {
        char *dm = vm_demangle(m->function, strlen(m->function));
        const char *r = dm ? replace_string(f, "function", dm) : NULL;
        if (r) m->function = r;
        free(dm);
    }
}

static void stack_of(struct ctx *c, json_t *s, void *elem, size_t i, const struct walk *w) {
    static const struct walk frames = {frame_fields, NSPECS(frame_fields), "frame", frame_rest, NULL, 0};
    struct vm_stack *st = elem;
    st->site = st->through = -1;
    json_t *fr = field(c, s, "frames", JSON_ARRAY, "stack");
    char name[64];
    if (!fr) return;
    size_t n;
    struct vt_frame *own = objects(c, fr, sizeof *own, &n, inner_name(name, sizeof name, "stacks", i, "frames"),
                                   &frames);
    if (!own) return;
    /* The traced process's choice when the dump has it (its own
     * VRAMTRACE_APP and VRAMTRACE_LIBRARY), else the rule's. */
    st->site = vt_site_index(own, n);
    st->through = vt_site_through(own, n, st->site);
    if (!c->failed && vm_tree_add(w->d, st, own, n) != 0) fail(c, "out of memory");
    free(own);
    json_t *site = json_object_get(s, "site"), *through = json_object_get(s, "through");
    if (json_is_integer(site) && json_integer_value(site) >= 0 && (size_t)json_integer_value(site) < st->nframes) {
        st->site = (int)json_integer_value(site);
        st->through = -1;
        if (json_is_integer(through) && json_integer_value(through) >= 0 &&
            json_integer_value(through) < json_integer_value(site))
            st->through = (int)json_integer_value(through);
    }
}

static void load_stacks(struct ctx *c, json_t *root, struct vm_dump *d) {
    const struct walk stacks = {NULL, 0, "stack", stack_of, d, 0};
    json_t *arr = field(c, root, "stacks", JSON_ARRAY, "dump");
    if (arr) d->stacks = objects(c, arr, sizeof *d->stacks, &d->nstacks, "stacks", &stacks);
}

static struct vm_holder *load_holders(struct ctx *c, json_t *arr, size_t nstacks, size_t *n,
                                      const char *where) {
    struct walk w = {holder_fields, NSPECS(holder_fields), where, NULL, NULL, nstacks};
    return objects(c, arr, sizeof(struct vm_holder), n, where, &w);
}

static void load_devices(struct ctx *c, json_t *root, struct vm_dump *d) {
    static const struct walk devices = {device_fields, NSPECS(device_fields), "device", NULL, NULL, 0};
    json_t *arr = field(c, root, "devices", JSON_ARRAY, "dump");
    if (arr) d->devices = objects(c, arr, sizeof *d->devices, &d->ndevices, "devices", &devices);
}

static void load_totals(struct ctx *c, json_t *root, struct vm_dump *d) {
    json_t *t = field(c, root, "totals", JSON_OBJECT, "dump");
    json_t *h = field(c, root, "host_memory", JSON_OBJECT, "dump");
    if (!t || !h) return;
    struct vm_totals *v = &d->totals;
    read_fields(c, t, totals_fields, NSPECS(totals_fields), v, 0, "totals");
    if (json_object_get(t, "missed")) v->missed = u64(c, t, "missed", "totals");
    if (json_object_get(t, "records_lost")) v->records_lost = u64(c, t, "records_lost", "totals");
    if (json_object_get(t, "events_dropped_while_read"))
        v->events_dropped_while_read = u64(c, t, "events_dropped_while_read", "totals");
    if (json_object_get(t, "oom_survived")) v->oom_survived = u64(c, t, "oom_survived", "totals");
    json_t *last = json_object_get(t, "last_oom_survived");
    if (last && !json_is_boolean(last)) fail(c, "totals: field \"last_oom_survived\" is not true or false");
    v->last_oom_survived = last ? json_is_true(last) : -1;
    read_fields(c, h, host_fields, NSPECS(host_fields), v, 0, "host_memory");
    json_t *im = json_object_get(root, "imported_memory");
    if (im && json_is_object(im)) read_fields(c, im, imported_fields, NSPECS(imported_fields), v, 0, "imported_memory");
}

static void finding_rest(struct ctx *c, json_t *x, void *elem, size_t k, const struct walk *w) {
    struct vm_finding *fi = elem;
    fi->finding = demangled_field(x, "finding", fi->finding);
    fi->next = demangled_field(x, "next", fi->next);
}

static void proc_rest(struct ctx *c, json_t *x, void *elem, size_t k, const struct walk *w) {
    struct vm_proc *p = elem;
    json_t *u = json_object_get(x, "used_bytes");
    if (u && is_count(u)) {
        p->used_known = 1;
        p->used_bytes = u64(c, x, "used_bytes", "other process");
    }
}

/* OOM i's holder list `key` (holders, device_holders) in either format:
 * in a version 2 dump, the text vm_v2_split cut out (or, in a document it
 * did not cut, the array). NULL when there is neither. */
static struct vm_holder *oom_holders(struct ctx *c, const struct walk *w, json_t *h, size_t i, const char *key,
                                     size_t *n) {
    const char *at;
    size_t len;
    int span = w->d->v2 && vm_v2_oom_span(c->v2, i, strcmp(key, "device_holders") == 0, &at, &len);
    if (!span && !json_is_array(h)) return NULL;
    if (!w->d->v2) return load_holders(c, h, w->nstacks, n, "oom holders");
    char herr[128];
    struct vm_holder *out = span ? vm_v2_holders(at, len, NULL, w->nstacks, n, herr, sizeof herr)
                                 : vm_v2_holders(NULL, 0, h, w->nstacks, n, herr, sizeof herr);
    if (!out) fail(c, "ooms[%zu].%s%s", i, key, herr);
    return out;
}

static void oom_rest(struct ctx *c, json_t *o, void *elem, size_t i, const struct walk *w) {
    static const struct walk findings = {finding_fields, NSPECS(finding_fields), "finding", finding_rest, NULL, 0};
    static const struct walk procs = {proc_fields, NSPECS(proc_fields), "other process", proc_rest, NULL, 0};
    struct vm_oom *v = elem;
    char name[64];
    /* Its number among the process's failures: older dumps kept the first
     * ones only, each its place + 1. */
    v->number = json_object_get(o, "number") ? u64(c, o, "number", "oom") : i + 1;
    json_t *fb = json_object_get(o, "free_bytes");
    v->have_info = fb && is_count(fb);
    if (v->have_info) read_fields(c, o, oom_info_fields, NSPECS(oom_info_fields), v, 0, "oom");
    if (json_object_get(o, "graph_reserved_bytes"))
        read_fields(c, o, oom_graph_fields, NSPECS(oom_graph_fields), v, 0, "oom");
    if (json_object_get(o, "pool_reserved_bytes"))
        read_fields(c, o, oom_pool_fields, NSPECS(oom_pool_fields), v, 0, "oom");
    read_fields(c, o, oom_end_fields, NSPECS(oom_end_fields), v, 0, "oom");
    if (json_object_get(o, "taken_count")) /* the request's own handles (absent where it made none) */
        read_fields(c, o, oom_taken_fields, NSPECS(oom_taken_fields), v, 0, "oom");
    if (json_object_get(o, "live_count")) { /* the device's counts at the failure (absent in older dumps) */
        read_fields(c, o, oom_count_fields, NSPECS(oom_count_fields), v, 0, "oom");
        v->have_counts = !c->failed;
    }
    if (json_object_get(o, "raised_allocated_bytes")) /* a refusal of PyTorch's learnt late (absent: none) */
        read_fields(c, o, oom_raised_fields, NSPECS(oom_raised_fields), v, 0, "oom");
    json_t *b = json_object_get(o, "budget");
    v->budget = b && json_is_true(b);
    b = json_object_get(o, "requested_rounded"); /* absent: the bytes asked */
    v->requested_rounded = b && json_is_true(b);
    json_t *fs = json_object_get(o, "findings");
    if (fs && json_is_array(fs) && !c->failed)
        v->findings = objects(c, fs, sizeof *v->findings, &v->nfindings, inner_name(name, sizeof name, "ooms", i, "findings"),
                              &findings);
    json_t *ps = json_object_get(o, "other_processes");
    if (ps && json_is_array(ps) && !c->failed)
        v->procs = objects(c, ps, sizeof *v->procs, &v->nprocs, inner_name(name, sizeof name, "ooms", i, "other_processes"),
                           &procs);
    json_t *h = json_object_get(o, "holders");
    if (h && !c->failed && (v->holders = oom_holders(c, w, h, i, "holders", &v->nholders))) v->have_holders = 1;
    json_t *dh = json_object_get(o, "device_holders");
    if (dh && !c->failed && (v->device_holders = oom_holders(c, w, dh, i, "device_holders", &v->ndevice_holders)))
        v->have_device_holders = 1;
    char terr[256];
    if (!c->failed && vm_torch_load(o, w->nstacks, &v->torch, terr, sizeof terr) != 0) fail(c, "ooms[%zu]: %s", i, terr);
}

static void load_ooms(struct ctx *c, json_t *root, struct vm_dump *d) {
    struct walk ooms = {oom_fields, NSPECS(oom_fields), "oom", oom_rest, d, d->nstacks};
    json_t *arr = field(c, root, "ooms", JSON_ARRAY, "dump");
    if (arr) d->ooms = objects(c, arr, sizeof *d->ooms, &d->nooms, "ooms", &ooms);
    struct walk requests = {oom_request_fields, NSPECS(oom_request_fields), "oom request", NULL, d, d->nstacks};
    json_t *r = json_object_get(root, "oom_requests");
    if (r && json_is_array(r) && !c->failed)
        d->oom_requests = objects(c, r, sizeof *d->oom_requests, &d->noom_requests, "oom_requests", &requests);
    if (json_object_get(root, "oom_requests_other") && !c->failed)
        d->oom_requests_other = u64(c, root, "oom_requests_other", "dump");
}

/* The address, and the handle where the allocation has one, before the
 * rest (the order the fields are checked in). */
static const struct spec address_field[] = {HEX(struct vm_alloc, address)};
static const struct spec bytes_field[] = {U64(struct vm_alloc, bytes)};

/* A live allocation's kind or API as an index into the dump's names. */
static uint16_t live_name(struct ctx *c, json_t *o, const char *key, struct vm_dump *d) {
    const char *s = c->failed ? NULL : str(c, o, key, 0, "live");
    int k = s ? vm_name_index(d, s) : 0;
    if (k < 0) fail(c, "live: more than %d distinct kinds and APIs, or out of memory", VM_NAMES_MAX);
    return k < 0 ? 0 : (uint16_t)k;
}

static void live_rest(struct ctx *c, json_t *o, void *elem, size_t i, const struct walk *w) {
    struct vm_alloc *a = elem;
    if (json_object_get(o, "handle")) {
        a->has_handle = 1;
        uint64_t h = hexval(c, o, "handle", "live");
        if (!c->failed && vm_add_handle(w->d, i, h) != 0) fail(c, "out of memory");
    }
    read_fields(c, o, bytes_field, 1, a, w->nstacks, "live");
    a->kind = live_name(c, o, "kind", w->d);
    a->api = live_name(c, o, "api", w->d);
    read_fields(c, o, live_fields, NSPECS(live_fields), a, w->nstacks, "live");
}

static void load_live(struct ctx *c, json_t *root, struct vm_dump *d) {
    struct walk live = {address_field, 1, "live", live_rest, d, d->nstacks};
    json_t *arr = field(c, root, "live", JSON_ARRAY, "dump");
    if (arr) d->live = objects(c, arr, sizeof *d->live, &d->nlive, "live", &live);
}

const char *vm_known_kind(const char *k) {
    static const char *const names[] = {"device", "pitched", "managed", "async",    "vmm",
                                        "host",   "array",   "imported", "host_vmm", "host_async",
                                        "host_registered", "graph"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(k, names[i]) == 0) return names[i];
    return NULL;
}

/* The events' nodes are most of a large dump's parsed tree: once no event
 * points into them they are let go (512 ranks' dumps then fit in memory). */
static void load_events(struct ctx *c, json_t *root, struct vm_dump *d) {
    json_t *arr = field(c, root, "events", JSON_ARRAY, "dump");
    if (!arr) return;
    d->events_dropped = u64(c, root, "events_dropped", "dump");
    d->nevents = json_array_size(arr);
    int all_known = 1;
    for (size_t i = 0; i < d->nevents && !c->failed; i++) {
        json_t *e = json_array_get(arr, i);
        json_t *t = json_array_get(e, 0), *ty = json_array_get(e, 1), *ad = json_array_get(e, 2),
               *by = json_array_get(e, 3), *dv = json_array_get(e, 4), *st = json_array_get(e, 5),
               *ki = json_array_get(e, 6);
        uint64_t time_ns, bytes;
        if (!json_is_array(e) || !vm_json_u64(t, &time_ns) || !json_is_string(ty) || !json_is_string(ad) ||
            !vm_json_u64(by, &bytes) || !json_is_integer(dv) || !json_is_integer(st) || !json_is_string(ki) ||
            json_integer_value(dv) < -1 || json_integer_value(dv) > 4095 ||
            json_integer_value(st) < 0 || (size_t)json_integer_value(st) >= d->nstacks) {
            fail(c, "events[%zu] is malformed", i);
            return;
        }
        struct vm_event one = {0}, *v = &one;
        const char *type = json_string_value(ty);
        if (strcmp(type, "alloc") == 0) v->type = 'a';
        else if (strcmp(type, "free") == 0) v->type = 'f';
        else if (strcmp(type, "oom") == 0) v->type = 'o';
        else { fail(c, "events[%zu] has unknown type \"%s\"", i, type); return; }
        v->time_ns = time_ns;
        v->address = strtoull(json_string_value(ad), NULL, 16);
        v->bytes = bytes;
        v->device = (int16_t)json_integer_value(dv);
        v->stack = (uint32_t)json_integer_value(st);
        const char *kind = vm_known_kind(json_string_value(ki));
        if (!kind) {
            kind = json_string_value(ki);
            all_known = 0;
        }
        int k = vm_event_kind_index(d, kind);
        if (k < 0) { fail(c, "events[%zu]: more than %d kinds of memory", i, VM_EVENT_KINDS); return; }
        v->kind = (uint8_t)k;
        vm_count_event(d, v);
        if (!d->events_counted_only && vm_events_add(&d->events, v) != 0) { fail(c, "out of memory"); return; }
    }
    vm_events_done(&d->events);
    if (all_known && !c->failed) json_array_clear(arr);
}

/* A growing site's rate, where the dump has it. */
static void growth_rest(struct ctx *c, json_t *o, void *elem, size_t i, const struct walk *w) {
    struct vm_growth *v = elem;
    json_t *r = json_object_get(o, "bytes_per_second");
    v->bytes_per_second = json_is_number(r) ? json_number_value(r) : 0;
    json_t *since = json_object_get(o, "since_ns"), *last = json_object_get(o, "last_ns");
    json_t *per = json_object_get(o, "bytes_per_allocation");
    uint64_t s, l, p;
    if (vm_json_u64(since, &s) && vm_json_u64(last, &l) && vm_json_u64(per, &p) && l >= s) {
        v->have_rate = 1;
        v->since_ns = s;
        v->last_ns = l;
        v->bytes_per_allocation = p;
    }
    vm_growth_unit(o, v);
}

/* A version 2 dump's "live_fields" name the columns of its "live" rows,
 * which are read by place: a list other than the one written (the handle
 * optional) is refused, not misread (a writer that moved or added a
 * column would have its rows read as this one's). */
static void check_live_fields(struct ctx *c, json_t *root) {
    static const char *const want[] = {"address", "bytes", "kind", "api", "device", "stack", "thread", "time_ns",
                                       "handle"};
    json_t *lf = json_object_get(root, "live_fields");
    size_t n = json_is_array(lf) ? json_array_size(lf) : 0;
    int same = n == 8 || n == 9;
    for (size_t i = 0; same && i < n; i++) {
        json_t *x = json_array_get(lf, i);
        same = json_is_string(x) && strcmp(json_string_value(x), want[i]) == 0;
    }
    if (!same)
        fail(c, "dump: field \"live_fields\" is not [\"address\", \"bytes\", \"kind\", \"api\", \"device\", "
                "\"stack\", \"thread\", \"time_ns\", \"handle\"], the columns this vramtrace reads (a newer "
                "vramtrace's dump?)");
}

static int load_root(struct ctx *c, json_t *root, struct vm_dump *d, const struct vm_v2_spans *v2) {
    if (!json_is_object(root)) { fail(c, "not a vramtrace dump (not a JSON object)"); return -1; }
    json_t *fmt = json_object_get(root, "format");
    if (!json_is_string(fmt) || strcmp(json_string_value(fmt), "vramtrace-dump") != 0) {
        fail(c, "not a vramtrace dump (no \"format\": \"vramtrace-dump\")");
        return -1;
    }
    json_t *ver = json_object_get(root, "version");
    if (!json_is_integer(ver) || json_integer_value(ver) != (v2 ? 2 : 1)) {
        fail(c, "unsupported dump version (this vramtrace reads versions 1 and 2)");
        return -1;
    }
    d->reason = str(c, root, "reason", 0, "dump");
    d->host = str(c, root, "host", 1, "dump");
    d->pid = int_in(c, root, "pid", 0, INT32_MAX, "dump");
    d->rank = int_in(c, root, "rank", 0, INT32_MAX, "dump");
    json_t *known = json_object_get(root, "rank_known");
    if (known && !json_is_boolean(known)) fail(c, "dump: field \"rank_known\" is not true or false");
    d->rank_known = !known || json_is_true(known);
    d->rank_from = d->rank_known ? str(c, root, "rank_from", 1, "dump") : NULL;
    d->rank_local = vt_rank_var_is_local(d->rank_from);
    json_t *lr = json_object_get(root, "local_rank");
    if (lr) d->local_rank = int_in(c, root, "local_rank", 0, INT32_MAX, "dump");
    if (json_object_get(root, "world_size")) d->world_size = int_in(c, root, "world_size", 1, INT32_MAX, "dump");
    json_t *ended = json_object_get(root, "ended_by");
    if (ended) {
        json_t *sig = json_object_get(ended, "signal"), *pid = json_object_get(ended, "from_pid"),
               *from = json_object_get(ended, "from");
        if (!json_is_object(ended) || !json_is_string(sig) || (pid && !json_is_integer(pid)) ||
            (from && !json_is_string(from)))
            fail(c, "dump: field \"ended_by\" is not an object with a \"signal\" string, an integer \"from_pid\" "
                    "and a \"from\" string");
        else {
            d->ended_signal = json_string_value(sig);
            d->ended_from_pid = pid && json_integer_value(pid) > 0 && json_integer_value(pid) <= INT32_MAX
                                    ? (long)json_integer_value(pid) : 0;
            d->ended_from = from ? json_string_value(from) : NULL;
        }
    }
    if (json_object_get(root, "dump_number")) d->dump_number = int_in(c, root, "dump_number", 1, INT32_MAX, "dump");
    if (json_object_get(root, "exit_status")) {
        d->exit_status = int_in(c, root, "exit_status", INT32_MIN, INT32_MAX, "dump");
        d->exit_status_known = 1;
    }
    d->start_unix_ns = u64(c, root, "start_unix_ns", "dump");
    d->time_ns = u64(c, root, "time_ns", "dump");
    json_t *argv = field(c, root, "argv", JSON_ARRAY, "dump");
    if (argv) {
        d->argc = json_array_size(argv);
        d->argv = room(c, d->argc, sizeof *d->argv);
        for (size_t i = 0; d->argv && i < d->argc; i++) {
            json_t *a = json_array_get(argv, i);
            d->argv[i] = json_is_string(a) ? json_string_value(a) : "?";
        }
    }
    char verr[256];
    if (!v2) load_stacks(c, root, d);
    else if (!c->failed && vm_v2_load_stacks(v2, d, verr, sizeof verr) != 0) fail(c, "%s", verr);
    load_devices(c, root, d);
    load_totals(c, root, d);
    load_ooms(c, root, d);
    if (!v2) {
        json_t *h = field(c, root, "holders", JSON_ARRAY, "dump");
        if (h) d->holders = load_holders(c, h, d->nstacks, &d->nholders, "holders");
        h = json_object_get(root, "peak_holders");
        if (h && json_is_array(h)) d->peak_holders = load_holders(c, h, d->nstacks, &d->npeak_holders, "peak_holders");
    } else if (!c->failed) {
        if (!v2->at[V2_HOLDERS]) fail(c, "dump: field \"holders\" is missing or not an array");
        else if (!(d->holders = vm_v2_holders(v2->at[V2_HOLDERS], v2->len[V2_HOLDERS], NULL, d->nstacks, &d->nholders,
                                              verr, sizeof verr)))
            fail(c, "holders%s", verr);
        if (!c->failed && v2->at[V2_PEAK_HOLDERS] &&
            !(d->peak_holders = vm_v2_holders(v2->at[V2_PEAK_HOLDERS], v2->len[V2_PEAK_HOLDERS], NULL, d->nstacks,
                                              &d->npeak_holders, verr, sizeof verr)))
            fail(c, "peak_holders%s", verr);
        json_t *rel = json_object_get(root, "released");
        if (rel && !c->failed) {
            if (!json_is_array(rel)) fail(c, "dump: field \"released\" is not an array");
            else if (!(d->released = vm_v2_holders(NULL, 0, rel, d->nstacks, &d->nreleased, verr, sizeof verr)))
                fail(c, "released%s", verr);
        }
        /* Pinned host memory a reset released: absent from older dumps
         * (none; those before it counted such memory in `released`). */
        rel = json_object_get(root, "released_host");
        if (rel && !c->failed) {
            if (!json_is_array(rel)) fail(c, "dump: field \"released_host\" is not an array");
            else if (!(d->released_host = vm_v2_holders(NULL, 0, rel, d->nstacks, &d->nreleased_host, verr,
                                                         sizeof verr)))
                fail(c, "released_host%s", verr);
        }
    }
    if (v2 && !c->failed) check_live_fields(c, root);
    if (!v2) {
        load_live(c, root, d);
        load_events(c, root, d);
    } else if (!c->failed && vm_v2_load_live_events(v2, root, d, verr, sizeof verr) != 0) {
        fail(c, "%s", verr);
    }
    vm_names_done(d);
    char terr[256];
    if (!c->failed && vm_steps_load(root, d->nevents, &d->steps, &d->nsteps, &d->steps_total, terr, sizeof terr))
        fail(c, "%s", terr);
    if (!c->failed && vm_mappings_load(v2 ? v2->at[V2_MAPPINGS] : NULL, v2 ? v2->len[V2_MAPPINGS] : 0, root,
                                       d->nevents, &d->mappings, &d->nmappings, &d->mappings_total, terr,
                                       sizeof terr) != 0)
        fail(c, "%s", terr);
    if (!c->failed && vm_torch_load(root, d->nstacks, &d->torch, terr, sizeof terr) != 0) fail(c, "%s", terr);
    json_t *g = json_object_get(root, "growing");
    struct walk growing = {growth_fields, NSPECS(growth_fields), "growing", growth_rest, d, d->nstacks};
    if (g && json_is_array(g) && !c->failed)
        d->growing = objects(c, g, sizeof *d->growing, &d->ngrowing, "growing", &growing);
    return c->failed ? -1 : 0;
}

int vm_load_text(const char *buf, size_t len, unsigned flags, const char *name, struct vm_dump *d, char *err,
                 size_t errsize) {
    struct ctx c = {err, errsize, 0, name, NULL};
    int mapped = (flags & VM_LOAD_MAPPED) != 0;
    memset(d, 0, sizeof *d);
    d->events_counted_only = (flags & VM_LOAD_COUNT_EVENTS) != 0;
    /* A version 2 dump's big arrays are read from the text; jansson
     * parses the rest. */
    struct vm_v2_spans spans;
    char *small = NULL;
    size_t nsmall = 0;
    int v2 = vm_v2_split(buf, len, mapped, &spans, &small, &nsmall);
    if (v2 < 0) { fail(&c, "out of memory"); return -1; }
    if (v2 && spans.duplicate) {
        free(small);
        vm_v2_spans_free(&spans);
        fail(&c, "not valid JSON (line %d, column %d: duplicate object key near '%.*s')", spans.duplicate_line,
             spans.duplicate_column, (int)spans.duplicate_len, spans.duplicate);
        return -1;
    }
    json_error_t je;
    json_t *root = v2 ? vm_json_load(small, nsmall, &je) : vm_json_load(buf, len, &je);
    free(small);
    if (!root) {
        if (v2) vm_v2_spans_free(&spans);
        fail(&c, "not valid JSON (line %d, column %d: %s)%s", je.line, je.column, je.text,
             len == 0 ? "; the file is empty" : "");
        return -1;
    }
    d->json = root;
    d->path = name;
    c.v2 = v2 ? &spans : NULL;
    int loaded = load_root(&c, root, d, v2 ? &spans : NULL);
    c.v2 = NULL;
    if (v2) vm_v2_spans_free(&spans);
    if (loaded != 0) {
        vm_free(d);
        return -1;
    }
    if (vm_tree_ready(d) != 0) {
        fail(&c, "out of memory");
        vm_free(d);
        return -1;
    }
    return 0;
}

int vm_load_buffer(const char *buf, size_t len, unsigned flags, const char *name, struct vm_dump *d, char *err,
                   size_t errsize) {
    return vm_load_text(buf, len, flags & VM_LOAD_COUNT_EVENTS, name, d, err, errsize);
}

void vm_free(struct vm_dump *d) {
    if (!d) return;
    vm_v2_free(d->v2);
    VT_FREE_ALL(d->stacks, d->frames, d->nodes, d->flat, d->scratch);
    for (size_t i = 0; d->ooms && i < d->nooms; i++) {
        VT_FREE_ALL(d->ooms[i].holders, d->ooms[i].device_holders, d->ooms[i].findings, d->ooms[i].procs);
        vm_torch_free(d->ooms[i].torch);
    }
    vm_torch_free(d->torch);
    VT_FREE_ALL(d->ooms, d->oom_requests, d->devices, d->holders, d->peak_holders, d->released, d->released_host, d->live, d->steps,
                d->mappings, d->growing, d->argv);
    vm_events_free(&d->events);
    vm_names_done(d);
    VT_FREE_ALL(d->names, d->handles);
    if (d->json) json_decref(d->json);
    memset(d, 0, sizeof *d);
}
