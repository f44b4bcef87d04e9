/* pystack.c -- reading CPython frames from a CUDA hook. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../common/format.h"
#include "../common/frame.h"
#include "../common/warn.h"
#include "pylayout.h"
#include "pystack.h"
#include "stack.h"

#define MAX_PY_FRAMES VT_PY_MAX_FRAMES
#define NAME_MAX_BYTES 1024   /* a name's bytes kept, as the reports keep one (cut ones end in "...") */

/* struct _gil_runtime_state, the same from 3.10 to 3.12. */
#define GIL_FIELDS .gil_holder = 8, .gil_locked = 16

static const struct vt_pylayout py310 = {
    .minor = 10, .interp_threads = 8, .gil_runtime = 352, .gil_interp = -1, .gil_embedded = -1, .ts_frame = 24, .ts_cframe = -1, .cf_current = -1,
    .fr_code = 32, .fr_previous = 24, .fr_instr = -1, .fr_owner = -1, .fr_is_entry = -1,
    .fr_lasti = 96, .owner_cstack = -1,
    .co_filename = 104, .co_name = 112, .co_qualname = -1, .co_firstlineno = 40,
    .co_linetable = 120, .co_code_adaptive = -1,
    .str_state = 32, .str_length = 16, .str_ascii_size = 48, .str_compact_size = 72,
    .bytes_size = 16, .bytes_sval = 32, .ob_type = 8,
    .ts_next = 8, GIL_FIELDS
};

static const struct vt_pylayout py311 = {
    .minor = 11, .interp_threads = 16, .gil_runtime = 360, .gil_interp = -1, .gil_embedded = -1, .ts_frame = -1, .ts_cframe = 56, .cf_current = 8,
    .fr_code = 32, .fr_previous = 48, .fr_instr = 56, .fr_owner = 69, .fr_is_entry = 68,
    .fr_lasti = -1, .owner_cstack = -1,
    .co_filename = 112, .co_name = 120, .co_qualname = 128, .co_firstlineno = 72,
    .co_linetable = 136, .co_code_adaptive = 184,
    .str_state = 32, .str_length = 16, .str_ascii_size = 48, .str_compact_size = 72,
    .bytes_size = 16, .bytes_sval = 32, .ob_type = 8,
    .ts_next = 8, GIL_FIELDS
};

static const struct vt_pylayout py312 = {
    .minor = 12, .interp_threads = 72, .gil_runtime = -1, .gil_interp = 384, .gil_embedded = -1, .ts_frame = -1, .ts_cframe = 56, .cf_current = 0,
    .fr_code = 0, .fr_previous = 8, .fr_instr = 56, .fr_owner = 70, .fr_is_entry = -1,
    .fr_lasti = -1, .owner_cstack = 3,
    .co_filename = 112, .co_name = 120, .co_qualname = 128, .co_firstlineno = 68,
    .co_linetable = 136, .co_code_adaptive = 192,
    .str_state = 32, .str_length = 16, .str_ascii_size = 40, .str_compact_size = 56,
    .bytes_size = 16, .bytes_sval = 32, .ob_type = 8,
    .ts_next = 8, GIL_FIELDS
};

struct vt_pylayout vt_pyl;
#define L vt_pyl
static int enabled;            /* 1 once the layout and symbols are checked */
static int tried;
static unsigned long version_hex;

static void *(*get_tstate)(void);
static int (*is_initialized)(void);
static int (*is_finalizing)(void);
static int (*addr2line)(void *, int);
void *vt_py_code_type;
void *vt_py_none;
#define code_type vt_py_code_type
#define none_object vt_py_none
static uintptr_t eval_lo, eval_hi;

#define RD(T, base, off) (*(T *)((char *)(base) + (off)))

/* Python frames are off for the process: say why, through the capped
 * warning. */
static void warn_once(const char *why) { vt_warn("no Python frames: %s; stacks stay native", why); }

/* ------------------------------------------------------- interning */

/* Functions are interned by what they are, not by their code object: a
 * program that compiles the same source again and again (exec and eval in
 * a loop, generated code) makes a new code object each time, often at an
 * address an earlier one had, and interning code objects filled a table
 * of 65,536 with one function, after which every Python frame of every new
 * stack was lost without a word. A function's identity is its file, name,
 * first line and line table (hashed: two functions that agree on all four
 * have the same lines at the same offsets); its id (a frame value's) is
 * never reused, up to CODE_IDS. A cache from code objects to ids answers
 * the usual frame; it is a cache, its entries overwritten, each read
 * checked by its sequence number (written by one thread at a time, read by
 * any without a lock). */
#define CODE_IDS (1u << 20)
#define CODE_CACHE (1u << 16)
#define CACHE_PROBES 8
#define IDENT_SLOTS (1u << 21)
#define LINE_SLOTS (1u << 18)
#define ARENA_BYTES (256u << 20)
/* Line tables larger than this are read in part from another thread (a
 * line beyond it reads 0), and hashed in part for a function's identity. */
#define SAFE_TABLE_BYTES 16384

struct code_slot {   /* a function, by id */
    int ready;            /* names below are set */
    int in_torch;         /* its file is PyTorch's (a "/torch/" folder) or the
                           * companion's (a "/vramtrace_torch/" folder) */
    const char *qualname, *filename;
};

struct code_cache {  /* a code object's id, as last seen */
    uint32_t seq;         /* odd while written */
    uint32_t id;
    uintptr_t code, filename_obj, name_obj;
    uint64_t tails;       /* tails() of its strings and line table */
    int firstlineno;
};

struct ident_slot {  /* a function's identity (hash, never 0) and id + 1 */
    uint64_t ident;
    uint32_t id1;
};

static struct code_slot *codes;     /* CODE_IDS, mapped on first use */
static struct code_cache *cache_of_codes; /* CODE_CACHE */
static struct ident_slot *idents;   /* IDENT_SLOTS */
static uint32_t next_id = 1;        /* id 0: a function there was no room for */
static uint64_t *lines;             /* LINE_SLOTS */
static char *arena;
static size_t arena_used;

static void *map_table(size_t bytes) {
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static int map_tables(void) {
    codes = map_table(CODE_IDS * sizeof *codes);
    cache_of_codes = map_table(CODE_CACHE * sizeof *cache_of_codes);
    idents = map_table(IDENT_SLOTS * sizeof *idents);
    lines = map_table(LINE_SLOTS * sizeof *lines);
    arena = map_table(ARENA_BYTES);
    if (!codes || !cache_of_codes || !idents || !lines || !arena) return -1;
    codes[0] = (struct code_slot){1, 0, "(a function past vramtrace's table)", "?"};
    return 0;
}

/* Room for n bytes in the names arena, or NULL when it is full. */
static char *arena_take(size_t n) {
    size_t at = __atomic_fetch_add(&arena_used, n, __ATOMIC_RELAXED);
    return at + n <= ARENA_BYTES ? arena + at : NULL;
}

/* Code point c as UTF-8. A lone surrogate U+DC80..U+DCFF is how Python
 * holds a byte that is not UTF-8 in a file name (surrogateescape): the
 * byte itself goes out, as the path has it, for the dump's writer to
 * escape (\xNN) like any native path's; any other surrogate, or a code
 * point past U+10FFFF, is U+FFFD. */
static void utf8_put(char *out, size_t *k, size_t cap, uint32_t c) {
    char b[4];
    size_t n;
    if (c >= 0xdc80 && c <= 0xdcff) { b[0] = (char)(c - 0xdc00); n = 1; }
    else if ((c >= 0xd800 && c <= 0xdfff) || c > 0x10ffff) {
        b[0] = (char)0xef; b[1] = (char)0xbf; b[2] = (char)0xbd; n = 3;
    }
    else if (c < 0x80) { b[0] = (char)c; n = 1; }
    else if (c < 0x800) { b[0] = (char)(0xc0 | (c >> 6)); b[1] = (char)(0x80 | (c & 0x3f)); n = 2; }
    else if (c < 0x10000) {
        b[0] = (char)(0xe0 | (c >> 12)); b[1] = (char)(0x80 | ((c >> 6) & 0x3f));
        b[2] = (char)(0x80 | (c & 0x3f)); n = 3;
    } else {
        b[0] = (char)(0xf0 | (c >> 18)); b[1] = (char)(0x80 | ((c >> 12) & 0x3f));
        b[2] = (char)(0x80 | ((c >> 6) & 0x3f)); b[3] = (char)(0x80 | (c & 0x3f)); n = 4;
    }
    if (*k + n >= cap) return;
    memcpy(out + *k, b, n);
    *k += n;
}

/* A str object as UTF-8 into out (cap bytes; returns the length, 0 when
 * it is not a compact string: all code-object names are). With `safe` the
 * header and the characters are read through vt_py_peek, else directly. */
static size_t str_utf8(const void *s, char *out, size_t cap, int safe) {
    size_t k = 0;
    if (!s || cap < 5) return 0;
    char hdr[128];
    const char *h = s;
    if (safe) {
        if ((size_t)L.str_compact_size > sizeof hdr) return 0;
        if (vt_py_peek(s, hdr, (size_t)L.str_ascii_size) != 0) return 0;
        h = hdr;
    }
    uint32_t state = RD(uint32_t, h, L.str_state);
    int64_t len = RD(int64_t, h, L.str_length);
    int kind = (state >> 2) & 7, compact = (state >> 5) & 1, ascii = (state >> 6) & 1;
    if (!compact || len < 0 || (kind != 1 && kind != 2 && kind != 4)) return 0;
    const char *data = (const char *)s + (ascii ? L.str_ascii_size : L.str_compact_size);
    uint8_t copy[NAME_MAX_BYTES * 4];
    if (safe) {
        int64_t n = len < NAME_MAX_BYTES ? len : NAME_MAX_BYTES;
        if (vt_py_peek(data, copy, (size_t)(n * kind)) != 0) return 0;
        data = (const char *)copy;
        len = n;
    }
    for (int64_t i = 0; i < len && k + 5 < cap; i++) {
        uint32_t c = kind == 1 ? ((const uint8_t *)data)[i]
                   : kind == 2 ? ((const uint16_t *)data)[i] : ((const uint32_t *)data)[i];
        utf8_put(out, &k, cap, c);
    }
    return k;
}

int vt_py_str_peek(const void *s, char *buf, size_t size) {
    if (size == 0) return -1;
    size_t k = str_utf8(s, buf, size, 1);
    buf[k < size ? k : size - 1] = '\0';
    return k ? (int)k : -1;
}

static uint32_t hash_ptr(uintptr_t p) {
    uint64_t x = (uint64_t)p * 0x9e3779b97f4a7c15ull;
    return (uint32_t)(x >> 40);
}

/* The length and last 8 bytes of a str (is_str) or bytes object, mixed;
 * 0 when unreadable. */
static uint64_t tail(const void *o, int is_str, int safe) {
    if (!o) return 0;
    char hdr[128];
    const char *h = o;
    size_t need = (size_t)(is_str ? L.str_ascii_size : L.bytes_sval);
    if (safe) {
        if (need > sizeof hdr || vt_py_peek(o, hdr, need) != 0) return 0;
        h = hdr;
    }
    int64_t len;
    const char *data;
    if (is_str) {
        uint32_t state = RD(uint32_t, h, L.str_state);
        int kind = (state >> 2) & 7, ascii = (state >> 6) & 1;
        len = RD(int64_t, h, L.str_length) * kind;
        data = (const char *)o + (ascii ? L.str_ascii_size : L.str_compact_size);
    } else {
        len = RD(int64_t, h, L.bytes_size);
        data = (const char *)o + L.bytes_sval;
    }
    if (len < 0 || len > (1 << 30)) return 0;
    uint64_t last = 0;
    size_t n = len < 8 ? (size_t)len : 8;
    if (safe ? vt_py_peek(data + len - (int64_t)n, &last, n) != 0 : (memcpy(&last, data + len - (int64_t)n, n), 0))
        return 0;
    return (last ^ (uint64_t)len * 0x9e3779b97f4a7c15ull) * 0xff51afd7ed558ccdull;
}

/* What tells two code objects at one address apart when their strings are
 * at one address too: CPython's allocator hands the last freed block out
 * first, so a function compiled again from another file (an exec loop)
 * got the old code object's, file name's and name's addresses, and passed
 * for it ("generated_0.py" for "generated_4.py"). Their file names (whose
 * tails hold the file's own name), names and line tables, in part. */
static uint64_t tails(const void *hdr, uintptr_t fobj, uintptr_t nobj, int safe) {
    uint64_t t = tail((const void *)fobj, 1, safe);
    t = t * 31 + tail((const void *)nobj, 1, safe);
    return t * 31 + tail(RD(const void *, hdr, L.co_linetable), 0, safe);
}

/* The id of code object `code` in the cache, or -1 (code, filename,
 * name, first line and their tails the code object's now). */
static int cached_id(uintptr_t c, uintptr_t fobj, uintptr_t nobj, int first, uint64_t t, uint32_t h) {
    for (uint32_t i = 0; i < CACHE_PROBES; i++) {
        struct code_cache *e = &cache_of_codes[(h + i) & (CODE_CACHE - 1)];
        uint32_t seq = __atomic_load_n(&e->seq, __ATOMIC_ACQUIRE);
        if (seq & 1) continue;
        /* Acquire loads: none moves after the sequence's second read
         * (no fence: ThreadSanitizer does not model one). */
        if (__atomic_load_n(&e->code, __ATOMIC_ACQUIRE) != c) continue;
        uint32_t id = __atomic_load_n(&e->id, __ATOMIC_ACQUIRE);
        int same = __atomic_load_n(&e->filename_obj, __ATOMIC_ACQUIRE) == fobj &&
                   __atomic_load_n(&e->name_obj, __ATOMIC_ACQUIRE) == nobj &&
                   __atomic_load_n(&e->firstlineno, __ATOMIC_ACQUIRE) == first &&
                   __atomic_load_n(&e->tails, __ATOMIC_ACQUIRE) == t;
        if (__atomic_load_n(&e->seq, __ATOMIC_RELAXED) == seq && same) return (int)id;
    }
    return -1;
}

/* Code object c is function `id` now: into the cache, in an empty entry
 * of its probes or over the first (a writer of the same entry at once
 * leaves it to the other). */
static void cache_put(uintptr_t c, uintptr_t fobj, uintptr_t nobj, int first, uint64_t t, uint32_t h, uint32_t id) {
    struct code_cache *e = &cache_of_codes[h & (CODE_CACHE - 1)];
    for (uint32_t i = 0; i < CACHE_PROBES; i++) {
        struct code_cache *x = &cache_of_codes[(h + i) & (CODE_CACHE - 1)];
        if (__atomic_load_n(&x->code, __ATOMIC_RELAXED) == 0) { e = x; break; }
    }
    uint32_t seq = __atomic_load_n(&e->seq, __ATOMIC_RELAXED);
    if ((seq & 1) || !__atomic_compare_exchange_n(&e->seq, &seq, seq + 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
        return;
    /* Release stores: none moves before the odd sequence. */
    __atomic_store_n(&e->code, c, __ATOMIC_RELEASE);
    __atomic_store_n(&e->id, id, __ATOMIC_RELEASE);
    __atomic_store_n(&e->filename_obj, fobj, __ATOMIC_RELEASE);
    __atomic_store_n(&e->name_obj, nobj, __ATOMIC_RELEASE);
    __atomic_store_n(&e->firstlineno, first, __ATOMIC_RELEASE);
    __atomic_store_n(&e->tails, t, __ATOMIC_RELEASE);
    __atomic_store_n(&e->seq, seq + 2, __ATOMIC_RELEASE);
}

/* Code object c is being freed: out of the cache, so that a code object
 * made at its address later is never taken for it. A writer of the same
 * entry at that moment (a reader of another thread's frames, which holds
 * no reference to what it reads) is waited for; one that puts c back
 * after this is left to the tails' check. */
static void cache_forget(uintptr_t c) {
    uint32_t h = hash_ptr(c);
    for (uint32_t i = 0; i < CACHE_PROBES; i++) {
        struct code_cache *e = &cache_of_codes[(h + i) & (CODE_CACHE - 1)];
        for (;;) {
            uint32_t seq = __atomic_load_n(&e->seq, __ATOMIC_ACQUIRE);
            if (seq & 1) {
                sched_yield();
                continue;
            }
            if (__atomic_load_n(&e->code, __ATOMIC_ACQUIRE) != c) break;
            if (!__atomic_compare_exchange_n(&e->seq, &seq, seq + 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) continue;
            __atomic_store_n(&e->code, 0, __ATOMIC_RELEASE);
            __atomic_store_n(&e->seq, seq + 2, __ATOMIC_RELEASE);
            break;
        }
    }
}

/* Code objects freed so far. Every memo of a frame (frame, code object,
 * instruction: a thread's frame memo, its last stack's trail) holds only
 * while no code object has been freed since it was made: CPython's
 * allocator hands the last freed block out first, so an exec loop, an
 * IPython cell after cell, made each new code object at the address of the
 * one just freed, ran it from a frame at the same address and at the same
 * instruction, and every cell's allocations were the first cell's file
 * and line. Counted by a wrapper of PyCode_Type's tp_dealloc, which CPython
 * calls for every code object it frees (3.10 to 3.13; deep-frozen code is
 * never freed), before the real one frees it. */
static uint64_t codes_freed;
static void (*code_dealloc)(void *);

static void code_dealloc_counted(void *o) {
    cache_forget((uintptr_t)o);
    __atomic_add_fetch(&codes_freed, 1, __ATOMIC_RELEASE);
    code_dealloc(o);
}

/* PyTypeObject's tp_name and tp_dealloc: after PyObject_VAR_HEAD (the
 * builds this file reads: not debug, not free-threaded), tp_name, then
 * tp_basicsize and tp_itemsize. */
#define TP_NAME 24
#define TP_DEALLOC 48

/* Counts code objects freed from now on: 0, or -1 when PyCode_Type does
 * not look as expected (its name "code", a deallocator set). */
static int count_code_frees(void) {
    const char *name = RD(const char *, code_type, TP_NAME);
    void (**slot)(void *) = (void (**)(void *))((char *)code_type + TP_DEALLOC);
    void (*was)(void *) = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (!name || strcmp(name, "code") != 0 || !was) return -1;
    if (was == code_dealloc_counted) return 0;
    code_dealloc = was;
    __atomic_store_n(slot, code_dealloc_counted, __ATOMIC_RELEASE);
    return 0;
}

/* FNV-1a over n bytes, from h. */
static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* The bytes of a code object's line table (fields read from hdr), up to
 * cap, into buf; their number (0: none or unreadable). */
static size_t line_table(const void *hdr, uint8_t *buf, size_t cap, int safe) {
    const void *tab = RD(const void *, hdr, L.co_linetable);
    if (!tab) return 0;
    int64_t size;
    const uint8_t *data = (const uint8_t *)tab + L.bytes_sval;
    if (safe) {
        if (vt_py_peek((const char *)tab + L.bytes_size, &size, sizeof size) != 0 || size <= 0) return 0;
        if ((size_t)size > cap) size = (int64_t)cap;
        return vt_py_peek(data, buf, (size_t)size) == 0 ? (size_t)size : 0;
    }
    size = RD(int64_t, tab, L.bytes_size);
    if (size <= 0) return 0;
    if ((size_t)size > cap) size = (int64_t)cap;
    memcpy(buf, data, (size_t)size);
    return (size_t)size;
}

/* Name, file and first line of a code object (fields read from hdr), and
 * its line table: the function's identity, never 0. */
static uint64_t identity(const void *hdr, uintptr_t fobj, uintptr_t nobj, int first, int safe,
                         char *name, char *file, size_t cap) {
    uint8_t tab[SAFE_TABLE_BYTES];
    size_t nn = str_utf8((const void *)nobj, name, cap, safe), nf = str_utf8((const void *)fobj, file, cap, safe);
    name[nn] = file[nf] = '\0';
    uint64_t h = 0xcbf29ce484222325ull;
    h = fnv(h, name, nn + 1);
    h = fnv(h, file, nf + 1);
    h = fnv(h, &first, sizeof first);
    h = fnv(h, tab, line_table(hdr, tab, sizeof tab, safe));
    return h ? h : 1;
}

/* A copy of text in the arena, cut by the reports' rule; "?" when it is
 * empty or the arena full. */
static const char *arena_copy(char *text) {
    size_t k = strlen(vt_clamp_name(text, NAME_MAX_BYTES));
    if (k == 0) return "?";
    char *out = arena_take(k + 1);
    if (!out) return "?";
    memcpy(out, text, k);
    out[k] = '\0';
    return out;
}

/* The id of the function with identity `ident`, interning it (names
 * copied once) when new: 0 when the table has no room, -1 when another
 * thread interning it did not finish (a fork's child of a thread that was
 * at it). */
static int ident_id(uint64_t ident, char *name, char *file) {
    uint32_t h = (uint32_t)(ident >> 32) ^ (uint32_t)ident;
    for (uint32_t i = 0; i < 64; i++) {
        struct ident_slot *x = &idents[(h + i) & (IDENT_SLOTS - 1)];
        uint64_t cur = __atomic_load_n(&x->ident, __ATOMIC_ACQUIRE);
        if (cur == 0) {
            uint64_t expected = 0;
            if (!__atomic_compare_exchange_n(&x->ident, &expected, ident, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
                if (expected != ident) continue;
                cur = ident;
            } else {
                uint32_t id = __atomic_fetch_add(&next_id, 1, __ATOMIC_RELAXED);
                if (id >= CODE_IDS) {
                    static int warned;
                    if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
                        vt_warn("Python frames: more than %u distinct functions; frames of later ones are named "
                                "\"(a function past vramtrace's table)\"", CODE_IDS - 1);
                    id = 0;
                } else {
                    struct code_slot *s = &codes[id];
                    s->qualname = arena_copy(name);
                    s->filename = arena_copy(file);
                    s->in_torch = strstr(s->filename, "/torch/") != NULL ||
                                  strstr(s->filename, "/vramtrace_torch/") != NULL;
                    __atomic_store_n(&s->ready, 1, __ATOMIC_RELEASE);
                }
                __atomic_store_n(&x->id1, id + 1, __ATOMIC_RELEASE);
                return (int)id;
            }
        }
        if (cur != ident) continue;
        /* Another thread is copying its names: a few microseconds. */
        uint32_t id1 = 0;
        for (int k = 0; k < 2000 && !(id1 = __atomic_load_n(&x->id1, __ATOMIC_ACQUIRE)); k++)
            if (k >= 100) sched_yield();
        return id1 ? (int)(id1 - 1) : -1;
    }
    return 0;
}

/* The id of code object `code`, whose fields are read from `hdr` (the
 * object itself, or a copy of its first bytes): from the cache, else by
 * its identity (a freed code object whose address comes back for another
 * function is told apart by its filename, name and first line objects).
 * -1 when not known now. */
static int code_id(const void *code, const void *hdr, int safe) {
    uintptr_t c = (uintptr_t)code;
    uintptr_t fobj = RD(uintptr_t, hdr, L.co_filename);
    uintptr_t nobj = RD(uintptr_t, hdr, L.co_qualname >= 0 ? L.co_qualname : L.co_name);
    int first = RD(int, hdr, L.co_firstlineno);
    uint32_t h = hash_ptr(c);
    uint64_t t = tails(hdr, fobj, nobj, safe);
    int id = cached_id(c, fobj, nobj, first, t, h);
    if (id >= 0) return id;
    char name[NAME_MAX_BYTES + 8], file[NAME_MAX_BYTES + 8];
    id = ident_id(identity(hdr, fobj, nobj, first, safe, name, file, sizeof name), name, file);
    if (id >= 0) cache_put(c, fobj, nobj, first, t, h, (uint32_t)id);
    return id;
}


/* The line of a code object (fields read from hdr) at byte offset off,
 * decoded from its table; with `safe`, the table is read through
 * vt_py_peek. */
static int line_decode(const void *code, const void *hdr, int off, int safe) {
    if (L.minor == 10 && !safe) return addr2line((void *)code, off);
    const void *tab = RD(const void *, hdr, L.co_linetable);
    if (!tab) return 0;
    int64_t size;
    const uint8_t *data = (const uint8_t *)tab + L.bytes_sval;
    uint8_t copy[SAFE_TABLE_BYTES];
    if (safe) {
        if (vt_py_peek((const char *)tab + L.bytes_size, &size, sizeof size) != 0 || size <= 0) return 0;
        if (size > SAFE_TABLE_BYTES) size = SAFE_TABLE_BYTES;
        if (vt_py_peek(data, copy, (size_t)size) != 0) return 0;
        data = copy;
    } else {
        size = RD(int64_t, tab, L.bytes_size);
    }
    int first = RD(int, hdr, L.co_firstlineno);
    return L.minor == 10 ? vt_py_line_from_310(data, size, first, off) : vt_py_line_from_table(data, size, first, off / 2);
}

/* The line of a frame at byte offset `off`, through the line cache. */
static int line_of(int id, const void *code, const void *hdr, int off, int safe) {
    unsigned unit = (unsigned)off / 2;
    uint64_t key = 0;
    uint32_t h = 0;
    if (id >= 0 && id < (1 << 20) && unit < (1u << 20)) {
        key = ((uint64_t)(id + 1) << 20 | unit) << 24;
        h = hash_ptr((uintptr_t)key);
        for (uint32_t i = 0; i < 8; i++) {
            uint64_t v = __atomic_load_n(&lines[(h + i) & (LINE_SLOTS - 1)], __ATOMIC_ACQUIRE);
            if (v == 0) break;
            if ((v & ~0xffffffull) == key) return (int)(v & 0xffffff);
        }
    }
    int line = line_decode(code, hdr, off, safe);
    if (line < 0) line = 0;
    if (key && line < (1 << 24)) {
        for (uint32_t i = 0; i < 8; i++) {
            uint64_t expected = 0;
            if (__atomic_compare_exchange_n(&lines[(h + i) & (LINE_SLOTS - 1)], &expected,
                                            key | (uint64_t)line, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
                break;
            if ((expected & ~0xffffffull) == key) break;
        }
    }
    return line;
}

/* The bytes of a code object vt_py_code_value reads: every field above. */
static size_t code_header_bytes(void) {
    int m = L.ob_type;
    int f[] = {L.co_filename, L.co_name, L.co_qualname, L.co_firstlineno, L.co_linetable};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (f[i] > m) m = f[i];
    return (size_t)m + 8;
}

uintptr_t vt_py_code_value(const void *code, uintptr_t ip, int safe) {
    char copy[512];
    const void *hdr = code;
    if (safe) {
        size_t n = code_header_bytes();
        if (n > sizeof copy || vt_py_peek(code, copy, n) != 0) return 0;
        hdr = copy;
    }
    if (RD(void *, hdr, L.ob_type) != code_type) return 0;
    int off;
    if (L.minor == 10) {
        off = (int)ip * 2;
    } else {
        uintptr_t start = (uintptr_t)code + (uintptr_t)L.co_code_adaptive;
        off = ip >= start && ip - start < (1u << 30) ? (int)(ip - start) : 0;
    }
    int id = code_id(code, hdr, safe);
    if (id < 0) return 0;
    int line = line_of(id, code, hdr, off, safe);
    return VT_PYFRAME_TAG | ((uintptr_t)id << 24) | ((uintptr_t)line & 0xffffff);
}

/* ---------------------------------------------------------- set up */

static int layout_313(void *(*lookup)(const char *)) {
    const struct py313_debug_offsets *o = lookup("_PyRuntime");
    if (!o || memcmp(o->cookie, "xdebugpy", 8) != 0) return -1;
    if ((o->version >> 16) != 0x030d) return -1;
    if (o->free_threaded) { warn_once("free-threaded CPython is not supported"); return -2; }
    if (o->thread_state.size == 0 || o->thread_state.current_frame >= o->thread_state.size ||
        o->interpreter_frame.owner >= o->interpreter_frame.size ||
        o->code_object.co_code_adaptive >= o->code_object.size)
        return -1;
    L = (struct vt_pylayout){
        .minor = 13, .ts_frame = (int)o->thread_state.current_frame, .ts_cframe = -1, .cf_current = -1,
        .fr_code = (int)o->interpreter_frame.executable, .fr_previous = (int)o->interpreter_frame.previous,
        .fr_instr = (int)o->interpreter_frame.instr_ptr, .fr_owner = (int)o->interpreter_frame.owner,
        .fr_is_entry = -1, .fr_lasti = -1, .owner_cstack = 3,
        .co_filename = (int)o->code_object.filename, .co_name = (int)o->code_object.name,
        .co_qualname = (int)o->code_object.qualname, .co_firstlineno = (int)o->code_object.firstlineno,
        .co_linetable = (int)o->code_object.linetable, .co_code_adaptive = (int)o->code_object.co_code_adaptive,
        .str_state = (int)o->unicode_object.state, .str_length = (int)o->unicode_object.length,
        .str_ascii_size = (int)o->unicode_object.asciiobject_size,
        .str_compact_size = (int)o->unicode_object.asciiobject_size + 16,
        .bytes_size = (int)o->bytes_object.ob_size, .bytes_sval = (int)o->bytes_object.ob_sval,
        .ob_type = (int)o->pyobject.ob_type,
        /* 3.13's GIL offsets are the interpreter's: its own _gil's fields. */
        .ts_next = (int)o->thread_state.next, .interp_threads = (int)o->interpreter_state.threads_head,
        .gil_runtime = -1, .gil_interp = -1,
        .gil_embedded = (int)o->interpreter_state.gil_runtime_state,
        .gil_holder = (int)(o->interpreter_state.gil_runtime_state_holder - o->interpreter_state.gil_runtime_state),
        .gil_locked = (int)(o->interpreter_state.gil_runtime_state_locked - o->interpreter_state.gil_runtime_state),
    };
    return 0;
}

void vt_pystack_init(void *(*lookup)(const char *), int want) {
    if (__atomic_exchange_n(&tried, 1, __ATOMIC_ACQ_REL)) return;
    if (!want) return;
    get_tstate = (void *(*)(void))lookup("PyGILState_GetThisThreadState");
    code_type = lookup("PyCode_Type");
    *(void **)&is_initialized = lookup("Py_IsInitialized");
    if (!get_tstate || !code_type || !is_initialized) return; /* not a Python process */
    *(void **)&is_finalizing = lookup("Py_IsFinalizing");
    if (!is_finalizing) *(void **)&is_finalizing = lookup("_Py_IsFinalizing");
    none_object = lookup("_Py_NoneStruct");
    const unsigned long *pv = lookup("Py_Version");
    if (pv) {
        version_hex = *pv;
    } else {
        const char *(*get_version)(void) = (const char *(*)(void))lookup("Py_GetVersion");
        const char *v = get_version ? get_version() : NULL;
        int maj = 0, min = 0;
        if (v && sscanf(v, "%d.%d", &maj, &min) == 2) version_hex = ((unsigned long)maj << 24) | ((unsigned long)min << 16);
    }
    if (lookup("_Py_NegativeRefcount")) {
        warn_once("a debug build of CPython");
        return;
    }
    int minor = (version_hex >> 24) == 3 ? (int)((version_hex >> 16) & 0xff) : -1;
    if (minor == 10) L = py310;
    else if (minor == 11) L = py311;
    else if (minor == 12) L = py312;
    else if (minor == 13) {
        int r = layout_313(lookup);
        if (r == -1) warn_once("CPython 3.13's debug offsets did not check out");
        if (r != 0) return;
    } else {
        char why[64];
        snprintf(why, sizeof why, "CPython %lu.%lu is not supported", version_hex >> 24,
                 (version_hex >> 16) & 0xff);
        warn_once(why);
        return;
    }
    if (L.minor == 10) {
        *(void **)&addr2line = lookup("PyCode_Addr2Line");
        if (!addr2line) return;
    }
    void *eval = lookup("_PyEval_EvalFrameDefault");
    Dl_info info;
    const ElfW(Sym) *sym = NULL;
    if (eval && dladdr1(eval, &info, (void **)&sym, RTLD_DL_SYMENT) && sym && sym->st_size) {
        eval_lo = (uintptr_t)eval;
        eval_hi = eval_lo + sym->st_size;
    }
    if (map_tables() != 0) return;
    if (count_code_frees() != 0) {
        warn_once("CPython's code type is not laid out as expected");
        return;
    }
    vt_pyborrow_init(lookup, get_tstate);
    __atomic_store_n(&enabled, 1, __ATOMIC_RELEASE);
}

unsigned long vt_pystack_version(void) {
    return __atomic_load_n(&enabled, __ATOMIC_ACQUIRE) ? version_hex : 0;
}

/* ---------------------------------------------------------- capture */

/* Per thread, the values of the frames seen at recent captures: a loop
 * that allocates at the same depth finds its outer frames unchanged (same
 * code, same instruction) and skips their look-ups. A set by the frame's
 * address (the frames of a capture lie next to one another on the
 * interpreter's stack, so they never share one), two ways in it by what a
 * value is made of, the code object and the instruction, the newer first:
 * a frame that goes back and forth between two lines (an allocation from
 * each in turn) finds both there. It was one slot, keyed by the frame's
 * address too, and such a frame was looked up at every capture. Allocated
 * on a thread's first capture; emptied when a code object has been freed
 * since `memo_freed` (codes_freed). */
#define FRAME_SETS 128
#define FRAME_CACHE (2 * FRAME_SETS)
struct frame_memo {
    uintptr_t code, ip;
    uintptr_t value, unused; /* 32 bytes: a set is one cache line */
};

/* An empty way: a code object's address is never odd. */
#define MEMO_EMPTY 1

/* Every way of the memo empty. */
static void memo_clear(struct frame_memo *cache) {
    for (int i = 0; i < FRAME_CACHE; i++) cache[i] = (struct frame_memo){MEMO_EMPTY, 0, 0, 0};
}

/* The two ways of frame f's set. */
static inline struct frame_memo *memo_set(struct frame_memo *cache, const void *f) {
    return &cache[((uintptr_t)f >> 3) & (FRAME_CACHE - 2)];
}

/* The value of a frame of `code` at instruction `ip` in its set, or 0 (no
 * value is: each has the tag); a hit in the second way stays there. (walk()
 * makes the same look-up in its loop, written out.) */
static inline uintptr_t memo_get(const struct frame_memo *set, uintptr_t code, uintptr_t ip) {
    if (__builtin_expect(set[0].ip == ip && set[0].code == code, 1)) return set[0].value;
    if (set[1].ip == ip && set[1].code == code) return set[1].value;
    return 0;
}

/* (code, ip) -> value put first in its set, the first way's moved second. */
static inline void memo_put(struct frame_memo *set, uintptr_t code, uintptr_t ip, uintptr_t value) {
    set[1] = set[0];
    set[0] = (struct frame_memo){code, ip, value, 0};
}

/* A frame the memo does not hold: its value looked up and put in the set,
 * or 0 when `code` is no code object. Out of walk()'s loop, whose hit then
 * keeps what it reads in plain registers. */
static __attribute__((noinline)) uintptr_t memo_miss(struct frame_memo *set, uintptr_t code, uintptr_t ip) {
    uintptr_t value = vt_py_code_value((const void *)code, ip, 0);
    if (value) memo_put(set, code, ip, value);
    return value;
}

static __thread struct frame_memo *memo __attribute__((tls_model("initial-exec")));
static __thread uint64_t memo_freed __attribute__((tls_model("initial-exec")));
static pthread_key_t memo_key;
static pthread_once_t memo_once = PTHREAD_ONCE_INIT;

/* At the thread's exit: free, called (its address taken was a symbol
 * bound at every start). A later key's destructor that allocates from
 * Python finds no memo and makes a new one, as walker.c's cache. */
static void memo_free(void *m) {
    memo = NULL;
    free(m);
}
static void memo_key_make(void) { pthread_key_create(&memo_key, memo_free); }

static struct frame_memo *thread_memo(void) {
    if (memo) return memo;
    pthread_once(&memo_once, memo_key_make);
    memo = aligned_alloc(64, FRAME_CACHE * sizeof *memo); /* a set on one line */
    if (memo) {
        memo_clear(memo);
        pthread_setspecific(memo_key, memo);
    }
    return memo;
}

/* This thread's Python frames, innermost first, as tagged values, cut
 * into groups: each group the frames one native eval-loop call runs, and
 * ends[g] the index of group g's last (outermost) frame; the last group
 * ends at the last frame. */
static int python_running(void) { return is_initialized() && !(is_finalizing && is_finalizing()); }

/* Close the group at frame `at` unless it is closed there already. */
#define END_GROUP(at)                                                          \
    do {                                                                       \
        if (*ng == 0 || ends[*ng - 1] != (at)) ends[(*ng)++] = (int16_t)(at); \
    } while (0)

/* What the walk and vt_pystack_same read of frame f, for one version as
 * walk() is: its code, its instruction (3.10: the index of its last one)
 * and its entry mark (3.11's is_entry, 3.12+'s owner; 3.10 has none). */
#define READ_FRAME(f, code, ip, mark)                                                             \
    do {                                                                                          \
        (mark) = minor == 11 ? RD(char, f, fr_is_entry) : minor >= 12 ? RD(char, f, fr_owner) : 0; \
        (code) = RD(uintptr_t, f, fr_code);                                                       \
        (ip) = minor == 10 ? (uintptr_t)RD(int, f, fr_lasti) : RD(uintptr_t, f, fr_instr);        \
    } while (0)

/* The frame value that stands for n frames left out (pystack.h). */
static uintptr_t cut_frame(uint64_t n) { return VT_PYFRAME_CUT | (n < 0xffffff ? n : 0xffffff); }

/* How many outermost frames a stack of at most max keeps when it is cut:
 * VT_CUT_OUTER, a quarter of a smaller max. */
static int cut_outer(int max) { return max >= 4 * VT_CUT_OUTER ? VT_CUT_OUTER : max / 4; }

/* The walk from frame f (the innermost) on past the max frames walk()
 * read from it into out (a chain deeper than a read keeps: a library
 * recursing below the user's call): the frames further are only counted,
 * the last cut_outer(max) of the chain kept in a ring and looked up once
 * the walk ends, so that the read keeps its innermost frames, a cut frame
 * and its outermost frames (the user's script and its entry). Bounded by
 * VT_PY_WALK_MAX frames met, kept or skipped: a cycle in a torn chain
 * ends. The cut frames and the outer ones join the group of the innermost
 * frame kept last. walk() left no trail (it did not reach the chain's
 * end) unless the chain ends at its max'th frame: nothing is cut then.
 * Apart from walk(), whose loop it would make slower, and walked again to
 * the max'th frame: a stack that fits never comes here. Returns the frames
 * kept. */
static __attribute__((noinline, cold)) int walk_past(const int minor, const struct vt_pylayout *lay, void *f,
                                                     uintptr_t *out, int16_t *ends, int *ng, int max,
                                                     struct frame_memo *cache) {
    const int fr_owner = lay->fr_owner, owner_cstack = lay->owner_cstack, fr_code = lay->fr_code;
    const int fr_previous = lay->fr_previous, fr_instr = lay->fr_instr, fr_lasti = lay->fr_lasti;
    const int fr_is_entry = lay->fr_is_entry;
    const uintptr_t none = (uintptr_t)none_object;
    struct {
        void *f;
        uintptr_t code, ip, value; /* value 0: looked up when the walk ends */
    } ring[VT_CUT_OUTER];
    int outer = cut_outer(max), at = 0;
    if (outer == 0) return max;
    for (int i = 0; i < outer; i++) ring[i].value = out[max - outer + i];
    uint64_t more = 0;
    int seen = 0;
    for (int met = 0; f && met < VT_PY_WALK_MAX; met++) {
        char mark;
        uintptr_t code, ip;
        READ_FRAME(f, code, ip, mark);
        void *previous = RD(void *, f, fr_previous);
        if (minor == 13) code &= ~(uintptr_t)3;
        /* The frames walk() kept, as it kept them: none a shim or
         * without code, each a code object (else it would have ended). */
        if (!(minor >= 12 && mark == owner_cstack) && code && code != none && seen++ >= max) {
            ring[at].f = f;
            ring[at].code = code;
            ring[at].ip = ip;
            ring[at].value = 0;
            at = at + 1 == outer ? 0 : at + 1;
            more++;
        }
        f = previous;
    }
    /* None past the last frame walk() kept: nothing cut. */
    if (more == 0) return max;
    /* The frames from the max - outer - 1'th on go: the outer + 1 read
     * last, and every one past them but the ring's. */
    int keep = max - outer - 1, n = keep;
    while (*ng > 0 && ends[*ng - 1] >= keep - 1) (*ng)--;
    out[n++] = cut_frame(more + 1);
    for (int i = 0; i < outer; i++) {
        int r = (at + i) % outer;
        uintptr_t value = ring[r].value;
        if (!value) {
            struct frame_memo *set = memo_set(cache, ring[r].f);
            value = memo_get(set, ring[r].code, ring[r].ip);
            if (!value) {
                value = vt_py_code_value((const void *)ring[r].code, ring[r].ip, 0);
                /* Not a code object after all: the stack ends there. */
                if (!value) break;
                memo_put(set, ring[r].code, ring[r].ip, value);
            }
        }
        out[n++] = value;
    }
    END_GROUP(n - 1);
    return n;
}

/* The walk for one version, `minor` a constant at each call: 3.10 to 3.12's
 * offsets are the constants of their tables, folded in; 3.13's, read from
 * the interpreter, are copied to locals once (the stores through out and
 * ends may alias vt_pyl, which the compiler would otherwise read again at
 * every frame). A frame whose code and instruction the thread's memo saw
 * at its place at its last captures costs its loads and one compare. `guard`
 * bounds the frames skipped (shims, frames without code), `max` those
 * returned: a cycle in a torn chain ends either way. With `trail`, every
 * frame met is kept there as vt_pystack_same compares it. */
static inline __attribute__((always_inline)) int walk(const int minor, const struct vt_pylayout *lay, void *f,
                                                      uintptr_t *out, int16_t *ends, int *ng, int max,
                                                      struct frame_memo *cache, struct vt_pytrail *trail) {
    const int fr_owner = lay->fr_owner, owner_cstack = lay->owner_cstack, fr_code = lay->fr_code;
    const int fr_previous = lay->fr_previous, fr_instr = lay->fr_instr, fr_lasti = lay->fr_lasti;
    const int fr_is_entry = lay->fr_is_entry;
    const uintptr_t none = (uintptr_t)none_object;
    int n = 0, guard = 4 * MAX_PY_FRAMES, whole = 1;
    uintptr_t *tw = trail ? trail->f : NULL;
    int16_t *ta = trail ? trail->py : NULL;
    /* A walk meets at most max frames it keeps and guard + 1 it skips. */
    _Static_assert(sizeof trail->f / sizeof trail->f[0] >= 2 * (MAX_PY_FRAMES + 4 * MAX_PY_FRAMES + 1), "trail");
    *ng = 0;
    while (f && n < max) {
        char mark;
        uintptr_t code, ip;
        READ_FRAME(f, code, ip, mark);
        if (trail) {
            /* Room for every frame: max frames and guard skipped ones. */
            tw[0] = code;
            tw[1] = ip ^ (uintptr_t)(unsigned char)mark << 56;
            tw += 2;
            *ta++ = (int16_t)n; /* -1 below where it gives no value */
        }
        if (minor >= 12 && mark == owner_cstack) {
            /* A shim pushed where C entered the eval loop: the frame before
             * it (inner) was the first one of that native call. */
            if (trail) ta[-1] = -1;
            if (n > 0) END_GROUP(n - 1);
            f = RD(void *, f, fr_previous);
            if (--guard < 0) break;
            continue;
        }
        if (minor == 13) code &= ~(uintptr_t)3;
        /* The memo first: a way that holds this code is a code object's
         * (never NULL nor None, whose frames are skipped). */
        struct frame_memo *set = memo_set(cache, f);
        uintptr_t value;
        if (__builtin_expect(set[0].ip == ip && set[0].code == code, 1)) {
            value = set[0].value;
        } else if (set[1].ip == ip && set[1].code == code) {
            value = set[1].value;
        } else if (__builtin_expect(!code || code == none, 0)) {
            if (trail) ta[-1] = -1;
            f = RD(void *, f, fr_previous);
            if (--guard < 0) break;
            continue;
        } else if (!(value = memo_miss(set, code, ip))) {
            /* Not a code object after all: nothing to compare later. */
            whole = 0;
            break;
        }
        if (minor == 10 || (minor == 11 && mark)) ends[(*ng)++] = (int16_t)n;
        out[n++] = value;
        f = RD(void *, f, fr_previous);
    }
    if (n > 0) END_GROUP(n - 1);
    /* Only a walk that reached the chain's end can be compared whole. */
    if (trail) trail->n = whole && !f && n > 0 ? (int)(tw - trail->f) / 2 : -1;
    return n;
}

/* The first frame from f on that differs from trail's, for one version as
 * walk() is (vt_pystack_same and vt_pystack_patch): 0 when none does and the chain ends where it ended, 1 with *at
 * its index in the trail and *fp the frame, -1 when the chain is shorter
 * or longer. */
static inline __attribute__((always_inline)) int walk_differs(const int minor, const struct vt_pylayout *lay, void *f,
                                                              const struct vt_pytrail *trail, int *at, void **fp) {
    const int fr_owner = lay->fr_owner, fr_code = lay->fr_code, fr_previous = lay->fr_previous;
    const int fr_instr = lay->fr_instr, fr_lasti = lay->fr_lasti, fr_is_entry = lay->fr_is_entry;
    const uintptr_t *w = trail->f, *end = w + 2 * trail->n;
    for (; w < end; w += 2) {
        if (!f) return -1;
        char mark;
        uintptr_t code, ip;
        READ_FRAME(f, code, ip, mark);
        if (code != w[0] || (ip ^ (uintptr_t)(unsigned char)mark << 56) != w[1]) {
            *at = (int)(w - trail->f) / 2;
            *fp = f;
            return 1;
        }
        f = RD(void *, f, fr_previous);
    }
    return f ? -1 : 0;
}

/* The innermost frame of this thread's Python, or NULL. */
static void *first_frame(void) {
    if (!python_running()) return NULL;
    void *ts = get_tstate();
    if (!ts) return NULL;
    if (L.ts_cframe >= 0) {
        void *cf = RD(void *, ts, L.ts_cframe);
        return cf ? RD(void *, cf, L.cf_current) : NULL;
    }
    return RD(void *, ts, L.ts_frame);
}

static int read_frames(uintptr_t *out, int16_t *ends, int *ng, int max, struct vt_pytrail *trail) {
    *ng = 0;
    if (trail) {
        trail->n = -1;
        trail->placed = 0;
    }
    void *f = first_frame();
    if (!f) return 0;
    /* Read before the walk: a code object freed during it empties the
     * memo at the next read. */
    uint64_t freed = __atomic_load_n(&codes_freed, __ATOMIC_ACQUIRE);
    if (trail) trail->freed = freed;
    struct frame_memo *cache = thread_memo(), spare[FRAME_CACHE];
    if (!cache) {
        /* No memory for this thread's memo: one for this capture alone. */
        memo_clear(spare);
        cache = spare;
    } else if (__builtin_expect(memo_freed != freed, 0)) {
        memo_clear(cache);
        memo_freed = freed;
    }
    /* Each version's walk twice, with a trail and without: the test of
     * `trail` at every frame folds away. */
    int n;
    if (trail) {
        switch (L.minor) {
        case 10: n = walk(10, &py310, f, out, ends, ng, max, cache, trail); break;
        case 11: n = walk(11, &py311, f, out, ends, ng, max, cache, trail); break;
        case 12: n = walk(12, &py312, f, out, ends, ng, max, cache, trail); break;
        default: n = walk(13, &vt_pyl, f, out, ends, ng, max, cache, trail); break;
        }
    } else {
        switch (L.minor) {
        case 10: n = walk(10, &py310, f, out, ends, ng, max, cache, NULL); break;
        case 11: n = walk(11, &py311, f, out, ends, ng, max, cache, NULL); break;
        case 12: n = walk(12, &py312, f, out, ends, ng, max, cache, NULL); break;
        default: n = walk(13, &vt_pyl, f, out, ends, ng, max, cache, NULL); break;
        }
    }
    /* As deep as a read keeps, or deeper. */
    if (__builtin_expect(n == max, 0)) n = walk_past(L.minor, &vt_pyl, f, out, ends, ng, max, cache);
    if (trail && trail->n > 0) {
        int t = trail->n - 1;
        while (t >= 0 && trail->py[t] < 0) t--;
        trail->outer = t;
    }
    return n;
}

int vt_pystack_same(const struct vt_pytrail *trail) {
    if (trail->n <= 0 || !__atomic_load_n(&enabled, __ATOMIC_ACQUIRE)) return 0;
    if (trail->freed != __atomic_load_n(&codes_freed, __ATOMIC_ACQUIRE)) return 0;
    void *f = first_frame();
    if (!f) return 0;
    int k;
    switch (L.minor) {
    case 10: return walk_differs(10, &py310, f, trail, &k, &f) == 0;
    case 11: return walk_differs(11, &py311, f, trail, &k, &f) == 0;
    case 12: return walk_differs(12, &py312, f, trail, &k, &f) == 0;
    default: return walk_differs(13, &vt_pyl, f, trail, &k, &f) == 0;
    }
}

/* The group of frame j among the frames read: the first whose end is j or
 * past it (ends rise). */
static int group_of(const int16_t *ends, int ngroups, int j) {
    int lo = 0, hi = ngroups - 1;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (ends[mid] < j) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* vt_pystack_patch from trail frame k, frame f, on, for one version as
 * walk() is: each frame whose code or instruction changed, with the same
 * entry mark, gets its value (from the memo, or looked up) at its index
 * in py and its place in merged; between them, walk_differs' loop. */
static inline __attribute__((always_inline)) int walk_patch(const int minor, const struct vt_pylayout *lay, void *f,
                                                            int k, struct vt_pytrail *trail, struct vt_pyframes *pf,
                                                            uintptr_t *merged, struct frame_memo *cache) {
    uintptr_t *py = pf->frames;
    const int16_t *ends = pf->ends;
    const int ngroups = pf->ngroups;
    const int fr_owner = lay->fr_owner, fr_code = lay->fr_code, fr_previous = lay->fr_previous;
    const int fr_instr = lay->fr_instr, fr_lasti = lay->fr_lasti, fr_is_entry = lay->fr_is_entry;
    const uintptr_t none = (uintptr_t)none_object;
    int changed = 0;
    for (;;) {
        /* Frame k, f, changed. */
        uintptr_t *w = &trail->f[2 * k];
        char mark;
        uintptr_t code, ip;
        READ_FRAME(f, code, ip, mark);
        uintptr_t key = ip ^ (uintptr_t)(unsigned char)mark << 56;
        /* Another mark is another cut into groups; a frame that gave no
         * value (a shim, no code) or gives none now, no place. */
        int at = trail->py[k];
        if ((w[1] ^ key) >> 56 || at < 0) return -1;
        /* Another function outermost: the thread entered Python anew,
         * maybe in PyTorch's own code, whose frames the read follows with
         * those of the thread it works for. */
        if (k == trail->outer && code != w[0]) return -1;
        uintptr_t c = minor == 13 ? code & ~(uintptr_t)3 : code;
        if (!c || c == none) return -1;
        struct frame_memo *set = memo_set(cache, f);
        uintptr_t value = memo_get(set, c, ip);
        if (!value && !(value = memo_miss(set, c, ip))) return -1;
        py[at] = value;
        if (merged) merged[at + trail->shift[group_of(ends, ngroups, at)]] = value;
        w[0] = code;
        w[1] = key;
        changed++;
        /* The next that changed. */
        f = RD(void *, f, fr_previous);
        for (k++;; k++) {
            if (k == trail->n) return f ? -1 : changed;
            if (!f) return -1;
            w += 2;
            READ_FRAME(f, code, ip, mark);
            if (code != w[0] || (ip ^ (uintptr_t)(unsigned char)mark << 56) != w[1]) break;
            f = RD(void *, f, fr_previous);
        }
    }
}

/* The patch from the first frame that changed (out of vt_pystack_patch,
 * whose check of an unchanged stack then keeps to a few registers). */
static __attribute__((noinline)) int patch_from(struct vt_pytrail *trail, struct vt_pyframes *py, uintptr_t *merged,
                                                int k, void *f) {
    struct frame_memo *cache = thread_memo();
    if (!cache || memo_freed != trail->freed) return -1;
    switch (L.minor) {
    case 10: return walk_patch(10, &py310, f, k, trail, py, merged, cache);
    case 11: return walk_patch(11, &py311, f, k, trail, py, merged, cache);
    case 12: return walk_patch(12, &py312, f, k, trail, py, merged, cache);
    default: return walk_patch(13, &vt_pyl, f, k, trail, py, merged, cache);
    }
}

int vt_pystack_patch(struct vt_pytrail *trail, struct vt_pyframes *pf, uintptr_t *merged) {
    if (trail->n <= 0 || (merged && !trail->placed) || !__atomic_load_n(&enabled, __ATOMIC_ACQUIRE)) return -1;
    if (trail->freed != __atomic_load_n(&codes_freed, __ATOMIC_ACQUIRE)) return -1;
    void *f = first_frame();
    if (!f) return -1;
    int k = 0, r;
    switch (L.minor) {
    case 10: r = walk_differs(10, &py310, f, trail, &k, &f); break;
    case 11: r = walk_differs(11, &py311, f, trail, &k, &f); break;
    case 12: r = walk_differs(12, &py312, f, trail, &k, &f); break;
    default: r = walk_differs(13, &vt_pyl, f, trail, &k, &f); break;
    }
    return r == 1 ? patch_from(trail, pf, merged, k, f) : r;
}

/* The code slot of Python frame value v, once its names are set; NULL. */
static const struct code_slot *code_of(uintptr_t v) {
    uint32_t id = (uint32_t)((v & ~(VT_PYFRAME_TAG | VT_PYFRAME_BORROWED)) >> 24);
    return codes && id < CODE_IDS && __atomic_load_n(&codes[id].ready, __ATOMIC_ACQUIRE) ? &codes[id] : NULL;
}

/* Whether frame value v (this thread's outermost) runs PyTorch's own code
 * or the companion's: a thread whose Python was entered there is one
 * PyTorch called into from C++ (an autograd thread running checkpoint's
 * recomputation, a Function's backward, a communication hook, or the
 * allocator's out-of-memory observer, the companion's, when a backward
 * pass meets the memory fraction's limit). */
static int entered_in_torch(uintptr_t v) {
    const struct code_slot *c = code_of(v);
    return c && c->in_torch;
}

int vt_pystack_read(struct vt_pyframes *pf, struct vt_pytrail *trail) {
    pf->n = pf->ngroups = pf->borrowed = 0;
    if (trail) {
        trail->n = -1;
        trail->placed = 0;
    }
    if (__atomic_load_n(&enabled, __ATOMIC_ACQUIRE)) {
        pf->n = read_frames(pf->frames, pf->ends, &pf->ngroups, MAX_PY_FRAMES, trail);
        if (pf->n == 0 && python_running()) {
            pf->borrowed = pf->n = vt_pyborrow_frames(pf->frames, MAX_PY_FRAMES);
            if (trail) trail->n = -1;
        } else if (pf->n > 0 && pf->n < MAX_PY_FRAMES && entered_in_torch(pf->frames[pf->n - 1])) {
            /* Its own frames, then (outermost, after every group) those
             * of the Python thread it works for; never remembered, as
             * those may change while its own do not. */
            if (trail) trail->n = -1;
            if (python_running()) pf->n += vt_pyborrow_frames(pf->frames + pf->n, MAX_PY_FRAMES - pf->n);
        }
    }
    return pf->n;
}

/* The frames a cut frame's place holds: its count, 1 for any other. */
static uint64_t weight(uintptr_t v) { return vt_pyframe_cut(v) ? vt_pyframe_cut_count(v) : 1; }

/* Stack all[0..t) into out, at most max frames: whole when it fits, else
 * its innermost and outermost frames with one cut frame for the rest
 * (pystack.h, vt_pystack_merge). Returns the frames written. */
static int cut_into(const uintptr_t *all, int t, uintptr_t *out, int max) {
    if (t <= max || max < 3) {
        int k = t < max ? t : max;
        memcpy(out, all, (size_t)k * sizeof *out);
        return k;
    }
    int outer = cut_outer(max), at = -1, to = t, py = 0;
    for (int i = 0; i < t && at < 0; i++)
        if (vt_pyframe_cut(all[i])) at = i;
    if (at >= 0) {
        /* The read's cut frame stands for the frames before it too: its
         * outermost Python frames, and the native ones outside, stay. */
        to = at + 1;
    } else {
        /* The Python frames fit and the native ones made the stack too
         * deep: the outermost `outer` Python frames (all, when fewer)
         * and the native ones outside them stay, as a read's would; a
         * stack of native frames alone keeps its outermost `outer`. */
        while (to > 0 && py < outer)
            if (vt_pyframe_is(all[--to])) py++;
        if (py == 0) to = t - outer;
    }
    /* The innermost frames fill the rest, at least `outer` of them: past
     * that, the outermost frames that fit stay. */
    int from = max - 1 - (t - to);
    if (from < outer) {
        from = outer;
        to = t - (max - 1 - outer);
    }
    uint64_t left = 0;
    for (int i = from; i < to; i++) left += weight(all[i]);
    memcpy(out, all, (size_t)from * sizeof *out);
    out[from] = cut_frame(left);
    memcpy(out + from + 1, all + to, (size_t)(t - to) * sizeof *out);
    return from + 1 + t - to;
}

/* vt_pystack_splice when the frames may not fit, or are borrowed: the
 * whole merged stack first, then what of it fits (cut_into). Out of the
 * usual path, whose frame its buffer would make larger. */
static __attribute__((noinline, cold)) int splice_cut(const uintptr_t *native, int n, const struct vt_pyframes *pf,
                                                      uintptr_t *out, int max) {
    const uintptr_t *py = pf->frames;
    const int16_t *ends = pf->ends;
    int np = pf->n, ng = pf->ngroups, borrowed = pf->borrowed;
    int k = 0, next = 0, g = 0;
    uintptr_t lo = eval_lo + 1, span = eval_hi - eval_lo;
    /* A native walk holds at most VT_STACK_MAX frames. */
    uintptr_t all[VT_STACK_MAX + VT_PY_MAX_FRAMES];
    if (n > VT_STACK_MAX) n = VT_STACK_MAX;
    for (int i = 0; i < n; i++) {
        if (!borrowed && g < ng && native[i] - lo < span) {
            /* This eval-loop call runs the next group of Python frames. */
            int end = ends[g++] + 1;
            memcpy(all + k, py + next, (size_t)(end - next) * sizeof *all);
            k += end - next;
            next = end;
            continue;
        }
        all[k++] = native[i];
    }
    /* Frames left over (the native walk was cut short, or the eval loop's
     * extent is unknown) go outermost, so the script's frames still show;
     * so do borrowed frames, which no native frame of this thread runs. */
    memcpy(all + k, py + next, (size_t)(np - next) * sizeof *all);
    return cut_into(all, k + np - next, out, max);
}

/* The splice where every frame fits and none is borrowed (the usual
 * case: no bound to check); with `shift`, where each group went noted
 * there (frame j of group g at j + shift[g]). */
static inline __attribute__((always_inline)) int splice_fits(const uintptr_t *native, int n,
                                                             const struct vt_pyframes *pf, uintptr_t *out,
                                                             int16_t *shift) {
    const uintptr_t *py = pf->frames;
    const int16_t *ends = pf->ends;
    int np = pf->n, ng = pf->ngroups;
    int k = 0, next = 0, g = 0;
    /* An address inside the eval loop: lo < ip <= hi, as one compare. */
    uintptr_t lo = eval_lo + 1, span = eval_hi - eval_lo;
    int i = 0;
    for (; i < n && g < ng; i++) {
        if (native[i] - lo < span) {
            /* One frame a group is 3.10's shape (each Python call its
             * own eval-loop call): a store, not a call to memcpy. */
            int end = ends[g++] + 1;
            if (end - next == 1) out[k] = py[next];
            else memcpy(out + k, py + next, (size_t)(end - next) * sizeof *out);
            if (shift) shift[g - 1] = (int16_t)(k - next);
            k += end - next;
            next = end;
            continue;
        }
        out[k++] = native[i];
    }
    memcpy(out + k, native + i, (size_t)(n - i) * sizeof *out);
    k += n - i;
    memcpy(out + k, py + next, (size_t)(np - next) * sizeof *out);
    if (shift)
        for (; g < ng; g++) shift[g] = (int16_t)(k - next);
    return k + np - next;
}

int vt_pystack_splice(const uintptr_t *native, int n, const struct vt_pyframes *pf, uintptr_t *out, int max) {
    if (!pf->borrowed && n + pf->n <= max) return splice_fits(native, n, pf, out, NULL);
    return splice_cut(native, n, pf, out, max);
}

int vt_pystack_splice_placed(const uintptr_t *native, int n, const struct vt_pyframes *pf, uintptr_t *out, int max,
                             struct vt_pytrail *trail) {
    trail->placed = 0;
    if (pf->borrowed || n + pf->n > max || trail->n <= 0) return vt_pystack_splice(native, n, pf, out, max);
    int k = splice_fits(native, n, pf, out, trail->shift);
    trail->placed = 1;
    return k;
}

int vt_pystack_merge(const uintptr_t *native, int n, uintptr_t *out, int max) {
    struct vt_pyframes pf;
    vt_pystack_read(&pf, NULL);
    return vt_pystack_splice(native, n, &pf, out, max);
}

/* The name of a cut frame that stands for n frames, kept in the arena:
 * the last name made for each of a few counts is reused (a stack's
 * frames are named once per report), so that names do not fill it. */
static const char *cut_name(unsigned n) {
    static const char *made[64];
    char want[64];
    if (n == 1) snprintf(want, sizeof want, "(1 frame left out)");
    else snprintf(want, sizeof want, VT_CUT_NAME, n);
    const char **slot = &made[n % 64];
    const char *had = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (had && strcmp(had, want) == 0) return had;
    size_t k = strlen(want) + 1;
    char *name = arena_take(k);
    if (!name) return "(frames left out)";
    memcpy(name, want, k);
    __atomic_store_n(slot, name, __ATOMIC_RELEASE);
    return name;
}

int vt_pyframe_resolve(uintptr_t v, const char **function, const char **file, int *line) {
    if (!vt_pyframe_is(v) || !codes) return -1;
    if (vt_pyframe_cut(v)) {
        *function = cut_name(vt_pyframe_cut_count(v));
        *file = VT_CUT_FILE;
        *line = 0;
        return 0;
    }
    const struct code_slot *c = code_of(v);
    if (!c) return -1;
    *function = c->qualname;
    *file = c->filename;
    *line = (int)(v & 0xffffff);
    return 0;
}
