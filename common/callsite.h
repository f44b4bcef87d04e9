/* callsite.h -- which frame of a stack a report names as its call site.
 *
 * The innermost frame outside the CUDA driver and runtime: frames in
 * libcuda.* and libcudart*, and frames of a statically linked runtime
 * (functions named cuda[A-Z]..., cu[A-Z]... or __cudart...), are skipped. */
#ifndef VT_CALLSITE_H
#define VT_CALLSITE_H

/* Whether a frame (module path and function name, either may be NULL)
 * belongs to the CUDA driver or runtime. */
int vt_cuda_frame(const char *module, const char *function);

#endif
