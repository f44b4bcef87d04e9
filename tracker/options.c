/* options.c -- reading the settings table's VRAMTRACE_* variables into vt_opt. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../common/callsite.h"
#include "../common/fdkeep.h"
#include "../common/rawsys.h"
#include "../common/warn.h"
#include "options.h"

struct vt_options vt_opt;

extern char **environ;

/* What the loader reads: the kept variables, or the environment itself. */
static const struct vt_options_env *kept_env;

/* Start-up code (vt_options_keep and what it calls) sits in .text.startup
 * beside the library's other start-up code, and reads no constant data:
 * each page it touches is a page fault at every process start. */
#define VT_AT_START __attribute__((section(".text.startup")))

/* Whether e begins with the prefix p. */
VT_AT_START static int begins(const char *e, const char *p) {
    for (; *p; e++, p++)
        if (*e != *p) return 0;
    return 1;
}

/* Copy the string `from`, its 0 included, into `to` if it fits in `room`
 * bytes: its length with the 0, or 0 when it does not fit. A loop, not
 * strlen and memcpy: at the start each C library function called first is
 * bound then (a symbol look-up, a thousand instructions each), and the
 * barrier keeps the compiler from making the loop those calls again. */
VT_AT_START static size_t copy_in(char *to, const char *from, size_t room) {
    size_t n = 0;
    do {
        if (n == room) return 0;
        to[n] = from[n];
        __asm__("" : "+r"(n));
    } while (from[n++]);
    return n;
}

/* The value of `name` among n kept variables, or NULL. */
VT_AT_START static const char *kept_value(const char *const *vars, int n, const char *name) {
    for (int i = 0; i < n; i++) {
        const char *v = vars[i];
        if (!begins(v, name)) continue;
        v += __builtin_strlen(name);
        if (*v == '=') return v + 1;
    }
    return NULL;
}

/* getenv, over the kept variables once they are kept. */
static const char *env_get(const char *name) {
    if (!kept_env || !kept_env->kept) return getenv(name);
    return kept_value(kept_env->vars, kept_env->count, name);
}

/* VRAMTRACE_MARK: created empty at start in every process the library
 * reaches, so that `vramtrace run` can tell afterwards that the preload took
 * (it points the variable into a private directory of its own). Never
 * through a link, never blocking on a FIFO, never a controlling terminal;
 * an existing file is left as it is. */
static char mark_path[4096]; /* the mark's path, for vt_mark_verdict; "" without one */

VT_AT_START static void mark_loaded(const char *path) {
    if (!path || !*path) return;
    int fd = vt_fd_open(AT_FDCWD, path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, 0600);
    if (fd >= 0) close(fd);
    size_t n = __builtin_strlen(path);
    if (n + sizeof ".verdicts" <= sizeof mark_path) {
        __builtin_memcpy(mark_path, path, n);
        __builtin_memcpy(mark_path + n, ".verdicts", sizeof ".verdicts");
    }
}

/* One line "WHAT PID" appended to the mark's verdicts file (the same
 * care as the mark; one write, O_APPEND: the lines of processes ending at
 * once do not mix). */
void vt_mark_verdict(const char *what) {
    if (!mark_path[0]) return;
    int fd = vt_fd_open(AT_FDCWD, mark_path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, 0600);
    if (fd < 0) return;
    char line[64];
    int n = snprintf(line, sizeof line, "%s %ld\n", what, (long)getpid());
    if (n > 0 && (size_t)n < sizeof line) {
        ssize_t w = write(fd, line, (size_t)n);
        (void)w;
    }
    close(fd);
}

VT_AT_START int vt_options_keep(struct vt_options_env *e) {
    char ours[] = {'V', 'R', 'A', 'M', 'T', 'R', 'A', 'C', 'E', '_', 0};
    size_t used = 0;
    int n = 0;
    for (char **v = environ; v && *v; v++) {
        if (!begins(*v, ours)) continue;
        size_t len = n < (int)(sizeof e->vars / sizeof *e->vars) ? copy_in(e->text + used, *v, VT_OPTIONS_VARS_ROOM - used) : 0;
        if (!len) return 0;
        e->vars[n++] = e->text + used;
        used += len;
    }
    e->count = n;
    e->kept = 1;
    /* Where the process started: a program may change its working folder
     * before its first allocation, when the options are read. */
    char *cwd = e->text + used; /* the system call's own (rawsys.h): no look-up for getcwd */
    if (vt_sys3(SYS_getcwd, (long)cwd, (long)(sizeof e->text - used), 0) <= 0 || cwd[0] != '/') cwd[0] = '\0';
    e->cwd = cwd;
    if (n) {
        char mark[] = {'V', 'R', 'A', 'M', 'T', 'R', 'A', 'C', 'E', '_', 'M', 'A', 'R', 'K', 0};
        mark_loaded(kept_value(e->vars, n, mark));
    }
    return 1;
}

VT_AT_START int vt_options_set(const struct vt_options_env *e, const char *suffix) {
    if (!e->kept) {
        char name[64];
        snprintf(name, sizeof name, "VRAMTRACE_%s", suffix);
        return getenv(name) != NULL;
    }
    /* Every kept name begins "VRAMTRACE_" (10 characters). */
    for (int i = 0; i < e->count; i++) {
        const char *v = e->vars[i] + 10;
        if (begins(v, suffix) && v[__builtin_strlen(suffix)] == '=') return 1;
    }
    return 0;
}

/* Warnings wait here until the process first touches a GPU, so that the
 * many processes an LD_PRELOAD reaches without using CUDA print nothing. */
static char pending[2048];
static size_t npending;

static void warn(const char *fmt, const char *a, const char *b, const char *c) {
    if (npending >= sizeof pending - 1) return;
    int n = snprintf(pending + npending, sizeof pending - npending, fmt, a, b, c);
    if (n > 0) npending += (size_t)n;
    if (npending >= sizeof pending) npending = sizeof pending - 1;
}

/* Each held line goes out through the capped warning (common/warn.h),
 * which writes the "vramtrace: warning: " the line begins with itself. */
void vt_options_flush_warnings(void) {
    static const char prefix[] = "vramtrace: warning: ";
    size_t n = __atomic_exchange_n(&npending, 0, __ATOMIC_ACQ_REL);
    for (size_t at = 0; at < n;) {
        const char *line = pending + at, *end = memchr(line, '\n', n - at);
        size_t len = end ? (size_t)(end - line) : n - at;
        if (len >= sizeof prefix - 1 && memcmp(line, prefix, sizeof prefix - 1) == 0)
            vt_warn("%.*s", (int)(len - (sizeof prefix - 1)), line + sizeof prefix - 1);
        else if (len)
            vt_warn("%.*s", (int)len, line);
        at += len + 1;
    }
}

/* A VT_OPT_NUMBER option: its value, or its default after a warning. */
static long load_number(enum vt_option_id id) {
    const struct vt_option_desc *d = &vt_option_table[id];
    const char *v = env_get(d->name);
    long out = d->number;
    if (v == NULL) return out;
    if (vt_parse_number(v, d->lo, d->hi, &out) != 0) {
        char range[64];
        if (d->lo == 0 && d->hi == 1) snprintf(range, sizeof range, "0 or 1 (true/false, yes/no, on/off)");
        else snprintf(range, sizeof range, "a whole number from %ld to %ld", d->lo, d->hi);
        /* A leak check asked for with a value it cannot read (a typo in a
         * CI's settings) still runs: off, the run would pass unchecked. An
         * empty value (a shell's way to unset one) keeps the default. */
        int fail_safe = id == VT_O_LEAK_CHECK && v[0];
        warn(fail_safe ? "vramtrace: warning: %s=%s is not %s; checking for leaks anyway\n"
                       : "vramtrace: warning: %s=%s is not %s; keeping the default\n",
             d->name, v, range);
        out = fail_safe ? 1 : d->number;
    }
    return out;
}

/* The default of a VT_OPT_TEXT option ("" where the table says none). */
static const char *text_default(enum vt_option_id id) {
    const char *d = vt_option_table[id].def;
    return d[0] == '(' ? "" : d;
}

/* A VT_OPT_TEXT option into out. An empty value keeps the default after a
 * warning, where there is none saying what that does (`instead`), as an
 * empty VRAMTRACE_SUPPRESSIONS checks without suppressions: a script's
 * unset variable is told, not taken; one too long for the buffer becomes
 * `too_long` (an output never goes to a different file than asked). */
static void load_string(enum vt_option_id id, const char *too_long, const char *instead, char *out, size_t size) {
    const char *name = vt_option_table[id].name, *def = text_default(id);
    const char *v = env_get(name);
    if (v && *v == '\0') {
        warn("vramtrace: warning: %s is empty; %s\n", name, *def ? "keeping the default" : instead, "");
        v = def;
    } else if (v && !vt_option_valid(&vt_option_table[id], v)) {
        /* "-" for the dump or the report (options.c's vt_option_valid). */
        warn("vramtrace: warning: %s=- names no file (%s); keeping the default\n", name,
             id == VT_O_REPORT ? "standard output is 'stdout'" : "a dump goes to a file", "");
        v = def;
    } else if (v == NULL) {
        v = def;
    } else if (strlen(v) >= size) {
        char most[24];
        snprintf(most, sizeof most, "%zu", size - 1);
        warn("vramtrace: warning: %s is longer than %s characters; %s\n", name, most, instead);
        v = too_long;
    }
    snprintf(out, size, "%s", v);
}

/* The place of v among a VT_OPT_CHOICE option's words (0 for the first),
 * or -1. */
static int choice_index(const struct vt_option_desc *d, const char *v) {
    int k = 0;
    for (const char *w = d->choices; w && *w; k++) {
        size_t n = strcspn(w, ",");
        if (strlen(v) == n && strncmp(v, w, n) == 0) return k;
        w += n + (w[n] == ',');
    }
    return -1;
}

/* A VT_OPT_CHOICE option's words as a sentence lists them: "a, b or c". */
static const char *choice_list(const struct vt_option_desc *d, char *buf, size_t size) {
    size_t k = 0, words = 1;
    for (const char *c = d->choices; *c; c++) words += *c == ',';
    buf[0] = '\0';
    size_t i = 0;
    for (const char *w = d->choices; *w && k < size; i++) {
        size_t n = strcspn(w, ",");
        int m = snprintf(buf + k, size - k, "%s%.*s", i == 0 ? "" : i + 1 == words ? " or " : ", ", (int)n, w);
        if (m < 0) break;
        k += (size_t)m;
        w += n + (w[n] == ',');
    }
    return buf;
}

/* Where the loader keeps each option of the table in vt_opt: the field's
 * offset and size (a VT_OPT_NUMBER goes into an int or a long as the size
 * says), and for a VT_OPT_TEXT option the value that stands in for one too
 * long for its field, with the words that say what that does. An option
 * without a field here (size 0) is read elsewhere: VRAMTRACE_MARK by
 * mark_loaded, PYTORCH_CUDA_ALLOC_CONF by vramtrace run alone. */
struct field {
    size_t at, size;
    char too_long[8], instead[48]; /* in place: no pointer to relocate at every start */
};
#define VT_FIELD(member) offsetof(struct vt_options, member), sizeof vt_opt.member
static const struct field fields[VT_O_COUNT] = {
    [VT_O_OUT] = {VT_FIELD(out), "off", "writing no dump"},
    [VT_O_REPORT] = {VT_FIELD(report), "stderr", "reporting on stderr"},
    [VT_O_DEPTH] = {VT_FIELD(depth)},
    [VT_O_EVENTS] = {VT_FIELD(events)},
    [VT_O_TOP] = {VT_FIELD(top)},
    [VT_O_LIMIT] = {VT_FIELD(limit)},
    [VT_O_PYTHON] = {VT_FIELD(python)},
    [VT_O_UNWIND] = {VT_FIELD(unwind)},
    [VT_O_LEAK_CHECK] = {VT_FIELD(leak_check)},
    [VT_O_EXITCODE] = {VT_FIELD(exitcode)},
    [VT_O_SUPPRESSIONS] = {VT_FIELD(suppressions), "", "checking without suppressions"},
    [VT_O_SIGNAL] = {VT_FIELD(signal)},
    [VT_O_ON_TERM] = {VT_FIELD(on_term)},
    [VT_O_LIVE] = {VT_FIELD(live)},
    [VT_O_FORECAST] = {VT_FIELD(forecast)},
    [VT_O_SPILL] = {VT_FIELD(spill)},
    [VT_O_APP] = {VT_FIELD(app), "", "using the default rule for call sites"},
    [VT_O_LIBRARY] = {VT_FIELD(library), "", "using the default library paths"},
};
#undef VT_FIELD

/* A VT_OPT_SIZE option: its bytes, or 0 (none) after a warning. */
static uint64_t load_size(enum vt_option_id id) {
    const struct vt_option_desc *d = &vt_option_table[id];
    const char *v = env_get(d->name);
    uint64_t out = 0;
    if (v && !vt_option_valid(d, v))
        warn("vramtrace: warning: %s=%s is not a size (512M, 24G, bytes)%s; running without a budget\n", d->name,
             v, "");
    else if (v)
        vt_parse_size(v, &out);
    return out;
}

/* A VT_OPT_CHOICE option: the place of its value among the table's words
 * (VT_UNWIND_* are VRAMTRACE_UNWIND's in their order), or of the default
 * after a warning. */
static int load_choice(enum vt_option_id id) {
    const struct vt_option_desc *d = &vt_option_table[id];
    const char *v = env_get(d->name);
    if (v && choice_index(d, v) >= 0) return choice_index(d, v);
    if (v) {
        char words[96], line[512];
        snprintf(line, sizeof line, "vramtrace: warning: %s=%.300s is not %s; using the %s\n", d->name, v,
                 choice_list(d, words, sizeof words), d->def);
        warn("%s%s%s", line, "", "");
    }
    return choice_index(d, d->def);
}

/* A VT_OPT_SIGNAL option: its signal, or the default's after a warning. */
static int load_signal(enum vt_option_id id) {
    const struct vt_option_desc *d = &vt_option_table[id];
    const char *v = env_get(d->name);
    int n = v ? vt_parse_signal(v) : -1;
    if (v && n < 0)
        warn("vramtrace: warning: %s=%s is not a signal vramtrace can use; keeping %s\n", d->name, v, d->def);
    return n >= 0 ? n : vt_parse_signal(d->def);
}

/* A relative path in `field` made absolute from the working directory now
 * (the program's start): one that chdir()s before its exit or failure
 * still has its dump, report and suppressions where they were asked for
 * (LeakSanitizer reads its suppressions at the start). Left as it is when
 * the working directory cannot be read or the whole would not fit in
 * PATH_MAX (a path relative to a deep folder is written as given). */
static void anchor_path(char *field, size_t size, const char *start, int pattern) {
    if (field[0] == '\0' || field[0] == '/') return;
    char cwd[8192];
    if (start && start[0] == '/') {
        snprintf(cwd, sizeof cwd, "%s", start);
    } else if (!getcwd(cwd, 4096) || cwd[0] != '/') {
        return;
    }
    /* A pattern's '%' expands (%p, %h...): one in the folder's name is
     * written "%%", so that it stays itself. */
    if (pattern) {
        char esc[sizeof cwd];
        size_t k = 0;
        for (const char *c = cwd; *c && k + 2 < sizeof esc; c++) {
            if (*c == '%') esc[k++] = '%';
            esc[k++] = *c;
        }
        esc[k] = '\0';
        memcpy(cwd, esc, k + 1);
    }
    size_t n = strlen(cwd), m = strlen(field);
    int slash = n > 0 && cwd[n - 1] != '/';
    if (n + (size_t)slash + m + 1 > size || n + (size_t)slash + m >= PATH_MAX) return;
    memmove(field + n + (size_t)slash, field, m + 1);
    memcpy(field, cwd, n);
    if (slash) field[n] = '/';
}

/* Every option of the table with a field, in the table's order, by its
 * type's reader. */
void vt_options_load(const struct vt_options_env *e) {
    kept_env = e;
    if (!e || !e->kept) mark_loaded(getenv("VRAMTRACE_MARK"));
    for (int i = 0; i < VT_O_COUNT; i++) {
        const struct field *fl = &fields[i];
        char *at = (char *)&vt_opt + fl->at;
        if (fl->size == 0) continue;
        switch (vt_option_table[i].type) {
        case VT_OPT_TEXT: load_string(i, fl->too_long, fl->instead, at, fl->size); break;
        case VT_OPT_NUMBER: {
            long n = load_number(i);
            if (fl->size == sizeof(int)) *(int *)(void *)at = (int)n;
            else *(long *)(void *)at = n;
            break;
        }
        case VT_OPT_SIZE: *(uint64_t *)(void *)at = load_size(i); break;
        case VT_OPT_CHOICE: *(int *)(void *)at = load_choice(i); break;
        case VT_OPT_SIGNAL: *(int *)(void *)at = load_signal(i); break;
        case VT_OPT_FOREIGN: break;
        }
    }
    vt_callsite_configure(vt_opt.app, vt_opt.library);
    /* Kept options were kept at the start, with its folder; others are
     * read at the start itself. */
    const char *start = e && e->kept ? e->cwd : NULL;
    if (strcmp(vt_opt.out, "off") != 0) anchor_path(vt_opt.out, sizeof vt_opt.out, start, 1);
    if (vt_report_to_file(vt_opt.report)) anchor_path(vt_opt.report, sizeof vt_opt.report, start, 1);
    anchor_path(vt_opt.suppressions, sizeof vt_opt.suppressions, start, 0);

    int kept = e && e->kept;
    char **vars = kept ? (char **)e->vars : environ;
    for (int i = 0; vars && (!kept || i < e->count) && vars[i]; i++) {
        const char *v = vars[i];
        if (strncmp(v, "VRAMTRACE_", 10) != 0) continue;
        size_t len = strcspn(v, "=");
        int known = 0;
        for (int k = 0; k < VT_O_COUNT; k++) {
            const char *name = vt_option_table[k].name;
            if (strlen(name) == len && strncmp(name, v, len) == 0) known = 1;
        }
        if (!known) {
            char name[128];
            snprintf(name, sizeof name, "%.*s", (int)(len < 100 ? len : 100), v);
            warn("vramtrace: warning: %s is not a vramtrace option; ignoring it%s%s\n",
                 name, "", "");
        }
    }
}
