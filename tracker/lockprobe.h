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

/* Kinds of lock; VT_PROBE_HANDOVER is not one, but the waits of a hooked
 * call that gives its slot's lock to a waiter (vt_slot_hand_over without
 * may_yield) are timed as waits are. */
enum { VT_PROBE_SLOT, VT_PROBE_GLOBAL, VT_PROBE_HANDOVER, VT_PROBE_KINDS };

/* What a hold did, counted by the holding thread (VT_PROBE_COUNT): the
 * longest hold of each kind keeps what its thread counted from the take
 * to the give, and the page faults and context switches of that thread
 * meanwhile (getrusage), to say where its time went. A hold inside
 * another of the same kind (a slot's lock taken under another's) counts
 * from its own take, and the outer one then from there. */
enum {
    VT_PC_CHUNKS,     /* chunks of a live table copied for a snapshot (cow.c) */
    VT_PC_RECS,       /* records kept into a snapshot's list */
    VT_PC_KEEP_US,    /* CPU time in the list's keep, us */
    VT_PC_KEEP_WAIT,  /* the list's lock found held */
    VT_PC_MOVES,      /* steps of a growing table's move */
    VT_PC_RESERVE,    /* the spilled list's file made longer */
    VT_PC_STAGE_GROW, /* a spilled list's stage begun in fresh memory */
    VT_PC_SYNC_WRITES, /* a queued stage written by whoever put (the queue full) */
    VT_PC_UNMAPS,     /* pages given back to the kernel (madvise, munmap) */
    VT_PC_MINFLT,     /* minor page faults */
    VT_PC_MAJFLT,     /* major page faults */
    VT_PC_NVCSW,      /* voluntary context switches (slept) */
    VT_PC_NIVCSW,     /* involuntary ones (preempted) */
    VT_PC_COUNTS
};

#ifdef VT_LOCK_PROBE
/* The calling thread's CPU time, in ns. */
uint64_t vt_probe_cpu_ns(void) __attribute__((visibility("hidden")));
/* A take of `kind`: the thread's counts kept, and its CPU time in ns. */
uint64_t vt_probe_taken(int kind) __attribute__((visibility("hidden")));
extern __thread uint64_t vt_probe_n[VT_PC_COUNTS] __attribute__((visibility("hidden")));
#define VT_PROBE_COUNT(c, n) (vt_probe_n[c] += (n))
/* A wait for a lock of `kind` (its slow path), by the wall clock: from
 * VT_PROBE_WAIT_BEGIN to VT_PROBE_WAIT_END, and where the holder took it
 * when the wait began (read without the lock: a diagnostic). */
uint64_t vt_probe_wall_ns(void) __attribute__((visibility("hidden")));
void vt_probe_waited(int kind, uint64_t since, const char *holder) __attribute__((visibility("hidden")));
#define VT_PROBE_WAIT_BEGIN(since, holder, where) \
    uint64_t since = vt_probe_wall_ns();          \
    const char *holder = __atomic_load_n(&(where), __ATOMIC_RELAXED)
#define VT_PROBE_WAIT_END(kind, since, holder) vt_probe_waited((kind), (since), (holder))
/* A hold of `kind`, taken at `where` at CPU time `since`, ends now. */
void vt_probe_held(int kind, uint64_t since, const char *where) __attribute__((visibility("hidden")));
/* Where the calling thread's next take is (VT_PROBE_AT). */
extern __thread const char *vt_probe_site __attribute__((visibility("hidden")));
#define VT_PROBE_STR2(x) #x
#define VT_PROBE_STR(x) VT_PROBE_STR2(x)
/* `call`, a take, known by this file and line. */
#define VT_PROBE_AT(call) (vt_probe_site = __FILE__ ":" VT_PROBE_STR(__LINE__), call)
#define VT_PROBE_FIELD uint64_t probe_since; const char *probe_where;
#define VT_PROBE_TAKEN(kind, since, where) ((since) = vt_probe_taken(kind), (where) = vt_probe_site)
#define VT_PROBE_GIVEN(kind, since, where) vt_probe_held((kind), (since), (where))
#else
#define VT_PROBE_FIELD
#define VT_PROBE_COUNT(c, n) ((void)0)
#define VT_PROBE_WAIT_BEGIN(since, holder, where) ((void)0)
#define VT_PROBE_WAIT_END(kind, since, holder) ((void)0)
#define VT_PROBE_TAKEN(kind, since, where) ((void)0)
#define VT_PROBE_GIVEN(kind, since, where) ((void)0)
#endif

#endif
