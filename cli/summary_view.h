/* summary_view.h -- a dump's model in the shapes of common/summary.h, so
 * that `vramtrace report` prints the totals, holders, largest live
 * allocations and growing call sites with the library's own printers. */
#ifndef VR_SUMMARY_VIEW_H
#define VR_SUMMARY_VIEW_H

#include <stdio.h>

#include "reporters.h"

/* The devices of d, as the library's exit summary lists them. */
void vr_put_devices(FILE *f, const struct vm_dump *d);

/* The totals of d as the library's exit summary gives them: live "at exit"
 * in an exit dump, "at the dump" in any other. */
void vr_put_totals(FILE *f, const struct vm_dump *d);

/* The holders of d at o->at merged by call site (vr_combine's rule), each
 * with its largest stack; a line saying so when the dump has none at that
 * moment. */
void vr_put_holders(FILE *f, const struct vm_dump *d, const struct vr_opts *o);

/* What context resets released without a free, by call site (stacks of
 * one label in one row, with the largest one's frames), as the holders
 * table prints its rows: device memory, then pinned host memory in a
 * table of its own; nothing for a kind the dump has none of. */
void vr_put_released(FILE *f, const struct vm_dump *d, int top);

/* The largest live allocations of device memory this process owned. */
void vr_put_live(FILE *f, const struct vm_dump *d, int top);

/* The growing call sites of d. */
void vr_put_growing(FILE *f, const struct vm_dump *d, int top);

/* A stack of d, innermost first, each line after indent, made safe. */
void vr_put_stack(FILE *f, const struct vm_dump *d, size_t stack, const char *indent);

#endif
