/* pyborrow.c -- the Python frames of another thread, read without faulting:
 * what a thread without Python frames borrows (the rule is pystack.h's,
 * above vt_pystack_merge). */
#define _GNU_SOURCE
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "../common/sysver.h"
#include "pylayout.h"
#include "pystack.h"

#define L vt_pyl
#define RD(T, base, off) (*(T *)((char *)(base) + (off)))

#define MAX_THREADS 1024    /* thread states looked at, at most */
#define MAX_WALK 1024       /* frames stepped over, shims included */

static void *(*interp_main)(void);
static void *(*this_thread)(void);
static char *runtime;       /* _PyRuntime (3.10/3.11: holds the GIL's state) */

void vt_pyborrow_init(void *(*lookup)(const char *), void *(*this_tstate)(void)) {
    *(void **)&interp_main = lookup("PyInterpreterState_Main");
    runtime = lookup("_PyRuntime");
    this_thread = this_tstate;
}

int vt_py_peek(const void *src, void *dst, size_t n) {
    struct iovec local = {dst, n}, remote = {(void *)src, n};
    if (n == 0) return 0;
    if ((uintptr_t)src < 4096 || (uintptr_t)src + n < (uintptr_t)src) return -1;
    return vt_process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == (ssize_t)n ? 0 : -1;
}

/* A pointer that could be an object's: user space, 8-byte aligned. */
static int plausible(uintptr_t p) { return p >= 4096 && p < (1ull << 47) && (p & 7) == 0; }

static int peek_ptr(uintptr_t base, int off, uintptr_t *out) {
    *out = 0;
    return off >= 0 && vt_py_peek((const void *)(base + (uintptr_t)off), out, sizeof *out) == 0 ? 0 : -1;
}

/* A thread state's innermost frame pointer, or 0. */
static uintptr_t current_frame(uintptr_t ts) {
    uintptr_t f = 0;
    if (L.ts_cframe >= 0) {
        uintptr_t cf;
        if (peek_ptr(ts, L.ts_cframe, &cf) != 0 || !plausible(cf) || peek_ptr(cf, L.cf_current, &f) != 0) return 0;
    } else if (peek_ptr(ts, L.ts_frame, &f) != 0) {
        return 0;
    }
    return plausible(f) ? f : 0;
}

/* One frame's fields, read in one go. */
struct frame_fields {
    uintptr_t code, previous, ip;
    int shim;   /* a C-stack shim frame (3.12+), or code is not Python's */
};

static int read_frame(uintptr_t f, struct frame_fields *out) {
    char buf[256];
    int offs[] = {L.fr_code, L.fr_previous, L.fr_instr, L.fr_lasti, L.fr_owner};
    int top = 0;
    for (size_t i = 0; i < sizeof offs / sizeof offs[0]; i++)
        if (offs[i] + 8 > top) top = offs[i] + 8;
    if ((size_t)top > sizeof buf || vt_py_peek((const void *)f, buf, (size_t)top) != 0) return -1;
    out->code = RD(uintptr_t, buf, L.fr_code);
    out->previous = RD(uintptr_t, buf, L.fr_previous);
    out->ip = L.minor == 10 ? (uintptr_t)RD(int, buf, L.fr_lasti) : RD(uintptr_t, buf, L.fr_instr);
    if (L.minor == 13) out->code &= ~(uintptr_t)3;
    out->shim = (L.fr_owner >= 0 && L.owner_cstack >= 0 && RD(char, buf, L.fr_owner) == L.owner_cstack) ||
                !out->code || (vt_py_none && out->code == (uintptr_t)vt_py_none);
    return 0;
}

int vt_pystack_foreign(const void *tstate, uintptr_t *out, int max) {
    if (!vt_pystack_version() || !plausible((uintptr_t)tstate)) return 0;
    uintptr_t f = current_frame((uintptr_t)tstate);
    int n = 0;
    for (int guard = 0; f && n < max && guard < MAX_WALK; guard++) {
        struct frame_fields fr;
        if (read_frame(f, &fr) != 0) break;
        if (!fr.shim) {
            if (!plausible(fr.code)) break;
            uintptr_t v = vt_py_code_value((const void *)fr.code, fr.ip, 1);
            if (!v) break;
            out[n++] = v | VT_PYFRAME_BORROWED;
        }
        if (fr.previous && !plausible(fr.previous)) break;
        f = fr.previous;
    }
    return n;
}

/* Whether a thread's innermost Python frame runs in a torch/autograd/
 * file. */
static int waits_in_autograd(uintptr_t ts) {
    uintptr_t f = current_frame(ts);
    for (int guard = 0; f && guard < 16; guard++) {
        struct frame_fields fr;
        if (read_frame(f, &fr) != 0) return 0;
        if (!fr.shim) {
            char hdr[512], file[512];
            uintptr_t fobj;
            if (!plausible(fr.code) || (size_t)L.co_filename + 8 > sizeof hdr ||
                vt_py_peek((const void *)fr.code, hdr, (size_t)(L.co_filename > L.ob_type ? L.co_filename : L.ob_type) + 8) != 0)
                return 0;
            if (RD(void *, hdr, L.ob_type) != vt_py_code_type) return 0;
            fobj = RD(uintptr_t, hdr, L.co_filename);
            if (!plausible(fobj) || vt_py_str_peek((const void *)fobj, file, sizeof file) < 0) return 0;
            return strstr(file, "/torch/autograd/") != NULL;
        }
        if (fr.previous && !plausible(fr.previous)) return 0;
        f = fr.previous;
    }
    return 0;
}

/* The address of the GIL's state, or 0. */
static uintptr_t gil_state(uintptr_t interp) {
    if (L.gil_runtime >= 0) return runtime ? (uintptr_t)runtime + (uintptr_t)L.gil_runtime : 0;
    if (L.gil_embedded >= 0) return interp + (uintptr_t)L.gil_embedded;
    uintptr_t g;
    if (L.gil_interp < 0 || peek_ptr(interp, L.gil_interp, &g) != 0 || !plausible(g)) return 0;
    return g;
}

int vt_pyborrow_frames(uintptr_t *out, int max) {
    if (!interp_main || !this_thread || L.ts_next < 0) return 0;
    void *interp = interp_main();
    if (!plausible((uintptr_t)interp)) return 0;
    uintptr_t self = (uintptr_t)this_thread(), gil = gil_state((uintptr_t)interp), holder = 0;
    int locked = 0;
    if (gil && (vt_py_peek((const void *)(gil + (uintptr_t)L.gil_locked), &locked, sizeof locked) != 0 ||
                peek_ptr(gil, L.gil_holder, &holder) != 0))
        locked = 0, holder = 0;
    uintptr_t ts = 0, found = 0;
    int count = 0;
    if (peek_ptr((uintptr_t)interp, L.interp_threads, &ts) != 0) return 0;
    for (int i = 0; ts && i < MAX_THREADS && count < 2; i++) {
        if (!plausible(ts)) break;
        if (ts != self && !(locked && holder == ts) && waits_in_autograd(ts)) {
            found = ts;
            count++;
        }
        if (peek_ptr(ts, L.ts_next, &ts) != 0) break;
    }
    return count == 1 ? vt_pystack_foreign((const void *)found, out, max) : 0;
}
