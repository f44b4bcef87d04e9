/* callsite.h -- which frame of a stack a report names as its call site,
 * and the name it gives it.
 *
 * The call site is the innermost Python frame when there is one, else the
 * innermost frame outside the CUDA driver and runtime: frames in libcuda.*
 * and libcudart*, and frames of a statically linked runtime (functions
 * named cuda[A-Z]..., cu[A-Z]... or __cudart...), are skipped. The library
 * and the CLI both ask these functions, so that a site is the same site in
 * the post-mortem, the dump and every CLI format. */
#ifndef VT_CALLSITE_H
#define VT_CALLSITE_H

#include <stddef.h>

#include "frame.h"

/* Whether a frame (module path and function name, either may be NULL)
 * belongs to the CUDA driver or runtime. */
int vt_cuda_frame(const char *module, const char *function);

/* The index of the call-site frame in frames[0..n) (innermost first), or
 * -1 when n is 0. */
int vt_site_index(const struct vt_frame *frames, size_t n);

/* A frame's name where it is a call site: "function file:line" (a Python
 * frame's qualified name, script and line), "function (Python)" for a
 * Python frame without its script, "function (module+0xoffset)" without
 * line information, "function 0xaddress" without a module ("??" for an
 * unknown function). Cut, where it does not fit in size bytes, at a whole
 * UTF-8 character. Writes into buf; returns buf. */
const char *vt_frame_where(const struct vt_frame *f, char *buf, size_t size);

/* The name of a stack's call site (vt_site_index's frame, NULL for an
 * empty stack): its vt_frame_where, "(no stack)" for none. The one label
 * every report gives a call site, in the library and the CLI. */
const char *vt_site_name(const struct vt_frame *site, char *buf, size_t size);

#endif
