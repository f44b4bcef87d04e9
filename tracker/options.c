/* options.c -- VRAMTRACE_* environment variables. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "options.h"

struct vt_options vt_opt;

extern char **environ;

const struct vt_option_desc vt_option_table[] = {
    {"VRAMTRACE_OUT", "vramtrace.%p.json",
     "where the JSON dump goes: %p pid, %h host, %r rank (RANK, else 0), "
     "%% a percent sign; 'off' writes none"},
    {"VRAMTRACE_REPORT", "stderr",
     "where the human post-mortem and exit summary go: 'stderr', 'off' or a file"},
    {"VRAMTRACE_DEPTH", "64", "native frames kept per stack (1 to 256)"},
    {"VRAMTRACE_EVENTS", "1000000",
     "alloc/free/OOM events kept in the history ring (0 to 100000000; 0 keeps none)"},
    {"VRAMTRACE_TOP", "10", "rows in the report's holder and allocation tables (1 to 1000)"},
    {"VRAMTRACE_PYTHON", "1", "1 records the Python frames of each allocation (CPython 3.10 to 3.13), 0 native frames only"},
    {NULL, NULL, NULL},
};

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

void vt_options_flush_warnings(void) {
    size_t n = __atomic_exchange_n(&npending, 0, __ATOMIC_ACQ_REL);
    if (n > 0) {
        ssize_t w = write(2, pending, n);
        (void)w;
    }
}

/* Parse a whole decimal number in [lo, hi]; 0 on success. */
static int parse_long(const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end != '\0' || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

static void load_long(const char *name, long lo, long hi, long def, long *out) {
    const char *v = getenv(name);
    *out = def;
    if (v == NULL) return;
    if (parse_long(v, lo, hi, out) != 0) {
        char range[64];
        snprintf(range, sizeof range, "a whole number from %ld to %ld", lo, hi);
        warn("vramtrace: warning: %s=%s is not %s; keeping the default\n", name, v, range);
        *out = def;
    }
}

static void load_string(const char *name, const char *def, char *out, size_t size) {
    const char *v = getenv(name);
    if (v == NULL) v = def;
    if (*v == '\0' || strlen(v) >= size) {
        warn("vramtrace: warning: %s%s%s is empty or too long; keeping the default\n",
             name, "", "");
        v = def;
    }
    snprintf(out, size, "%s", v);
}

void vt_options_load(void) {
    long depth, events, top, python;
    load_string("VRAMTRACE_OUT", "vramtrace.%p.json", vt_opt.out, sizeof vt_opt.out);
    load_string("VRAMTRACE_REPORT", "stderr", vt_opt.report, sizeof vt_opt.report);
    load_long("VRAMTRACE_DEPTH", 1, 256, 64, &depth);
    load_long("VRAMTRACE_EVENTS", 0, 100000000, 1000000, &events);
    load_long("VRAMTRACE_TOP", 1, 1000, 10, &top);
    load_long("VRAMTRACE_PYTHON", 0, 1, 1, &python);
    vt_opt.depth = (int)depth;
    vt_opt.events = events;
    vt_opt.top = (int)top;
    vt_opt.python = (int)python;

    for (char **e = environ; e && *e; e++) {
        if (strncmp(*e, "VRAMTRACE_", 10) != 0) continue;
        size_t len = strcspn(*e, "=");
        int known = 0;
        for (const struct vt_option_desc *d = vt_option_table; d->name; d++)
            if (strlen(d->name) == len && strncmp(d->name, *e, len) == 0) known = 1;
        if (!known) {
            char name[128];
            snprintf(name, sizeof name, "%.*s", (int)(len < 100 ? len : 100), *e);
            warn("vramtrace: warning: %s is not a vramtrace option; ignoring it%s%s\n",
                 name, "", "");
        }
    }
}
