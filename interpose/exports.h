/* exports.h -- whether vramtrace's CUDA exports can be seen (exports.c).
 *
 * In a process without a CUDA library (libcuda.so*, libcudart*) the hooked
 * names vramtrace exports are invisible, as if it did not define them; in
 * one where vramtrace stands behind the C library (infront.h) they are
 * invisible for good. */
#ifndef VT_EXPORTS_H
#define VT_EXPORTS_H

/* Whether a CUDA library is in the link map now (read there, not from
 * what was seen before: at the start, the flag's page is not touched). */
int vt_exports_cuda_mapped(void);

/* Called by the dlopen override before the real dlopen: the objects it
 * loads bind the exports only if they bring a CUDA library. */
void vt_exports_before_dlopen(void);

/* Called by the dlsym override before it answers a hooked name: whether the
 * exports are invisible now (no CUDA library is loaded), so that the real
 * dlsym answers such a name as without vramtrace. */
int vt_exports_hidden(void);

#endif
