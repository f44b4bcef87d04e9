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
    int on_term;         /* the exit's outputs at a SIGTERM left to its default */
    uint64_t limit;      /* per-device budget in bytes, 0 = none */
    int unwind;          /* VT_UNWIND_* */
    int live;            /* publish the live segment */
    long forecast;       /* the forecast's horizon in seconds, 0 = none */
    long spill;          /* MiB of live allocations a dump holds in memory */
    char app[4096];      /* VRAMTRACE_APP's patterns, or "" */
    char library[4096];  /* VRAMTRACE_LIBRARY's patterns, or "" */
};

enum { VT_UNWIND_WALKER, VT_UNWIND_LIBUNWIND, VT_UNWIND_CHECK };

extern struct vt_options vt_opt;

/* The VRAMTRACE_* variables as the process started with them, kept by
 * vt_options_keep at start so that the options read later, at the first
 * GPU call, are the ones it started with, whatever it did to its
 * environment since (setenv, clearenv, a title written over the
 * environment's strings). The caller owns the memory: at start the library
 * touches only its own start-up pages. */
#define VT_OPTIONS_VARS_ROOM (16384 - 64 * sizeof(const char *) - 2 * sizeof(int))

struct vt_options_env {
    int kept;              /* 1 once kept */
    int count;             /* variables in vars */
    const char *cwd;       /* the working folder at the start ("" if unknown),
                              in text after the variables: relative paths are
                              taken from it */
    const char *vars[64];  /* "NAME=value", in text */
    /* The variables (16 KiB at most) and then the working folder, packed
     * from the start: a start with few variables writes one page of it. */
    char text[VT_OPTIONS_VARS_ROOM + 4096];
};

/* Keep the variables in e, and create VRAMTRACE_MARK's file when it is
 * set. Returns 0 when they do not fit (64 variables, 16 KiB in all): the
 * caller then loads the options at once, from the environment. */
int vt_options_keep(struct vt_options_env *e);

/* Parse e's variables (the environment when e is NULL or not kept) into
 * vt_opt, and create VRAMTRACE_MARK's file when they were not kept.
 * Warnings are held back until vt_options_flush_warnings, which prints
 * them once on stderr. */
void vt_options_load(const struct vt_options_env *e);

/* Under `vramtrace run`, tell it this process's verdict at exit ("leaks":
 * its leak check found leaks; "unchecked": the check could not run), so
 * that a leak in a child process fails the run too: a line in the file
 * beside VRAMTRACE_MARK's. Nothing without a mark. */
void vt_mark_verdict(const char *what);

/* Whether the variable VRAMTRACE_`suffix` is set: among e's, once kept. */
int vt_options_set(const struct vt_options_env *e, const char *suffix);
void vt_options_flush_warnings(void);

#endif
