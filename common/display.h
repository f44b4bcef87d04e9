/* display.h -- a text's display form, for every report a person reads
 * (the CLI's, and the library's post-mortem, exit summary and leak
 * report): a name from a program (a Python function, a path, argv) may
 * hold anything. */
#ifndef VT_DISPLAY_H
#define VT_DISPLAY_H

#include <stddef.h>
#include <stdio.h>

/* The display form of the character at *p, written into out (at most
 * VT_CHAR_MAX bytes and a NUL); returns how many bytes of p it stands for
 * (0 at the end of the string). A printable character stands for itself;
 * a control character (C0, DEL, C1), a bidirectional override, a line or
 * paragraph separator and a byte that is not UTF-8 become an escape such
 * as \x1b or \u202e, so that no name can move a terminal's cursor, recolour
 * it, reorder what it shows or break a line. */
#define VT_CHAR_MAX 8
size_t vt_display_char(const char *p, char out[VT_CHAR_MAX + 1]);

/* s in its display form, in buf; cut at a character boundary when buf is
 * too small. NULL becomes "". Returns buf. */
const char *vt_display(const char *s, char *buf, size_t size);

/* Write s to f in its display form, however long. */
void vt_put_display(FILE *f, const char *s);

#endif
