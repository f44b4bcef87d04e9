/* vramtrace.h -- per-test GPU memory checks from inside a program.
 *
 * libvramtrace.so, preloaded, exports the functions below. A program (a
 * test runner, a library's test suite) asks it, at any point and from any
 * thread:
 *   - whether vramtrace is active in this process;
 *   - a mark: a point after which every allocation of device memory is
 *     counted until it is freed;
 *   - since a mark, per device or in all: the bytes and allocations still
 *     live and the peak of those live bytes;
 *   - the allocations made since a mark and still live, with their stacks,
 *     in LeakSanitizer's words (the exit leak check's report, suppressions
 *     included, pinned host memory too, as the exit check counts it), and
 *     the holders of device memory at the mark's peak in the same words;
 *   - a named dump of the whole process, for `vramtrace report`;
 *   - a step boundary: the program's own unit of work (a training step),
 *     which growth is then said per (PyTorch's optimizer steps are marked
 *     without a call, by vramtrace's companion).
 *
 * Do not link against the library: find it at run time, so that the same
 * binary runs with and without vramtrace. vramtrace_load() does that with
 * dlsym; without vramtrace every function it fills in returns
 * VRAMTRACE_INACTIVE (vramtrace_active() returns 0):
 *
 *   struct vramtrace_api vt;
 *   vramtrace_load(&vt);
 *   int mark = vt.mark();
 *   run_one_test();
 *   struct vramtrace_usage u;
 *   if (vt.usage(mark, -1, &u) == 0 && u.live_bytes > 0) {
 *       char report[65536];
 *       vt.leaks(mark, report, sizeof report);
 *       fputs(report, stderr);
 *   }
 *   vt.mark_end(mark);
 *
 * Link with -ldl on a C library older than glibc 2.34. */
#ifndef VRAMTRACE_H
#define VRAMTRACE_H

#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

#define VRAMTRACE_API_VERSION 3

/* What the functions return besides their figures. */
#define VRAMTRACE_OK 0
#define VRAMTRACE_INACTIVE (-1) /* vramtrace is not loaded in this process */
#define VRAMTRACE_BAD_MARK (-2) /* not a mark that is open, or a device out of range */
#define VRAMTRACE_NO_ROOM (-3)  /* 64 marks are open already, or memory ran out */
#define VRAMTRACE_FAILED (-4)   /* the dump or report could not be written */

/* Device memory since a mark: this process's own (not pinned host memory,
 * not memory opened from another process; vramtrace_leaks reports those
 * too). */
struct vramtrace_usage {
    uint64_t live_bytes; /* allocated since the mark and still live */
    uint64_t live_count;
    uint64_t peak_bytes; /* the highest live_bytes since the mark */
};

/* 1 when vramtrace is loaded and tracking this process: preloaded, or
 * linked into the program. 0 from a libvramtrace.so the program loaded
 * itself with dlopen after it started, which nothing reaches (its other
 * functions then return VRAMTRACE_INACTIVE). */
int vramtrace_active(void);

/* Open a mark now; its id (> 0), or VRAMTRACE_NO_ROOM. Marks are
 * independent: each thread or nested scope may have its own. */
int vramtrace_mark(void);

/* Close a mark (its figures are gone). VRAMTRACE_OK or VRAMTRACE_BAD_MARK. */
int vramtrace_mark_end(int mark);

/* What mark counts on device `device` (a CUDA ordinal, 0 to 63), or in all
 * devices (-1: their sum, whose peak is the peak of the sum). An ordinal
 * the process never used counts zero, whether or not the machine has that
 * device. VRAMTRACE_OK, or VRAMTRACE_BAD_MARK (a mark not open, a device
 * below -1 or above 63). */
int vramtrace_usage(int mark, int device, struct vramtrace_usage *out);

/* The leak report of the allocations made since mark and still live, in
 * buf (NUL-terminated, cut to size); empty when there are none. Every kind
 * the exit leak check reports is in it: device memory and also pinned host
 * memory (cudaMallocHost, cuMemHostAlloc, host registrations, ...), which
 * struct vramtrace_usage leaves out, so that a test's leak is that test's
 * failure and not only the exit's. Its SUMMARY line counts them all.
 * Returns the length of the whole report, as snprintf does, or a
 * VRAMTRACE_ code below zero. */
long vramtrace_leaks(int mark, char *buf, size_t size);

/* As vramtrace_leaks, of the mark's live allocations that did not go
 * through PyTorch's CUDA allocator (no frame in libc10_cuda): in a
 * process that uses PyTorch, what a test made through CuPy, ctypes or an
 * extension's cudaMalloc and kept, without the segments of PyTorch's
 * cache (whose tensors PyTorch counts itself). Since
 * VRAMTRACE_API_VERSION 3. */
long vramtrace_leaks_outside_torch(int mark, char *buf, size_t size);

/* The holders at the mark's peak (the allocations since the mark live
 * then, by stack), in the leak report's words, as vramtrace_leaks returns
 * them; empty when nothing was allocated since the mark. */
long vramtrace_peak(int mark, char *buf, size_t size);

/* A dump of the whole process now, to VRAMTRACE_OUT's path with ".NAME"
 * before ".json" (NAME: name, at most 100 characters, every character but
 * letters, digits, '.', '-' and '_' made '_'); its path in path (when size
 * > 0). VRAMTRACE_OK, or VRAMTRACE_FAILED (dumps off, an empty or longer
 * name, a file not written). */
int vramtrace_dump(const char *name, char *path, size_t size);

/* Mark a step boundary now: everything allocated or freed before the call
 * belongs to the steps before it. Returns the step's number (1 for the
 * first call, counted over the whole run; INT_MAX past it), or
 * VRAMTRACE_INACTIVE. */
int vramtrace_step(void);

/* ---------------------------------------------------------- the loader */

struct vramtrace_api {
    int (*active)(void);
    int (*mark)(void);
    int (*mark_end)(int mark);
    int (*usage)(int mark, int device, struct vramtrace_usage *out);
    long (*leaks)(int mark, char *buf, size_t size);
    long (*peak)(int mark, char *buf, size_t size);
    int (*dump)(const char *name, char *path, size_t size);
    int (*step)(void);  /* since VRAMTRACE_API_VERSION 2 */
    long (*leaks_outside_torch)(int mark, char *buf, size_t size);  /* since VRAMTRACE_API_VERSION 3 */
};

static inline int vramtrace_off_active_(void) { return 0; }
static inline int vramtrace_off_mark_(void) { return VRAMTRACE_INACTIVE; }
static inline int vramtrace_off_mark_end_(int mark) { (void)mark; return VRAMTRACE_INACTIVE; }
static inline int vramtrace_off_usage_(int mark, int device, struct vramtrace_usage *out) {
    (void)mark; (void)device;
    if (out) memset(out, 0, sizeof *out);
    return VRAMTRACE_INACTIVE;
}
static inline long vramtrace_off_report_(int mark, char *buf, size_t size) {
    (void)mark;
    if (buf && size) buf[0] = '\0';
    return VRAMTRACE_INACTIVE;
}
static inline int vramtrace_off_dump_(const char *name, char *path, size_t size) {
    (void)name;
    if (path && size) path[0] = '\0';
    return VRAMTRACE_INACTIVE;
}

static inline int vramtrace_off_step_(void) { return VRAMTRACE_INACTIVE; }

/* Fill api with vramtrace's functions when it is loaded in this process,
 * else with ones that do nothing and return VRAMTRACE_INACTIVE. Returns 1
 * when vramtrace is active. Cheap enough to call once per test. */
static inline int vramtrace_load(struct vramtrace_api *api) {
    /* RTLD_DEFAULT, which glibc defines only with _GNU_SOURCE. */
    void *all = (void *)0;
#define VRAMTRACE_FIND_(field, name, off)                                      \
    do {                                                                       \
        void *p_ = dlsym(all, name);                                           \
        if (p_) memcpy((void *)&api->field, &p_, sizeof p_);                   \
        else api->field = off;                                                 \
    } while (0)
    VRAMTRACE_FIND_(active, "vramtrace_active", vramtrace_off_active_);
    VRAMTRACE_FIND_(mark, "vramtrace_mark", vramtrace_off_mark_);
    VRAMTRACE_FIND_(mark_end, "vramtrace_mark_end", vramtrace_off_mark_end_);
    VRAMTRACE_FIND_(usage, "vramtrace_usage", vramtrace_off_usage_);
    VRAMTRACE_FIND_(leaks, "vramtrace_leaks", vramtrace_off_report_);
    VRAMTRACE_FIND_(peak, "vramtrace_peak", vramtrace_off_report_);
    VRAMTRACE_FIND_(dump, "vramtrace_dump", vramtrace_off_dump_);
    VRAMTRACE_FIND_(step, "vramtrace_step", vramtrace_off_step_);
    VRAMTRACE_FIND_(leaks_outside_torch, "vramtrace_leaks_outside_torch", vramtrace_off_report_);
#undef VRAMTRACE_FIND_
    return api->active();
}

#ifdef __cplusplus
}
#endif

#endif
