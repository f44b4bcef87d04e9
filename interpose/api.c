/* api.c -- the door a program opens itself: the functions of
 * include/vramtrace.h.
 *
 * The only names besides the hooked CUDA and dl names that the library
 * exports, all with the vramtrace_ prefix (and the PyTorch companion's
 * vt_torch_submit, vt_torch_warn); exports.c rewrites only the
 * CUDA names, so these are found by dlsym whether or not a CUDA library is
 * loaded. Each call keeps the caller's errno, marks the thread busy like a
 * hook (a CUDA call a signal handler makes meanwhile passes through), and
 * hands the work down: marks and steps to the tracker (tracker/mark.h,
 * tracker/steps.h), reports and
 * dumps to the writer (report/since.h, report/output.h). One made from a
 * signal handler that interrupted vramtrace's own code returns
 * VRAMTRACE_FAILED rather than wait for a lock that code holds. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../include/vramtrace.h"
#include "../report/output.h"
#include "../report/since.h"
#include "../common/warn.h"
#include "../report/torch.h"
#include "../tracker/mark.h"
#include "../tracker/steps.h"
#include "hook.h"
#include "infront.h"

#define VT_API __attribute__((visibility("default")))

/* Loaded behind the C library (infront.h), vramtrace tracks nothing: each
 * call answers as vramtrace.h's stand-ins do without it. */
#define API_BEHIND(v)                                                          \
    if (__builtin_expect(vt_behind(), 0)) return (v)

#define API_ENTER                                                              \
    if (__builtin_expect(vt_busy > 0, 0)) return VRAMTRACE_FAILED;             \
    int api_errno_ = errno;                                                    \
    vt_busy++;                                                                 \
    vt_init()
#define API_LEAVE(v)                                                           \
    do {                                                                       \
        vt_busy--;                                                             \
        errno = api_errno_;                                                    \
        return (v);                                                            \
    } while (0)

VT_API int vramtrace_active(void) { return !vt_behind(); }

VT_API int vramtrace_mark(void) {
    API_BEHIND(VRAMTRACE_INACTIVE);
    API_ENTER;
    int id = vt_mark_begin();
    API_LEAVE(id > 0 ? id : VRAMTRACE_NO_ROOM);
}

VT_API int vramtrace_mark_end(int mark) {
    API_BEHIND(VRAMTRACE_INACTIVE);
    API_ENTER;
    int r = vt_mark_end(mark);
    API_LEAVE(r == 0 ? VRAMTRACE_OK : VRAMTRACE_BAD_MARK);
}

VT_API int vramtrace_usage(int mark, int device, struct vramtrace_usage *out) {
    if (vt_behind()) {
        if (out) memset(out, 0, sizeof *out);
        return VRAMTRACE_INACTIVE;
    }
    API_ENTER;
    struct vt_mark_usage u;
    int r = out ? vt_mark_usage(mark, device, &u) : -1;
    if (r == 0) *out = (struct vramtrace_usage){u.live_bytes, u.live_count, u.peak_bytes};
    API_LEAVE(r == 0 ? VRAMTRACE_OK : VRAMTRACE_BAD_MARK);
}

enum report { LEAKS, LEAKS_OUTSIDE_TORCH, PEAK };

/* A report of mark into buf, snprintf's way. */
static long to_buffer(int mark, char *buf, size_t size, enum report which) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return VRAMTRACE_FAILED;
    struct vt_leak_result res;
    int r = which == PEAK ? vt_since_peak(f, mark) : vt_since_leaks(f, mark, which == LEAKS_OUTSIDE_TORCH, &res);
    int bad = fclose(f) != 0;
    if (r == 0 && !bad && buf && size) {
        size_t n = len < size - 1 ? len : size - 1;
        memcpy(buf, text, n);
        buf[n] = '\0';
    }
    free(text);
    if (r != 0) return VRAMTRACE_BAD_MARK;
    return bad ? VRAMTRACE_FAILED : (long)len;
}

VT_API long vramtrace_leaks(int mark, char *buf, size_t size) {
    if (vt_behind()) {
        if (buf && size) buf[0] = '\0';
        return VRAMTRACE_INACTIVE;
    }
    API_ENTER;
    long r = to_buffer(mark, buf, size, LEAKS);
    API_LEAVE(r);
}

VT_API long vramtrace_leaks_outside_torch(int mark, char *buf, size_t size) {
    if (vt_behind()) {
        if (buf && size) buf[0] = '\0';
        return VRAMTRACE_INACTIVE;
    }
    API_ENTER;
    long r = to_buffer(mark, buf, size, LEAKS_OUTSIDE_TORCH);
    API_LEAVE(r);
}

VT_API long vramtrace_peak(int mark, char *buf, size_t size) {
    if (vt_behind()) {
        if (buf && size) buf[0] = '\0';
        return VRAMTRACE_INACTIVE;
    }
    API_ENTER;
    long r = to_buffer(mark, buf, size, PEAK);
    API_LEAVE(r);
}

VT_API int vramtrace_dump(const char *name, char *path, size_t size) {
    if (vt_behind()) {
        if (path && size) path[0] = '\0';
        return VRAMTRACE_INACTIVE;
    }
    API_ENTER;
    if (path && size) path[0] = '\0';
    int r = vt_output_named(name, path, size);
    API_LEAVE(r == 0 ? VRAMTRACE_OK : VRAMTRACE_FAILED);
}

VT_API int vramtrace_step(void) {
    API_BEHIND(VRAMTRACE_INACTIVE);
    API_ENTER;
    uint64_t n = vt_tracker_step();
    API_LEAVE(n > 0x7fffffff ? 0x7fffffff : (int)n);
}

/* The PyTorch companion's door (report/torch.h): the library is set up
 * first, as for a hooked call, since a process whose first touch of a GPU
 * is PyTorch refusing its first tensor (a memory fraction of 0) has made
 * no allocation: without it, that failure had no post-mortem, exit report
 * or dump. */
/* The companion's word that an optimizer step began (its first). */
VT_API void vt_torch_optimizer_step(void) {
    if (!vt_behind()) vt_torch_step_began();
}

/* The companion's record (the door's set-up above), refused as
 * vt_torch_take refuses one where vramtrace stands behind the C library:
 * it tracks nothing there, and sets nothing up. */
VT_API int vt_torch_submit(const char *text, size_t len) {
    if (vt_behind()) return -1;
    vt_init();
    return vt_torch_take(text, len);
}

/* The companion's warnings (a part of PyTorch it cannot follow): the
 * library's own line, under the same cap as its other warnings. */
VT_API void vt_torch_warn(const char *text) {
    if (text) vt_warn("%s", text);
}
