/* options.c -- VRAMTRACE_* environment variables. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
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
    {"VRAMTRACE_LEAK_CHECK", "0",
     "1 checks for leaks at exit: every live allocation not suppressed is reported LeakSanitizer-style "
     "and the exit status becomes VRAMTRACE_EXITCODE"},
    {"VRAMTRACE_EXITCODE", "23", "exit status when the leak check finds leaks (1 to 255)"},
    {"VRAMTRACE_SUPPRESSIONS", "(none)", "file of leak:PATTERN lines that the leak check ignores"},
    {"VRAMTRACE_SIGNAL", "USR2",
     "signal that writes a dump of the running process (number or name such as USR1); 0 disables"},
    {"VRAMTRACE_LIMIT", "(none)",
     "per-device budget (512M, 24G, bytes): allocations past it fail with the API's own out-of-memory "
     "error, as on a GPU that small"},
    {"VRAMTRACE_PYTHON", "1", "1 records the Python frames of each allocation (CPython 3.10 to 3.13), 0 native frames only"},
    {"VRAMTRACE_UNWIND", "walker",
     "how native stacks are read: 'walker' (vramtrace's, from cached CFI rules), 'libunwind', or 'check' "
     "(both at every allocation, compared; the count of differences is printed at exit)"},
    {"VRAMTRACE_MARK", "(none)",
     "a file the library creates when it starts in a process; vramtrace run sets it (with --leak-check "
     "or --limit) to tell a traced command from one the preload never reached"},
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

/* An empty value keeps the default; one too long for the buffer becomes
 * `too_long` (an output never goes to a different file than asked). */
static void load_string(const char *name, const char *def, const char *too_long, const char *instead,
                        char *out, size_t size) {
    const char *v = getenv(name);
    if (v == NULL) v = def;
    if (*v == '\0' && *def != '\0') {
        warn("vramtrace: warning: %s%s%s is empty; keeping the default\n", name, "", "");
        v = def;
    } else if (strlen(v) >= size) {
        char most[24];
        snprintf(most, sizeof most, "%zu", size - 1);
        warn("vramtrace: warning: %s is longer than %s characters; %s\n", name, most, instead);
        v = too_long;
    }
    snprintf(out, size, "%s", v);
}

int vt_parse_size(const char *s, uint64_t *out) {
    if (!s || !*s) return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || v < 0) return -1;
    double mul = 1;
    switch (*end) {
    case 'k': case 'K': mul = 1024.0; end++; break;
    case 'm': case 'M': mul = 1024.0 * 1024; end++; break;
    case 'g': case 'G': mul = 1024.0 * 1024 * 1024; end++; break;
    case 't': case 'T': mul = 1024.0 * 1024 * 1024 * 1024; end++; break;
    default: break;
    }
    if (mul > 1 && *end == 'i') end++;
    if (*end == 'B' || *end == 'b') end++;
    if (*end != '\0' || v * mul > 1.8e19) return -1;
    *out = (uint64_t)(v * mul);
    return 0;
}

static const struct { const char *name; int num; } signals[] = {
    {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"HUP", SIGHUP}, {"QUIT", SIGQUIT}, {"PROF", SIGPROF},
    {"WINCH", SIGWINCH}, {"URG", SIGURG}, {"PWR", SIGPWR},
};

/* A signal by number or name ("USR2", "SIGUSR2", "12"); -1 if neither. */
static int parse_signal(const char *v) {
    long n;
    if (parse_long(v, 0, 64, &n) == 0) return (int)n;
    if (strncmp(v, "SIG", 3) == 0) v += 3;
    for (size_t i = 0; i < sizeof signals / sizeof signals[0]; i++)
        if (strcmp(v, signals[i].name) == 0) return signals[i].num;
    return -1;
}

/* VRAMTRACE_MARK: created empty at start in every process the library
 * reaches, so that `vramtrace run` can tell afterwards that the preload took
 * (it points the variable into a private directory of its own). Never
 * through a link, never blocking on a FIFO, never a controlling terminal;
 * an existing file is left as it is. */
static void mark_loaded(void) {
    const char *path = getenv("VRAMTRACE_MARK");
    if (!path || !*path) return;
    int fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0600);
    if (fd >= 0) close(fd);
}

void vt_options_load(void) {
    mark_loaded();
    long depth, events, top, python, leak, code;
    load_string("VRAMTRACE_OUT", "vramtrace.%p.json", "off", "writing no dump", vt_opt.out, sizeof vt_opt.out);
    load_string("VRAMTRACE_REPORT", "stderr", "stderr", "reporting on stderr", vt_opt.report,
                sizeof vt_opt.report);
    load_long("VRAMTRACE_DEPTH", 1, 256, 64, &depth);
    load_long("VRAMTRACE_EVENTS", 0, 100000000, 1000000, &events);
    load_long("VRAMTRACE_TOP", 1, 1000, 10, &top);
    load_long("VRAMTRACE_PYTHON", 0, 1, 1, &python);
    load_long("VRAMTRACE_LEAK_CHECK", 0, 1, 0, &leak);
    load_long("VRAMTRACE_EXITCODE", 1, 255, 23, &code);
    load_string("VRAMTRACE_SUPPRESSIONS", "", "", "checking without suppressions", vt_opt.suppressions,
                sizeof vt_opt.suppressions);
    const char *lim = getenv("VRAMTRACE_LIMIT");
    vt_opt.limit = 0;
    if (lim && (vt_parse_size(lim, &vt_opt.limit) != 0 || vt_opt.limit == 0)) {
        warn("vramtrace: warning: VRAMTRACE_LIMIT=%s is not a size (512M, 24G, bytes)%s%s; "
             "running without a budget\n", lim, "", "");
        vt_opt.limit = 0;
    }
    const char *uw = getenv("VRAMTRACE_UNWIND");
    vt_opt.unwind = VT_UNWIND_WALKER;
    if (uw && strcmp(uw, "libunwind") == 0) vt_opt.unwind = VT_UNWIND_LIBUNWIND;
    else if (uw && strcmp(uw, "check") == 0) vt_opt.unwind = VT_UNWIND_CHECK;
    else if (uw && strcmp(uw, "walker") != 0)
        warn("vramtrace: warning: VRAMTRACE_UNWIND=%s is not walker, libunwind or check%s%s; "
             "using the walker\n", uw, "", "");
    const char *sig = getenv("VRAMTRACE_SIGNAL");
    vt_opt.signal = SIGUSR2;
    if (sig) {
        int n = parse_signal(sig);
        if (n < 0 || n == SIGKILL || n == SIGSTOP || n == SIGSEGV || n == SIGBUS || n == SIGFPE ||
            n == SIGILL || n == SIGABRT)
            warn("vramtrace: warning: VRAMTRACE_SIGNAL=%s is not a signal vramtrace can use%s%s; "
                 "keeping USR2\n", sig, "", "");
        else
            vt_opt.signal = n;
    }
    vt_opt.depth = (int)depth;
    vt_opt.events = events;
    vt_opt.top = (int)top;
    vt_opt.python = (int)python;
    vt_opt.leak_check = (int)leak;
    vt_opt.exitcode = (int)code;

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
