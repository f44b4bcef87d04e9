/* options.c -- the settings table and the readers of its values. */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "options.h"

const struct vt_option_desc vt_option_table[VT_O_COUNT] = {
    [VT_O_OUT] = {"VRAMTRACE_OUT", VT_OPT_TEXT, "vramtrace.%p.json", 0, 0, 0, NULL,
                  "where the JSON dump goes: %p pid, %h host, %r rank (RANK, else 0), %n on-demand dump number, "
                  "%% a percent sign; 'off' writes none",
                  "--out", "PATH", "dump path pattern"},
    [VT_O_REPORT] = {"VRAMTRACE_REPORT", VT_OPT_TEXT, "stderr", 0, 0, 0, NULL,
                     "where the human post-mortem and exit summary go: 'stderr', 'off' or a file",
                     "--report", "DEST", "stderr, off or a file"},
    [VT_O_DEPTH] = {"VRAMTRACE_DEPTH", VT_OPT_NUMBER, "64", 64, 1, 256, NULL,
                    "native frames kept per stack (1 to 256)",
                    "--depth", "N", "native frames per stack"},
    [VT_O_EVENTS] = {"VRAMTRACE_EVENTS", VT_OPT_NUMBER, "1000000", 1000000, 0, 100000000, NULL,
                     "alloc/free/OOM events kept in the history ring (0 to 100000000; 0 keeps none)",
                     "--events", "N", "events kept in the history"},
    [VT_O_TOP] = {"VRAMTRACE_TOP", VT_OPT_NUMBER, "10", 10, 1, 1000, NULL,
                  "rows in the report's holder and allocation tables (1 to 1000)",
                  "--top", "N", "rows in the report's tables"},
    [VT_O_LIMIT] = {"VRAMTRACE_LIMIT", VT_OPT_SIZE, "(none)", 0, 0, 0, NULL,
                    "per-device budget (512M, 24G, bytes): allocations past it fail with the API's own "
                    "out-of-memory error, as on a GPU that small",
                    "--limit", "SIZE", "a per-device budget, as if the GPU had SIZE"},
    [VT_O_PYTHON] = {"VRAMTRACE_PYTHON", VT_OPT_NUMBER, "1", 1, 0, 1, NULL,
                     "1 records the Python frames of each allocation (CPython 3.10 to 3.13), 0 native "
                     "frames only",
                     "--python", "0|1", "Python frames"},
    [VT_O_UNWIND] = {"VRAMTRACE_UNWIND", VT_OPT_CHOICE, "walker", 0, 0, 0, "walker,libunwind,check",
                     "how native stacks are read: 'walker' (vramtrace's, from cached CFI rules), "
                     "'libunwind', or 'check' (both at every allocation, compared; the count of "
                     "differences is printed at exit)",
                     NULL, NULL, NULL},
    [VT_O_LEAK_CHECK] = {"VRAMTRACE_LEAK_CHECK", VT_OPT_NUMBER, "0", 0, 0, 1, NULL,
                         "1 checks for leaks at exit: every live allocation not suppressed is reported "
                         "LeakSanitizer-style and the exit status becomes VRAMTRACE_EXITCODE",
                         "--leak-check", NULL, "report leaks at exit and fail with status 23"},
    [VT_O_EXITCODE] = {"VRAMTRACE_EXITCODE", VT_OPT_NUMBER, "23", 23, 1, 255, NULL,
                       "exit status when the leak check finds leaks (1 to 255)",
                       "--exitcode", "N", "exit status when leaks remain"},
    [VT_O_SUPPRESSIONS] = {"VRAMTRACE_SUPPRESSIONS", VT_OPT_TEXT, "(none)", 0, 0, 0, NULL,
                           "file of leak:PATTERN lines that the leak check ignores",
                           "--suppressions", "FILE", "leak:PATTERN lines the leak check ignores"},
    [VT_O_SIGNAL] = {"VRAMTRACE_SIGNAL", VT_OPT_SIGNAL, "USR2", 0, 0, 0, NULL,
                     "signal that writes a dump of the running process (number or name such as USR1); "
                     "0 disables",
                     "--signal", "SIG", "signal for on-demand dumps, 0 none"},
    [VT_O_MARK] = {"VRAMTRACE_MARK", VT_OPT_TEXT, "(none)", 0, 0, 0, NULL,
                   "a file the library creates when it starts in a process; vramtrace run sets it (with "
                   "--leak-check or --limit) to tell a traced command from one the preload never reached",
                   NULL, NULL, NULL},
    /* Set by cmd_run.c itself (two variables, the program's settings kept). */
    [VT_O_TENSORS] = {"PYTORCH_CUDA_ALLOC_CONF", VT_OPT_FOREIGN, "(unset)", 0, 0, 0, NULL, NULL,
                      "--tensors[=nocache]", NULL,
                      "each PyTorch tensor becomes one live allocation\n"
                      "with vramtrace's own stack. --tensors adds backend:cudaMallocAsync to\n"
                      "PYTORCH_CUDA_ALLOC_CONF and PYTORCH_ALLOC_CONF (other settings kept):\n"
                      "one cudaMallocAsync per tensor; a free returns it to CUDA's pool\n"
                      "without synchronizing the device; the pool, not PyTorch, caches what\n"
                      "is freed (empty_cache() trims it) and there is no free-and-retry at\n"
                      "an OOM. --tensors=nocache sets PYTORCH_NO_CUDA_MEMORY_CACHING=1\n"
                      "instead: one cudaMalloc per tensor and every free a cudaFree, which\n"
                      "synchronizes the device (steps can take several times longer)."},
};

int vt_parse_number(const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end != '\0' || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

int vt_parse_size(const char *s, uint64_t *out) {
    /* DIGITS[.DIGITS][K|M|G|T[i]][B]: the whole part exact, as bytes or
     * times the unit; a fraction only with a unit (1.5G). Anything else
     * (signs, hex, exponents, inf, nan, overflow) is not a size. */
    if (!s || *s < '0' || *s > '9') return -1;
    const char *p = s;
    uint64_t whole = 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (whole > (UINT64_MAX - (uint64_t)(*p - '0')) / 10) return -1;
        whole = whole * 10 + (uint64_t)(*p - '0');
    }
    const char *frac = NULL;
    size_t nfrac = 0;
    if (*p == '.') {
        frac = ++p;
        while (*p >= '0' && *p <= '9') p++;
        nfrac = (size_t)(p - frac);
        if (nfrac == 0) return -1;
    }
    int shift = 0;
    switch (*p) {
    case 'k': case 'K': shift = 10; p++; break;
    case 'm': case 'M': shift = 20; p++; break;
    case 'g': case 'G': shift = 30; p++; break;
    case 't': case 'T': shift = 40; p++; break;
    default: break;
    }
    if (shift && *p == 'i') p++;
    if (*p == 'B' || *p == 'b') p++;
    if (*p != '\0' || (frac && shift == 0)) return -1;
    if (shift && whole > (UINT64_MAX >> shift)) return -1;
    uint64_t v = whole << shift;
    if (frac) {
        /* The fraction of one unit, rounded down to a byte. */
        uint64_t unit = (uint64_t)1 << shift, part = 0, scale = 1;
        for (size_t i = 0; i < nfrac && i < 12; i++) {
            part = part * 10 + (uint64_t)(frac[i] - '0');
            scale *= 10;
        }
        uint64_t add = (uint64_t)((unsigned __int128)part * unit / scale);
        if (v > UINT64_MAX - add) return -1;
        v += add;
    }
    *out = v;
    return 0;
}

static const struct { const char *name; int num; } signals[] = {
    {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"HUP", SIGHUP}, {"QUIT", SIGQUIT}, {"PROF", SIGPROF},
    {"WINCH", SIGWINCH}, {"URG", SIGURG}, {"PWR", SIGPWR},
};

int vt_parse_signal(const char *v) {
    long n = -1;
    if (vt_parse_number(v, 0, 64, &n) != 0) {
        if (strncmp(v, "SIG", 3) == 0) v += 3;
        for (size_t i = 0; i < sizeof signals / sizeof signals[0]; i++)
            if (strcmp(v, signals[i].name) == 0) n = signals[i].num;
    }
    if (n == SIGKILL || n == SIGSTOP || n == SIGSEGV || n == SIGBUS || n == SIGFPE || n == SIGILL ||
        n == SIGABRT)
        return -1;
    return (int)n;
}

int vt_option_valid(const struct vt_option_desc *d, const char *v) {
    long n;
    uint64_t bytes;
    switch (d->type) {
    case VT_OPT_NUMBER: return vt_parse_number(v, d->lo, d->hi, &n) == 0;
    case VT_OPT_SIZE: return vt_parse_size(v, &bytes) == 0 && bytes > 0;
    case VT_OPT_SIGNAL: return vt_parse_signal(v) >= 0;
    case VT_OPT_CHOICE: {
        size_t len = strlen(v);
        for (const char *c = d->choices; len > 0 && c && *c; c = strchr(c, ',') ? strchr(c, ',') + 1 : NULL)
            if (strncmp(c, v, len) == 0 && (c[len] == ',' || c[len] == '\0')) return 1;
        return 0;
    }
    default: return 1;
    }
}
