/* fmt_torch.c -- a pickle in PyTorch's memory snapshot format, for
 * pytorch.org/memory_viz and `python -m torch.cuda._memory_viz`.
 *
 * Each live device allocation becomes a segment holding one active block
 * (at the CUDA level one sees what the caching allocator calls segments);
 * the event history becomes device_traces (segment_alloc + alloc, then
 * free_requested + free_completed + segment_free, and oom).
 *
 * Only memory with a device address of this process is exported, the same
 * in segments and in traces: device, pitched, managed and stream-ordered
 * allocations, and a VMM handle at the address it is mapped to: a live
 * handle's segment where its live record is mapped, and the trace entries
 * of each of a handle's lives (its cuMemCreate, the end of its memory),
 * freed before the dump or not, where the dump's history of mappings says
 * that life was mapped (vmm_lives). They are segment_alloc and
 * segment_free, as a device allocation's: memory_viz's segment timeline
 * draws only those (a segment_map is no segment there, so a page freed
 * before the snapshot would not show), and its allocator state view
 * replays a segment_unmap by merging the range with the segments beside
 * it, where the segment_alloc of a device allocation next to it (found by
 * its exact address) is then lost. CUDA arrays (known by handle), pinned
 * host memory and memory opened from another process are left out. A
 * viewer replays the trace
 * backwards from the segments (the state at the end), so a trace entry is
 * kept only where it agrees with that replay: every entry then lies in a
 * segment of its own device. One snapshot is one process: the command
 * refuses several dumps.
 *
 * The writer emits pickle protocol 2 with a fixed set of opcodes that build
 * only dicts, lists, strings, integers, booleans and None: nothing a reader
 * could execute (no GLOBAL, REDUCE, BUILD or INST).
 *
 * Each frames list (innermost first, as PyTorch writes them) starts with
 * one frame of vramtrace's own, the stack's call site (site_frame): the
 * user's file and line, named for the call site and the library line it
 * went through; the real frames follow, unchanged. Through the pickle
 * memo, each key and repeated name, each distinct frame dict ({filename,
 * line, name}) and each stack's frame list is written once and referenced
 * after, so that every block and trace entry of a stack holds the same
 * list object. PyTorch's viewers only read frames (memory_viz.js adds
 * fields to trace entries and blocks, which therefore are never shared).
 * A number repeated within one segment or one event's entries (its size,
 * address and time) is written once into a scratch memo slot and fetched
 * from it: an integer is the same value whichever object holds it.
 *
 * A memo index below 256 is fetched in two bytes (BINGET), any other in
 * five (LONG_BINGET), and the index is the writer's to choose. So the
 * low indices are kept for what is fetched most: the scratch slots, the
 * keys and names (each its own index, whenever it is first written: a
 * trace entry's keys come after every segment's frames), and the frame
 * lists and frame dicts the export fetches most, counted before anything
 * is written (hot_indices). Everything else is numbered after the indices
 * those took (from 256 when all 189 were taken). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <uthash.h>

#include "../common/format.h"
#include "model_torch.h"
#include "refset.h"
#include "reporters.h"
#include "torch_ooms.h"
#include "varint.h"

/* Scratch memo slots, rewritten for each segment or event: its size,
 * address and time. */
enum { SLOT_SIZE, SLOT_ADDR, SLOT_TIME, NSLOTS };

/* The strings written once and then fetched from the memo: the dicts'
 * keys and the few values that repeat (a segment's type, an action). The
 * i-th name first written takes memo index NSLOTS + i. */
#define PK_NAMES 64

/* The frame lists and frame dicts fetched most take the indices after the
 * names', up to 255 (NHOT of them at most); everything else is numbered
 * after those taken, so that a small export's memo stays below 256. */
#define HOT_FIRST (NSLOTS + PK_NAMES)
#define MEMO_FREE 256
/* A stack whose frame list is not written yet (memo indices are 32-bit:
 * an export cannot reach this one, 4 billion objects). */
#define NO_MEMO UINT32_MAX
#define NHOT (MEMO_FREE - HOT_FIRST)

/* No entry: a frame or string written in full (out of memory, or a key
 * that does not fit). */
#define NO_ENTRY UINT32_MAX

/* Frame dicts and frames' strings are memoized by content, each distinct
 * one an entry of a set that keeps no copy of it (refset.h): its ref says
 * which frame the text is remade from, frame fi of the dump's table or
 * (SITE_REF | s) stack s's call-site frame; a string's ref is its frame's
 * shifted by one, with STR_LABEL for the frame's label (else its file).
 * Copies of the keys (file, line and label) took 111 MB of 170 for a dump
 * of 47 MB with 60,000 Python functions of 300-character names. */
#define SITE_REF (1ull << 62)
#define STR_LABEL 1ull
/* The longest frame dict's key (frame_key's). */
#define FRAME_KEY_MAX 2600

/* A frame dict's entry: made when the export's fetches are counted
 * (hot_indices), before anything is written: `uses` counts the stacks
 * written that hold it, `slot` is the low index kept for it (0: none);
 * `memo` its index once written. */
struct dict_entry {
    uint64_t uses;
    uint32_t memo;
    uint8_t written;
    uint8_t slot;
};

struct pk {
    FILE *f;
    const struct vm_dump *d;
    uint32_t memo_next;
    uint32_t *stack_memo;    /* per stack of the current dump: memo index or NO_MEMO */
    uint8_t *hot_stack;      /* per stack: the low memo index kept for its list, or 0 */
    uint32_t *frame_entry;   /* per frame of the dump's table: its dict's entry, or NO_ENTRY */
    const char *names[PK_NAMES];
    uint32_t name_memo[PK_NAMES];
    int nnames;
    struct vr_refset frames, strings;
    struct dict_entry *dict; /* per entry of frames */
    uint32_t *string_memo;   /* per entry of strings: memo index or NO_MEMO */
    size_t dict_cap, string_memo_cap;
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

/* A memo opcode on slot i: the one-byte form below 256, else the long one
 * (BINGET/LONG_BINGET, BINPUT/LONG_BINPUT). */
static void memo_op(struct pk *p, unsigned char short_op, unsigned char long_op, uint32_t i) {
    if (i < 256) {
        op(p, short_op);
        op(p, (unsigned char)i);
    } else {
        op(p, long_op);
        u32le(p, i);
    }
}

static void memo_get(struct pk *p, uint32_t i) { memo_op(p, 'h', 'j', i); }
static void memo_put_at(struct pk *p, uint32_t i) { memo_op(p, 'q', 'r', i); }

static void memo_put(struct pk *p) { memo_put_at(p, p->memo_next++); }

/* Room for entry m of set s in the array *(T **)arrayp of *cap elements
 * (each `each` bytes), grown to the set's own room, the new elements
 * filled with `fill` bytes; 0 when memory ran out. */
static int entry_room(const struct vr_refset *s, void *arrayp, size_t *cap, size_t each, uint32_t m, int fill) {
    if (m < *cap) return 1;
    void *old;
    memcpy(&old, arrayp, sizeof old);
    void *grown = realloc(old, s->cap * each);
    if (!grown) return 0;
    memset((char *)grown + *cap * each, fill, (s->cap - *cap) * each);
    memcpy(arrayp, &grown, sizeof grown);
    *cap = s->cap;
    return 1;
}

/* A string of the writer's own (a literal: a key, a type, an action),
 * written the first time and fetched from the memo after. */
static void pk_name(struct pk *p, const char *s) {
    for (int i = 0; i < p->nnames; i++)
        if (p->names[i] == s || strcmp(p->names[i], s) == 0) { memo_get(p, p->name_memo[i]); return; }
    pk_str(p, s);
    if (p->nnames < PK_NAMES) {
        p->names[p->nnames] = s;
        p->name_memo[p->nnames] = NSLOTS + (uint32_t)p->nnames;
        memo_put_at(p, p->name_memo[p->nnames++]);
    }
}

static void pk_int(struct pk *p, int64_t v) {
    if (v >= 0 && v < 256) {
        op(p, 'K'); /* BININT1 */
        op(p, (unsigned char)v);
        return;
    }
    if (v >= 0 && v < 65536) {
        op(p, 'M'); /* BININT2 */
        op(p, (unsigned char)v);
        op(p, (unsigned char)(v >> 8));
        return;
    }
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

/* PyTorch's snapshot holds int64s: a value past INT64_MAX (a request of
 * SIZE_MAX, a negative size cast to size_t) is written as INT64_MAX, in
 * eight bytes. memory_viz's own unpickler turns a longer LONG1 into a
 * BigInt, which its size formatting throws on. */
static void pk_uint(struct pk *p, uint64_t v) {
    pk_int(p, v <= (uint64_t)INT64_MAX ? (int64_t)v : INT64_MAX);
}

static void pk_bool(struct pk *p, int v) { op(p, v ? 0x88 : 0x89); }
static void dict_begin(struct pk *p) { op(p, '}'); op(p, '('); } /* EMPTY_DICT MARK */
static void dict_end(struct pk *p) { op(p, 'u'); }                /* SETITEMS */
static void list_begin(struct pk *p) { op(p, ']'); op(p, '('); }  /* EMPTY_LIST MARK */
static void list_end(struct pk *p) { op(p, 'e'); }                /* APPENDS */

static void kv_str(struct pk *p, const char *k, const char *v) { pk_name(p, k); pk_str(p, v); }
static void kv_name(struct pk *p, const char *k, const char *v) { pk_name(p, k); pk_name(p, v); }
static void kv_int(struct pk *p, const char *k, int64_t v) { pk_name(p, k); pk_int(p, v); }

/* v under key k, kept in scratch slot `slot` for kv_slot. */
static void kv_keep(struct pk *p, const char *k, uint64_t v, uint32_t slot) {
    pk_name(p, k);
    pk_uint(p, v);
    memo_put_at(p, slot);
}

/* The value last kept in `slot`, under key k. */
static void kv_slot(struct pk *p, const char *k, uint32_t slot) {
    pk_name(p, k);
    memo_get(p, slot);
}

/* s as a string in its display form (vr_display_char, the text and
 * folded reports' escaping): a name from the program may hold a control
 * character, which PyTorch's viewers copy into an SVG or a terminal as it
 * is (an ESC made memory_viz's flame graph a file no XML reader takes). A
 * string of printable ASCII, nearly every one, is written as it is. */
static void pk_display(struct pk *p, const char *s) {
    size_t n = 0;
    while ((unsigned char)s[n] >= 0x20 && (unsigned char)s[n] < 0x7f) n++;
    if (s[n] == '\0') { pk_str(p, s); return; }
    size_t cap = strlen(s) * 2 + VR_CHAR_MAX + 1, len = n;
    char *out = malloc(cap), ch[VR_CHAR_MAX + 1];
    if (!out) { pk_str(p, "?"); return; }
    memcpy(out, s, n);
    for (size_t k; (k = vr_display_char(s + n, ch)) > 0; n += k) {
        size_t w = strlen(ch);
        if (len + w + 1 > cap) {
            char *bigger = realloc(out, cap = 2 * cap + w);
            if (!bigger) break;
            out = bigger;
        }
        memcpy(out + len, ch, w);
        len += w;
    }
    out[len] = '\0';
    pk_str(p, out);
    free(out);
}

/* A frame's string, memoized by content: a file or function shared by
 * many frames is written once. ref: where it is remade from (SITE_REF). */
static void pk_text(struct pk *p, const char *s, uint64_t ref) {
    uint32_t m = vr_refset_add(&p->strings, s, strlen(s), ref, NULL);
    if (m != NO_ENTRY &&
        !entry_room(&p->strings, &p->string_memo, &p->string_memo_cap, sizeof *p->string_memo, m, 0xff))
        m = NO_ENTRY;
    if (m != NO_ENTRY && p->string_memo[m] != NO_MEMO) { memo_get(p, p->string_memo[m]); return; }
    pk_display(p, s);
    if (m == NO_ENTRY) return;
    p->string_memo[m] = p->memo_next;
    memo_put(p);
}

/* A frame's file as its dict names it. */
static const char *frame_file(const struct vt_frame *f) { return f->file ? f->file : f->module ? f->module : "??"; }

/* A frame's label and its key among frame dicts (file, line and label);
 * the key's length, or -1 when it does not fit. */
static int frame_key(const struct vt_frame *f, char label[1024], char key[FRAME_KEY_MAX]) {
    vm_frame_label(f, label, 1024);
    int n = snprintf(key, FRAME_KEY_MAX, "%s%c%ld%c%s", frame_file(f), 0, (long)f->line, 0, label);
    return n > 0 && n < FRAME_KEY_MAX ? n : -1;
}

static int site_frame_of(const struct vm_dump *d, size_t stack, struct vt_frame *f, char name[1024]);

/* The frame a ref names (SITE_REF), a call-site frame made in *f with
 * its name in name; NULL for none. */
static const struct vt_frame *frame_of_ref(const struct vm_dump *d, uint64_t ref, struct vt_frame *f,
                                           char name[1024]) {
    if (ref & SITE_REF) return site_frame_of(d, (size_t)(ref & ~SITE_REF), f, name) == 0 ? f : NULL;
    return ref < d->nframes ? &d->frames[ref] : NULL;
}

/* The remade key of the frame dict of frame ref (vr_remake_fn). */
static size_t remake_frame_key(void *ctx, uint64_t ref, char *buf, size_t size) {
    const struct pk *p = ctx;
    struct vt_frame site;
    char name[1024], label[1024];
    const struct vt_frame *f = frame_of_ref(p->d, ref, &site, name);
    int n = f && size >= FRAME_KEY_MAX ? frame_key(f, label, buf) : -1;
    return n < 0 ? SIZE_MAX : (size_t)n;
}

/* The remade string of ref: its frame's label or file (vr_remake_fn). */
static size_t remake_string(void *ctx, uint64_t ref, char *buf, size_t size) {
    const struct pk *p = ctx;
    struct vt_frame site;
    char name[1024], label[1024];
    const struct vt_frame *f = frame_of_ref(p->d, ref >> 1, &site, name);
    if (!f) return SIZE_MAX;
    const char *s = ref & STR_LABEL ? vm_frame_label(f, label, sizeof label) : frame_file(f);
    size_t n = strlen(s);
    if (n >= size) return SIZE_MAX;
    memcpy(buf, s, n);
    return n;
}

/* The entry of the dict of frame f (whose ref is `ref`), made when there
 * is none; NO_ENTRY when out of memory or its key does not fit. */
static uint32_t frame_entry(struct pk *p, const struct vt_frame *f, uint64_t ref) {
    char label[1024], key[FRAME_KEY_MAX];
    int n = frame_key(f, label, key);
    uint32_t m = n < 0 ? NO_ENTRY : vr_refset_add(&p->frames, key, (size_t)n, ref, NULL);
    if (m != NO_ENTRY && !entry_room(&p->frames, &p->dict, &p->dict_cap, sizeof *p->dict, m, 0)) return NO_ENTRY;
    return m;
}

/* One frame as {filename, line, name}, each distinct one written once (at
 * the low index kept for it, if any) and fetched after. m is its entry,
 * or NO_ENTRY (written in full); ref the frame's (SITE_REF). */
static void frame(struct pk *p, const struct vt_frame *f, uint32_t m, uint64_t ref) {
    struct dict_entry *e = m != NO_ENTRY ? &p->dict[m] : NULL;
    if (e && e->written) { memo_get(p, e->memo); return; }
    char label[1024], key[FRAME_KEY_MAX];
    frame_key(f, label, key);
    uint32_t at = !e ? 0 : e->slot ? e->slot : p->memo_next++;   /* taken before its contents' */
    dict_begin(p);
    pk_name(p, "filename");
    pk_text(p, frame_file(f), ref << 1);
    kv_int(p, "line", f->line);
    pk_name(p, "name");
    pk_text(p, label, ref << 1 | STR_LABEL);
    dict_end(p);
    if (!e) return;
    e->memo = at;
    e->written = 1;
    memo_put_at(p, at);
}

/* The call-site frame of a stack (vm_site), written before its real
 * frames: the user's file and line, and as its name the site's function,
 * the library line it went through and "(call site)", the rest of the
 * stack's call-site label: "evaluate -> relu torch/nn/functional.py:1777
 * (call site)". A viewer shows a stack innermost first, so this is the
 * first frame it shows. Nothing for a stack without a call site. The name
 * fits in a frame label's 1024 bytes with its " (call site)" kept: the
 * library line is cut to 400 bytes, the function to what is left, each at
 * a whole character. The frame is made in *f, its name in name; 0, or -1
 * for a stack without a call site. */
static int site_frame_of(const struct vm_dump *d, size_t stack, struct vt_frame *f, char name[1024]) {
    static const char suffix[] = " (call site)";
    const struct vt_frame *site = vm_site(d, stack);
    if (!site) return -1;
    char label[2048], where[2048], through[400], fn[1024];
    vm_site_label(d, stack, label, sizeof label);
    vt_site_name(site, where, sizeof where);
    size_t k = strlen(where);
    snprintf(through, sizeof through, "%s", strncmp(label, where, k) == 0 ? label + k : "");
    vt_utf8_whole(through, sizeof through);
    size_t room = 1024 - strlen(through) - (sizeof suffix - 1);
    snprintf(fn, room, "%s", site->function ? site->function : "??");
    vt_utf8_whole(fn, room);
    /* fn was cut to leave room for through and suffix: nothing is cut here. */
    if (snprintf(name, 1024, "%s%s%s", fn, through, suffix) >= 1024) name[1023] = '\0';
    *f = (struct vt_frame){.function = name, .file = site->file, .module = site->module, .line = site->line};
    return 0;
}

static void site_frame(struct pk *p, const struct vm_dump *d, size_t stack) {
    struct vt_frame f;
    char name[1024];
    if (site_frame_of(d, stack, &f, name) == 0) frame(p, &f, frame_entry(p, &f, SITE_REF | stack), SITE_REF | stack);
}

/* The entry of the dict of frame fi of the dump's table (fr, a pointer
 * to it), kept by index so that its label and key are made once. */
static uint32_t table_frame_entry(struct pk *p, const struct vm_dump *d, const struct vt_frame *fr) {
    size_t fi = (size_t)(fr - d->frames);
    if (!p->frame_entry) return NO_ENTRY;
    if (p->frame_entry[fi] == NO_ENTRY) p->frame_entry[fi] = frame_entry(p, fr, fi);
    return p->frame_entry[fi];
}

/* The frames of a stack as [{filename, line, name}], innermost first,
 * after its call-site frame. */
static void frames(struct pk *p, const struct vm_dump *d, size_t stack) {
    if (p->stack_memo[stack] != NO_MEMO) {
        memo_get(p, p->stack_memo[stack]);
        return;
    }
    const struct vm_stack *s = &d->stacks[stack];
    list_begin(p);
    site_frame(p, d, stack);   /* before the frames: its label may use the model's frame buffer */
    const struct vt_frame *const *fr = vm_stack_frames(d, stack);
    for (size_t i = 0; i < s->nframes; i++)
        frame(p, fr[i], table_frame_entry(p, d, fr[i]), (uint64_t)(fr[i] - d->frames));
    list_end(p);
    if (p->hot_stack && p->hot_stack[stack]) {
        p->stack_memo[stack] = p->hot_stack[stack];
        memo_put_at(p, p->hot_stack[stack]);
    } else {
        p->stack_memo[stack] = p->memo_next;
        memo_put(p);
    }
}

static void segment(struct pk *p, const struct vm_dump *d, const struct vm_alloc *a) {
    dict_begin(p);
    kv_int(p, "device", a->device);
    kv_keep(p, "address", a->address, SLOT_ADDR);
    kv_keep(p, "total_size", a->bytes, SLOT_SIZE);
    kv_slot(p, "allocated_size", SLOT_SIZE);
    kv_slot(p, "active_size", SLOT_SIZE);
    kv_slot(p, "requested_size", SLOT_SIZE);
    kv_int(p, "stream", 0);
    kv_name(p, "segment_type", a->bytes <= (1u << 20) ? "small" : "large");
    pk_name(p, "is_expandable");
    pk_bool(p, strcmp(vm_alloc_kind(d, a), "vmm") == 0);
    pk_name(p, "frames");
    frames(p, d, a->stack);
    pk_name(p, "blocks");
    op(p, ']');  /* EMPTY_LIST, its one block APPENDed */
    dict_begin(p);
    kv_slot(p, "address", SLOT_ADDR);
    kv_slot(p, "size", SLOT_SIZE);
    kv_slot(p, "requested_size", SLOT_SIZE);
    kv_name(p, "state", "active_allocated");
    pk_name(p, "frames");
    frames(p, d, a->stack);
    dict_end(p);
    op(p, 'a');  /* APPEND */
    dict_end(p);
}

/* One trace entry; `first` writes the event's address, size and time into
 * their scratch slots, the event's later entries fetch them. */
static void trace_entry(struct pk *p, const struct vm_dump *d, const char *action,
                        const struct vm_event *e, int64_t device_free, int first) {
    dict_begin(p);
    kv_name(p, "action", action);
    if (first) {
        kv_keep(p, "addr", e->address, SLOT_ADDR);
        kv_keep(p, "size", e->bytes, SLOT_SIZE);
    } else {
        kv_slot(p, "addr", SLOT_ADDR);
        kv_slot(p, "size", SLOT_SIZE);
    }
    kv_int(p, "stream", 0);
    if (first) kv_keep(p, "time_us", (d->start_unix_ns + e->time_ns) / 1000, SLOT_TIME);
    else kv_slot(p, "time_us", SLOT_TIME);
    if (device_free >= 0) kv_int(p, "device_free", device_free);
    pk_name(p, "frames");
    frames(p, d, e->stack);
    dict_end(p);
}

/* Kinds whose address is a device address of this process. */
static int addressed_kind(const char *kind) {
    return strcmp(kind, "device") == 0 || strcmp(kind, "pitched") == 0 || strcmp(kind, "managed") == 0 ||
           strcmp(kind, "async") == 0 || strcmp(kind, "graph") == 0;
}

/* The device address a live allocation is exported at, or 0 for none. */
static uint64_t live_address(const struct vm_dump *d, const struct vm_alloc *a) {
    if (a->device < 0 || a->address == 0) return 0;
    const char *kind = vm_alloc_kind(d, a);
    if (addressed_kind(kind)) return a->address;
    if (strcmp(kind, "vmm") == 0 && a->has_handle && a->address != vm_alloc_handle(d, a)) return a->address;
    return 0;
}

struct key {
    uint64_t address;
    int64_t device;
};

/* A VMM handle by (device, handle): in the set of live handles, the
 * address its live record is mapped at (`mapped`); in the set of lives
 * (vmm_lives), the address its current life was last mapped at, 0 for
 * none yet, and the index of the allocation event that began that life
 * (`begun`; -1: none kept, or the life ended). */
struct seg {
    struct key k;
    uint64_t mapped;
    int64_t begun;
    UT_hash_handle hh;
};

static struct seg *seg_find(struct seg *set, int device, uint64_t address) {
    struct key k = {address, device};
    struct seg *s;
    HASH_FIND(hh, set, &k, sizeof k, s);
    return s;
}

static struct seg *seg_add(struct seg **set, int device, uint64_t address) {
    struct seg *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->k.address = address;
    s->k.device = device;
    s->begun = -1;
    HASH_ADD(hh, *set, k, sizeof s->k, s);
    return s;
}

static void seg_clear(struct seg **set) {
    struct seg *s, *tmp;
    HASH_ITER(hh, *set, s, tmp) {
        HASH_DEL(*set, s);
        free(s);
    }
}

/* What is exported of one dump: which live allocations become segments
 * (seg_ok), and per event a byte of flags: EV_OK when it is exported, and
 * where the address its trace entries carry comes from (ev_address): the
 * event's own (EV_OWN), a VMM handle's mapped address kept in `mapped`
 * (EV_MAPPED), else none, 0: the event is left out of the replay (an OOM
 * keeps address 0 and is marked EV_OK). An address an event was 8 bytes,
 * 8 MB of an export's 50 for a dump of 1,000,000 events. */
enum { EV_OK = 1, EV_OWN = 2, EV_MAPPED = 4 };
struct ev_mapped {
    uint32_t i;              /* the event (first: first_event_from reads it) */
    uint64_t address;
};
struct selection {
    char *seg_ok;
    uint8_t *ev;
    struct ev_mapped *mapped; /* by event, ascending */
    size_t nmapped, mapped_cap;
};

static void selection_free(struct selection *x) {
    free(x->seg_ok);
    free(x->ev);
    free(x->mapped);
}

/* The first of n records `stride` bytes apart from `base`, in ascending
 * order of the event index each begins with, whose index is i or more; n
 * when none is. */
static size_t first_event_from(const void *base, size_t n, size_t stride, size_t i) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uint32_t at;
        memcpy(&at, (const char *)base + mid * stride, sizeof at);
        if (at < i) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* The address event i (e) carries in its trace entries; 0 for none. */
static uint64_t ev_address(const struct selection *x, size_t i, const struct vm_event *e) {
    if (x->ev[i] & EV_OWN) return e->address;
    if (!(x->ev[i] & EV_MAPPED)) return 0;
    size_t k = first_event_from(x->mapped, x->nmapped, sizeof *x->mapped, i);
    return k < x->nmapped && x->mapped[k].i == i ? x->mapped[k].address : 0;
}

/* The addresses the replay adds that no live segment has (allocations
 * freed within the events' window): an open-addressed set of the free
 * events that added them, a slot the event's index (plus 2; 0 empty, 1 a
 * removed key) with a byte of its key's hash beside, compared first: the
 * key itself (its device, and its address as the selection gives it,
 * ev_address) is read from the event only where that byte matches (the
 * events are packed: reading one decodes part of its block). A removed
 * key's slot is taken again by the next key added through it, and the set
 * is remade without removed keys, with room for twice its keys, when
 * three quarters of it are used: it is as big as the most keys it holds
 * at once, not as the free events (made once with room for every free
 * event it was 4 MB of a 7.9 MB dump whose 500,000 frees each followed
 * their allocation). Keys of 16 bytes, remade past three quarters full,
 * took 48 MB at the remaking for the 900,000 freed allocations of a dump
 * of 67 MB; a uthash entry each, 79 MB. */
struct key_set {
    uint32_t *slot;
    uint8_t *tag;            /* a byte of each slot's key hash */
    size_t cap, used, live;  /* used: slots not empty (keys and removed ones) */
    size_t max_cap;          /* the most slots it may have (replay) */
    const struct vm_dump *d;
    const struct selection *x;
};
#define KEY_EMPTY 0u
#define KEY_GONE 1u

static uint64_t key_hash(int device, uint64_t address) {
    uint64_t h = (address ^ (uint64_t)(int64_t)device * 0x9e3779b97f4a7c15ull) * 0xff51afd7ed558ccdull;
    return h ^ h >> 32;
}

/* The slot's tag: hash bits the slot's place does not use. */
static uint8_t key_tag(uint64_t h) { return (uint8_t)(h >> 56); }

/* An empty set of `cap` slots (a power of two); 0 when out of memory. */
static int key_set_make(struct key_set *s, size_t cap, const struct vm_dump *d, const struct selection *x) {
    *s = (struct key_set){.cap = cap, .d = d, .x = x};
    s->slot = calloc(cap, sizeof *s->slot + 1);
    s->tag = s->slot ? (uint8_t *)(s->slot + cap) : NULL;
    return s->slot != NULL;
}

/* The slot of (device, address), or SIZE_MAX. */
static size_t key_find(const struct key_set *s, int device, uint64_t address) {
    uint64_t h = key_hash(device, address);
    for (size_t i = h & (s->cap - 1);; i = (i + 1) & (s->cap - 1)) {
        uint32_t k = s->slot[i];
        if (k == KEY_EMPTY) return SIZE_MAX;
        if (k == KEY_GONE || s->tag[i] != key_tag(h)) continue;
        struct vm_event e = vm_event_at(&s->d->events, k - 2);
        if (e.device == device && ev_address(s->x, k - 2, &e) == address) return i;
    }
}

/* Event i's key, of hash h, put in the first free slot of its run (s has
 * room). */
static void key_put(struct key_set *s, uint64_t h, size_t i) {
    size_t j = h & (s->cap - 1);
    while (s->slot[j] > KEY_GONE) j = (j + 1) & (s->cap - 1);
    s->used += s->slot[j] == KEY_EMPTY;
    s->live++;
    s->slot[j] = (uint32_t)i + 2;
    s->tag[j] = key_tag(h);
}

static uint64_t event_key_hash(const struct key_set *s, size_t i, const struct vm_event *e) {
    return key_hash(e->device, ev_address(s->x, i, e));
}

/* Event i's (e's) key added (it is not in s); 0, 1 when s would pass its
 * max_cap, or -1 when out of memory. */
static int key_add(struct key_set *s, size_t i, const struct vm_event *e) {
    if (4 * (s->used + 1) > 3 * s->cap) {
        struct key_set t;
        size_t cap = s->cap;
        while (cap < 2 * (s->live + 1)) cap *= 2;
        if (cap > s->max_cap) return 1;
        if (!key_set_make(&t, cap, s->d, s->x)) return -1;
        for (size_t j = 0; j < s->cap; j++)
            if (s->slot[j] > KEY_GONE) {
                struct vm_event k = vm_event_at(&s->d->events, s->slot[j] - 2);
                key_put(&t, event_key_hash(s, s->slot[j] - 2, &k), s->slot[j] - 2);
            }
        free(s->slot);
        t.max_cap = s->max_cap;
        *s = t;
    }
    key_put(s, event_key_hash(s, i, e), i);
    return 0;
}

static void key_del(struct key_set *s, int device, uint64_t address) {
    size_t i = key_find(s, device, address);
    if (i != SIZE_MAX) {
        s->slot[i] = KEY_GONE;
        s->live--;
    }
}

/* The live segments, by (device, address): a sorted array of their keys,
 * with a bit each for whether the replay has the segment now, and a set
 * of the addresses the replay adds that no live segment has. (A hash
 * entry for every live allocation took about 100 bytes each: 1.1 GB at
 * 10,000,000 live, 3.6 times the dump.) */
struct live_key {
    uint64_t address;
    int32_t device;
    uint32_t index;          /* in d->live */
};

struct segments {
    struct live_key *k;      /* sorted by device, address, then index */
    size_t n;
    uint8_t *present;        /* a bit per k[]: the replay has it now */
    struct key_set extra;    /* added by the replay, not among k */
};

static int key_cmp(const void *a, const void *b) {
    const struct live_key *x = a, *y = b;
    if (x->device != y->device) return x->device < y->device ? -1 : 1;
    if (x->address != y->address) return x->address < y->address ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* The first position of (device, address) in g->k, or SIZE_MAX. */
static size_t seg_at(const struct segments *g, int device, uint64_t address) {
    size_t lo = 0, hi = g->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const struct live_key *m = &g->k[mid];
        if (m->device < device || (m->device == device && m->address < address)) lo = mid + 1;
        else hi = mid;
    }
    return lo < g->n && g->k[lo].device == device && g->k[lo].address == address ? lo : SIZE_MAX;
}

static int has_bit(const uint8_t *b, size_t i) { return b[i / 8] >> (i % 8) & 1; }

static void set_bit(uint8_t *b, size_t i, int on) {
    if (on) b[i / 8] |= (uint8_t)(1u << (i % 8));
    else b[i / 8] &= (uint8_t)~(1u << (i % 8));
}

/* Whether the replay has the segment (device, address) now. */
static int seg_has(const struct segments *g, int device, uint64_t address) {
    size_t i = seg_at(g, device, address);
    return i != SIZE_MAX ? has_bit(g->present, i) : key_find(&g->extra, device, address) != SIZE_MAX;
}

/* The segment taken out of the replay's set. */
static void seg_take(struct segments *g, int device, uint64_t address) {
    size_t i = seg_at(g, device, address);
    if (i != SIZE_MAX) {
        set_bit(g->present, i, 0);
        return;
    }
    key_del(&g->extra, device, address);
}

/* Free event i's (e's) segment put into the replay's set; 0, 1 when the
 * set of added keys would pass its room, or -1 when out of memory. */
static int seg_put(struct segments *g, size_t i, const struct vm_event *e) {
    size_t at = seg_at(g, e->device, ev_address(g->extra.x, i, e));
    if (at == SIZE_MAX) return key_add(&g->extra, i, e);
    set_bit(g->present, at, 1);
    return 0;
}

/* The replay's set of live segments as it is before the replay: the
 * first of each run of keys. */
static void present_reset(struct segments *g) {
    memset(g->present, 0, g->n / 8 + 1);
    for (size_t i = 0; i < g->n; i++)
        if (i == 0 || g->k[i].device != g->k[i - 1].device || g->k[i].address != g->k[i - 1].address)
            set_bit(g->present, i, 1);
}

/* The replay's set of added keys emptied, of at most max_cap slots. 0, or
 * -1 when out of memory. */
static int extra_reset(struct segments *g, size_t max_cap) {
    const struct vm_dump *d = g->extra.d;
    const struct selection *x = g->extra.x;
    free(g->extra.slot);
    if (!key_set_make(&g->extra, 1024, d, x)) return -1;
    g->extra.max_cap = max_cap;
    return 0;
}

static void segments_free(struct segments *g) {
    free(g->k);
    free(g->present);
    free(g->extra.slot);
}

/* The live segments: one per address and device (a corrupt dump may repeat
 * one: the first in the live list's order is the segment), marked in
 * x->seg_ok. The keys keep the repeats; lookups find the first of a run,
 * whose bit is the segment's. 0, or -1 when out of memory. */
static int segments_of(const struct vm_dump *d, struct selection *x, struct segments *g) {
    if (d->nlive > UINT32_MAX) return -1;
    g->k = malloc((d->nlive ? d->nlive : 1) * sizeof *g->k);
    if (!g->k) return -1;
    for (size_t i = 0; i < d->nlive; i++) {
        uint64_t a = live_address(d, &d->live[i]);
        if (a) g->k[g->n++] = (struct live_key){a, d->live[i].device, (uint32_t)i};
    }
    qsort(g->k, g->n, sizeof *g->k, key_cmp);
    g->present = calloc(g->n / 8 + 1, 1);
    if (!g->present) return -1;
    for (size_t i = 0; i < g->n; i++)
        if (i == 0 || g->k[i].device != g->k[i - 1].device || g->k[i].address != g->k[i - 1].address) {
            set_bit(g->present, i, 1);
            x->seg_ok[g->k[i].index] = 1;
        }
    return 0;
}

/* Event i carries `address` in its trace entries (EV_MAPPED). 0, or -1
 * when out of memory. */
static int place(struct selection *x, size_t i, uint64_t address) {
    if (x->nmapped == x->mapped_cap) {
        size_t cap = x->mapped_cap ? 2 * x->mapped_cap : 64;
        struct ev_mapped *m = realloc(x->mapped, cap * sizeof *m);
        if (!m) return -1;
        x->mapped = m;
        x->mapped_cap = cap;
    }
    x->mapped[x->nmapped++] = (struct ev_mapped){(uint32_t)i, address};
    x->ev[i] = EV_MAPPED;
    return 0;
}

static int by_event(const void *a, const void *b) {
    const struct ev_mapped *x = a, *y = b;
    return x->i < y->i ? -1 : x->i > y->i;
}

/* The life of a handle of (device, handle) in *lives, made when new;
 * NULL when out of memory. */
static struct seg *life_of(struct seg **lives, int device, uint64_t handle) {
    struct seg *h = seg_find(*lives, device, handle);
    return h ? h : seg_add(lives, device, handle);
}

/* Mapping m seen (the events before it are): the address of its handle's
 * current life, when its device's. 0, or -1 when out of memory. */
static int mapping_seen(struct seg **lives, const struct vm_mapping *m) {
    if (m->device < 0) return 0;
    struct seg *h = life_of(lives, m->device, m->handle);
    if (!h) return -1;
    h->mapped = m->address;
    return 0;
}

/* Which events are exported, and at which address (a VMM handle's), in
 * one pass first to last. An event of a device allocation is at its own
 * address. A VMM handle's events (its allocation, cuMemCreate, and the
 * free that ended its memory) are its handle's: each life of a handle,
 * from its allocation to its free, is placed at the address it was last
 * mapped at in that life, found in the dump's history of mappings by
 * their order among the events (a mapping's `event` is the first event
 * after it): the mappings of a handle between its allocation and its free
 * are that life's, so a handle value the driver gave again after a
 * release is a new life with its own mappings. A handle mapped at several
 * addresses is placed at the last, as its live record is; one never
 * mapped is left out. A life still open at the end (the handle is live)
 * with no mapping kept is placed where its live record is mapped (an
 * older dump has no history: its live handles' last lives only). */
static int vmm_lives(const struct vm_dump *d, struct selection *x, struct seg *vmm_live) {
    struct seg *lives = NULL;
    size_t next = 0;   /* the next mapping, in the order made */
    struct vm_ev_cursor c;
    struct vm_event ev, *e = &ev;
    for (vm_ev_from(&c, &d->events, 0); vm_ev_next(&c, e);) {
        size_t i = c.i - 1;
        for (; next < d->nmappings && d->mappings[next].event <= (int64_t)i; next++)
            if (mapping_seen(&lives, &d->mappings[next]) != 0) goto oom;
        if (e->device < 0) continue;
        if (e->type == 'o') { x->ev[i] = EV_OK; continue; }
        const char *kind = vm_event_kind(d, e);
        if (addressed_kind(kind)) {
            if (e->address) x->ev[i] = EV_OWN;
            continue;
        }
        if (strcmp(kind, "vmm") != 0) continue;
        struct seg *h = life_of(&lives, e->device, e->address);
        if (!h) goto oom;
        if (e->type == 'a') {
            h->begun = (int64_t)i;
            h->mapped = 0;
            continue;
        }
        if (h->mapped && (place(x, i, h->mapped) != 0 || (h->begun >= 0 && place(x, (size_t)h->begun, h->mapped) != 0)))
            goto oom;
        h->begun = -1;
        h->mapped = 0;
    }
    for (; next < d->nmappings; next++)
        if (mapping_seen(&lives, &d->mappings[next]) != 0) goto oom;
    for (struct seg *h = lives; h; h = h->hh.next) {
        if (h->begun < 0) continue;
        const struct seg *l = h->mapped ? NULL : seg_find(vmm_live, (int)h->k.device, h->k.address);
        uint64_t address = h->mapped ? h->mapped : l ? l->mapped : 0;
        if (address && place(x, (size_t)h->begun, address) != 0) goto oom;
    }
    seg_clear(&lives);
    if (x->nmapped) qsort(x->mapped, x->nmapped, sizeof *x->mapped, by_event);
    return 0;
oom:
    seg_clear(&lives);
    return -1;
}

/* The replay of the events whose keys are in part `part` of `parts` (a
 * power of two), last to first from the segments: an allocation's segment
 * exists after it, a free's does not. 0, 1 when the set of added keys
 * would pass its room (*at the event that would have passed it), -1 when
 * out of memory. */
static int replay_part(const struct vm_dump *d, struct selection *x, struct segments *g, uint64_t part,
                       uint64_t parts, size_t *at) {
    struct vm_ev_back back;
    struct vm_event ev, *e = &ev;
    for (vm_ev_back_from_end(&back, &d->events); vm_ev_prev(&back, e);) {
        size_t i = back.i;
        if (e->type == 'o' || !(x->ev[i] & (EV_OWN | EV_MAPPED))) continue;
        uint64_t address = ev_address(x, i, e);
        if ((key_hash(e->device, address) >> 32 & (parts - 1)) != part) continue;
        int has = seg_has(g, e->device, address);
        if (e->type == 'a' && has) {
            seg_take(g, e->device, address);
            x->ev[i] |= EV_OK;
        } else if (e->type == 'f' && !has) {
            int rc = seg_put(g, i, e);
            *at = i;
            if (rc != 0) return rc;
            x->ev[i] |= EV_OK;
        }
    }
    return 0;
}

/* The replay, kept within its room. The set of keys a free adds that no
 * live segment has holds, at its largest, every free whose allocation the
 * event ring no longer had: a ring of 1,000,000 frees whose allocations
 * were dropped made it 16 MB at its remaking, 1.6 times the 10 MB dump.
 * So its slots may take a quarter of the packed events' bytes (1 MiB at
 * least); where they would take more, the replay starts again in parts,
 * each a pass over the events for the keys whose hash falls in it: a key's
 * events are all in one part, and nothing of one key's replay depends on
 * another's, so the marks are the same as one pass's. 0, or -1 when out of
 * memory. */
static int replay(const struct vm_dump *d, struct selection *x, struct segments *g) {
    size_t room = d->events.len / 4 > (1u << 20) ? d->events.len / 4 : (1u << 20);
    size_t max_cap = 1024;
    while (max_cap * 2 * (sizeof *g->extra.slot + 1) <= room) max_cap *= 2;
    for (uint64_t parts = 1;;) {
        /* A part of more keys than its room even so (keys whose hashes
         * agree) is let grow. */
        if (parts >= 1024) max_cap = SIZE_MAX;
        int rc = 0;
        size_t at = 0;
        present_reset(g);
        for (uint64_t part = 0; part < parts && rc == 0; part++)
            if ((rc = extra_reset(g, max_cap)) == 0) rc = replay_part(d, x, g, part, parts, &at);
        if (rc <= 0) return rc;
        /* As many more parts as the part's keys, at the rate they came
         * (the events after `at` were read), need for half its room each,
         * at least twice as many. */
        double keys = (double)g->extra.live * (double)d->nevents / (double)(d->nevents - at);
        uint64_t more = 2;
        while (more < 1024 && (double)more * (double)max_cap / 2 < keys) more *= 2;
        parts *= more;
        /* Too many keys in one part: the marks so far are undone. */
        for (size_t i = 0; i < d->nevents; i++)
            if (x->ev[i] & (EV_OWN | EV_MAPPED)) x->ev[i] &= (uint8_t)~EV_OK;
    }
}

static int select_exported(const struct vm_dump *d, struct selection *x) {
    struct seg *vmm_live = NULL;
    struct segments set;
    memset(&set, 0, sizeof set);
    x->seg_ok = calloc(d->nlive ? d->nlive : 1, 1);
    x->ev = calloc(d->nevents ? d->nevents : 1, 1);
    x->mapped = NULL;
    x->nmapped = x->mapped_cap = 0;
    if (!x->seg_ok || !x->ev || d->nevents > UINT32_MAX - 2) goto oom;
    if (segments_of(d, x, &set) != 0) goto oom;
    /* The exported VMM handles by (device, handle): the address each is
     * mapped at (a corrupt dump's repeated handle: the last one's). One
     * pass, so that the events' pass below is linear in handles too. */
    for (size_t j = 0; j < d->nlive; j++) {
        const struct vm_alloc *l = &d->live[j];
        if (!x->seg_ok[j] || strcmp(vm_alloc_kind(d, l), "vmm") != 0) continue;
        uint64_t handle = vm_alloc_handle(d, l);
        struct seg *h = seg_find(vmm_live, l->device, handle);
        if (!h && !(h = seg_add(&vmm_live, l->device, handle))) goto oom;
        h->mapped = l->address;
    }
    if (vmm_lives(d, x, vmm_live) != 0) goto oom;
    set.extra.d = d;
    set.extra.x = x;
    if (replay(d, x, &set) != 0) goto oom;
    segments_free(&set);
    seg_clear(&vmm_live);
    return 0;
oom:
    segments_free(&set);
    seg_clear(&vmm_live);
    selection_free(x);
    return -1;
}

/* One process's events on one device, as trace entries: the n events
 * whose indexes' differences (from 0 for the first) are the varints at
 * list, in order; ooms[0..nooms) every OOM event of the dump, in order,
 * and oom_entry[k] the entry of the k-th (torch_ooms.h). */
static void trace_entries(struct pk *p, const struct vm_dump *d, const struct selection *x, const uint8_t *list,
                          size_t n, const uint32_t *ooms, size_t nooms, const struct vr_torch_oom *oom_entry) {
    size_t i = 0;
    for (size_t j = 0; j < n; j++) {
        uint64_t step;
        list = vm_varint_get(list, &step);
        i += step;
        struct vm_event at = vm_event_at(&d->events, i), *e = &at;
        at.address = ev_address(x, i, &at);
        if (e->type == 'o') {
            size_t k = first_event_from(ooms, nooms, sizeof *ooms, i);
            if (k >= nooms || !oom_entry[k].keep) continue;
            at.bytes = oom_entry[k].size;
            /* memory_viz reads device_free of every oom entry. */
            trace_entry(p, d, "oom", &at, oom_entry[k].device_free >= 0 ? oom_entry[k].device_free : 0, 1);
        } else if (e->type == 'a') {
            trace_entry(p, d, "segment_alloc", &at, -1, 1);
            trace_entry(p, d, "alloc", &at, -1, 0);
        } else {
            trace_entry(p, d, "free_requested", &at, -1, 1);
            trace_entry(p, d, "free_completed", &at, -1, 0);
            trace_entry(p, d, "segment_free", &at, -1, 0);
        }
    }
}

/* The exported events by device 0 .. ndev - 1, each device's in order,
 * found in two passes (a pass over every event per device took seconds
 * for a dump listing thousands of devices): device g's count[g] events are
 * at list + start[g], each index as the varint of its difference from the
 * one before (1 byte an event where devices take turns, where an index
 * each was 4); and every OOM event of the dump, in order, in *ooms_out
 * (*nooms_out of them). 0, or -1 when out of memory. */
struct by_dev {
    size_t *start, *count;
    uint8_t *list;
    uint32_t *ooms;
    size_t nooms;
};

static void by_device_free(struct by_dev *b) {
    free(b->start);
    free(b->count);
    free(b->list);
    free(b->ooms);
}

static int by_device(const struct vm_dump *d, const struct selection *x, int ndev, struct by_dev *b) {
    memset(b, 0, sizeof *b);
    if (d->nevents > UINT32_MAX) return -1;
    size_t *last = calloc((size_t)ndev + 1, sizeof *last), *at = NULL;
    b->start = calloc((size_t)ndev + 2, sizeof *b->start);
    b->count = calloc((size_t)ndev + 1, sizeof *b->count);
    if (!last || !b->start || !b->count) goto oom;
    struct vm_ev_cursor c;
    struct vm_event ev, *e = &ev;
    for (vm_ev_from(&c, &d->events, 0); vm_ev_next(&c, e);) {
        size_t i = c.i - 1;
        b->nooms += e->type == 'o';
        if (!(x->ev[i] & EV_OK) || e->device < 0 || e->device >= ndev) continue;
        b->start[e->device + 1] += vm_varint_len(i - last[e->device]);
        last[e->device] = i;
    }
    for (int g = 1; g <= ndev; g++) b->start[g] += b->start[g - 1];
    b->list = malloc(b->start[ndev] + 1);
    b->ooms = malloc((b->nooms + 1) * sizeof *b->ooms);
    if (!b->list || !b->ooms) goto oom;
    memset(last, 0, ((size_t)ndev + 1) * sizeof *last);
    at = malloc(((size_t)ndev + 1) * sizeof *at); /* where each device's next index goes */
    if (!at) goto oom;
    memcpy(at, b->start, ((size_t)ndev + 1) * sizeof *at);
    b->nooms = 0;
    for (vm_ev_from(&c, &d->events, 0); vm_ev_next(&c, e);) {
        size_t i = c.i - 1;
        if (e->type == 'o') b->ooms[b->nooms++] = (uint32_t)i;
        if (!(x->ev[i] & EV_OK) || e->device < 0 || e->device >= ndev) continue;
        at[e->device] = (size_t)(vm_varint_put(b->list + at[e->device], i - last[e->device]) - b->list);
        last[e->device] = i;
        b->count[e->device]++;
    }
    free(last);
    free(at);
    return 0;
oom:
    free(last);
    free(at);
    by_device_free(b);
    return -1;
}

/* How often the export uses each stack's frame list (it is written at the
 * first use and fetched at the others): a segment uses it twice (its own
 * and its block's), each trace entry an event makes once. */
static uint64_t *stack_uses(const struct vm_dump *d, const struct selection *x) {
    uint64_t *n = calloc(d->nstacks ? d->nstacks : 1, sizeof *n);
    if (!n) return NULL;
    for (size_t i = 0; i < d->nlive; i++)
        if (x->seg_ok[i] && d->live[i].stack < d->nstacks) n[d->live[i].stack] += 2;
    struct vm_ev_cursor c;
    struct vm_event ev, *e = &ev;
    for (vm_ev_from(&c, &d->events, 0); vm_ev_next(&c, e);) {
        size_t i = c.i - 1;
        if ((x->ev[i] & EV_OK) && e->stack < d->nstacks) n[e->stack] += e->type == 'a' ? 2 : e->type == 'f' ? 3 : 1;
    }
    return n;
}

/* A candidate for a low memo index: a stack's frame list (id the stack)
 * or a frame dict (`dict`, id its entry: its place among them), and how
 * often the export would fetch it. */
struct cand {
    uint64_t fetches;
    uint32_t id;
    int dict;
};

/* Whether a is a worse pick than b: fewer fetches, or as many and later
 * (lists before dicts, each in order: the pick, and the pickle, are the
 * same from run to run). */
static int worse(const struct cand *a, const struct cand *b) {
    if (a->fetches != b->fetches) return a->fetches < b->fetches;
    return a->dict != b->dict ? a->dict : a->id > b->id;
}

/* A heap of the NHOT best candidates so far, the worst at its root. */
struct pick {
    struct cand h[NHOT];
    size_t n;
};

static void sift_down(struct pick *k, size_t i) {
    for (;;) {
        size_t w = i, l = 2 * i + 1, r = l + 1;
        if (l < k->n && worse(&k->h[l], &k->h[w])) w = l;
        if (r < k->n && worse(&k->h[r], &k->h[w])) w = r;
        if (w == i) return;
        struct cand t = k->h[i];
        k->h[i] = k->h[w];
        k->h[w] = t;
        i = w;
    }
}

static void offer(struct pick *k, struct cand c) {
    if (c.fetches == 0) return;   /* written once, never fetched: no index needed */
    if (k->n < NHOT) {
        k->h[k->n++] = c;
        if (k->n == NHOT)
            for (size_t i = NHOT / 2; i-- > 0;) sift_down(k, i);
    } else if (worse(&k->h[0], &c)) {
        k->h[0] = c;
        sift_down(k, 0);
    }
}

/* Counts what the export will fetch, before anything is written, and
 * gives the low memo indices (HOT_FIRST .. 255) to the NHOT frame lists
 * and frame dicts fetched most: p->hot_stack per stack, a frame dict's
 * entry's slot (0: none). A list is fetched for each use but its first
 * (stack_uses); a frame dict, call-site frames among them, for each time
 * a written list holds it but the first. Every frame dict's entry is made
 * here, with its count. The rest are numbered from the first index not
 * taken. Out of memory: every index from MEMO_FREE (the pickle is larger,
 * not wrong). */
static void hot_indices(struct pk *p, const struct vm_dump *d, const struct selection *x) {
    if (d->nstacks > UINT32_MAX) return;
    uint64_t *uses = stack_uses(d, x);
    uint8_t *hs = calloc(d->nstacks ? d->nstacks : 1, 1);
    struct pick *k = calloc(1, sizeof *k);
    if (!uses || !hs || !k) {
        free(uses);
        free(hs);
        free(k);
        return;
    }
    for (uint32_t s = 0; s < d->nstacks; s++) {
        if (!uses[s]) continue;
        offer(k, (struct cand){uses[s] - 1, s, 0});
        struct vt_frame f;
        char name[1024];
        uint32_t m;
        if (site_frame_of(d, s, &f, name) == 0 && (m = frame_entry(p, &f, SITE_REF | s)) != NO_ENTRY) p->dict[m].uses++;
        const struct vt_frame *const *fr = vm_stack_frames(d, s);
        for (size_t i = 0; fr && i < d->stacks[s].nframes; i++)
            if ((m = table_frame_entry(p, d, fr[i])) != NO_ENTRY) p->dict[m].uses++;
    }
    /* A dict's entry is its place among them: the ties' order. */
    for (uint32_t m = 0; m < p->frames.n; m++)
        if (p->dict[m].uses) offer(k, (struct cand){p->dict[m].uses - 1, m, 1});
    for (size_t i = 0; i < k->n; i++) {
        uint8_t slot = (uint8_t)(HOT_FIRST + i);
        if (k->h[i].dict) p->dict[k->h[i].id].slot = slot;
        else hs[k->h[i].id] = slot;
    }
    p->memo_next = HOT_FIRST + (uint32_t)k->n;
    free(uses);
    free(k);
    p->hot_stack = hs;
}

/* PyTorch's allocator settings as the dump's PyTorch record gives them
 * (its `settings`: the exit or on-demand record's, else the last OOM's
 * that has them), NULL where none does. */
static const char *torch_settings(const struct vm_dump *d) {
    for (size_t i = 0; d->torch && i < d->torch->ndevices; i++)
        if (d->torch->devices[i].settings) return d->torch->devices[i].settings;
    for (size_t k = d->nooms; k-- > 0;)
        for (size_t i = 0; d->ooms[k].torch && i < d->ooms[k].torch->ndevices; i++)
            if (d->ooms[k].torch->devices[i].settings) return d->ooms[k].torch->devices[i].settings;
    return NULL;
}

/* One setting's value as _snapshot()'s allocator_settings has it: True
 * and False as booleans, a whole number as an integer, anything else
 * (a fraction, a list) as its text. */
static void setting_value(struct pk *p, const char *v, size_t n) {
    char text[256];
    snprintf(text, sizeof text, "%.*s", (int)(n < sizeof text ? n : sizeof text - 1), v);
    char *end;
    long long x = n && n < 20 ? strtoll(text, &end, 10) : 0;
    if (strcmp(text, "True") == 0 || strcmp(text, "False") == 0) pk_bool(p, text[0] == 'T');
    else if (n && n < 20 && *end == '\0' && (text[0] == '-' || (text[0] >= '0' && text[0] <= '9'))) pk_int(p, x);
    else pk_display(p, text);
}

/* The snapshot's allocator_settings: {"source": "vramtrace"} and each
 * `name:value` of PyTorch's settings text (commas within brackets, a
 * list's, are the value's; the companion keeps 200 characters of the
 * text, so at 200 its last item, maybe cut, is left out). */
static void allocator_settings(struct pk *p, const struct vm_dump *d) {
    const char *s = torch_settings(d);
    dict_begin(p);
    kv_str(p, "source", "vramtrace");
    size_t chars = 0;
    for (const char *c = s; c && *c; c++) chars += ((unsigned char)*c & 0xc0) != 0x80;
    while (s && *s) {
        const char *at = s;
        int depth = 0;
        for (; *at && (*at != ',' || depth > 0); at++) depth += *at == '[' || *at == '{' ? 1 : *at == ']' || *at == '}' ? -1 : 0;
        if (!*at && chars >= 200) break;
        const char *colon = memchr(s, ':', (size_t)(at - s));
        if (colon && colon > s && (size_t)(colon - s) < 128) {
            char name[128];
            snprintf(name, sizeof name, "%.*s", (int)(colon - s), s);
            if (strcmp(name, "source") != 0) {
                pk_display(p, name);
                setting_value(p, colon + 1, (size_t)(at - colon - 1));
            }
        }
        s = *at ? at + 1 : at;
    }
    dict_end(p);
}

static void pk_free(struct pk *p) {
    vr_refset_free(&p->frames);
    vr_refset_free(&p->strings);
    free(p->dict);
    free(p->string_memo);
}

int vr_torch(FILE *f, const struct vr_input *in, const struct vr_opts *o, char *err, size_t errsize) {
    (void)o;
    if (in->n != 1) {
        snprintf(err, errsize, "--format torch takes one dump (a snapshot is one process)");
        return -1;
    }
    const struct vm_dump *d = &in->dumps[0];
    struct selection x;
    if (select_exported(d, &x) != 0) { snprintf(err, errsize, "out of memory"); return -1; }
    /* Frames are memoized: a stack's list is written once. */
    uint32_t *memo = malloc((d->nstacks ? d->nstacks : 1) * sizeof *memo);
    if (!memo) {
        selection_free(&x);
        snprintf(err, errsize, "out of memory");
        return -1;
    }
    for (size_t j = 0; j < d->nstacks; j++) memo[j] = NO_MEMO;
    uint32_t *frame_entry = malloc((d->nframes ? d->nframes : 1) * sizeof *frame_entry);
    if (frame_entry) memset(frame_entry, 0xff, d->nframes * sizeof *frame_entry);
    struct pk p = {.f = f, .d = d, .memo_next = MEMO_FREE, .stack_memo = memo, .frame_entry = frame_entry};
    vr_refset_init(&p.frames, remake_frame_key, &p, FRAME_KEY_MAX - 1);
    vr_refset_init(&p.strings, remake_string, &p, 2 * VM_NAME_MAX);
    hot_indices(&p, d, &x);
    int ndev = 0;
    for (size_t j = 0; j < d->ndevices; j++)
        if (d->devices[j].ordinal + 1 > ndev) ndev = d->devices[j].ordinal + 1;
    struct vm_ev_cursor c;
    struct vm_event e;
    for (vm_ev_from(&c, &d->events, 0); vm_ev_next(&c, &e);)
        if ((x.ev[c.i - 1] & EV_OK) && e.device + 1 > ndev) ndev = e.device + 1;
    for (size_t j = 0; j < d->nlive; j++)
        if (x.seg_ok[j] && d->live[j].device + 1 > ndev) ndev = d->live[j].device + 1;
    op(&p, 0x80); /* PROTO 2 */
    op(&p, 2);
    dict_begin(&p);
    pk_str(&p, "segments");
    list_begin(&p);
    for (size_t j = 0; j < d->nlive; j++)
        if (x.seg_ok[j]) segment(&p, d, &d->live[j]);
    list_end(&p);
    pk_str(&p, "device_traces");
    struct by_dev b;
    int have_b = by_device(d, &x, ndev, &b) == 0;
    struct vr_torch_oom *oom_entry = have_b ? vr_torch_ooms(d, b.ooms, b.nooms) : NULL;
    if (!oom_entry) {
        if (have_b) by_device_free(&b);
        pk_free(&p);
        free(frame_entry);
        free(p.hot_stack);
        free(memo);
        selection_free(&x);
        snprintf(err, errsize, "out of memory");
        return -1;
    }
    list_begin(&p);
    for (int dev = 0; dev < ndev; dev++) {
        list_begin(&p);
        trace_entries(&p, d, &x, b.list + b.start[dev], b.count[dev], b.ooms, b.nooms, oom_entry);
        list_end(&p);
    }
    list_end(&p);
    free(oom_entry);
    by_device_free(&b);
    pk_str(&p, "allocator_settings");
    allocator_settings(&p, d);
    dict_end(&p);
    op(&p, '.'); /* STOP */
    pk_free(&p);
    free(frame_entry);
    free(p.hot_stack);
    free(memo);
    selection_free(&x);
    return ferror(f) ? -1 : 0;
}
