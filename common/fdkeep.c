/* fdkeep.c -- descriptors the library keeps, out of the program's way
 * (fdkeep.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fdkeep.h"
#include "rawsys.h"

/* The lowest number the library's descriptors go to: VT_FD_LOW, or 3
 * where the descriptor limit leaves no room above it. */
static int low_number(void) {
    struct rlimit rl;
    return getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur <= VT_FD_LOW + 16
               ? 3 : VT_FD_LOW;
}

/* Whether fd holds the file `was` describes (vt_fd_mine). */
static int holds(int fd, const struct stat *was) {
    return vt_fd_mine(&(struct vt_fd){fd, was->st_dev, was->st_ino});
}

int vt_fd_keep(int fd, struct vt_fd *k) {
    struct stat was;
    k->fd = -1;
    if (fd < 0) return -1;
    if (fstat(fd, &was) != 0) return -1; /* closed already: the number is the program's (EBADF) */
    int low = low_number();
    int moved = fcntl(fd, F_DUPFD_CLOEXEC, low);
    if (moved < 0 && low != 3) moved = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    /* As move_high: fd closed only while it is still the file, and a copy
     * of another file (the program's, at fd's number now) not kept. */
    int ok = moved >= 0 && holds(moved, &was), e = ok || moved < 0 ? errno : EBADF;
    if (holds(fd, &was)) close(fd);
    if (!ok) {
        if (moved >= 0) close(moved);
        errno = e;
        return -1;
    }
    *k = (struct vt_fd){moved, was.st_dev, was.st_ino};
    return 0;
}

/* Beside the library's other start-up code (a page of its own was a page
 * fault of every process's start), its path built on the stack, its calls
 * the system's own (rawsys.h: no C library function bound for them). */
__attribute__((section(".text.startup"))) void vt_fd_reserve(void) {
    /* A descriptor of the library's own, not a dup of the program's: a
     * close of any descriptor of a file drops the process's record locks
     * on it (a lock the program took on its stdin, kept across exec, was
     * lost). Under a lower descriptor limit the dup fails (EINVAL):
     * nothing to do, the kept descriptors go low then. */
    const char root[] = {'/', 0};
    long own = vt_sys4(SYS_openat, AT_FDCWD, (long)root, O_PATH | O_CLOEXEC, 0);
    if (own >= 0) {
        long high = vt_sys3(SYS_fcntl, own, F_DUPFD_CLOEXEC, VT_FD_LOW + 16);
        if (high >= 0) vt_sys3(SYS_close, high, 0, 0);
        vt_sys3(SYS_close, own, 0, 0);
    }
}

int vt_fd_note(int fd, struct vt_fd *k) {
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        *k = (struct vt_fd)VT_FD_NONE;
        return -1;
    }
    *k = (struct vt_fd){fd, st.st_dev, st.st_ino};
    return 0;
}

int vt_fd_mine(const struct vt_fd *k) {
    struct stat st;
    return k->fd >= 0 && fstat(k->fd, &st) == 0 && st.st_dev == k->dev && st.st_ino == k->ino;
}

void vt_fd_drop(struct vt_fd *k) {
    if (vt_fd_mine(k)) close(k->fd);
    k->fd = -1;
}

void vt_fd_std_hold(int held[3]) {
    held[0] = held[1] = held[2] = -1;
    int e = errno;
    /* Each open takes the lowest number free: the closed ones of 0..2
     * first, then one above them, given back at once. */
    for (int i = 0; i < 3; i++) {
        int fd = open("/", O_PATH | O_CLOEXEC);
        if (fd < 0) break;
        if (fd > 2) {
            close(fd);
            break;
        }
        held[fd] = fd;
    }
    errno = e;
}

void vt_fd_std_free(const int held[3]) {
    int e = errno;
    for (int i = 0; i < 3; i++)
        if (held[i] >= 0) close(held[i]);
    errno = e;
}

/* fd, of the file `was` describes, moved as vt_fd_high says. The number
 * is the program's once it holds another file: where the program took it
 * between the look and the move (a daemon's closefrom and its own open, in
 * another thread), the copy made is of the program's file and is closed,
 * the program's descriptor left open, and -1 returned with EBADF; where
 * it took it after the move, the copy is the library's and the number is
 * left to the program. Before, the number was closed in either case: the
 * program lost its file, and the library went on with a copy of it. */
static int move_high(int fd, const struct stat *was) {
    int low = low_number(), e = errno;
    int moved = fd < low ? fcntl(fd, F_DUPFD_CLOEXEC, low) : -1;
    if (moved < 0 && fd <= 2) moved = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    if (moved >= 0 && !holds(moved, was)) {
        close(moved);
        errno = EBADF;
        return -1;
    }
    if (moved >= 0) {
        if (holds(fd, was)) close(fd);
        errno = e;
        return moved;
    }
    if (fd <= 2) {
        if (holds(fd, was)) close(fd);
        errno = EMFILE;
        return -1;
    }
    errno = e;
    return fd;
}

int vt_fd_high(int fd) {
    struct stat was;
    if (fd < 0) return -1;
    if (fstat(fd, &was) != 0) return -1; /* closed already: the number is the program's (EBADF) */
    return move_high(fd, &was);
}

int vt_fd_open(int dirfd, const char *path, int flags, mode_t mode) {
    int held[3];
    vt_fd_std_hold(held);
    int fd = openat(dirfd, path, flags | O_CLOEXEC, mode), e = errno;
    vt_fd_std_free(held);
    if (fd < 0) {
        errno = e;
        return -1;
    }
    /* The number holds path's file, unless the program took it since the
     * open: then it is the program's, and left open (EBADF). A file of no
     * name (O_TMPFILE) cannot be told so, nor one whose name is gone
     * meanwhile; a name another file took meanwhile (a rename over it)
     * reads as the program's, and the descriptor is left open: one
     * descriptor lost in that race, rather than the program's file. */
    struct stat was, at;
    if (fstat(fd, &was) != 0) return -1;
    if ((flags & O_TMPFILE) != O_TMPFILE &&
        fstatat(dirfd, path, &at, flags & O_NOFOLLOW ? AT_SYMLINK_NOFOLLOW : 0) == 0 &&
        (at.st_dev != was.st_dev || at.st_ino != was.st_ino)) {
        errno = EBADF;
        return -1;
    }
    return move_high(fd, &was); /* one of 0..2 closed by the program meanwhile: moved too */
}

/* A file read whole, as a stream's cookie: its bytes and where the
 * stream is. */
struct whole {
    char *buf;
    size_t len, at;
};

static ssize_t whole_read(void *cookie, char *out, size_t n) {
    struct whole *w = cookie;
    if (n > w->len - w->at) n = w->len - w->at;
    memcpy(out, w->buf + w->at, n);
    w->at += n;
    return (ssize_t)n;
}

static int whole_seek(void *cookie, off64_t *off, int whence) {
    struct whole *w = cookie;
    off64_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? (off64_t)w->at : (off64_t)w->len;
    if (*off < -base || base + *off > (off64_t)w->len) return -1;
    w->at = (size_t)(base + *off);
    *off = (off64_t)w->at;
    return 0;
}

static int whole_close(void *cookie) {
    struct whole *w = cookie;
    free(w->buf);
    free(w);
    return 0;
}

/* fd read whole into *w (at most max bytes: else EFBIG) and closed, when
 * it is still the file it was at its first fstat: 0; -1 with errno, EBADF
 * when the descriptor was no longer that file by the end (left open: the
 * program's). */
static int read_fd_whole(int fd, struct whole *w, size_t max) {
    struct stat opened;
    if (fstat(fd, &opened) != 0) return -1; /* closed already: not ours to close */
    struct vt_fd k = {fd, opened.st_dev, opened.st_ino};
    size_t cap = 16384, len = 0;
    char *buf = malloc(cap);
    ssize_t r = buf ? 1 : -1;
    int e = buf ? 0 : ENOMEM;
    while (r > 0) {
        if (len > max) { e = EFBIG; break; }
        if (len == cap) {
            char *more = realloc(buf, cap * 2);
            if (!more) { e = ENOMEM; break; }
            buf = more;
            cap *= 2;
        }
        r = read(fd, buf + len, cap - len);
        if (r < 0 && errno == EINTR) r = 1;
        else if (r < 0) e = errno;
        else len += (size_t)r;
    }
    if (vt_fd_mine(&k)) close(fd);
    else e = EBADF;
    if (e) {
        free(buf);
        errno = e;
        return -1;
    }
    *w = (struct whole){buf, len, 0};
    return 0;
}

/* path read whole through one descriptor into *w (read_fd_whole). */
static int read_whole(const char *path, struct whole *w) {
    int fd = vt_fd_open(AT_FDCWD, path, O_RDONLY, 0);
    return fd < 0 ? -1 : read_fd_whole(fd, w, SIZE_MAX);
}

/* read_whole, again (three times in all) while the program takes the
 * descriptor's number. */
static int read_whole_again(const char *path, struct whole *w) {
    int r = -1;
    for (int tries = 0; r != 0 && tries < VT_FD_TRIES; tries++)
        if ((r = read_whole(path, w)) != 0 && errno != EBADF) break;
    return r;
}

ssize_t vt_fd_read_small(const char *path, char *buf, size_t size) {
    struct whole w;
    if (size == 0 || read_whole_again(path, &w) != 0) return -1;
    size_t n = w.len < size - 1 ? w.len : size - 1;
    memcpy(buf, w.buf, n);
    buf[n] = '\0';
    free(w.buf);
    return (ssize_t)n;
}

/* A stream from memory over what read_fd_whole or read_whole_again read
 * (fd >= 0: that descriptor's, else path's). */
static FILE *whole_stream(int fd, const char *path, size_t max) {
    struct whole got;
    int r = fd >= 0 ? read_fd_whole(fd, &got, max) : read_whole_again(path, &got);
    if (r != 0) return NULL; /* the descriptor dealt with, as read_fd_whole says */
    struct whole *w = malloc(sizeof *w);
    FILE *f = NULL;
    if (w) {
        *w = got;
        f = fopencookie(w, "r", (cookie_io_functions_t){whole_read, NULL, whole_seek, whole_close});
    }
    if (f) return f;
    free(got.buf);
    free(w);
    errno = ENOMEM;
    return NULL;
}

FILE *vt_fd_fopen(const char *path) { return whole_stream(-1, path, SIZE_MAX); }

FILE *vt_fd_fdopen(int fd, size_t max) { return whole_stream(fd, NULL, max); }
