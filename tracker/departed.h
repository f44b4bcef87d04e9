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
 * and the report reads that frame from the library's file.
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
 * load bias, its file (as the loader names it) and its GNU build ID. */
struct vt_code_span {
    uintptr_t lo, hi;
    uintptr_t base;
    const char *path;
    uint8_t build_id[20];
    uint8_t build_id_len;
};

/* A library that left, as vt_departed_of returns it: the span (its path
 * owned by the record, kept for the process's life) and the number of
 * stacks interned before it left (ids below it may hold its code). */
struct vt_departed {
    struct vt_code_span span;
    uint32_t before;
};

/* The most departures remembered (the tag's 14 bits); one library
 * unloaded again and again where it was each time is one. Past this,
 * frames of code that left are read as the code there now. */
#define VT_MAX_DEPARTED 1024

/* Libraries that left the process now (after a dlclose): each
 * remembered with the stacks interned so far. Takes the global lock. */
void vt_departed_note(const struct vt_code_span *gone, size_t n);

/* How many departures are remembered (read with acquire). */
extern uint32_t vt_departed_count __attribute__((visibility("hidden")));

uintptr_t vt_code_key_slow(const struct vt_stack *st, uint32_t j, uint32_t n);

/* The code key of frame j of stack st (see above): its return address
 * while no library has left. */
static inline uintptr_t vt_code_key(const struct vt_stack *st, uint32_t j) {
    uint32_t n = __atomic_load_n(&vt_departed_count, __ATOMIC_ACQUIRE);
    return __builtin_expect(n == 0, 1) ? st->frames[j] : vt_code_key_slow(st, j, n);
}

/* The departure a key is tagged with, or NULL for a key of code still
 * loaded (or a Python frame's value). */
const struct vt_departed *vt_departed_of(uintptr_t key);

/* The index (0 and up) of the departure a tagged key names. */
static inline size_t vt_departed_index(uintptr_t key) { return (size_t)((key >> 48) & 0x3fff) - 1; }

/* The return address of a code key (a Python frame's value unchanged). */
static inline uintptr_t vt_code_address(uintptr_t key) {
    return key >> 63 ? key : key & (((uintptr_t)1 << 48) - 1);
}

/* In a forked child: its stacks start anew, after every departure. */
void vt_departed_reset_child(void) __attribute__((visibility("hidden")));

#endif
