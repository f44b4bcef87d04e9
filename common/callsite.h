/* callsite.h -- which frames of a stack a report names as its call site,
 * and the name it gives them.
 *
 * The call site is the innermost frame in the user's code: the innermost
 * Python frame that is not a library frame when the stack has Python
 * frames, else the innermost native frame that is not one. Library frames
 * (vt_frame_is_library): Python files in the standard library
 * (.../lib/pythonX.Y/), in site-packages or dist-packages, `<frozen ...>`
 * modules and PyTorch (a path with a torch/ folder); native frames of
 * libtorch*, libc10*, the CUDA driver and runtime (libcuda.*, libcudart*,
 * and a statically linked runtime's functions: cuda[A-Z]..., cu[A-Z]...,
 * __cudart...) and NVIDIA's libraries (libcublas*, libcudnn*, libnccl*,
 * libcufft*, libcurand*, libcusparse*, libcusolver*, libnvrtc*,
 * libnvJitLink*, libnvToolsExt*, libcupti*, libnvidia-ml*). With no user
 * frame the call site is the innermost frame as before: the innermost
 * Python frame, else the library function the innermost runtime frame
 * (vt_frame_is_runtime: the interpreter, the C runtime) called, else the
 * innermost one outside the CUDA driver and runtime. A runtime frame is
 * never a call site but in a stack of runtime frames alone (a ctypes call
 * that no Python frame was read for: its innermost frame is libffi's),
 * nor is the frame that stands for the frames a deep stack left out
 * (vt_frame_is_cut).
 *
 * Beside the user's frame, a report names the library frame the call went
 * through (vt_site_through): the innermost library Python frame inside it,
 * else the outermost library native frame inside it that is neither a
 * runtime frame (vt_frame_is_runtime) nor the CUDA driver or runtime: the
 * library's entry point the user's line called (`THPVariable_randn` in
 * libtorch_python, `cublasCreate_v2`), not the allocator deep inside it
 * that every call shares; else none. The label reads
 * "train_step train.py:47 -> Linear.forward torch/nn/modules/linear.py:125".
 *
 * VRAMTRACE_APP (paths or globs, ':'-separated) names the user's code: when
 * it is set, a frame is the user's exactly when its file (or, native, its
 * module or source file) matches one; everything else is library.
 * VRAMTRACE_LIBRARY adds library paths to the rule above. A pattern matches
 * a path when it is a glob of the whole path (`*` crosses '/'), a folder
 * the path is under, or, without a '/', a glob of the path's last part.
 *
 * The library and the CLI both ask these functions, so that a site is the
 * same site in the post-mortem, the dump and every CLI format; the library
 * sets the options (vt_callsite_configure) and records each stack's two
 * frames in the dump ("site", "through"), which the CLI reads rather than
 * choose again (a dump without them: the rule with no options). */
#ifndef VT_CALLSITE_H
#define VT_CALLSITE_H

#include <stddef.h>

#include "frame.h"

/* Set VRAMTRACE_APP's and VRAMTRACE_LIBRARY's patterns (':'-separated;
 * NULL or "" for none), copied. Not thread-safe: called once at start,
 * before any stack is named. */
void vt_callsite_configure(const char *app, const char *library);

/* Whether a frame belongs to a library rather than the user's code, by the
 * rule above and the configured options. A Python frame passes its file
 * and function (module NULL); a native frame its module path, function and
 * source file, any of them NULL when unknown. */
int vt_frame_is_library(const char *file, const char *function, const char *module);

/* Whether a frame is the one that stands for the frames a stack deeper
 * than a stack holds left out (common/frame.h's VT_CUT_FILE and
 * VT_CUT_NAME): neither a call site nor a library frame the call went
 * through, whatever the options say. */
int vt_frame_is_cut(const struct vt_frame *f);

/* Whether a native frame's module is the interpreter or the C or C++
 * runtime (libpython, python3, libc, ld-linux, libstdc++, libgcc_s,
 * libffi, and CPython's own extension modules: a module under a folder
 * named lib-dynload, .../lib/pythonX.Y/lib-dynload/_ctypes.cpython-311-
 * x86_64-linux-gnu.so; a file's name alone is not enough, installed
 * packages' Cython modules are named so too): never the user's code, yet
 * no library a call went through, so neither a call site nor the library
 * beside it; a view may fold it away with the library frames. */
int vt_frame_is_runtime(const char *module);

/* Whether a frame (module path and function name, either may be NULL)
 * belongs to the CUDA driver or runtime. */
int vt_cuda_frame(const char *module, const char *function);

/* The index of the call-site frame in frames[0..n) (innermost first), or
 * -1 when n is 0. */
int vt_site_index(const struct vt_frame *frames, size_t n);

/* The index of the library frame the call site `site` (vt_site_index's)
 * went through, or -1 when there is none to name. */
int vt_site_through(const struct vt_frame *frames, size_t n, int site);

/* A frame's name where it is a call site: "function file:line" (a Python
 * frame's qualified name, script and line), "function (Python)" for a
 * Python frame without its script, "function (module+0xoffset)" without
 * line information, "function 0xaddress" without a module ("??" for an
 * unknown function). Cut, where it does not fit in size bytes, at a whole
 * UTF-8 character. Writes into buf; returns buf. */
const char *vt_frame_where(const struct vt_frame *f, char *buf, size_t size);

/* Room for a call site's name whole, as the reports keep one (a name
 * past it is cut to 1,023 bytes). */
#define VT_SITE_NAME_MAX 1024

/* The name of a stack's call site (vt_site_index's frame, NULL for an
 * empty stack): its vt_frame_where, "(no stack)" for none. */
const char *vt_site_name(const struct vt_frame *site, char *buf, size_t size);

/* The one label every report gives a call site, in the library and the
 * CLI: vt_site_name(site), followed, when `through` is not NULL, by " -> "
 * and the through frame's vt_frame_where, shortened: a Python file to what
 * follows site-packages/, dist-packages/ or lib/pythonX.Y/, a C++ function
 * to its name without the parameter list. */
const char *vt_site_label_of(const struct vt_frame *site, const struct vt_frame *through, char *buf,
                             size_t size);

#endif
