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

/* The symbolized stacks of a snapshot: stacks[i] has depth[i] frames. */
struct vt_symbols {
    size_t nstacks;
    const struct vt_frame **stacks;
    uint32_t *depth;
    int *site;              /* per stack: the call-site frame, or -1 */
    void *priv;
};

struct vt_symbols *vt_symbolize(const struct vt_snapshot *s);
void vt_symbols_free(struct vt_symbols *sym);

/* The frame a report names as the call site of a stack: the innermost
 * Python frame when there is one, else the innermost frame outside the CUDA
 * driver and runtime. NULL for an empty stack. */
const struct vt_frame *vt_call_site(const struct vt_symbols *sym, uint32_t stack);

/* The name every in-process report gives a stack's call site: the
 * vt_frame_where of the frame vt_call_site picks, "(no stack)" for an
 * empty stack. Two stacks with the same label are the same call site: the
 * holder tables group by it. Writes at most size bytes into buf; returns
 * buf. */
const char *vt_site_label(const struct vt_symbols *sym, uint32_t stack, char *buf, size_t size);

#endif
