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

#include "../tracker/tracker.h"

struct vt_frame {
    uintptr_t address;      /* the return address as captured */
    const char *function;   /* NULL when unknown */
    const char *file;       /* NULL when unknown */
    int line;               /* 0 when unknown */
    const char *module;     /* path of the object; NULL when unknown */
    uintptr_t offset;       /* address relative to the module's load base */
    int python;             /* a Python frame (function, file, line only) */
};

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

/* The name every in-process report gives a stack's call site (the frame
 * vt_call_site picks): "function file:line" (a Python frame's qualified
 * name, script and line), "function (module+0xoffset)" without line
 * information, "function 0xaddress" without a module, "(no stack)" for an
 * empty stack. Two stacks with the same label are the same call site: the
 * holder tables group by it. Writes at most size bytes into buf; returns
 * buf. */
const char *vt_site_label(const struct vt_symbols *sym, uint32_t stack, char *buf, size_t size);

/* The index of that frame in frames[0..n), or -1 when n is 0. */
int vt_site_index(const struct vt_frame *frames, size_t n);

#endif
