/* options.h -- the one table of vramtrace's settings.
 *
 * Each VRAMTRACE_* variable is one row: its name, the kind of value, the
 * default, the range of a number, what it means, and the `vramtrace run`
 * flag that sets it. The library's loader (tracker/options.c), the CLI's
 * `vramtrace --help`, `vramtrace run`'s flags and the README's options
 * table (`vramtrace --options-markdown`, checked by a test) are all read
 * from this table. A new option is one entry in options.def, plus, for the
 * library to keep it, its field in struct vt_options and the row naming
 * that field in tracker/options.c's `fields`. */
#ifndef VT_COMMON_OPTIONS_H
#define VT_COMMON_OPTIONS_H

#include <stdint.h>

enum vt_option_type {
    VT_OPT_TEXT,      /* a path or a word, as it is */
    VT_OPT_NUMBER,    /* a whole number from lo to hi */
    VT_OPT_SIZE,      /* bytes, or 512M, 24G (vt_parse_size), above 0 */
    VT_OPT_SIGNAL,    /* a signal vramtrace can use (vt_parse_signal) */
    VT_OPT_CHOICE,    /* one of the words in `choices` */
    VT_OPT_FOREIGN,   /* another program's variable that a run flag sets to 1 */
};

/* Rows in table order (options.def); VT_O_COUNT is their number. */
enum vt_option_id {
#define VT_OPTION(id, ...) VT_O_##id,
#include "options.def"
#undef VT_OPTION
    VT_O_COUNT
};

struct vt_option_desc {
    const char *name;      /* the environment variable */
    enum vt_option_type type;
    const char *def;       /* the default as people read it: "64", "(none)" */
    long number;           /* the default of a VT_OPT_NUMBER */
    long lo, hi;           /* a VT_OPT_NUMBER's range */
    const char *choices;   /* a VT_OPT_CHOICE's words, comma-separated */
    const char *meaning;   /* for --help's environment list */
    const char *flag;      /* `vramtrace run`'s flag, or NULL */
    const char *arg;       /* the flag's value in --help ("N"), NULL for a switch that sets 1 */
    const char *flag_help; /* the flag's line in --help */
};

/* The table, indexed by enum vt_option_id. */
extern const struct vt_option_desc vt_option_table[VT_O_COUNT];

/* A size: bytes, or a number with K, M, G or T (binary units, an optional
 * trailing B or iB: 512M, 24G, 1.5GiB). Returns 0, or -1 when it is not a
 * size. */
int vt_parse_size(const char *s, uint64_t *out);

/* A whole decimal number in [lo, hi] (strtol's reading: leading blanks
 * and a sign are taken). Returns 0, or -1 when it is not. */
int vt_parse_number(const char *s, long lo, long hi, long *out);

/* Whether VRAMTRACE_LEAK_CHECK's value `v` (NULL: unset) has the library
 * check for leaks: a switch that reads on, or a value it cannot read (it
 * checks anyway, with a warning); not unset, empty or off. */
int vt_leak_check_wanted(const char *v);

/* Whether VRAMTRACE_REPORT's value `v` names a file: not 'off', 'stderr'
 * or 'stdout' (the last two as LeakSanitizer's log_path takes them). */
int vt_report_to_file(const char *v);

/* A signal by number or name ("USR2", "SIGUSR2", "12") that vramtrace can
 * take for its dumps (never KILL, STOP, or one a crash raises); -1 when
 * it is not one. */
int vt_parse_signal(const char *s);

/* Whether value v is one the library takes for option d (what its loader
 * would keep rather than warn about). */
int vt_option_valid(const struct vt_option_desc *d, const char *v);

#endif
