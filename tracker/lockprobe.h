/* lockprobe.h -- how long the tracker's locks are held, by the holder's
 * own CPU time: what a hooked call that waits for one of them waits for
 * at most, the tracker's own work, apart from the time the holder spends
 * off its CPU (the machine's scheduler).
 *
 * Built in only with -DVT_LOCK_PROBE (build/probe/libvramtrace.so, which
 * `bench_shapes dumpwait` runs under for its figures); everywhere else
 * each hook below is nothing. The probe reads the thread's CPU clock at
 * every take and give of a lock (a system call each), so it measures hold
 * times, not speed. Each hold is known by where its lock was taken (the
 * file and line of the slot_take or vt_global_lock); at exit the probe
 * prints, to stderr, the longest hold of a slot's lock and of the global
 * lock, and where each was taken. Internal to tracker/. */
#ifndef VT_LOCKPROBE_H
#define VT_LOCKPROBE_H

#include <stdint.h>

enum { VT_PROBE_SLOT, VT_PROBE_GLOBAL, VT_PROBE_KINDS };

#ifdef VT_LOCK_PROBE
/* The calling thread's CPU time, in ns. */
uint64_t vt_probe_cpu_ns(void) __attribute__((visibility("hidden")));
/* A hold of `kind`, taken at `where` at CPU time `since`, ends now. */
void vt_probe_held(int kind, uint64_t since, const char *where) __attribute__((visibility("hidden")));
/* Where the calling thread's next take is (VT_PROBE_AT). */
extern __thread const char *vt_probe_site __attribute__((visibility("hidden")));
#define VT_PROBE_STR2(x) #x
#define VT_PROBE_STR(x) VT_PROBE_STR2(x)
/* `call`, a take, known by this file and line. */
#define VT_PROBE_AT(call) (vt_probe_site = __FILE__ ":" VT_PROBE_STR(__LINE__), call)
#define VT_PROBE_FIELD uint64_t probe_since; const char *probe_where;
#define VT_PROBE_TAKEN(since, where) ((since) = vt_probe_cpu_ns(), (where) = vt_probe_site)
#define VT_PROBE_GIVEN(kind, since, where) vt_probe_held((kind), (since), (where))
#else
#define VT_PROBE_FIELD
#define VT_PROBE_TAKEN(since, where) ((void)0)
#define VT_PROBE_GIVEN(kind, since, where) ((void)0)
#endif

#endif
