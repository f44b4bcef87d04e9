/* reporters.h -- the formats `vramtrace report` writes, behind one interface.
 *
 * Each format is one file (fmt_*.c) with one writer; this header lists them
 * and the helpers they share. Writers only read the checked model. */
#ifndef VT_REPORTERS_H
#define VT_REPORTERS_H

#include <stdio.h>

#include "model.h"

enum vr_moment { VR_AT_EXIT, VR_AT_PEAK, VR_AT_OOM };

struct vr_opts {
    enum vr_moment at;
    int top;
};

struct vr_input {
    struct vm_dump *dumps;
    size_t n;
};

struct vt_reporter {
    const char *name;
    const char *summary;
    /* Write the report. Returns 0, or -1 with a one-line reason in err. */
    int (*write)(FILE *f, const struct vr_input *in, const struct vr_opts *o, char *err,
                 size_t errsize);
};

extern const struct vt_reporter vt_reporters[]; /* ended by a NULL name */

int vr_text(FILE *, const struct vr_input *, const struct vr_opts *, char *, size_t);
int vr_json(FILE *, const struct vr_input *, const struct vr_opts *, char *, size_t);
int vr_folded(FILE *, const struct vr_input *, const struct vr_opts *, char *, size_t);
int vr_html(FILE *, const struct vr_input *, const struct vr_opts *, char *, size_t);
int vr_torch(FILE *, const struct vr_input *, const struct vr_opts *, char *, size_t);

const char *vr_moment_name(enum vr_moment at);

/* The holders of one dump at the chosen moment: live at exit (or when the
 * dump was written), at the peak of device bytes, or at the first OOM.
 * NULL with *n = 0 when the dump has none; *missing is set when the dump
 * cannot answer (no OOM for VR_AT_OOM, no peak holders in the dump). */
const struct vm_holder *vr_holders_at(const struct vm_dump *d, enum vr_moment at, size_t *n,
                                      int *missing);

/* Call sites combined across dumps, by their "function file:line" text,
 * largest first: for several ranks or processes at once. */
struct vr_combined {
    char *where;
    uint64_t bytes, count;
    size_t processes;           /* how many dumps hold memory there */
    const struct vm_dump *first; /* a dump and stack to show the stack from */
    size_t stack;
};

struct vr_combined *vr_combine(const struct vr_input *in, enum vr_moment at, size_t *n);
void vr_combined_free(struct vr_combined *c, size_t n);

/* "1.50 GiB" */
const char *vr_bytes(uint64_t v, char *buf, size_t size);

#endif
