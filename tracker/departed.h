/* departed.h -- code that left the process (dlclose), remembered for the
 * stacks that were walked through it (departed.c).
 *
 * Reports symbolize a stack's return addresses when they are written,
 * long after the stack was walked. A library unloaded in between has
 * taken its symbols with it, and a library loaded later at the same
 * addresses would lend them its own: the leak of a plugin the program
 * unloaded was named after whatever code came to sit where it was. So
 * each library that leaves is remembered (its address range, load bias,
 * file and build ID) with the number of stacks interned before it left.
 * A stack interned before a departure that covers one of its addresses
 * was walked through the library that left (the first such departure
 * after it, since no other code could sit there before that one left),
 * and the report reads that frame from the library's file (unless it was
 * interned while that dlclose ran: see vt_departed_mark).
 *
 * A frame's *code key* says which: its return address where it is code
 * still loaded, or the address tagged with the departure (bits 48 to 61)
 * where it is not. Reports key their frames by it. The one stack not told
 * apart: a stack whose every return address is the same after a different
 * library came to the same addresses is the stack interned before (ids
 * are per distinct list of addresses). */
#ifndef VT_DEPARTED_H
#define VT_DEPARTED_H

#include <stddef.h>
#include <stdint.h>

#include "tracker.h"

/* A library as the loader lists it: its segments' address range, its
 * load bias, its file (named whole) and its GNU build ID; for a library
 * built without one, what the file was (below) and a fingerprint of its
 * code as mapped (vt_print_* of its first executable segment, text_len
 * bytes at text_off in its file), so that a file replaced since is not
 * read for its frames either. */
struct vt_code_span {
    uintptr_t lo, hi;
    uintptr_t base;
    const char *path;
    uint8_t build_id[20];
    uint8_t build_id_len;
    uint64_t text_off, text_len, text_hash;
    /* Without a build ID, the mapped file as it was at the dlclose (its
     * device, inode, size and modification time; `file` 0 when that was
     * not known or the path already named another file then). */
    int file;
    uint64_t dev, ino, size;
    int64_t mtime_ns;
};

/* A fingerprint of a segment of `len` bytes: FNV-1a over its length and
 * VT_PRINT_SAMPLES samples of VT_PRINT_BYTES bytes spread over it (the
 * whole of a short one), so that two builds differing anywhere but in a
 * few bytes differ; read in memory at a dlclose, in the file at a report.
 * Sample i (0 and up) starts at vt_print_at(len, i) and has
 * vt_print_len(len) bytes. */
#define VT_PRINT_SAMPLES 64u
#define VT_PRINT_BYTES 64u
static inline uint64_t vt_print_len(uint64_t len) {
    return len <= VT_PRINT_SAMPLES * VT_PRINT_BYTES ? len : VT_PRINT_BYTES;
}
static inline uint64_t vt_print_at(uint64_t len, uint32_t i) {
    if (len <= VT_PRINT_SAMPLES * VT_PRINT_BYTES) return 0;
    return (len - VT_PRINT_BYTES) / (VT_PRINT_SAMPLES - 1) * i;
}
static inline uint32_t vt_print_samples(uint64_t len) {
    return len <= VT_PRINT_SAMPLES * VT_PRINT_BYTES ? 1 : VT_PRINT_SAMPLES;
}
static inline uint64_t vt_print_add(uint64_t h, const unsigned char *p, uint64_t n) {
    for (uint64_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}
static inline uint64_t vt_print_start(uint64_t len) {
    return vt_print_add(0xcbf29ce484222325ull, (const unsigned char *)&len, sizeof len);
}

/* A library that left, as vt_departed_of returns it: the span (its path
 * owned by the record, kept for the process's life) and the number of
 * stacks interned before it left (ids below it may hold its code). */
struct vt_departed {
    struct vt_code_span span;
    uint32_t from, before;   /* the stacks interned when its dlclose began, and when it returned */
};

/* The most departures remembered (a frame's key is looked for among them
 * all); one library unloaded again and again where it was each time is
 * one. Once they are all taken, the records stop changing, and each
 * library that leaves after is kept as a range alone (64 of them, widened
 * when more): a frame of a stack interned before it left that lies in it
 * is of unknown code (shown by address), unless a record says which
 * library was there and left first. */
#define VT_MAX_DEPARTED 1024
#define VT_CODE_UNKNOWN 16383

/* The number of stacks interned so far: taken as a dlclose begins and as
 * it returns, it is what vt_departed_note remembers the libraries that
 * left with. A stack interned before the dlclose began that lies where a
 * library left was walked through it; one interned while the dlclose ran
 * may have been walked through another library, loaded by another thread
 * at once where it was (or waited for the loader while that thread
 * loaded, used and closed the same library): its frames there are of
 * unknown code. */
uint32_t vt_departed_mark(void);

/* Libraries that left the process at a dlclose that began at mark `from`
 * and returned at mark `before`. Takes the global lock. */
void vt_departed_note(const struct vt_code_span *gone, size_t n, uint32_t from, uint32_t before);

/* How many departures are remembered (read with acquire). */
extern uint32_t vt_departed_count __attribute__((visibility("hidden")));

/* How many dlcloses have taken code out of the process, each counted as
 * vt_departed_note takes it, whether a record remembers it or not (a
 * library leaving where it left before, the records full): an address
 * symbolized before it moved may name other code now (report/symbolize.c's
 * kept frames). */
extern uint32_t vt_departed_notes __attribute__((visibility("hidden")));

uintptr_t vt_code_key_slow(const struct vt_stack *st, uint32_t j, uint32_t n);

/* The code key of frame j of stack st (see above): its return address
 * while no library has left. */
static inline uintptr_t vt_code_key(const struct vt_stack *st, uint32_t j) {
    uint32_t n = __atomic_load_n(&vt_departed_count, __ATOMIC_ACQUIRE);
    return __builtin_expect(n == 0, 1) ? st->frames[j] : vt_code_key_slow(st, j, n);
}

/* The departure a key is tagged with, or NULL for a key of code still
 * loaded, of unknown code (vt_code_unknown) or a Python frame's value. */
const struct vt_departed *vt_departed_of(uintptr_t key);

/* Whether a key is of code that left where no record says which. */
static inline int vt_code_unknown(uintptr_t key) {
    return !(key >> 63) && ((key >> 48) & 0x3fff) == VT_CODE_UNKNOWN;
}

/* The index (0 and up) of the departure a tagged key names. */
static inline size_t vt_departed_index(uintptr_t key) { return (size_t)((key >> 48) & 0x3fff) - 1; }

/* The return address of a code key (a Python frame's value unchanged). */
static inline uintptr_t vt_code_address(uintptr_t key) {
    return key >> 63 ? key : key & (((uintptr_t)1 << 48) - 1);
}

/* In a forked child: its stacks start anew, after every departure. */
void vt_departed_reset_child(void) __attribute__((visibility("hidden")));

#endif
