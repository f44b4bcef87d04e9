/* torch.c -- the records of PyTorch's own view of its memory: reading the
 * companion's text (the grammar is in torch.h) and keeping it. */
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "../common/warn.h"
#include "torch.h"

const char *const vt_torch_categories[VT_TORCH_NCAT] = {"parameter", "buffer", "gradient",
                                                        "optimizer_state", "activation", "other"};

/* ------------------------------------------------------- the parser */

/* A cursor over one line's fields; never reads at or past `end`. */
struct line {
    const char *p, *end;
    int bad;
};

/* The next field: [*s, *s + *n). Sets bad when the line has no more. */
static void next_field(struct line *l, const char **s, size_t *n) {
    if (l->bad || !l->p) {
        l->bad = 1;
        *s = "";
        *n = 0;
        return;
    }
    const char *q = l->p;
    while (q < l->end && *q != '\t') q++;
    *s = l->p;
    *n = (size_t)(q - l->p);
    l->p = q < l->end ? q + 1 : NULL;
}

static uint64_t num(struct line *l) {
    const char *s;
    size_t n;
    next_field(l, &s, &n);
    if (n == 0 || n > 20) { l->bad = 1; return 0; }
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') { l->bad = 1; return 0; }
        uint64_t d = (uint64_t)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10) { l->bad = 1; return 0; }
        v = v * 10 + d;
    }
    return v;
}

/* A number or "-" (*known 0). */
static uint64_t num_or_dash(struct line *l, int *known) {
    if (l->p && l->p < l->end && *l->p == '-' && (l->p + 1 == l->end || l->p[1] == '\t')) {
        const char *s;
        size_t n;
        next_field(l, &s, &n);
        *known = 0;
        return 0;
    }
    return num(l);
}

/* A device ordinal, or -1 when minus_one is allowed. */
static int ordinal(struct line *l, int minus_one) {
    if (minus_one && l->p && l->end - l->p >= 2 && l->p[0] == '-' && l->p[1] == '1' &&
        (l->p + 2 == l->end || l->p[2] == '\t')) {
        const char *s;
        size_t n;
        next_field(l, &s, &n);
        return -1;
    }
    uint64_t v = num(l);
    if (v >= 1024) l->bad = 1;
    return (int)v;
}

/* A text field into out (size bytes): refused when longer than size - 1
 * or holding a NUL (a tab or newline cannot be in a field). */
static void field_text(struct line *l, char *out, size_t size) {
    const char *s;
    size_t n;
    next_field(l, &s, &n);
    if (n >= size || memchr(s, '\0', n)) { l->bad = 1; n = 0; }
    memcpy(out, s, n);
    out[n] = '\0';
}

static int is(const char *s, size_t n, const char *word) { return n == strlen(word) && memcmp(s, word, n) == 0; }

static int ended(struct line *l) { return !l->bad && l->p == NULL; }

static struct vt_torch_device *device_of(struct vt_torch_record *r, int dev) {
    for (size_t i = 0; i < r->ndevices; i++)
        if (r->devices[i].device == dev) return &r->devices[i];
    return NULL;
}

static int parse_head(struct line *l, struct vt_torch_record *r) {
    const char *s;
    size_t n;
    next_field(l, &s, &n);
    if (!is(s, n, "vramtrace-torch")) return -1;
    next_field(l, &s, &n);
    if (!is(s, n, "1")) return -1;
    next_field(l, &s, &n);
    r->reason = is(s, n, "oom") ? VT_TORCH_OOM : is(s, n, "exit") ? VT_TORCH_EXIT : is(s, n, "signal") ? VT_TORCH_SIGNAL : -1;
    r->oom_device = ordinal(l, 1);
    r->request = num(l);
    r->steps = num(l);
    if (l->p) r->raised_allocated = num(l);
    if (l->p) r->request_rounded = num(l) != 0;
    if (r->reason < 0 || !ended(l) || (r->reason == VT_TORCH_OOM) != (r->oom_device >= 0)) return -1;
    return 0;
}

/* How the fields of a D or a T line are read, in order, into its struct:
 * a device ordinal, a number, a number or "-" (the device's memory not
 * known), a text of at most size - 1 bytes, or a category's name (its
 * index in vt_torch_categories, -1 for another). */
enum { F_ORDINAL, F_NUM, F_NUM_OR_DASH, F_TEXT, F_CATEGORY };
struct field {
    int type;
    size_t off, size;
};
#define FIELD(type, T, member) {type, offsetof(T, member), sizeof(((T *)0)->member)}
#define DEV(type, member) FIELD(type, struct vt_torch_device, member)
#define TEN(type, member) FIELD(type, struct vt_torch_tensor, member)

static const struct field device_fields[] = {
    DEV(F_ORDINAL, device), DEV(F_NUM, allocated), DEV(F_NUM, reserved), DEV(F_NUM, largest_free),
    DEV(F_NUM_OR_DASH, free), DEV(F_NUM_OR_DASH, total),
    DEV(F_NUM, cat[0]), DEV(F_NUM, cat[1]), DEV(F_NUM, cat[2]), DEV(F_NUM, cat[3]), DEV(F_NUM, cat[4]),
    DEV(F_NUM, cat[5]), DEV(F_TEXT, settings),
};
_Static_assert(VT_TORCH_NCAT == 6, "device_fields reads six categories");
static const struct field tensor_fields[] = {
    TEN(F_ORDINAL, device), TEN(F_NUM, bytes), TEN(F_NUM, block), TEN(F_NUM, segment), TEN(F_TEXT, dtype),
    TEN(F_CATEGORY, category), TEN(F_TEXT, shape), TEN(F_TEXT, name), TEN(F_TEXT, holder),
};

/* The rest of line l read into out as the n fields f say; 0 when one was
 * "-" in *known (which is left alone otherwise). Whether the line then
 * ended well is the caller's ended(l). */
static void read_fields(struct line *l, const struct field *f, size_t n, void *out, int *known) {
    for (size_t i = 0; i < n; i++) {
        char *at = (char *)out + f[i].off;
        char cat[32];
        switch (f[i].type) {
        case F_ORDINAL: *(int *)at = ordinal(l, 0); break;
        case F_NUM: *(uint64_t *)at = num(l); break;
        case F_NUM_OR_DASH: *(uint64_t *)at = num_or_dash(l, known); break;
        case F_TEXT: field_text(l, at, f[i].size); break;
        case F_CATEGORY:
            field_text(l, cat, sizeof cat);
            *(int *)at = -1;
            for (int k = 0; k < VT_TORCH_NCAT; k++)
                if (strcmp(cat, vt_torch_categories[k]) == 0) *(int *)at = k;
            break;
        }
    }
}

static int parse_device(struct line *l, struct vt_torch_record *r) {
    if (r->ndevices >= VT_TORCH_DEVICES) return -1;
    struct vt_torch_device d;
    memset(&d, 0, sizeof d);
    d.have_mem = 1;
    read_fields(l, device_fields, sizeof device_fields / sizeof *device_fields, &d, &d.have_mem);
    if (!ended(l) || device_of(r, d.device)) return -1;
    if (!(d.tensors = calloc(VT_TORCH_TENSORS, sizeof *d.tensors))) return -1;
    r->devices[r->ndevices++] = d;
    return 0;
}

static int parse_tensor(struct line *l, struct vt_torch_record *r) {
    struct vt_torch_tensor t;
    memset(&t, 0, sizeof t);
    read_fields(l, tensor_fields, sizeof tensor_fields / sizeof *tensor_fields, &t, NULL);
    struct vt_torch_device *d = device_of(r, t.device);
    if (!ended(l) || t.category < 0 || !d || d->ntensors >= VT_TORCH_TENSORS) return -1;
    d->tensors[d->ntensors++] = t;
    return 0;
}

static int parse_free_seg(struct line *l, struct vt_torch_record *r) {
    int device = ordinal(l, 0);
    uint64_t address = num(l), size = num(l);
    struct vt_torch_device *d = device_of(r, device);
    if (!ended(l) || !d || size == 0 || d->nfree_segs >= VT_TORCH_FREE_SEGS) return -1;
    if (!d->free_segs && !(d->free_segs = calloc(VT_TORCH_FREE_SEGS, sizeof *d->free_segs))) return -1;
    d->free_segs[d->nfree_segs++] = (struct vt_torch_seg){address, size};
    return 0;
}

static int by_address(const void *a, const void *b) {
    uint64_t x = ((const struct vt_torch_seg *)a)->address, y = ((const struct vt_torch_seg *)b)->address;
    return (x > y) - (x < y);
}

void vt_torch_record_free(struct vt_torch_record *r) {
    for (size_t i = 0; r->devices && i < r->ndevices; i++) {
        free(r->devices[i].tensors);
        free(r->devices[i].free_segs);
    }
    free(r->devices);
    memset(r, 0, sizeof *r);
}

int vt_torch_parse(const char *text, size_t len, struct vt_torch_record *r) {
    memset(r, 0, sizeof *r);
    if (!text || len == 0 || len > VT_TORCH_MAX_LEN || text[len - 1] != '\n') return -1;
    if (!(r->devices = calloc(VT_TORCH_DEVICES, sizeof *r->devices))) return -1;
    const char *p = text, *end = text + len;
    int lineno = 0, rc = 0;
    while (p < end && rc == 0) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));   /* one exists: text ends with '\n' */
        struct line l = {p, nl, 0};
        if (lineno == 0) {
            rc = parse_head(&l, r);
        } else {
            const char *s;
            size_t n;
            next_field(&l, &s, &n);
            rc = is(s, n, "D")   ? parse_device(&l, r)
                 : is(s, n, "T") ? parse_tensor(&l, r)
                 : is(s, n, "F") ? parse_free_seg(&l, r)
                                 : -1;
        }
        lineno++;
        p = nl + 1;
    }
    if (rc != 0) vt_torch_record_free(r);
    for (size_t i = 0; rc == 0 && i < r->ndevices; i++)
        if (r->devices[i].nfree_segs)
            qsort(r->devices[i].free_segs, r->devices[i].nfree_segs, sizeof *r->devices[i].free_segs, by_address);
    return rc;
}

/* ------------------------------------------------------ the records */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct vt_torch_record ooms[VT_TORCH_OOMS];   /* a ring, by arrival */
static size_t nooms_seen;
static struct vt_torch_record top[2];                /* exit, signal */
static void (*refresh_fn)(void);
static void (*oom_listener)(void);
static void (*unseen_oom)(int device, uint64_t request, uint64_t raised_allocated, int rounded);
static int warned_refused;

int vt_torch_take(const char *text, size_t len) {
    struct vt_torch_record r;
    if (vt_torch_parse(text, len, &r) != 0) {
        pthread_mutex_lock(&lock);
        int warn = !warned_refused;
        warned_refused = 1;
        pthread_mutex_unlock(&lock);
        if (warn) vt_warn("a record of PyTorch's memory was malformed and is left out of the dumps");
        return -1;
    }
    int at_oom = r.reason == VT_TORCH_OOM;
    if (at_oom) {
        /* The record belongs to this thread's failure, or makes one (before
         * its time is taken: it belongs to the latest OOM before it). */
        void (*unseen)(int, uint64_t, uint64_t, int) = __atomic_load_n(&unseen_oom, __ATOMIC_ACQUIRE);
        /* A record of a failure on another thread (the companion saw the
         * error raised again on the thread that ran backward()) belongs to
         * the device's failure still open. */
        int mine = vt_thread_oom_open;
        if (mine) {
            r.oom_seq = vt_thread_oom_seq;
            vt_oom_close_mine();
        } else if (!vt_oom_claim(r.oom_device) && unseen) {
            unseen(r.oom_device, r.request, r.raised_allocated, r.request_rounded);
            /* The failure it made is this record's: not open for the next
             * (PyTorch's refusals one after another, with no allocation
             * between, each took the one before as theirs). */
            r.oom_seq = vt_thread_oom_seq;
            vt_oom_close_mine();
        }
    }
    r.time_ns = vt_now_ns();
    pthread_mutex_lock(&lock);
    struct vt_torch_record *slot = at_oom ? &ooms[nooms_seen++ % VT_TORCH_OOMS] : &top[r.reason - 1];
    vt_torch_record_free(slot);
    *slot = r;
    void (*listener)(void) = oom_listener;
    pthread_mutex_unlock(&lock);
    if (at_oom && listener) listener();
    return 0;
}

void vt_torch_on_oom(void (*listener)(void)) { oom_listener = listener; }

void vt_torch_on_unseen_oom(void (*fn)(int device, uint64_t request, uint64_t raised_allocated, int rounded)) {
    __atomic_store_n(&unseen_oom, fn, __ATOMIC_RELEASE);
}

void vt_torch_set_refresh(void (*fn)(void)) {
    pthread_mutex_lock(&lock);
    refresh_fn = fn;
    pthread_mutex_unlock(&lock);
}

static int stepping; /* an optimizer step began (the companion's pre-hook) */

void vt_torch_step_began(void) { __atomic_store_n(&stepping, 1, __ATOMIC_RELAXED); }

int vt_torch_stepping(void) { return __atomic_load_n(&stepping, __ATOMIC_RELAXED); }

static uint64_t signal_asked; /* the last vt_torch_refresh's time */

void vt_torch_refresh(void) {
    pthread_mutex_lock(&lock);
    signal_asked = vt_now_ns();
    void (*fn)(void) = refresh_fn;
    pthread_mutex_unlock(&lock);
    if (fn) fn();
}

void vt_torch_lock(void) { pthread_mutex_lock(&lock); }
void vt_torch_unlock(void) { pthread_mutex_unlock(&lock); }

const struct vt_torch_record *vt_torch_top(const char *reason) {
    if (strcmp(reason, "exit") == 0) return top[0].devices ? &top[0] : NULL;
    if (strcmp(reason, "signal") == 0) return top[1].devices && top[1].time_ns >= signal_asked ? &top[1] : NULL;
    return NULL;
}

/* Whether OOM record i of s is r's: its thread's own, or the latest on
 * r's device at or before r arrived. */
static int belongs(const struct vt_snapshot *s, size_t i, const struct vt_torch_record *r) {
    const struct vt_oom *o = &s->ooms[i];
    /* Its own thread's failure: when two threads fail at once, the other
     * thread's may be the latest by time. */
    if (r->oom_seq) return r->oom_seq == o->number && o->device == r->oom_device;
    if (o->device != r->oom_device || o->time_ns > r->time_ns) return 0;
    for (size_t k = i + 1; k < s->nooms; k++)
        if (s->ooms[k].device == r->oom_device) return s->ooms[k].time_ns > r->time_ns;
    return 1;
}

const struct vt_torch_record *vt_torch_for_oom(const struct vt_snapshot *s, size_t i) {
    const struct vt_torch_record *best = NULL;
    size_t n = nooms_seen < VT_TORCH_OOMS ? nooms_seen : VT_TORCH_OOMS;
    for (size_t k = 0; k < n; k++)
        if (belongs(s, i, &ooms[k]) && (!best || ooms[k].time_ns >= best->time_ns)) best = &ooms[k];
    return best;
}

uint64_t vt_torch_rounding(uint64_t figure) {
    uint64_t unit = figure >= (1ull << 30) - (1ull << 30) / 200 ? 1ull << 30
                  : figure >= (1ull << 20) - (1ull << 20) / 200 ? 1ull << 20 : 1ull << 10;
    return unit / 200 + 1;
}

/* The figure vt_torch_request gives, and whether it is a rounded one. */
static uint64_t request_of(const struct vt_torch_record *r, const struct vt_snapshot *s, size_t i, int *rounded) {
    const struct vt_oom *o = &s->ooms[i];
    uint64_t far = r->request > o->requested ? r->request - o->requested : o->requested - r->request;
    if (!r->request || (r->request_rounded && !o->requested_rounded && o->requested &&
                        far <= vt_torch_rounding(r->request))) {
        *rounded = o->requested_rounded;
        return o->requested;
    }
    *rounded = r->request_rounded;
    return r->request;
}

uint64_t vt_torch_request(const struct vt_torch_record *r, const struct vt_snapshot *s, size_t i) {
    int rounded;
    return request_of(r, s, i, &rounded);
}

int vt_torch_request_rounded(const struct vt_torch_record *r, const struct vt_snapshot *s, size_t i) {
    int rounded;
    request_of(r, s, i, &rounded);
    return rounded;
}

void vt_torch_reset_child(void) {
    pthread_mutex_init(&lock, NULL);
}
