/* options.c -- the settings table and the readers of its values. */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "options.h"

/* Every entry of options.def, at the index of its id. */
#define VT_OPTION(id, name, type, def, number, lo, hi, choices, meaning, flag, arg, flag_help) \
    [VT_O_##id] = {name, VT_OPT_##type, def, number, lo, hi, choices, meaning, flag, arg, flag_help},
const struct vt_option_desc vt_option_table[VT_O_COUNT] = {
#include "options.def"
};
#undef VT_OPTION

int vt_parse_number(const char *s, long lo, long hi, long *out) {
    /* A switch (0 or 1) also takes the words LeakSanitizer's flags and
     * most tools take: true/false, yes/no, on/off, any case. */
    if (s && lo == 0 && hi == 1) {
        static const char *const words[] = {"false", "no", "off", "true", "yes", "on"};
        for (int i = 0; i < 6; i++)
            if (strcasecmp(s, words[i]) == 0) {
                *out = i >= 3;
                return 0;
            }
    }
    /* Digits, a '-' first where the range allows: strtol alone also took
     * leading spaces and a '+' (" 5" was 5 here and refused elsewhere). */
    if (!s || !((s[0] >= '0' && s[0] <= '9') || (s[0] == '-' && s[1] >= '0' && s[1] <= '9'))) return -1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end != '\0' || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

int vt_leak_check_wanted(const char *v) {
    long on = 0;
    if (!v || !v[0]) return 0;
    return vt_parse_number(v, 0, 1, &on) != 0 || on == 1;
}

int vt_report_to_file(const char *v) {
    return strcmp(v, "off") != 0 && strcmp(v, "stderr") != 0 && strcmp(v, "stdout") != 0;
}

int vt_parse_size(const char *s, uint64_t *out) {
    /* DIGITS[.DIGITS][ ][K|M|G|T[i]][B], the unit in any case ("2 GiB",
     * 2GIB, 2gb): the whole part exact, as bytes or times the unit; a
     * fraction only with a unit (1.5G). Anything else
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
    const char *num_end = p;
    while (*p == ' ' || *p == '\t') p++;
    const char *unit = p;
    int shift = 0;
    switch (*p) {
    case 'k': case 'K': shift = 10; p++; break;
    case 'm': case 'M': shift = 20; p++; break;
    case 'g': case 'G': shift = 30; p++; break;
    case 't': case 'T': shift = 40; p++; break;
    default: break;
    }
    if (shift && (*p == 'i' || *p == 'I')) p++;
    if (*p == 'B' || *p == 'b') p++;
    /* Spaces only between the number and a unit: "2 " is not a size. */
    if (*p != '\0' || (frac && shift == 0) || (unit > num_end && p == unit)) return -1;
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

/* Every signal's name, so that a name is taken where its number is (the
 * ones vramtrace cannot use are refused below either way). The names in
 * place, not pointers: a table of pointers is relocated at every start of
 * every process the library is preloaded in. */
static const struct { char name[8]; int num; } signals[] = {
    {"HUP", SIGHUP}, {"INT", SIGINT}, {"QUIT", SIGQUIT}, {"ILL", SIGILL}, {"TRAP", SIGTRAP},
    {"ABRT", SIGABRT}, {"IOT", SIGIOT}, {"BUS", SIGBUS}, {"FPE", SIGFPE}, {"KILL", SIGKILL},
    {"USR1", SIGUSR1}, {"SEGV", SIGSEGV}, {"USR2", SIGUSR2}, {"PIPE", SIGPIPE}, {"ALRM", SIGALRM},
    {"TERM", SIGTERM}, {"STKFLT", SIGSTKFLT}, {"CHLD", SIGCHLD}, {"CONT", SIGCONT}, {"STOP", SIGSTOP},
    {"TSTP", SIGTSTP}, {"TTIN", SIGTTIN}, {"TTOU", SIGTTOU}, {"URG", SIGURG}, {"XCPU", SIGXCPU},
    {"XFSZ", SIGXFSZ}, {"VTALRM", SIGVTALRM}, {"PROF", SIGPROF}, {"WINCH", SIGWINCH}, {"IO", SIGIO},
    {"POLL", SIGPOLL}, {"PWR", SIGPWR}, {"SYS", SIGSYS},
};

/* RTMIN, RTMIN+N, RTMAX, RTMAX-N (as kill -l names them), or -1. */
static long rt_signal(const char *v) {
    int max = strncmp(v, "RTMAX", 5) == 0;
    if (!max && strncmp(v, "RTMIN", 5) != 0) return -1;
    long base = max ? SIGRTMAX : SIGRTMIN, off = 0;
    if (v[5] == (max ? '-' : '+')) {
        if (vt_parse_number(v + 6, 0, 64, &off) != 0) return -1;
    } else if (v[5]) {
        return -1;
    }
    return max ? base - off : base + off;
}

int vt_parse_signal(const char *v) {
    long n = -1;
    if (vt_parse_number(v, 0, 64, &n) != 0) {
        if (strcasecmp(v, "off") == 0 || strcasecmp(v, "none") == 0 || strcasecmp(v, "no") == 0 ||
            strcasecmp(v, "false") == 0)
            return 0;
        if (strncmp(v, "SIG", 3) == 0) v += 3;
        for (size_t i = 0; i < sizeof signals / sizeof signals[0]; i++)
            if (strcmp(v, signals[i].name) == 0) n = signals[i].num;
        if (n < 0) n = rt_signal(v);
    }
    /* USR1, USR2 or a real-time signal (0: none). Every other signal means
     * something else to the program or its launcher: taken for dumps,
     * TERM, INT or HUP no longer stopped the program (a scheduler's stop
     * request, Ctrl-C), CHLD wrote a dump at each child's exit, the job
     * control, timer, pipe and limit signals theirs; KILL and STOP cannot
     * be caught, and SEGV and the like mean a crash. Between the standard
     * signals and SIGRTMIN lie the C library's own (32 and 33 with glibc:
     * thread cancellation, setxid): a handler there is refused or never
     * called, and the signal kills the process. */
    if (n == 0 || n == SIGUSR1 || n == SIGUSR2 || (n >= SIGRTMIN && n <= SIGRTMAX)) return (int)n;
    return -1;
}

int vt_option_valid(const struct vt_option_desc *d, const char *v) {
    long n;
    uint64_t bytes;
    switch (d->type) {
    /* An empty text is never a value: the library warns and keeps the
     * default (an unset variable in a script, --suppressions "$SUPP",
     * would otherwise pass unnoticed, the check run without the file). */
    /* "-" names no file for the dump or the report: taken as a path it
     * made a file named "-" in the start folder (and a later run's report
     * went into the dump at it); it is not standard output either, which
     * the report calls "stdout" and the dump never goes to. */
    case VT_OPT_TEXT:
        return *v != '\0' && !(strcmp(v, "-") == 0 && (d == &vt_option_table[VT_O_OUT] ||
                                                       d == &vt_option_table[VT_O_REPORT]));
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
