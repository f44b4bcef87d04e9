/* report_out.h -- the file `vramtrace report -o FILE` writes.
 *
 * A regular file (or a name with nothing at it) is written into a
 * temporary file beside it and renamed over it once whole, so that a write
 * that fails (a full disk, a quota, a file size limit, a Ctrl-C) leaves
 * the report that was there as it was and nothing beside it. A name of
 * one of this process's descriptors (/dev/stdout, /dev/stderr, /dev/fd/N,
 * /proc/self/fd/N) is that descriptor, written where it stands: following
 * its link replaced the file a shell had redirected the output to (`-o
 * /dev/stdout >> log` lost the log). Another symbolic link is followed
 * (its target is replaced); a device or a FIFO (one nobody reads is
 * refused at once), a file in a folder where no file can be made beside
 * it, one with other names (hard links) and one whose owner this user
 * cannot give the new file (another user's in a sticky folder) are
 * written in place, as is a file the rename is refused for. A file this
 * user may not write is refused, as the shell's `>` refuses it. */
#ifndef VR_REPORT_OUT_H
#define VR_REPORT_OUT_H

#include <limits.h>
#include <stdio.h>

struct vr_out {
    FILE *f;
    int fd;                /* the descriptor the name stood for, or -1 */
    char target[PATH_MAX]; /* the name renamed over ("" : written in place) */
    char tmp[PATH_MAX];    /* the temporary file beside it ("" : none) */
    const char *why;       /* why out was refused, where errno does not say */
};

/* Open out into o; 0, or -1 with o->why or errno. */
int vr_out_open(const char *out, struct vr_out *o);

/* Close o: renamed into place when it was written aside and `ok`, else the
 * temporary file removed. 0, or -1 with errno. */
int vr_out_close(struct vr_out *o, int ok);

#endif
