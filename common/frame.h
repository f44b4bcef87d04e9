/* frame.h -- one frame of a stack, as every report names it.
 *
 * The library fills frames from the running process (report/symbolize.c),
 * the CLI from a dump (cli/model.c): both hold the same struct, so that the
 * call-site rule and the call-site label (common/callsite.h) are one piece
 * of code for both. */
#ifndef VT_FRAME_H
#define VT_FRAME_H

#include <stdint.h>

/* What a stack listing says after a borrowed frame. */
#define VT_BORROWED_NOTE "(borrowed: the Python thread waiting for this one)"

/* The frame that stands, in a stack deeper than a stack holds, for the
 * frames left out between its innermost and its outermost ones
 * (tracker/pystack.h): a Python frame of this file, line 0, named
 * VT_CUT_NAME with the number left out. */
#define VT_CUT_FILE "<vramtrace>"
#define VT_CUT_NAME "(%u frames left out)"

struct vt_frame {
    uint64_t address;       /* the return address as captured; 0 for Python */
    const char *function;   /* NULL when unknown */
    const char *file;       /* NULL when unknown */
    long line;              /* 0 when unknown */
    const char *module;     /* path of the object; NULL when unknown */
    uint64_t offset;        /* address relative to the module's load base */
    int python;             /* a Python frame (function, file, line only) */
    int borrowed;           /* a Python frame of another thread: the one this
                               thread worked for (tracker/pystack.h) */
    int inlined;            /* a function the compiler inlined into the next
                               frame (its caller), at the same return address:
                               its line is where its code is, the caller's
                               line is where it was inlined */
};

#endif
