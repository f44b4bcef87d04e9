/* report_keep.h -- a file at the report's name that is no report log of
 * vramtrace's is kept as it is, not appended to (see report_keep.c). */
#ifndef VT_REPORT_KEEP_H
#define VT_REPORT_KEEP_H

/* Whether the report may be appended to the file at path: 1 when there
 * is none, or it is not a regular file of this user (a FIFO, a device,
 * another user's file: outfile.h's rules decide), or it is empty (or
 * holds blank lines alone, up to a MiB of them), or its first line that
 * is not blank is one a vramtrace report begins with. 0, with *why ("is a
 * vramtrace dump", "is not a vramtrace report log"), when it is a regular
 * file of this user that holds something else. */
int vt_report_keep_appendable(const char *path, const char **why);

#endif
