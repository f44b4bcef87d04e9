/* model.c -- reading and checking a dump. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "../common/callsite.h"
#include "../common/format.h"
#include "model.h"
#include "model_torch.h"

/* Parsing state: the first error wins and stops the load. */
struct ctx {
    char *err;
    size_t errsize;
    int failed;
    const char *name;
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

/* Element i of the array arr when it is an object; NULL after failing with
 * "WHERE[i] is not an object". */
static json_t *object_at(struct ctx *c, json_t *arr, size_t i, const char *where) {
    json_t *o = json_array_get(arr, i);
    if (!json_is_object(o)) fail(c, "%s[%zu] is not an object", where, i);
    return json_is_object(o) ? o : NULL;
}

/* The same for OUTER[i].INNER[j]. */
static json_t *object_at_in(struct ctx *c, json_t *arr, size_t j, const char *outer, size_t i,
                            const char *inner) {
    json_t *o = json_array_get(arr, j);
    if (!json_is_object(o)) fail(c, "%s[%zu].%s[%zu] is not an object", outer, i, inner, j);
    return json_is_object(o) ? o : NULL;
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

static uint64_t u64(struct ctx *c, json_t *o, const char *key, const char *where) {
    json_t *v = field(c, o, key, JSON_INTEGER, where);
    if (!v) return 0;
    json_int_t i = json_integer_value(v);
    if (i < 0) { fail(c, "%s: field \"%s\" is negative", where, key); return 0; }
    return (uint64_t)i;
}

static int int_in(struct ctx *c, json_t *o, const char *key, long lo, long hi, const char *where) {
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

/* libstdc++'s demangler (extern "C" in <cxxabi.h>): the one the library
 * itself asks in a process that has a C++ runtime, so a name reads the same
 * whether the process or the CLI demangled it. */
char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

#define DEMANGLE_MAX 16384 /* longer names are left as they are */

/* The demangled form of a mangled C++ name (Itanium ABI, "_Z..."), in
 * malloc'd memory, or NULL when name is not one. Only "_Z" names are tried:
 * given a plain word the demangler reads it as a type ("i" is "int"). */
static char *demangle(const char *name, size_t len) {
    if (len < 3 || len > DEMANGLE_MAX || name[0] != '_' || name[1] != 'Z') return NULL;
    char *tmp = strndup(name, len);
    if (!tmp) return NULL;
    int status = -1;
    char *out = __cxa_demangle(tmp, NULL, NULL, &status);
    free(tmp);
    if (status != 0) { free(out); return NULL; }
    return out;
}

/* Replace the string at key in object o by text, where text is valid UTF-8
 * (the model's strings always are); returns the new value, owned by o, or
 * NULL with nothing changed. */
static const char *replace_string(json_t *o, const char *key, const char *text) {
    json_t *v = json_string(text);
    if (!v || json_object_set_new(o, key, v) != 0) return NULL;
    return json_string_value(json_object_get(o, key));
}

static int ident_char(char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' ||
           ch == '.' || ch == '$';
}

/* A text with every mangled C++ name in it demangled, as c++filt does with
 * the words of a line: the findings quote call sites by name. NULL when
 * nothing changed (or memory ran out: the text stays as it was). */
static char *demangle_words(const char *s) {
    char *out = NULL;
    size_t len = 0, cap = 0;
    int changed = 0;
    for (const char *p = s; *p;) {
        const char *w = p;
        size_t n = 1;
        char *dm = NULL;
        if ((p == s || !ident_char(p[-1])) && p[0] == '_' && p[1] == 'Z') {
            while (ident_char(p[n])) n++;
            dm = demangle(p, n);
        }
        if (dm) { w = dm; changed = 1; }
        size_t wn = dm ? strlen(dm) : n;
        if (len + wn + 1 > cap) {
            size_t nc = (cap + wn + 1) * 2;
            char *b = realloc(out, nc);
            if (!b) { free(dm); free(out); return NULL; }
            out = b;
            cap = nc;
        }
        memcpy(out + len, w, wn);
        len += wn;
        out[len] = '\0';
        free(dm);
        p += n;
    }
    if (!changed) { free(out); return NULL; }
    return out;
}

/* Demangle the string at key in place, word by word. */
static const char *demangled_field(json_t *o, const char *key, const char *s) {
    if (!s || !strstr(s, "_Z")) return s;
    char *dm = demangle_words(s);
    const char *r = dm ? replace_string(o, key, dm) : NULL;
    free(dm);
    return r ? r : s;
}

static void load_stacks(struct ctx *c, json_t *root, struct vm_dump *d) {
    json_t *arr = field(c, root, "stacks", JSON_ARRAY, "dump");
    if (!arr) return;
    d->nstacks = json_array_size(arr);
    if (!(d->stacks = room(c, d->nstacks, sizeof *d->stacks))) return;
    for (size_t i = 0; i < d->nstacks && !c->failed; i++) {
        json_t *s = object_at(c, arr, i, "stacks");
        if (!s) return;
        json_t *fr = field(c, s, "frames", JSON_ARRAY, "stack");
        if (!fr) return;
        struct vm_stack *st = &d->stacks[i];
        st->nframes = json_array_size(fr);
        st->site = -1;
        if (!(st->frames = room(c, st->nframes, sizeof *st->frames))) return;
        for (size_t j = 0; j < st->nframes && !c->failed; j++) {
            json_t *f = object_at_in(c, fr, j, "stacks", i, "frames");
            if (!f) return;
            struct vt_frame *m = &st->frames[j];
            m->function = str(c, f, "function", 1, "frame");
            m->file = str(c, f, "file", 1, "frame");
            m->module = str(c, f, "module", 1, "frame");
            m->line = int_in(c, f, "line", 0, 100000000, "frame");
            m->offset = hexval(c, f, "offset", "frame");
            m->address = hexval(c, f, "address", "frame");
            json_t *py = json_object_get(f, "python");
            m->python = py && json_is_true(py);
            /* A process without a C++ runtime leaves names mangled. */
            if (!m->python && m->function) {
                char *dm = demangle(m->function, strlen(m->function));
                const char *r = dm ? replace_string(f, "function", dm) : NULL;
                if (r) m->function = r;
                free(dm);
            }
        }
        st->site = vt_site_index(st->frames, st->nframes);
    }
}

static struct vm_holder *load_holders(struct ctx *c, json_t *arr, size_t nstacks, size_t *n,
                                      const char *where) {
    *n = json_array_size(arr);
    struct vm_holder *h = room(c, *n, sizeof *h);
    if (!h) return NULL;
    for (size_t i = 0; i < *n && !c->failed; i++) {
        json_t *o = object_at(c, arr, i, where);
        if (!o) break;
        h[i].stack = stack_ref(c, o, "stack", nstacks, where);
        h[i].bytes = u64(c, o, "bytes", where);
        h[i].count = u64(c, o, "count", where);
    }
    return h;
}

static void load_devices(struct ctx *c, json_t *root, struct vm_dump *d) {
    json_t *arr = field(c, root, "devices", JSON_ARRAY, "dump");
    if (!arr) return;
    d->ndevices = json_array_size(arr);
    if (!(d->devices = room(c, d->ndevices, sizeof *d->devices))) return;
    for (size_t i = 0; i < d->ndevices && !c->failed; i++) {
        json_t *o = object_at(c, arr, i, "devices");
        if (!o) return;
        struct vm_device *v = &d->devices[i];
        v->ordinal = int_in(c, o, "ordinal", 0, 4095, "device");
        v->name = str(c, o, "name", 1, "device");
        v->uuid = str(c, o, "uuid", 1, "device");
        v->total_bytes = u64(c, o, "total_bytes", "device");
        v->live_bytes = u64(c, o, "live_bytes", "device");
        v->live_count = u64(c, o, "live_count", "device");
        v->peak_bytes = u64(c, o, "peak_bytes", "device");
        v->peak_time_ns = u64(c, o, "peak_time_ns", "device");
        v->alloc_count = u64(c, o, "alloc_count", "device");
        v->free_count = u64(c, o, "free_count", "device");
        v->failed_count = u64(c, o, "failed_count", "device");
        v->oom_count = u64(c, o, "oom_count", "device");
    }
}

static void load_totals(struct ctx *c, json_t *root, struct vm_dump *d) {
    json_t *t = field(c, root, "totals", JSON_OBJECT, "dump");
    json_t *h = field(c, root, "host_memory", JSON_OBJECT, "dump");
    if (!t || !h) return;
    struct vm_totals *v = &d->totals;
    v->live_bytes = u64(c, t, "live_bytes", "totals");
    v->live_count = u64(c, t, "live_count", "totals");
    v->peak_bytes = u64(c, t, "peak_bytes", "totals");
    v->peak_time_ns = u64(c, t, "peak_time_ns", "totals");
    v->alloc_count = u64(c, t, "alloc_count", "totals");
    v->free_count = u64(c, t, "free_count", "totals");
    v->failed_count = u64(c, t, "failed_count", "totals");
    v->oom_count = u64(c, t, "oom_count", "totals");
    v->unknown_frees = u64(c, t, "unknown_frees", "totals");
    if (json_object_get(t, "missed")) v->missed = u64(c, t, "missed", "totals");
    if (json_object_get(t, "records_lost")) v->records_lost = u64(c, t, "records_lost", "totals");
    v->host_live_bytes = u64(c, h, "live_bytes", "host_memory");
    v->host_live_count = u64(c, h, "live_count", "host_memory");
    v->host_peak_bytes = u64(c, h, "peak_bytes", "host_memory");
    json_t *im = json_object_get(root, "imported_memory");
    if (im && json_is_object(im)) {
        v->imported_live_bytes = u64(c, im, "live_bytes", "imported_memory");
        v->imported_live_count = u64(c, im, "live_count", "imported_memory");
    }
}

static void load_ooms(struct ctx *c, json_t *root, struct vm_dump *d) {
    json_t *arr = field(c, root, "ooms", JSON_ARRAY, "dump");
    if (!arr) return;
    d->nooms = json_array_size(arr);
    if (!(d->ooms = room(c, d->nooms, sizeof *d->ooms))) return;
    for (size_t i = 0; i < d->nooms && !c->failed; i++) {
        json_t *o = object_at(c, arr, i, "ooms");
        if (!o) return;
        struct vm_oom *v = &d->ooms[i];
        v->requested = u64(c, o, "requested_bytes", "oom");
        v->api = str(c, o, "api", 0, "oom");
        v->kind = str(c, o, "kind", 0, "oom");
        v->device = int_in(c, o, "device", -1, 4095, "oom");
        v->thread = int_in(c, o, "thread", 0, INT32_MAX, "oom");
        v->stack = stack_ref(c, o, "stack", d->nstacks, "oom");
        json_t *fb = json_object_get(o, "free_bytes");
        v->have_info = fb && json_is_integer(fb);
        if (v->have_info) {
            v->free_bytes = u64(c, o, "free_bytes", "oom");
            v->total_bytes = u64(c, o, "total_bytes", "oom");
        }
        v->live_bytes = u64(c, o, "live_bytes", "oom");
        v->time_ns = u64(c, o, "time_ns", "oom");
        json_t *b = json_object_get(o, "budget");
        v->budget = b && json_is_true(b);
        json_t *fs = json_object_get(o, "findings");
        if (fs && json_is_array(fs)) {
            v->nfindings = json_array_size(fs);
            if (!(v->findings = room(c, v->nfindings, sizeof *v->findings))) return;
            for (size_t k = 0; k < v->nfindings && !c->failed; k++) {
                json_t *x = object_at_in(c, fs, k, "ooms", i, "findings");
                if (!x) return;
                v->findings[k].id = str(c, x, "id", 0, "finding");
                v->findings[k].finding = demangled_field(x, "finding", str(c, x, "finding", 0, "finding"));
                v->findings[k].next = demangled_field(x, "next", str(c, x, "next", 0, "finding"));
            }
        }
        json_t *ps = json_object_get(o, "other_processes");
        if (ps && json_is_array(ps)) {
            v->nprocs = json_array_size(ps);
            if (!(v->procs = room(c, v->nprocs, sizeof *v->procs))) return;
            for (size_t k = 0; k < v->nprocs && !c->failed; k++) {
                json_t *x = object_at_in(c, ps, k, "ooms", i, "other_processes");
                if (!x) return;
                v->procs[k].pid = int_in(c, x, "pid", 0, INT32_MAX, "other process");
                v->procs[k].name = str(c, x, "name", 1, "other process");
                json_t *u = json_object_get(x, "used_bytes");
                if (u && json_is_integer(u)) {
                    v->procs[k].used_known = 1;
                    v->procs[k].used_bytes = u64(c, x, "used_bytes", "other process");
                }
            }
        }
        json_t *h = json_object_get(o, "holders");
        if (h && json_is_array(h)) {
            v->have_holders = 1;
            v->holders = load_holders(c, h, d->nstacks, &v->nholders, "oom holders");
        }
        char terr[256];
        if (vm_torch_load(o, d->nstacks, &v->torch, terr, sizeof terr) != 0) fail(c, "ooms[%zu]: %s", i, terr);
    }
}

static void load_live(struct ctx *c, json_t *root, struct vm_dump *d) {
    json_t *arr = field(c, root, "live", JSON_ARRAY, "dump");
    if (!arr) return;
    d->nlive = json_array_size(arr);
    if (!(d->live = room(c, d->nlive, sizeof *d->live))) return;
    for (size_t i = 0; i < d->nlive && !c->failed; i++) {
        json_t *o = object_at(c, arr, i, "live");
        if (!o) return;
        struct vm_alloc *a = &d->live[i];
        a->address = hexval(c, o, "address", "live");
        if (json_object_get(o, "handle")) {
            a->has_handle = 1;
            a->handle = hexval(c, o, "handle", "live");
        }
        a->bytes = u64(c, o, "bytes", "live");
        a->kind = str(c, o, "kind", 0, "live");
        a->api = str(c, o, "api", 0, "live");
        a->device = int_in(c, o, "device", -1, 4095, "live");
        a->stack = stack_ref(c, o, "stack", d->nstacks, "live");
        a->thread = int_in(c, o, "thread", 0, INT32_MAX, "live");
        a->time_ns = u64(c, o, "time_ns", "live");
    }
}

static void load_events(struct ctx *c, json_t *root, struct vm_dump *d) {
    json_t *arr = field(c, root, "events", JSON_ARRAY, "dump");
    if (!arr) return;
    d->events_dropped = u64(c, root, "events_dropped", "dump");
    d->nevents = json_array_size(arr);
    if (!(d->events = room(c, d->nevents, sizeof *d->events))) return;
    for (size_t i = 0; i < d->nevents && !c->failed; i++) {
        json_t *e = json_array_get(arr, i);
        json_t *t = json_array_get(e, 0), *ty = json_array_get(e, 1), *ad = json_array_get(e, 2),
               *by = json_array_get(e, 3), *dv = json_array_get(e, 4), *st = json_array_get(e, 5),
               *ki = json_array_get(e, 6);
        if (!json_is_array(e) || !json_is_integer(t) || !json_is_string(ty) || !json_is_string(ad) ||
            !json_is_integer(by) || !json_is_integer(dv) || !json_is_integer(st) || !json_is_string(ki) ||
            json_integer_value(t) < 0 || json_integer_value(by) < 0 ||
            json_integer_value(dv) < -1 || json_integer_value(dv) > 4095 ||
            json_integer_value(st) < 0 || (size_t)json_integer_value(st) >= d->nstacks) {
            fail(c, "events[%zu] is malformed", i);
            return;
        }
        struct vm_event *v = &d->events[i];
        const char *type = json_string_value(ty);
        if (strcmp(type, "alloc") == 0) v->type = 'a';
        else if (strcmp(type, "free") == 0) v->type = 'f';
        else if (strcmp(type, "oom") == 0) v->type = 'o';
        else { fail(c, "events[%zu] has unknown type \"%s\"", i, type); return; }
        v->time_ns = (uint64_t)json_integer_value(t);
        v->address = strtoull(json_string_value(ad), NULL, 16);
        v->bytes = (uint64_t)json_integer_value(by);
        v->device = (int)json_integer_value(dv);
        v->stack = (size_t)json_integer_value(st);
        v->kind = json_string_value(ki);
    }
}

static int load_root(struct ctx *c, json_t *root, struct vm_dump *d) {
    if (!json_is_object(root)) { fail(c, "not a vramtrace dump (not a JSON object)"); return -1; }
    json_t *fmt = json_object_get(root, "format");
    if (!json_is_string(fmt) || strcmp(json_string_value(fmt), "vramtrace-dump") != 0) {
        fail(c, "not a vramtrace dump (no \"format\": \"vramtrace-dump\")");
        return -1;
    }
    json_t *ver = json_object_get(root, "version");
    if (!json_is_integer(ver) || json_integer_value(ver) != 1) {
        fail(c, "unsupported dump version (this vramtrace reads version 1)");
        return -1;
    }
    d->reason = str(c, root, "reason", 0, "dump");
    d->host = str(c, root, "host", 1, "dump");
    d->pid = int_in(c, root, "pid", 0, INT32_MAX, "dump");
    d->rank = int_in(c, root, "rank", 0, INT32_MAX, "dump");
    json_t *lr = json_object_get(root, "local_rank");
    if (lr) d->local_rank = int_in(c, root, "local_rank", 0, INT32_MAX, "dump");
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
    load_stacks(c, root, d);
    load_devices(c, root, d);
    load_totals(c, root, d);
    load_ooms(c, root, d);
    json_t *h = field(c, root, "holders", JSON_ARRAY, "dump");
    if (h) d->holders = load_holders(c, h, d->nstacks, &d->nholders, "holders");
    h = json_object_get(root, "peak_holders");
    if (h && json_is_array(h)) d->peak_holders = load_holders(c, h, d->nstacks, &d->npeak_holders, "peak_holders");
    load_live(c, root, d);
    load_events(c, root, d);
    char terr[256];
    if (!c->failed && vm_torch_load(root, d->nstacks, &d->torch, terr, sizeof terr) != 0) fail(c, "%s", terr);
    json_t *g = json_object_get(root, "growing");
    if (g && json_is_array(g) && !c->failed) {
        d->ngrowing = json_array_size(g);
        d->growing = room(c, d->ngrowing, sizeof *d->growing);
        for (size_t i = 0; d->growing && i < d->ngrowing && !c->failed; i++) {
            json_t *o = object_at(c, g, i, "growing");
            if (!o) break;
            struct vm_growth *v = &d->growing[i];
            v->stack = stack_ref(c, o, "stack", d->nstacks, "growing");
            v->first_bytes = u64(c, o, "first_bytes", "growing");
            v->end_bytes = u64(c, o, "end_bytes", "growing");
            v->allocations = u64(c, o, "allocations", "growing");
            json_t *r = json_object_get(o, "bytes_per_second");
            v->bytes_per_second = json_is_number(r) ? json_number_value(r) : 0;
            json_t *since = json_object_get(o, "since_ns"), *last = json_object_get(o, "last_ns");
            json_t *per = json_object_get(o, "bytes_per_allocation");
            if (json_is_integer(since) && json_is_integer(last) && json_is_integer(per) &&
                json_integer_value(since) >= 0 && json_integer_value(last) >= json_integer_value(since) &&
                json_integer_value(per) >= 0) {
                v->have_rate = 1;
                v->since_ns = (uint64_t)json_integer_value(since);
                v->last_ns = (uint64_t)json_integer_value(last);
                v->bytes_per_allocation = (uint64_t)json_integer_value(per);
            }
        }
    }
    return c->failed ? -1 : 0;
}

int vm_load_buffer(const char *buf, size_t len, const char *name, struct vm_dump *d,
                   char *err, size_t errsize) {
    struct ctx c = {err, errsize, 0, name};
    memset(d, 0, sizeof *d);
    json_error_t je;
    json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        fail(&c, "not valid JSON (line %d, column %d: %s)%s", je.line, je.column, je.text,
             len == 0 ? "; the file is empty" : "");
        return -1;
    }
    d->json = root;
    d->path = name;
    if (load_root(&c, root, d) != 0) {
        vm_free(d);
        return -1;
    }
    return 0;
}

int vm_load(const char *path, struct vm_dump *d, char *err, size_t errsize) {
    memset(d, 0, sizeof *d);
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errsize, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t n = fread(buf + len, 1, cap - len, f);
        len += n;
        if (n == 0) break;
        if (len == cap) {
            char *b = realloc(buf, cap * 2);
            if (!b) { free(buf); buf = NULL; break; }
            buf = b;
            cap *= 2;
        }
    }
    int rerr = ferror(f);
    fclose(f);
    if (!buf || rerr) {
        snprintf(err, errsize, "%s: cannot read%s", path, buf ? "" : ": out of memory");
        free(buf);
        return -1;
    }
    int rc = vm_load_buffer(buf, len, path, d, err, errsize);
    free(buf);
    return rc;
}

void vm_free(struct vm_dump *d) {
    if (!d) return;
    for (size_t i = 0; d->stacks && i < d->nstacks; i++) free(d->stacks[i].frames);
    free(d->stacks);
    for (size_t i = 0; d->ooms && i < d->nooms; i++) {
        free(d->ooms[i].holders);
        free(d->ooms[i].findings);
        free(d->ooms[i].procs);
        vm_torch_free(d->ooms[i].torch);
    }
    vm_torch_free(d->torch);
    free(d->ooms);
    free(d->devices);
    free(d->holders);
    free(d->peak_holders);
    free(d->live);
    free(d->events);
    free(d->growing);
    free(d->argv);
    if (d->json) json_decref(d->json);
    memset(d, 0, sizeof *d);
}

static const char *base(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

const char *vm_frame_label(const struct vt_frame *f, char *buf, size_t size) {
    if (f->python && f->function && f->file) snprintf(buf, size, "%s (%s:%ld)", f->function, base(f->file), f->line);
    else if (f->function) snprintf(buf, size, "%s", f->function);
    else if (f->module) snprintf(buf, size, "%s+0x%" PRIx64, base(f->module), f->offset);
    else snprintf(buf, size, "0x%" PRIx64, f->address);
    return vt_utf8_whole(buf, size);
}

const struct vt_frame *vm_site(const struct vm_dump *d, size_t stack) {
    if (stack >= d->nstacks || d->stacks[stack].site < 0) return NULL;
    return &d->stacks[stack].frames[d->stacks[stack].site];
}

const char *vm_site_label(const struct vm_dump *d, size_t stack, char *buf, size_t size) {
    return vt_site_name(vm_site(d, stack), buf, size);
}
