/* outfile.c -- opening the files vramtrace writes, by rules that never
 * hurt the host. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <dirent.h>
#include <signal.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../common/fdkeep.h"
#include "../common/sysver.h"
#include "../common/warn.h"
#include "ownstream.h"
#include "outfile.h"
#include "writing.h"

/* Why the node st may not be written, or NULL. */
static const char *refusal(const struct stat *st) {
    if (S_ISLNK(st->st_mode)) return "it is a symbolic link (not followed)";
    if (S_ISCHR(st->st_mode)) return NULL;
    if (S_ISREG(st->st_mode) || S_ISFIFO(st->st_mode))
        return st->st_uid == geteuid() ? NULL : "it belongs to another user";
    return "it is not a regular file, a FIFO or a character device";
}

int vt_file_dir_of(const char *path, const char **base) {
    const char *slash = strrchr(path, '/');
    if (!slash) {
        *base = path;
        return vt_fd_open(AT_FDCWD, ".", O_PATH | O_DIRECTORY, 0);
    }
    *base = slash + 1;
    if (!**base) {
        errno = EISDIR;
        return -1;
    }
    char dir[PATH_MAX];
    size_t n = slash == path ? 1 : (size_t)(slash - path);
    memcpy(dir, path, n);
    dir[n] = '\0';
    return vt_fd_open(AT_FDCWD, dir, O_PATH | O_DIRECTORY, 0);
}

static int close_keep_errno(int fd) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
}

/* Open the existing node base (in dirfd) to write into it in place, with
 * `flags` (O_APPEND or 0) added. Checked before the open (opening some
 * devices does something) and after it (the same node). O_NONBLOCK is
 * cleared once open, so that writes are whole, except on a FIFO, which
 * stream_of writes with a bound on the wait. Returns the descriptor, or
 * -1 with errno or *why. */
static int open_existing(int dirfd, const char *base, int flags, const char **why) {
    struct stat before, st;
    if (fstatat(dirfd, base, &before, AT_SYMLINK_NOFOLLOW) != 0) return -1;
    if ((*why = refusal(&before))) return -1;
    int fd = vt_fd_open(dirfd, base, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | flags, 0);
    if (fd < 0) {
        if (errno == ELOOP) *why = "it is a symbolic link (not followed)";
        else if (errno == ENXIO && S_ISFIFO(before.st_mode)) *why = "it is a FIFO with no reader";
        return -1;
    }
    if (fstat(fd, &st) != 0) return close_keep_errno(fd);
    if (st.st_dev != before.st_dev || st.st_ino != before.st_ino) *why = "it was replaced while opened";
    else *why = refusal(&st);
    int fl = *why ? -1 : fcntl(fd, F_GETFL);
    if (fl < 0 || (!S_ISFIFO(st.st_mode) && fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0)) return close_keep_errno(fd);
    return fd;
}

/* 1 when a write to fd may block for as long as a reader does not read:
 * a pipe, FIFO or socket without O_NONBLOCK (stderr under a launcher that
 * reads it only once the program has ended). */
static int may_block(int fd) {
    struct stat st;
    int fl = fcntl(fd, F_GETFL);
    return fl >= 0 && !(fl & O_NONBLOCK) && fstat(fd, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode));
}

size_t vt_file_write_waiting(int fd, const char *p, size_t n, int *stuck) {
    size_t done = 0;
    /* The descriptor's flags are the program's (shared with it): a
     * blocking one is not made non-blocking, it is waited for with poll
     * before each write, and each write is at most PIPE_BUF bytes, which a
     * pipe that polls writable takes without blocking. */
    if (vt_writing_abandoned()) { /* writing.h: nothing more, and *stuck not touched */
        errno = EPIPE;
        return 0;
    }
    int guard = n && may_block(fd);
    while (done < n && !*stuck) {
        size_t chunk = n - done;
        if (guard) {
            struct pollfd pf = {.fd = fd, .events = POLLOUT};
            int r;
            do r = poll(&pf, 1, VT_FILE_WAIT_MS);
            while (r < 0 && errno == EINTR);
            if (r <= 0 || (pf.revents & POLLNVAL)) {
                if (r == 0) errno = ETIMEDOUT;
                else if (r > 0) errno = EBADF;
                *stuck = 1;
                break;
            }
            if (chunk > PIPE_BUF) chunk = PIPE_BUF;
        }
        ssize_t w = write(fd, p + done, chunk);
        if (w > 0) {
            done += (size_t)w;
            vt_writing_count((uint64_t)w);
            continue;
        }
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            struct pollfd pf = {.fd = fd, .events = POLLOUT};
            int r;
            do r = poll(&pf, 1, VT_FILE_WAIT_MS);
            while (r < 0 && errno == EINTR);
            if (r > 0 && !(pf.revents & (POLLERR | POLLNVAL))) continue;
            errno = r == 0 ? ETIMEDOUT : EPIPE;
        }
        *stuck = 1;
    }
    return done;
}

/* A FIFO is written without blocking (vt_file_write_waiting): a reader
 * that opened it and then stalled held the program's exit for as long as
 * it stalled. What is left is dropped, the stream in error. */
struct fifo {
    int fd, stuck;
};

static ssize_t fifo_write(void *c, const char *buf, size_t n) {
    if (vt_writing_abandoned()) return vt_writing_refused();
    struct fifo *q = c;
    size_t done = vt_file_write_waiting(q->fd, buf, n, &q->stuck);
    return done == 0 && n > 0 ? -1 : (ssize_t)done;
}

static int fifo_close(void *c) {
    struct fifo *q = c;
    int rc = close(q->fd);
    free(q);
    return rc;
}

/* The stream for descriptor fd of open_existing's, in `mode`. */
static FILE *stream_of(int fd, const char *mode) {
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISFIFO(st.st_mode)) return fdopen(fd, mode);
    struct fifo *q = malloc(sizeof *q);
    if (!q) return NULL;
    *q = (struct fifo){fd, 0};
    FILE *f = fopencookie(q, mode, (cookie_io_functions_t){.write = fifo_write, .close = fifo_close});
    if (!f) free(q);
    return f;
}

/* A report log whose last line has no newline (a note put there with
 * printf or an editor that adds none) had the report joined onto that
 * line ("vramtrace: no newlinevramtrace: out of memory..."): fd, the log
 * at base in dirfd just opened to append to, gets one first. Processes
 * that open one log together take turns (a lock of fd's open file, which
 * NFS carries, waited for 2 s at most), so that one of them adds it and
 * the others find it there; each appends whole lines after it, which
 * leave the file ending in a newline. The log is read through a
 * descriptor of its own (fd only writes), the same file's. */
static void end_last_line(int dirfd, const char *base, int fd) {
    struct stat st, rst;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0) return;
    int rfd = vt_fd_open(dirfd, base, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, 0);
    if (rfd < 0) return;
    if (fstat(rfd, &rst) != 0 || rst.st_dev != st.st_dev || rst.st_ino != st.st_ino) {
        close(rfd);
        return;
    }
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    int locked = 0;
    for (int i = 0; i < 200; i++) {
        if (fcntl(fd, F_OFD_SETLK, &fl) == 0) {
            locked = 1;
            break;
        }
        if (errno != EACCES && errno != EAGAIN) break;
        usleep(10000);
    }
    char last;
    if (fstat(fd, &st) == 0 && st.st_size > 0 && pread(rfd, &last, 1, st.st_size - 1) == 1 && last != '\n' &&
        write(fd, "\n", 1) != 1) {
        /* a full disk: the report's own writes meet it and say so */
    }
    if (locked) {
        fl.l_type = F_UNLCK;
        fcntl(fd, F_OFD_SETLK, &fl);
    }
    close(rfd);
}

static int open_report_fd(const char *path, const char **why) {
    const char *base;
    int dirfd = vt_file_dir_of(path, &base);
    if (dirfd < 0) return -1;
    int fd = -1;
    for (int tries = 0; tries < 4; tries++) {
        fd = vt_fd_open(dirfd, base, O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY, 0600);
        if (fd >= 0) (void)fchmod(fd, 0600); /* whatever the program's umask (777 made it 0000) */
        if (fd >= 0 || errno != EEXIST) break;
        fd = open_existing(dirfd, base, O_APPEND, why);
        if (fd >= 0) end_last_line(dirfd, base, fd);
        if (fd >= 0 || *why || errno != ENOENT) break; /* ENOENT: removed between the two */
    }
    int e = errno;
    close(dirfd);
    errno = e;
    return fd;
}

/* A report written in whole lines: processes that append to one report
 * file (pytest-xdist workers, ranks) or write into one FIFO never cut each
 * other's lines (a shared file took stdio's 4,096-byte writes, cut
 * anywhere: "Direct leak of 15#14 0x55bf..."). What the stream hands over
 * is written up to its last newline, in chunks of whole lines (at most
 * PIPE_BUF bytes each into a FIFO, which a pipe never interleaves; a
 * longer line alone); a line not yet ended waits for the next write or
 * the close (one past LINE_MAX_KEPT bytes goes out as it is). A FIFO is
 * written without blocking, as stream_of's.
 *
 * A file that stops taking the report (a full disk, a quota, /dev/full)
 * is left in whole lines: a line the last write cut is taken off the
 * file again (where nothing was appended after it), and from that line
 * on the report goes to the caller's fallback (stderr), so that the
 * post-mortem is not lost.
 *
 * A program may close the report's descriptor and open a file of its own
 * at its number while the report is written (a daemon's closefrom in
 * another thread): each write is made only while fdkeep's identity check
 * finds the descriptor the report's file, and checked again after it; a
 * write that went into the program's file is counted (fb->lost) and, with
 * the rest, goes to the fallback; the descriptor, the program's now, is
 * not closed. */
#define LINE_MAX_KEPT (64 * 1024)

struct lines {
    struct vt_fd k; /* the report file's descriptor and identity */
    int fd, stuck, fifo, regular;
    char *part; /* the line not yet ended */
    size_t len, cap;
    struct vt_report_fallback *fb; /* NULL: none, a failed write fails */
};

/* A write of n bytes into a regular file took only `done` of them: the
 * line it cut taken off the file again, where the file ends where that
 * write ended (nothing appended after it by another process). How many
 * bytes, whole lines, stay written. */
static size_t uncut(struct lines *q, const char *p, size_t done) {
    const char *nl = done ? memrchr(p, '\n', done) : NULL;
    size_t whole = nl ? (size_t)(nl - p) + 1 : 0;
    if (whole == done || !q->regular) return done;
    struct stat st;
    off_t end = lseek(q->fd, 0, SEEK_CUR);
    if (end >= 0 && fstat(q->fd, &st) == 0 && st.st_size == end &&
        ftruncate(q->fd, end - (off_t)(done - whole)) == 0)
        return whole;
    return done;
}

/* The descriptor is no longer the report's file: the rest to the fallback
 * (-1 without one). */
static int taken(struct lines *q, size_t went) {
    if (!q->fb) return -1;
    q->fb->err = EBADF;
    q->fb->taken_fd = q->fd;
    q->fb->lost += went;
    return 0;
}

static int put_lines(struct lines *q, const char *p, size_t n) {
    size_t at = 0;
    if (q->fb && q->fb->err) goto rest; /* the file failed before: all to the fallback */
    while (at < n) {
        if (!vt_fd_mine(&q->k)) {
            if (taken(q, 0) != 0) return -1;
            break;
        }
        size_t end = n;
        if (q->fifo && n - at > PIPE_BUF) {
            const char *nl = memrchr(p + at, '\n', PIPE_BUF);
            if (!nl) nl = memchr(p + at + PIPE_BUF, '\n', n - at - PIPE_BUF);
            end = nl ? (size_t)(nl - p) + 1 : n;
        }
        size_t done = vt_file_write_waiting(q->fd, p + at, end - at, &q->stuck);
        if (!vt_fd_mine(&q->k)) { /* taken under the write: it went into the program's file */
            if (taken(q, done) != 0) return -1;
            break;
        }
        if (done == end - at) {
            at = end;
            continue;
        }
        /* A FIFO's reader that stalls or leaves is waited for once, then
         * left (outfile.h): the rest of its report is not moved. */
        if (!q->fb || q->fifo) return -1;
        int e = errno;
        at += uncut(q, p + at, done);
        q->fb->err = e ? e : EIO;
        break;
    }
rest:
    if (at < n && q->fb && q->fb->to) {
        fwrite(p + at, 1, n - at, q->fb->to);
        q->fb->moved += n - at;
    }
    return 0;
}

static int keep_part(struct lines *q, const char *p, size_t n) {
    if (q->len + n > q->cap) {
        size_t want = q->cap ? q->cap : 256;
        while (want < q->len + n) want *= 2;
        char *more = realloc(q->part, want);
        if (!more) { /* no room: what is kept, then this, as they are */
            int rc = put_lines(q, q->part, q->len) | put_lines(q, p, n);
            q->len = 0;
            return rc;
        }
        q->part = more;
        q->cap = want;
    }
    memcpy(q->part + q->len, p, n);
    q->len += n;
    if (q->len <= LINE_MAX_KEPT) return 0;
    int rc = put_lines(q, q->part, q->len);
    q->len = 0;
    return rc;
}

static ssize_t lines_write(void *c, const char *buf, size_t n) {
    if (vt_writing_abandoned()) return vt_writing_refused();
    struct lines *q = c;
    const char *nl = n ? memrchr(buf, '\n', n) : NULL;
    int rc = 0;
    if (!nl) {
        rc = keep_part(q, buf, n);
    } else {
        size_t upto = (size_t)(nl - buf) + 1;
        if (q->len) { /* the line kept ends in buf: it goes with it */
            size_t first = (size_t)((const char *)memchr(buf, '\n', upto) - buf) + 1;
            rc = keep_part(q, buf, first);
            if (q->len) rc |= put_lines(q, q->part, q->len);
            q->len = 0;
            if (first < upto) rc |= put_lines(q, buf + first, upto - first);
        } else {
            rc = put_lines(q, buf, upto);
        }
        if (upto < n) rc |= keep_part(q, buf + upto, n - upto);
    }
    return rc ? -1 : (ssize_t)n;
}

static int lines_close(void *c) {
    struct lines *q = c;
    int rc = q->len ? put_lines(q, q->part, q->len) : 0;
    /* Taken after the last write, which was checked: nothing to say, and
     * the descriptor is the program's. */
    if (vt_fd_mine(&q->k) && close(q->fd) != 0) rc = -1;
    free(q->part);
    free(q);
    return rc;
}

FILE *vt_file_open_report(const char *path, const char **why, struct vt_report_fallback *fb) {
    int fd = open_report_fd(path, why);
    if (fd < 0) return NULL;
    struct stat st;
    struct lines *q = malloc(sizeof *q);
    FILE *f = NULL;
    if (q) {
        int known = fstat(fd, &st) == 0;
        *q = (struct lines){.fd = fd, .fifo = known && S_ISFIFO(st.st_mode), .regular = known && S_ISREG(st.st_mode),
                            .fb = fb};
        vt_fd_note(fd, &q->k);
        f = fopencookie(q, "a", (cookie_io_functions_t){.write = lines_write, .close = lines_close});
        if (!f) free(q);
        else setvbuf(f, NULL, _IOFBF, 65536);
    }
    if (!f) f = stream_of(fd, "a");
    if (!f) close_keep_errno(fd);
    return f;
}

/* fill, then the written file's identity into *placed (when asked); the
 * stream is on descriptor fd, and with `own` checked to be the file still. */
static int fill_and_close(FILE *f, int fd, struct vt_own *own, int (*fill)(FILE *, void *), void *arg,
                          struct stat *placed) {
    int rc = fill(f, arg);
    if (fflush(f) != 0) rc = -1;
    if (own && !vt_own_still(own)) rc = -1;
    if (placed && fstat(fd, placed) != 0) rc = -1;
    if (fclose(f) != 0) rc = -1;
    return rc;
}

/* Where the file system cannot swap files (NFS refuses renameat2's flags),
 * vramtrace's writers of one name take turns: a lock (fcntl, which NFS
 * carries) on "<base>.lock" beside it, waited for 2 s at most; the lock
 * file stays. Returns its descriptor (closing it lets go), or -1. */
static int take_turn(int dirfd, const char *base) {
    char name[NAME_MAX + 1];
    size_t keep = strlen(base);
    if (keep + 5 > NAME_MAX) keep = NAME_MAX - 5;
    snprintf(name, sizeof name, "%.*s.lock", (int)keep, base);
    int fd = vt_fd_open(dirfd, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, 0600);
    if (fd < 0) return -1;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return close_keep_errno(fd);
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    for (int i = 0; i < 200; i++) {
        if (fcntl(fd, F_SETLK, &fl) == 0) return fd;
        if (errno != EACCES && errno != EAGAIN) break;
        usleep(10000);
    }
    return close_keep_errno(fd);
}

/* Put the written temporary file tmp at base, both in dirfd: over a
 * regular file of this user, or where nothing is, without replacing what
 * appears there meanwhile. With `prev`, the file it replaces is handed to
 * prev first: swapped with the new one in one step (RENAME_EXCHANGE), so
 * that it lies at tmp, a name only this process uses, when prev looks at
 * it; prev keeps it elsewhere (1) or lets it go (0: unlinked). Where the
 * file system cannot swap (nor rename without replacing), the writers
 * take turns (take_turn): prev looks at it where it is, then the new file
 * replaces it. Returns 0, or -1 with errno or *why. */
static int place_dump(int dirfd, const char *tmp, const char *base, const char **why, const struct vt_prev *prev) {
    int turn = -1, rc = -1;
    for (int tries = 0; tries < 8; tries++) {
        struct stat st;
        if (fstatat(dirfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0) {
            if ((*why = refusal(&st))) goto out;
            if (!S_ISREG(st.st_mode)) {
                *why = "it stopped being a regular file while the dump was written";
                goto out;
            }
            if (!prev) {
                rc = renameat(dirfd, tmp, dirfd, base);
                goto out;
            }
            if (turn < 0) {
                if (vt_renameat2(dirfd, tmp, dirfd, base, RENAME_EXCHANGE) == 0) {
                    if (prev->fn(dirfd, tmp, base, prev->arg) != 1) unlinkat(dirfd, tmp, 0);
                    rc = 0;
                    goto out;
                }
                if (errno == ENOENT) continue; /* gone meanwhile */
                if (errno != EINVAL && errno != ENOSYS) goto out;
                /* No swapping here: take turns, and look again. */
                if ((turn = take_turn(dirfd, base)) >= 0) continue;
            }
            prev->fn(dirfd, base, base, prev->arg);
            rc = renameat(dirfd, tmp, dirfd, base);
            goto out;
        }
        if (errno != ENOENT) goto out;
        if (vt_renameat2(dirfd, tmp, dirfd, base, RENAME_NOREPLACE) == 0) {
            rc = 0;
            goto out;
        }
        if (errno == EEXIST) continue;
        if (errno != EINVAL && errno != ENOSYS) goto out;
        /* A file system without RENAME_NOREPLACE (NFS): a hard link does
         * not replace either; a writer that keeps what it replaces takes
         * its turn first, as where it swaps. */
        if (prev && turn < 0 && (turn = take_turn(dirfd, base)) >= 0) continue;
        if (linkat(dirfd, tmp, dirfd, base, 0) == 0) {
            rc = unlinkat(dirfd, tmp, 0);
            goto out;
        }
        if (errno == EEXIST) continue;
        if (errno != EPERM && errno != EOPNOTSUPP) goto out;
        rc = renameat(dirfd, tmp, dirfd, base);
        goto out;
    }
    errno = EEXIST;
out:
    if (turn >= 0) close_keep_errno(turn);
    return rc;
}

/* 64 bits no other writer of the folder is likely to draw: the kernel's
 * random bytes, else the clock's nanoseconds mixed with the thread id. */
static uint64_t random_bits(void) {
    uint64_t v;
    if (vt_getrandom(&v, sizeof v, GRND_NONBLOCK) == (ssize_t)sizeof v) return v;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    v = ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) ^ ((uint64_t)vt_gettid() << 32);
    return v * 0x9e3779b97f4a7c15ull;
}

/* A temporary name for base: the file's, cut to fit NAME_MAX, ".tmp.",
 * the pid and a random number. The pid alone is not this process's: the
 * programs of containers writing into one folder are each pid 1, and one's
 * temporary file replaced (or was unlinked by) another's: a dump was lost
 * or "File exists" (8 at once). */
static void temp_name(const char *base, char *tmp, size_t size) {
    char suffix[48];
    snprintf(suffix, sizeof suffix, ".tmp.%d.%016llx", (int)getpid(), (unsigned long long)random_bits());
    size_t keep = strlen(base);
    if (keep + strlen(suffix) > NAME_MAX) keep = NAME_MAX - strlen(suffix);
    snprintf(tmp, size, "%.*s%s", (int)keep, base, suffix);
}

/* Seconds a temporary file of a process that is gone has gone unwritten
 * before it is taken for a killed writer's: a pid gone here may be a
 * live writer's in another pid namespace (containers sharing the folder),
 * whose file is written to as long as it is written. */
#define STALE_S 600

/* Remove what writers of base (in dirfd) that were killed while they
 * wrote left: regular files of this user named as temp_name names them,
 * of a pid no process here has, unwritten for STALE_S seconds. Where the
 * file system takes O_TMPFILE no writer leaves any (unnamed_whole); this
 * cleans what a file system without it, or an older vramtrace, left. */
static void remove_stale_temps(int dirfd, const char *base) {
    size_t blen = strlen(base), keep = blen;
    if (keep + sizeof ".tmp.2147483647.0123456789abcdef" - 1 > NAME_MAX)
        keep = NAME_MAX - (sizeof ".tmp.2147483647.0123456789abcdef" - 1);
    int fd = vt_fd_open(dirfd, ".", O_RDONLY | O_DIRECTORY, 0);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0) close(fd);
        return;
    }
    time_t now = time(NULL);
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *n = e->d_name;
        /* The name's cut is the one its pid's length made: any cut of
         * base at least as long as the shortest (the longest pid's). */
        size_t len = strlen(n), at = 0;
        while (at < len && at < blen && n[at] == base[at]) at++;
        if (at < keep || strncmp(n + at, ".tmp.", 5) != 0) continue;
        char *end;
        long pid = strtol(n + at + 5, &end, 10);
        if (end == n + at + 5 || pid <= 0 || *end != '.' || strlen(end + 1) != 16 ||
            strspn(end + 1, "0123456789abcdef") != 16)
            continue;
        struct stat st;
        if (pid == getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
        if (fstatat(dirfd, n, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
            now - st.st_mtime < STALE_S)
            continue;
        unlinkat(dirfd, n, 0);
    }
    closedir(d);
}

/* A dump's folder, held (O_PATH) from before its file is written until it
 * is moved into place. The writing takes up to seconds; meanwhile the
 * program may close the descriptor and open a file or folder of its own at
 * its number (a daemon's closefrom in another thread, as for the stream's
 * descriptor, ownstream.h): the dump was then linked into the program's
 * folder, stale temporary files looked for there, and the close at the end
 * closed the program's descriptor. So after the writing the descriptor is
 * used only while fdkeep's identity check finds it the folder, opened
 * again by its path where the number is the program's now (taken only if
 * it is the same folder: its device and inode), and closed only while it
 * is still the folder. */
struct folder {
    struct vt_fd k;
    const char *path; /* the file's, whose folder it is */
};

static int folder_open(struct folder *d, const char *path, const char **base) {
    d->path = path;
    int fd = vt_file_dir_of(path, base);
    if (vt_fd_note(fd, &d->k) == 0) return 0;
    return fd >= 0 ? close_keep_errno(fd) : -1;
}

/* The folder's descriptor now, or -1 (EBADF: the program took the number
 * and the path no longer leads to the folder). */
static int folder_fd(struct folder *d) {
    if (vt_fd_mine(&d->k)) return d->k.fd;
    const char *base;
    int fd = d->k.fd >= 0 ? vt_file_dir_of(d->path, &base) : -1;
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0 && st.st_dev == d->k.dev && st.st_ino == d->k.ino) {
        d->k.fd = fd;
        return fd;
    }
    if (fd >= 0) close(fd);
    d->k.fd = -1;
    errno = EBADF;
    return -1;
}

static void folder_close(struct folder *d) {
    int e = errno;
    vt_fd_drop(&d->k);
    errno = e;
}

/* The file written into an unnamed file of the folder (O_TMPFILE), then
 * linked at a temporary name once whole, for place_dump to move: a
 * process killed while it writes (a scheduler's KILL, the OOM killer)
 * leaves nothing behind, where a named temporary file stayed for ever.
 * Returns 0 with tmp set, -1 when it was written and failed (tmp "" where
 * nothing was named), or 1 when this file system or process cannot make
 * or name such a file (errno as it was): nothing was written, the caller
 * writes a named one. */
static int unnamed_whole(struct folder *dir, const char *base, char *tmp, size_t size, int (*fill)(FILE *, void *),
                         void *arg, struct stat *placed, struct vt_own *own) {
    int e = errno;
    char proc[64];
    int dirfd = folder_fd(dir);
    if (dirfd < 0) return -1;
    int fd = vt_fd_open(dirfd, ".", O_TMPFILE | O_WRONLY, 0600);
    struct stat st;
    if (fd >= 0) snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    /* Named later through /proc (linkat's AT_EMPTY_PATH needs a
     * capability): without /proc the file could be written and not named. */
    if (fd >= 0 && stat(proc, &st) != 0) {
        close(fd);
        fd = -1;
    }
    if (fd < 0) {
        errno = e;
        return 1;
    }
    (void)fchmod(fd, 0600); /* whatever the program's umask */
    FILE *f = vt_own_begin(own, fd) == 0 ? vt_own_stream(own) : NULL;
    if (!f) return close_keep_errno(fd);
    int rc = fill(f, arg);
    if (fflush(f) != 0 || ferror(f)) rc = -1;
    if (rc == 0 && !vt_own_still(own)) rc = -1;
    if (rc == 0 && placed && fstat(fd, placed) != 0) rc = -1;
    if (rc == 0 && (dirfd = folder_fd(dir)) < 0) rc = -1;
    int linked = 0;
    for (int tries = 0; rc == 0 && !linked && tries < 16; tries++) {
        temp_name(base, tmp, size);
        if (linkat(AT_FDCWD, proc, dirfd, tmp, AT_SYMLINK_FOLLOW) == 0) linked = 1;
        else if (errno != EEXIST) rc = -1;
    }
    /* The number taken between the check and the link: the name is the
     * program's file's, taken back. */
    if (linked && !vt_own_still(own)) {
        unlinkat(dirfd, tmp, 0);
        linked = 0;
        rc = -1;
    }
    if (!linked) {
        tmp[0] = '\0';
        rc = -1;
    }
    if (fclose(f) != 0 && rc == 0) {
        rc = -1;
        int e2 = errno;
        unlinkat(dirfd, tmp, 0);
        tmp[0] = '\0';
        errno = e2;
    }
    return rc;
}

/* The file through a temporary file beside it, renamed into place; the
 * stream's descriptor checked through *own (ownstream.h). */
static int replace_once(struct folder *dir, const char *base, int (*fill)(FILE *, void *), void *arg,
                        const char **why, const struct vt_prev *prev, struct stat *placed, struct vt_own *own) {
    char tmp[NAME_MAX + 1];
    int dirfd = folder_fd(dir);
    if (dirfd < 0) return -1;
    remove_stale_temps(dirfd, base);
    tmp[0] = '\0';
    own->taken = 0;
    int rc = unnamed_whole(dir, base, tmp, sizeof tmp, fill, arg, placed, own);
    if (rc == 0) rc = (dirfd = folder_fd(dir)) < 0 ? -1 : place_dump(dirfd, tmp, base, why, prev);
    if (rc != 1) {
        if (rc != 0 && tmp[0] && (dirfd = folder_fd(dir)) >= 0) {
            int e = errno;
            unlinkat(dirfd, tmp, 0);
            errno = e;
        }
        return rc;
    }
    if ((dirfd = folder_fd(dir)) < 0) return -1;
    int fd = -1;
    for (int tries = 0; tries < 16 && fd < 0; tries++) {
        temp_name(base, tmp, sizeof tmp);
        fd = vt_fd_open(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
        if (fd >= 0) (void)fchmod(fd, 0600); /* whatever the program's umask (777 made it 0000) */
        if (fd < 0 && errno != EEXIST) return -1;
    }
    if (fd < 0) return -1;
    FILE *f = vt_own_begin(own, fd) == 0 ? vt_own_stream(own) : NULL;
    rc = f ? fill_and_close(f, fd, own, fill, arg, placed) : close_keep_errno(fd);
    if (rc == 0) rc = (dirfd = folder_fd(dir)) < 0 ? -1 : place_dump(dirfd, tmp, base, why, prev);
    if (rc != 0 && (dirfd = folder_fd(dir)) >= 0) {
        int e = errno;
        unlinkat(dirfd, tmp, 0);
        errno = e;
    }
    return rc;
}

/* replace_once, again (three times in all) while the program takes the
 * descriptor's number from under the writing, each time said. */
static int replace_whole(struct folder *dir, const char *base, int (*fill)(FILE *, void *), void *arg,
                         const char **why, const struct vt_prev *prev, struct stat *placed) {
    struct vt_own own = {.k = VT_FD_NONE};
    int rc = -1;
    for (int tries = 0; tries < VT_FD_TRIES; tries++) {
        rc = replace_once(dir, base, fill, arg, why, prev, placed, &own);
        if (!own.taken) break;
        vt_warn("the program closed the descriptor a file of vramtrace's was being written through and opened "
                "a file of its own at its number (%d): up to %llu bytes meant for %s may have gone into that "
                "file; %s", own.k.fd, (unsigned long long)own.lost, base,
                tries < VT_FD_TRIES - 1 ? "written again" : "given up");
        *why = "the program took its descriptor's number while it was written, three times";
        errno = EBADF;
    }
    return rc;
}

int vt_file_write_dump(const char *path, int (*fill)(FILE *, void *), void *arg, const char **why,
                       const struct vt_prev *prev, struct stat *placed) {
    if (placed) memset(placed, 0, sizeof *placed);
    const char *base;
    struct folder dir;
    if (folder_open(&dir, path, &base) != 0) return -1;
    int dirfd = dir.k.fd, rc = -1;
    struct stat st;
    if (fstatat(dirfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0) {
        if ((*why = refusal(&st))) {
            rc = -1;
        } else if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) {
            int fd = open_existing(dirfd, base, 0, why);
            FILE *f = fd >= 0 ? stream_of(fd, "w") : NULL;
            if (f) rc = fill_and_close(f, fd, NULL, fill, arg, NULL);
            else if (fd >= 0) close_keep_errno(fd);
        } else {
            rc = replace_whole(&dir, base, fill, arg, why, prev, placed);
        }
    } else if (errno == ENOENT) {
        rc = replace_whole(&dir, base, fill, arg, why, prev, placed);
    }
    if (rc != 0 && dir.k.fd < 0 && errno == EBADF)
        *why = "the program took the number of the descriptor of its folder while it was written, and its path no "
               "longer leads to that folder";
    folder_close(&dir);
    return rc;
}

int vt_file_write_whole(const char *path, int (*fill)(FILE *, void *), void *arg, const char **why) {
    return vt_file_write_dump(path, fill, arg, why, NULL, NULL);
}

int vt_file_same_name(const char *a, const char *b) {
    if (strcmp(a, b) == 0) return 1;
    const char *base_a, *base_b;
    int da = vt_file_dir_of(a, &base_a), db = da >= 0 ? vt_file_dir_of(b, &base_b) : -1;
    struct stat sa, sb;
    int same = db >= 0 && strcmp(base_a, base_b) == 0 && fstat(da, &sa) == 0 && fstat(db, &sb) == 0 &&
               sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    if (da >= 0) close(da);
    if (db >= 0) close(db);
    return same;
}
