/* callsite.c -- the call-site rule and the call site's name. */
#include <fnmatch.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "callsite.h"
#include "format.h"

static char *app_patterns, *library_patterns;

void vt_callsite_configure(const char *app, const char *library) {
    free(app_patterns);
    free(library_patterns);
    app_patterns = app && *app ? strdup(app) : NULL;
    library_patterns = library && *library ? strdup(library) : NULL;
}

static const char *last_part(const char *path) {
    const char *b = strrchr(path, '/');
    return b ? b + 1 : path;
}

/* Whether one pattern (len bytes of pat) matches path. */
static int match_one(const char *pat, size_t len, const char *path) {
    char p[4096];
    if (len == 0 || len >= sizeof p) return 0;
    memcpy(p, pat, len);
    p[len] = '\0';
    if (fnmatch(p, path, 0) == 0) return 1;
    while (len > 1 && p[len - 1] == '/') p[--len] = '\0';
    if (strncmp(path, p, len) == 0 && path[len] == '/') return 1;   /* a folder it is under */
    return !strchr(p, '/') && fnmatch(p, last_part(path), 0) == 0;
}

/* Whether any of the ':'-separated patterns matches path. */
static int match_list(const char *list, const char *path) {
    if (!list || !path) return 0;
    for (const char *s = list; *s;) {
        size_t len = strcspn(s, ":");
        if (match_one(s, len, path)) return 1;
        s += len;
        if (*s == ':') s++;
    }
    return 0;
}

/* A file of vramtrace's own Python packages (python/), wherever they run
 * from: by its own name, so that a user's folder that happens to share a
 * package's name stays the user's. */
static int own_python_file(const char *file) {
    static const char *const own[] = {
        "/vramtrace_torch/__init__.py", "/vramtrace_torch/collect.py", "/vramtrace_torch/_boot/sitecustomize.py",
        "/pytest_vramtrace/__init__.py", "/pytest_vramtrace/api.py",   "/pytest_vramtrace/plugin.py",
    };
    size_t n = file ? strlen(file) : 0;
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++) {
        size_t k = strlen(own[i]);
        if (n >= k && strcmp(file + n - k, own[i]) == 0) return 1;
    }
    return 0;
}

/* A Python file of the standard library (.../lib/pythonX.Y/...), installed
 * packages, frozen modules, PyTorch, or vramtrace's own. */
static int python_library_path(const char *file) {
    if (strncmp(file, "<frozen ", 8) == 0) return 1;
    if (strstr(file, "/site-packages/") || strstr(file, "/dist-packages/")) return 1;
    if (strncmp(file, "torch/", 6) == 0 || strstr(file, "/torch/")) return 1;
    /* vramtrace's own Python packages, wherever they run from (a PyTorch
     * error seen by the companion is recorded inside its call). */
    if (own_python_file(file)) return 1;
    for (const char *s = strstr(file, "lib"); s; s = strstr(s + 1, "lib")) {
        if (s != file && s[-1] != '/') continue;
        const char *p = s + 3;
        if (strncmp(p, "64", 2) == 0) p += 2;
        if (strncmp(p, "/python", 7) != 0) continue;
        p += 7;
        if (*p < '0' || *p > '9') continue;
        while ((*p >= '0' && *p <= '9') || *p == '.') p++;
        if (*p == '/') return 1;
    }
    return 0;
}

static const char *const native_libraries[] = {
    "libtorch", "libc10", "libcuda.", "libcudart", "libcublas", "libcudnn", "libnccl", "libcufft",
    "libcurand", "libcusparse", "libcusolver", "libnvrtc", "libnvJitLink", "libnvToolsExt", "libcupti",
    "libnvidia-ml",
};

/* The interpreter and the C and C++ runtimes: the frames around every
 * program's own code (from _start to PyEval_EvalCode, ctypes' libffi). */
static const char *const runtime_libraries[] = {
    "libpython", "python3", "libc.so", "libc-", "ld-linux", "libstdc++", "libgcc_s", "libffi",
};

int vt_frame_is_runtime(const char *module) {
    if (!module) return 0;
    const char *b = last_part(module);
    /* CPython's own extension modules (_ctypes, _posixsubprocess, ...)
     * live in a lib-dynload/ folder (.../lib/pythonX.Y/lib-dynload/ in
     * every build: pyenv's, Debian's, conda's); without them every ctypes
     * call's site was `_call_function_pointer Modules/_ctypes/callproc.c`.
     * A file's name alone (`_name.cpython-311-...so`) is no rule: Cython
     * modules of installed packages are named so too. */
    if (strncmp(module, "lib-dynload/", 12) == 0 || strstr(module, "/lib-dynload/")) return 1;
    for (size_t i = 0; i < sizeof runtime_libraries / sizeof runtime_libraries[0]; i++)
        if (strncmp(b, runtime_libraries[i], strlen(runtime_libraries[i])) == 0) return 1;
    return 0;
}

int vt_frame_is_library(const char *file, const char *function, const char *module) {
    if (app_patterns) return !(match_list(app_patterns, file) || match_list(app_patterns, module));
    if (match_list(library_patterns, file) || match_list(library_patterns, module)) return 1;
    if (!module && file && python_library_path(file)) return 1;
    if (module) {
        const char *b = last_part(module);
        for (size_t i = 0; i < sizeof native_libraries / sizeof native_libraries[0]; i++)
            if (strncmp(b, native_libraries[i], strlen(native_libraries[i])) == 0) return 1;
        if (file && strstr(file, "/torch/")) return 1;
    }
    return vt_cuda_frame(module, function);
}

int vt_cuda_frame(const char *module, const char *function) {
    if (module) {
        const char *b = last_part(module);
        if (strncmp(b, "libcuda.", 8) == 0 || strncmp(b, "libcudart", 9) == 0) return 1;
    }
    const char *fn = function;
    if (!fn) return 0;
    if (strncmp(fn, "__cudart", 8) == 0) return 1;
    /* CUDA 13's static runtime (nvcc's default: libcudart_static.a linked
     * into the program) names its inner functions so: on an H100 the
     * leaks' call site read `libcudart_static_5382377d...` (program+0x3e36e)
     * where it is the program's leak_big. */
    if (strncmp(fn, "libcudart_static_", 17) == 0) return 1;
    if (strncmp(fn, "cuda", 4) == 0 && fn[4] >= 'A' && fn[4] <= 'Z') return 1;
    if (strncmp(fn, "cu", 2) == 0 && fn[2] >= 'A' && fn[2] <= 'Z') return 1;
    return 0;
}

int vt_frame_is_cut(const struct vt_frame *f) {
    static const char tail[] = " frames left out)";
    size_t n = f->function ? strlen(f->function) : 0, k = sizeof tail - 1;
    return f->python && f->file && strcmp(f->file, VT_CUT_FILE) == 0 && n > k && f->function[0] == '(' &&
           strcmp(f->function + n - k, tail) == 0;
}

static int is_library(const struct vt_frame *f) {
    return vt_frame_is_library(f->file, f->function, f->python ? NULL : f->module);
}

/* The innermost frame, as the rule was before user frames: the innermost
 * Python frame, else the innermost frame outside the CUDA driver and
 * runtime, else frame 0. */
static int innermost_index(const struct vt_frame *frames, size_t n) {
    for (size_t j = 0; j < n; j++)
        if (frames[j].python && !vt_frame_is_cut(&frames[j])) return (int)j;
    for (size_t j = 0; j < n; j++)
        if (!vt_cuda_frame(frames[j].module, frames[j].function)) return (int)j;
    return n > 0 ? 0 : -1;
}

/* The interpreter's and the C runtime's native frames are never the
 * user's code: a stack of native frames alone (a Python that vramtrace
 * does not read, or --python 0) named CPython's `cfunction_call
 * Objects/methodobject.c:542` as the call site of every PyTorch
 * allocation. With no frame of the user's, such a stack names the library
 * function the innermost of them called (`THPVariable_empty` in
 * libtorch_python, a thread's entry point in libnccl), not the allocator
 * deep inside it that every call shares. */
int vt_site_index(const struct vt_frame *frames, size_t n) {
    int python = 0;
    for (size_t j = 0; j < n && !python; j++) python = frames[j].python;
    for (size_t j = 0; j < n; j++)
        if (frames[j].python == python && !is_library(&frames[j]) && !vt_frame_is_cut(&frames[j]) &&
            (python || !vt_frame_is_runtime(frames[j].module)))
            return (int)j;
    for (size_t j = 0; j < n && !python; j++)
        if (vt_frame_is_runtime(frames[j].module)) {
            int entry = vt_site_through(frames, n, (int)j);
            if (entry >= 0) return entry;
            break;
        }
    return innermost_index(frames, n);
}

int vt_site_through(const struct vt_frame *frames, size_t n, int site) {
    if (site <= 0 || (size_t)site > n || is_library(&frames[site])) return -1;
    /* vramtrace's own frames (the companion records PyTorch's own refusal
     * inside its call) are never what the call went through. */
    for (int j = 0; j < site; j++)
        if (frames[j].python && is_library(&frames[j]) && !own_python_file(frames[j].file) &&
            !vt_frame_is_cut(&frames[j]))
            return j;
    for (int j = site; j-- > 0;)
        if (!frames[j].python && is_library(&frames[j]) && !vt_frame_is_runtime(frames[j].module) &&
            !vt_cuda_frame(frames[j].module, frames[j].function))
            return j;
    return -1;
}

const char *vt_frame_where(const struct vt_frame *f, char *buf, size_t size) {
    const char *fn = f->function && f->function[0] ? f->function : "??";
    const char *m = f->module ? strrchr(f->module, '/') : NULL;
    /* The frames a deep stack left out: their count says it all. */
    if (vt_frame_is_cut(f)) snprintf(buf, size, "%s", fn);
    else if (f->file) snprintf(buf, size, "%s %s:%ld", fn, f->file, f->line);
    else if (f->python) snprintf(buf, size, "%s (Python)", fn);
    else if (f->module) snprintf(buf, size, "%s (%s+0x%" PRIx64 ")", fn, m ? m + 1 : f->module, f->offset);
    else snprintf(buf, size, "%s 0x%" PRIx64, fn, f->address);
    return vt_utf8_whole(buf, size);
}

const char *vt_site_name(const struct vt_frame *site, char *buf, size_t size) {
    if (site) return vt_frame_where(site, buf, size);
    snprintf(buf, size, "(no stack)");
    return buf;
}

/* A Python library file without its installation's folders. */
static const char *short_file(const char *file) {
    const char *best = file;
    const char *cut[] = {"/site-packages/", "/dist-packages/"};
    for (size_t i = 0; i < 2; i++) {
        const char *s = strstr(file, cut[i]);
        if (s) return s + strlen(cut[i]);
    }
    for (const char *s = strstr(file, "/python"); s; s = strstr(s + 1, "/python")) {
        const char *p = s + 7;
        if (*p < '0' || *p > '9') continue;
        while ((*p >= '0' && *p <= '9') || *p == '.') p++;
        if (*p == '/') best = p + 1;
    }
    return best;
}

/* A C++ function's name without its parameter list (and what follows
 * it: " const", " &&", " noexcept"): the name up to the '(' that matches
 * the ')' it ends with. A name that does not end so has no parameter list
 * (DWARF's plain name of an inlined function, "grab_with<...<lambda(int)>
 * >", "operator()") and is kept whole. */
static const char *without_arguments(const char *name, char *buf, size_t size) {
    static const char *const after[] = {" const", " volatile", " &&", " &", " noexcept"};
    size_t n = strlen(name);
    for (int again = 1; again;) {
        again = 0;
        for (size_t i = 0; i < sizeof after / sizeof *after; i++) {
            size_t k = strlen(after[i]);
            if (n >= k && memcmp(name + n - k, after[i], k) == 0) {
                n -= k;
                again = 1;
            }
        }
    }
    if (n == 0 || name[n - 1] != ')') return name;
    int depth = 0;
    for (size_t j = n; j-- > 0;) {
        if (name[j] == ')') depth++;
        else if (name[j] == '(' && --depth == 0) {
            /* "operator()" alone: the parentheses are the name's. */
            if (j >= 8 && memcmp(name + j - 8, "operator", 8) == 0 && j + 2 == n) return name;
            if (j == 0 || j >= size) return name;
            memcpy(buf, name, j);
            buf[j] = '\0';
            return buf;
        }
    }
    return name;
}

const char *vt_site_label_of(const struct vt_frame *site, const struct vt_frame *through, char *buf,
                             size_t size) {
    vt_site_name(site, buf, size);
    if (!site || !through || size == 0) return buf;
    size_t k = strlen(buf);
    struct vt_frame t = *through;
    if (t.python && t.file) t.file = short_file(t.file);
    char fn[512];
    if (!t.python && t.function) t.function = without_arguments(t.function, fn, sizeof fn);
    char where[1024];
    snprintf(buf + k, size - k, " -> %s", vt_frame_where(&t, where, sizeof where));
    return vt_utf8_whole(buf, size);
}
