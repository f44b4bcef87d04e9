/* outfile.h -- opening the files vramtrace writes, by one set of rules.
 *
 * Every output file is opened here: the last component of the path is
 * never followed when it is a symbolic link; a FIFO never blocks the
 * process (no reader: the output is skipped); a regular file or a FIFO of
 * another user is refused (they could read it, or planted it); a character
 * device is written into (/dev/null; only root makes one); anything else
 * is refused. A new file is created O_EXCL, mode 0600. Paths are shorter
 * than PATH_MAX. On failure errno says why, or *why where the path was
 * refused on purpose. */
#ifndef VT_OUTFILE_H
#define VT_OUTFILE_H

#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>

/* Write a file that is whole or absent: fill(f, arg) writes it (0, or -1
 * when a write failed) into a temporary file beside path, renamed into
 * place; into a FIFO or a character device in place. The temporary file
 * is unnamed (O_TMPFILE) until it is whole where the file system allows,
 * so that a process killed meanwhile leaves none; the stale ones of killed
 * writers at that name are removed first. Returns 0, or -1. */
int vt_file_write_whole(const char *path, int (*fill)(FILE *, void *), void *arg, const char **why);

/* What becomes of the regular file a dump replaces: fn(dirfd, name,
 * base, arg) looks at it, at `name` in dirfd (base: the dump's own
 * name), and keeps it elsewhere (returns 1) or leaves it to be replaced
 * (0). */
struct vt_prev {
    int (*fn)(int dirfd, const char *name, const char *base, void *arg);
    void *arg;
};

/* vt_file_write_whole, with prev (NULL: replaced) for the file a regular
 * file placed at path replaces, and *placed (NULL: not asked) set to the
 * written file's identity (st_dev, st_ino), 0 in both when it was not a
 * regular file that was written. */
int vt_file_write_dump(const char *path, int (*fill)(FILE *, void *), void *arg, const char **why,
                       const struct vt_prev *prev, struct stat *placed);

/* Write n bytes of p to fd, waiting for a descriptor that says "try
 * again" (non-blocking: a full pipe, a FIFO whose reader stalls), or a
 * blocking pipe, FIFO or socket that is full (polled before each write of
 * at most PIPE_BUF bytes: its flags stay the program's), up to
 * VT_FILE_WAIT_MS without progress, once: after a wait that long, or an
 * error, *stuck is set (errno ETIMEDOUT, or the write's) and nothing more
 * is written, this call or a later one with the same flag (each chunk
 * waiting its own 10 s held a program with a 278 KB report and no reader
 * for 9 minutes). Returns the bytes written. */
#define VT_FILE_WAIT_MS 10000
size_t vt_file_write_waiting(int fd, const char *p, size_t n, int *stuck);

/* Where a report goes when its file stops taking it (a full disk, a
 * quota, a file size limit, /dev/full): `to` (the caller's stderr
 * stream; NULL: nowhere), from the first line the file did not take
 * whole. err: the errno of the write that failed (0: none failed);
 * moved: the bytes sent to `to`. */
struct vt_report_fallback {
    FILE *to;
    int err;
    size_t moved;
    int taken_fd;    /* err EBADF: the program took this descriptor's number while it was written */
    uint64_t lost;   /* then: bytes that may have gone into the program's file */
};

/* The report file at path, appended to, created when new, written in
 * whole lines. With fb, a file that fails is left in whole lines and
 * the rest goes to fb->to (a FIFO's is not moved: dropped as before).
 * NULL on failure. */
FILE *vt_file_open_report(const char *path, const char **why, struct vt_report_fallback *fb);

/* Open the directory holding path (O_PATH) and point *base at the last
 * component. Returns the descriptor, or -1 with errno. */
int vt_file_dir_of(const char *path, const char **base);

/* Whether paths a and b name one file: the same text, or the same last
 * component in one folder (by its identity: "./x" and "x", a folder
 * reached through a link). 0 when either folder cannot be opened. */
int vt_file_same_name(const char *a, const char *b);

#endif
