/* fmt_torch.c -- a pickle in PyTorch's memory snapshot format, for
 * pytorch.org/memory_viz and `python -m torch.cuda._memory_viz`.
 *
 * Each live device allocation becomes a segment holding one active block
 * (at the CUDA level one sees what the caching allocator calls segments);
 * the event history becomes device_traces (segment_alloc + alloc, then
 * free_requested + free_completed + segment_free, and oom).
 *
 * The writer emits pickle protocol 2 with a fixed set of opcodes that build
 * only dicts, lists, strings, integers, booleans and None: nothing a reader
 * could execute (no GLOBAL, REDUCE, BUILD or INST). A stack's frame list is
 * written once and referenced through the pickle memo afterwards. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "reporters.h"

struct pk {
    FILE *f;
    uint32_t memo_next;
    int64_t *stack_memo;     /* per stack of the current dump: memo index or -1 */
};

static void op(struct pk *p, unsigned char c) { fputc(c, p->f); }

static void u32le(struct pk *p, uint32_t v) {
    unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 24)};
    fwrite(b, 1, 4, p->f);
}

static void pk_str(struct pk *p, const char *s) {
    size_t n = strlen(s);
    op(p, 'X'); /* BINUNICODE */
    u32le(p, (uint32_t)n);
    fwrite(s, 1, n, p->f);
}

static void pk_int(struct pk *p, int64_t v) {
    if (v >= INT32_MIN && v <= INT32_MAX) {
        op(p, 'J'); /* BININT */
        u32le(p, (uint32_t)(int32_t)v);
        return;
    }
    /* LONG1: little-endian two's complement, as few bytes as keep the sign. */
    unsigned char b[9];
    int n = 0;
    uint64_t u = (uint64_t)v;
    for (; n < 8; n++) b[n] = (unsigned char)(u >> (8 * n));
    n = 8;
    while (n > 1 && ((b[n - 1] == 0 && !(b[n - 2] & 0x80)) || (b[n - 1] == 0xff && (b[n - 2] & 0x80)))) n--;
    op(p, 0x8a);
    op(p, (unsigned char)n);
    fwrite(b, 1, (size_t)n, p->f);
}

static void pk_uint(struct pk *p, uint64_t v) {
    if (v <= (uint64_t)INT64_MAX) { pk_int(p, (int64_t)v); return; }
    unsigned char b[9];
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(v >> (8 * i));
    b[8] = 0;
    op(p, 0x8a);
    op(p, 9);
    fwrite(b, 1, 9, p->f);
}

static void pk_bool(struct pk *p, int v) { op(p, v ? 0x88 : 0x89); }
static void dict_begin(struct pk *p) { op(p, '}'); op(p, '('); } /* EMPTY_DICT MARK */
static void dict_end(struct pk *p) { op(p, 'u'); }                /* SETITEMS */
static void list_begin(struct pk *p) { op(p, ']'); op(p, '('); }  /* EMPTY_LIST MARK */
static void list_end(struct pk *p) { op(p, 'e'); }                /* APPENDS */

static void kv_str(struct pk *p, const char *k, const char *v) { pk_str(p, k); pk_str(p, v); }
static void kv_int(struct pk *p, const char *k, int64_t v) { pk_str(p, k); pk_int(p, v); }
static void kv_uint(struct pk *p, const char *k, uint64_t v) { pk_str(p, k); pk_uint(p, v); }

static void memo_put(struct pk *p) {
    op(p, 'r'); /* LONG_BINPUT */
    u32le(p, p->memo_next++);
}

/* The frames of a stack as [{filename, line, name}], innermost first. */
static void frames(struct pk *p, const struct vm_dump *d, size_t stack) {
    if (p->stack_memo[stack] >= 0) {
        op(p, 'j'); /* LONG_BINGET */
        u32le(p, (uint32_t)p->stack_memo[stack]);
        return;
    }
    const struct vm_stack *s = &d->stacks[stack];
    list_begin(p);
    for (size_t i = 0; i < s->nframes; i++) {
        const struct vm_frame *f = &s->frames[i];
        char label[1024];
        dict_begin(p);
        kv_str(p, "filename", f->file ? f->file : f->module ? f->module : "??");
        kv_int(p, "line", f->line);
        kv_str(p, "name", vm_frame_label(f, label, sizeof label));
        dict_end(p);
    }
    list_end(p);
    p->stack_memo[stack] = p->memo_next;
    memo_put(p);
}

static void segment(struct pk *p, const struct vm_dump *d, const struct vm_alloc *a) {
    dict_begin(p);
    kv_int(p, "device", a->device);
    kv_uint(p, "address", a->address);
    kv_uint(p, "total_size", a->bytes);
    kv_uint(p, "allocated_size", a->bytes);
    kv_uint(p, "active_size", a->bytes);
    kv_uint(p, "requested_size", a->bytes);
    kv_int(p, "stream", 0);
    kv_str(p, "segment_type", a->bytes <= (1u << 20) ? "small" : "large");
    pk_str(p, "is_expandable");
    pk_bool(p, strcmp(a->kind, "vmm") == 0);
    pk_str(p, "frames");
    frames(p, d, a->stack);
    pk_str(p, "blocks");
    list_begin(p);
    dict_begin(p);
    kv_uint(p, "address", a->address);
    kv_uint(p, "size", a->bytes);
    kv_uint(p, "requested_size", a->bytes);
    kv_str(p, "state", "active_allocated");
    pk_str(p, "frames");
    frames(p, d, a->stack);
    dict_end(p);
    list_end(p);
    dict_end(p);
}

static void trace_entry(struct pk *p, const struct vm_dump *d, const char *action,
                        const struct vm_event *e, int64_t device_free) {
    dict_begin(p);
    kv_str(p, "action", action);
    kv_uint(p, "addr", e->address);
    kv_uint(p, "size", e->bytes);
    kv_int(p, "stream", 0);
    kv_uint(p, "time_us", (d->start_unix_ns + e->time_ns) / 1000);
    if (device_free >= 0) kv_int(p, "device_free", device_free);
    pk_str(p, "frames");
    frames(p, d, e->stack);
    dict_end(p);
}

/* One process's events on one device, as trace entries (no list around
 * them: the caller appends them to the device's list). */
static void trace_entries(struct pk *p, const struct vm_dump *d, int device) {
    size_t oom_index = 0;
    for (size_t i = 0; i < d->nevents; i++) {
        const struct vm_event *e = &d->events[i];
        if (e->type == 'o') {
            /* The k-th OOM event is the k-th OOM record, when it was kept. */
            size_t k = oom_index++;
            if (e->device != device) continue;
            int64_t freeb = k < d->nooms && d->ooms[k].have_info ? (int64_t)d->ooms[k].free_bytes : 0;
            trace_entry(p, d, "oom", e, freeb);
        } else if (e->device != device) {
            continue;
        } else if (e->type == 'a') {
            trace_entry(p, d, "segment_alloc", e, -1);
            trace_entry(p, d, "alloc", e, -1);
        } else {
            trace_entry(p, d, "free_requested", e, -1);
            trace_entry(p, d, "free_completed", e, -1);
            trace_entry(p, d, "segment_free", e, -1);
        }
    }
}

int vr_torch(FILE *f, const struct vr_input *in, const struct vr_opts *o, char *err, size_t errsize) {
    (void)o;
    struct pk p = {f, 0, NULL};
    op(&p, 0x80); /* PROTO 2 */
    op(&p, 2);
    dict_begin(&p);
    int ndev = 0;
    for (size_t i = 0; i < in->n; i++) {
        const struct vm_dump *d = &in->dumps[i];
        for (size_t j = 0; j < d->ndevices; j++)
            if (d->devices[j].ordinal + 1 > ndev) ndev = d->devices[j].ordinal + 1;
        for (size_t j = 0; j < d->nevents; j++)
            if (d->events[j].device + 1 > ndev) ndev = d->events[j].device + 1;
    }
    /* Frames are memoized per dump; the memo indices stay valid across the
     * whole pickle, so keep one table per dump. */
    int64_t **memos = calloc(in->n ? in->n : 1, sizeof *memos);
    if (!memos) { snprintf(err, errsize, "out of memory"); return -1; }
    for (size_t i = 0; i < in->n; i++) {
        size_t ns = in->dumps[i].nstacks;
        memos[i] = malloc((ns ? ns : 1) * sizeof **memos);
        if (!memos[i]) { snprintf(err, errsize, "out of memory"); goto fail; }
        for (size_t j = 0; j < ns; j++) memos[i][j] = -1;
    }
    pk_str(&p, "segments");
    list_begin(&p);
    for (size_t i = 0; i < in->n; i++) {
        p.stack_memo = memos[i];
        for (size_t j = 0; j < in->dumps[i].nlive; j++)
            if (in->dumps[i].live[j].device >= 0 && strcmp(in->dumps[i].live[j].kind, "imported") != 0)
                segment(&p, &in->dumps[i], &in->dumps[i].live[j]);
    }
    list_end(&p);
    pk_str(&p, "device_traces");
    list_begin(&p);
    for (int dev = 0; dev < ndev; dev++) {
        /* With several dumps, a device's trace holds every process's events
         * for that ordinal, one process after another. */
        op(&p, ']'); /* EMPTY_LIST, then one MARK ... APPENDS per process */
        for (size_t i = 0; i < in->n; i++) {
            p.stack_memo = memos[i];
            op(&p, '(');
            trace_entries(&p, &in->dumps[i], dev);
            op(&p, 'e');
        }
    }
    list_end(&p);
    pk_str(&p, "allocator_settings");
    dict_begin(&p);
    kv_str(&p, "source", "vramtrace");
    dict_end(&p);
    dict_end(&p);
    op(&p, '.'); /* STOP */
    for (size_t i = 0; i < in->n; i++) free(memos[i]);
    free(memos);
    return ferror(f) ? -1 : 0;
fail:
    for (size_t i = 0; i < in->n; i++) free(memos[i]);
    free(memos);
    return -1;
}
