/* symbolize.h -- turning return addresses into function, file:line, module.
 *
 * Runs when a report is written, never in a hook. Uses elfutils libdwfl on
 * the running process: symbol tables (static functions included) for the
 * function, DWARF line tables for file:line, demangled C++ names when the
 * process has a demangler, module and offset as the last resort. */
#ifndef VT_SYMBOLIZE_H
#define VT_SYMBOLIZE_H

#include <stddef.h>
#include <stdint.h>

#include "../common/callsite.h"
#include "../tracker/tracker.h"

/* Where the compiler inlined functions, one return address has several
 * frames: each inlined function's, innermost first, then the function
 * that holds them (struct vt_frame's inlined). At most VT_MAX_INLINED at
 * one address (deeper nests keep their innermost, and the function that
 * holds them at the line of the outermost's call), and a stack's frames
 * so counted are cut at VT_SHOWN_FRAMES. */
#define VT_MAX_INLINED 32
#define VT_SHOWN_FRAMES (4 * VT_MAX_FRAMES)

/* The frames at one return address, from the first that vt_symbols_frame
 * returns: it and those after it in the symbols' table while the one
 * before is inlined into the next. */
static inline size_t vt_frames_at(const struct vt_frame *fr) {
    size_t n = 1;
    while (fr[n - 1].inlined) n++;
    return n;
}

/* The symbols of a snapshot's stacks: each distinct return address
 * symbolized once (a frame table), a stack's frames found through its
 * return addresses (stack[i], the snapshot's, which must outlive this), so
 * that no stack's frames are copied. */
struct vt_symbols {
    size_t nstacks;
    const struct vt_stack *const *stack;
    int *site1;             /* per stack: the call-site frame + 1, or 0 (vt_sym_site) */
    int *through1;          /* per stack: the library frame it went through + 1, or 0 */
    uint32_t *group;        /* per stack: its call site's group (vt_site_groups), or NULL */
    uint32_t *group_lowest; /* per group: its lowest stack */
    size_t ngroups;
    uint8_t *traits;        /* per stack: what its frames say (report/traits.c), 0 until asked */
    void *priv;
    int kept;               /* priv is the kept table (vt_symbolize_kept), its lock held */
};

struct vt_symbols *vt_symbolize(const struct vt_snapshot *s);
void vt_symbols_free(struct vt_symbols *sym);

/* A stack's call-site frame (its index among the stack's frames) and the
 * library frame it went through, or -1. Kept one up, so that a stack
 * never symbolized is the zero of calloc: a mark's report in a process of
 * a million stacks wrote -1 into two arrays of them, 8 MB of pages. */
static inline int vt_sym_site(const struct vt_symbols *sym, size_t stack) {
    return sym && stack < sym->nstacks ? sym->site1[stack] - 1 : -1;
}
static inline int vt_sym_through(const struct vt_symbols *sym, size_t stack) {
    return sym && stack < sym->nstacks ? sym->through1[stack] - 1 : -1;
}

/* vt_symbolize for the reports of a mark (report/since.c), which a test
 * runner may ask for at every test: only the stacks that s's live
 * allocations, holders and released memory name are symbolized (the
 * others are unnamed: site -1), and their frames are kept from one call
 * to the next in one table of the process's, dropped when code has left
 * the process since (tracker/departed.h's vt_departed_notes: an address
 * may then be another library's). Each call symbolized every stack the
 * process had ever made, opening every module on them and decompressing
 * their debug sections again: 40 ms a report in a small C program, half
 * a second a test under PyTorch. The table's lock is held until
 * vt_symbols_free (one such report at a time). NULL when memory ran out. */
struct vt_symbols *vt_symbolize_kept(const struct vt_snapshot *s);

/* In a forked child: the kept table dropped where a thread of the
 * parent's was making it. */
void vt_symbolize_reset_child(void);

/* Every frame of the stacks known now symbolized ahead of a snapshot, and
 * libdwfl's memory (tens of MB where a C library has a separate debug
 * file) given back before the snapshot's copy of the live allocations is
 * made: the two are never resident at once. NULL when the tracker's lock
 * was not free within within_ns (0: waits) or memory ran out. The same
 * frames as vt_symbolize's: vt_symbolize_with then symbolizes only what
 * the snapshot has that this does not, and takes `ahead` (NULL: none) over. */
struct vt_symbols_ahead;
struct vt_symbols_ahead *vt_symbolize_ahead(uint64_t within_ns);
struct vt_symbols *vt_symbolize_with(const struct vt_snapshot *s, struct vt_symbols_ahead *ahead);
void vt_symbols_ahead_free(struct vt_symbols_ahead *a);

/* The symbols of the first frame at return address `address` (as
 * captured; vt_frames_at counts its frames), or NULL when no stack of sym
 * has it. */
const struct vt_frame *vt_symbols_frame(const struct vt_symbols *sym, uintptr_t address);

/* The frames of stack `stack`, innermost first, each inlined function its
 * own, copied into out (room for VT_SHOWN_FRAMES); returns how many, 0 for
 * none (no symbols, no stack). */
size_t vt_stack_frames(const struct vt_symbols *sym, uint32_t stack, struct vt_frame *out);

/* The frame a report names as the call site of a stack: common/callsite.h's
 * rule (the innermost frame in the user's code). NULL for an empty stack. */
const struct vt_frame *vt_call_site(const struct vt_symbols *sym, uint32_t stack);

/* The name every in-process report gives a stack's call site: the
 * vt_site_label_of the frames vt_call_site and vt_sym_through pick. Two stacks with the same label are the same call site: the
 * holder tables group by it. Writes at most size bytes into buf; returns
 * buf. */
const char *vt_site_label(const struct vt_symbols *sym, uint32_t stack, char *buf, size_t size);

/* vt_site_label in its display form (common/display.h), for a report a
 * person reads: a function's or a file's name may hold control
 * characters. */
const char *vt_site_shown(const struct vt_symbols *sym, uint32_t stack, char *buf, size_t size);

/* The call site of each of the nstacks stacks of sym, as a group number:
 * out[stack] is the same for two stacks exactly when their vt_site_label
 * is: the one rule by which holder tables and growth group stacks. Groups
 * are numbered from 0 in the order of their lowest stack, and (lowest not
 * NULL) (*lowest)[group] is that stack, a malloc'd array. Without symbols
 * every stack is its own group. Returns a malloc'd array of nstacks
 * numbers and the number of groups in *ngroups; NULL when memory ran out. */
uint32_t *vt_site_groups(const struct vt_symbols *sym, size_t nstacks, size_t *ngroups, uint32_t **lowest);

#endif
