/* deepbind.h -- libraries loaded with RTLD_DEEPBIND, bound to the wrappers
 * (deepbind.c).
 *
 * RTLD_DEEPBIND puts a library's own scope (itself and its dependencies)
 * before the global one, where vramtrace's exports and its dlsym and
 * dlopen stand: its CUDA references, and the runtime's dlopen and dlsym
 * by which the runtime reaches the driver, would bind past vramtrace. */
#ifndef VT_DEEPBIND_H
#define VT_DEEPBIND_H

/* What vt_dlopen_deep answers when the real dlopen must run as the
 * caller's own (the dlopen stub then jumps to it). */
#define VT_DLOPEN_PASS ((void *)-1)

/* dlopen(file, mode) for a mode with RTLD_DEEPBIND, called by the dlopen
 * stub with the caller's return address: the real dlopen, then each
 * object it loaded has its references to a hooked name (and to dlopen,
 * dlsym, dlclose) pointed at what the dlsym override hands out for the
 * definition it bound to. Its result and dlerror() are the real dlopen's.
 * VT_DLOPEN_PASS when where the caller stands changes what the file names
 * (a `$` in it, or a bare name the caller's search path finds elsewhere):
 * one warning then (once per name, and not for an RTLD_NOLOAD probe or a
 * bare name already loaded, which load nothing), and the real dlopen runs
 * unfollowed; VT_DLOPEN_PASS also, without a word, where vramtrace stands
 * behind the C library (infront.h) and tracks nothing. */
void *vt_dlopen_deep(const char *file, int mode, void *caller);

#endif
