/* options.h -- the library's settings, read from the environment.
 *
 * The settings, their defaults and ranges are common/options.h's table;
 * this is where the library keeps their values. Read once from the
 * environment at start. A bad value warns once on stderr
 * (when the process first uses a GPU), naming the variable, and keeps the
 * default; an unknown VRAMTRACE_* name
 * warns too. */
#ifndef VT_OPTIONS_H
#define VT_OPTIONS_H

#include <stddef.h>
#include <stdint.h>

#include "../common/options.h"

struct vt_options {
    /* Patterns longer than PATH_MAX fit: "%%" shortens one, and the
     * writer says when an expanded path does not fit. */
    char out[8192];      /* dump path pattern, or "off" */
    char report[8192];   /* "stderr", "off" or a file path pattern */
    int depth;           /* native frames kept per stack */
    long events;         /* capacity of the event ring */
    int top;             /* rows in the human report's tables */
    int python;          /* read Python frames */
    int leak_check;      /* report leaks at exit, LSan style */
    int exitcode;        /* exit status when leaks remain */
    char suppressions[4096]; /* leak suppressions file, or "" */
    int signal;          /* on-demand dump signal, 0 = none */
    uint64_t limit;      /* per-device budget in bytes, 0 = none */
    int unwind;          /* VT_UNWIND_* */
    int live;            /* publish the live segment */
    long forecast;       /* the forecast's horizon in seconds, 0 = none */
    char app[4096];      /* VRAMTRACE_APP's patterns, or "" */
    char library[4096];  /* VRAMTRACE_LIBRARY's patterns, or "" */
};

enum { VT_UNWIND_WALKER, VT_UNWIND_LIBUNWIND, VT_UNWIND_CHECK };

extern struct vt_options vt_opt;

/* Parse the environment into vt_opt, and create VRAMTRACE_MARK's file
 * when it is set. Warnings are held back until vt_options_flush_warnings,
 * which prints them once on stderr. */
void vt_options_load(void);
void vt_options_flush_warnings(void);

#endif
