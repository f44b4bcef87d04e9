/* report_out.c -- the file `vramtrace report -o FILE` writes
 * (report_out.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "report_out.h"

/* The descriptor of this process that path names (/dev/stdout, /dev/fd/N,
 * /proc/self/fd/N and links to them), or -1: each link of the name is
 * followed by hand, and a name whose folder resolves to this process's
 * /proc/PID/fd (or a thread's /proc/PID/task/TID/fd) is its descriptor. */
static int descriptor_named(const char *path) {
    char cur[PATH_MAX], dir[PATH_MAX], real[PATH_MAX], link[PATH_MAX];
    if (strlen(path) >= sizeof cur) return -1;
    snprintf(cur, sizeof cur, "%s", path);
    for (int hop = 0; hop < 16; hop++) {
        const char *slash = strrchr(cur, '/'), *base = slash ? slash + 1 : cur;
        snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - cur) + (slash == cur) : 1, slash ? cur : ".");
        if (realpath(dir, real)) {
            char mine[64];
            int n = snprintf(mine, sizeof mine, "/proc/%d/", (int)getpid()), len = (int)strlen(real);
            if (strncmp(real, mine, (size_t)n) == 0 && len > 3 && strcmp(real + len - 3, "/fd") == 0 && *base &&
                strspn(base, "0123456789") == strlen(base) && strlen(base) < 10)
                return atoi(base);
        }
        ssize_t k = readlink(cur, link, sizeof link - 1);
        if (k <= 0) return -1;
        link[k] = '\0';
        if (link[0] == '/') snprintf(cur, sizeof cur, "%s", link);
        else if (snprintf(cur, sizeof cur, "%s/%s", realpath(dir, real) ? real : dir, link) >= (int)sizeof cur)
            return -1;
    }
    return -1;
}

/* The temporary file being written, removed by a signal that ends the
 * command (Ctrl-C, a CI job's timeout): an interrupted report left a
 * hidden .vramtrace-report.XXXXXX of tens of MB beside FILE for ever. */
static char pending[PATH_MAX];

static void remove_and_die(int sig) {
    if (pending[0]) unlink(pending);
    signal(sig, SIG_DFL);
    raise(sig);
}

static void remove_on_signals(void) {
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGXFSZ};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction old, sa = {.sa_handler = remove_and_die};
        sigemptyset(&sa.sa_mask);
        /* A signal the caller ignores (nohup's SIGHUP) stays ignored. */
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN) sigaction(sigs[i], &sa, NULL);
    }
}

/* The stream of fd, a file written in place from its start. */
static int in_place(struct vr_out *o, int fd) {
    if (ftruncate(fd, 0) == 0 && (o->f = fdopen(fd, "wb"))) return 0;
    int e = errno;
    close(fd);
    errno = e;
    return -1;
}

int vr_out_open(const char *out, struct vr_out *o) {
    o->target[0] = o->tmp[0] = '\0';
    o->why = NULL;
    o->fd = descriptor_named(out);
    if (o->fd >= 0) {
        int fd = fcntl(o->fd, F_DUPFD_CLOEXEC, 3);
        if (fd < 0) return -1;
        if (!(o->f = fdopen(fd, "wb"))) { /* fdopen truncates nothing: written where it stands */
            close(fd);
            return -1;
        }
        return 0;
    }
    struct stat st, lst;
    int exists = stat(out, &st) == 0;
    if (exists && S_ISFIFO(st.st_mode)) {
        /* Opened without blocking: a FIFO nobody reads held the command
         * for ever, as one nobody writes held `report FIFO`. */
        int fd = open(out, O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC), fl;
        if (fd < 0) {
            if (errno == ENXIO) o->why = "a FIFO nobody reads (not waited for)";
            return -1;
        }
        if ((fl = fcntl(fd, F_GETFL)) >= 0 && fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) == 0 && (o->f = fdopen(fd, "wb")))
            return 0;
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    const char *target = out;
    char real[PATH_MAX];
    if (lstat(out, &lst) == 0 && S_ISLNK(lst.st_mode)) target = exists && realpath(out, real) ? real : NULL;
    /* A file there is opened first, as the shell's `>` opens it: one this
     * user may not write is refused (the rename replaced a read-only
     * file). It is written in place, through this descriptor, where the
     * file written aside could not take its place as the same file: one
     * with other names (hard links, which kept the old text), and one whose
     * owner or group this user cannot give the new file (another user's,
     * in a sticky folder, where the rename is not permitted). */
    int fd = -1;
    if (exists && S_ISREG(st.st_mode) && (fd = open(out, O_WRONLY | O_NOCTTY | O_CLOEXEC)) < 0) return -1;
    if (target && (!exists || (S_ISREG(st.st_mode) && st.st_nlink <= 1)) && strlen(target) < sizeof o->target) {
        const char *slash = strrchr(target, '/');
        int dir = slash ? (int)(slash - target) + 1 : 0;
        int n = snprintf(o->tmp, sizeof o->tmp, "%.*s.vramtrace-report.XXXXXX", dir, target);
        int tfd = n > 0 && (size_t)n < sizeof o->tmp ? mkostemp(o->tmp, O_CLOEXEC) : -1;
        if (tfd >= 0 && exists && fchown(tfd, st.st_uid, st.st_gid) != 0) { /* not its owner's: in place */
            close(tfd);
            unlink(o->tmp);
            tfd = -1;
        }
        if (tfd >= 0) {
            /* The mode the file had (or a new one's, under the umask),
             * not mkstemp's 0600. */
            mode_t mask = umask(0);
            umask(mask);
            (void)fchmod(tfd, exists ? st.st_mode & 07777 : 0666 & ~mask);
            if ((o->f = fdopen(tfd, "wb"))) {
                snprintf(o->target, sizeof o->target, "%s", target);
                snprintf(pending, sizeof pending, "%s", o->tmp);
                remove_on_signals();
                if (fd >= 0) close(fd);
                return 0;
            }
            close(tfd);
            unlink(o->tmp);
        }
        o->tmp[0] = '\0';
    }
    if (fd >= 0) return in_place(o, fd);
    o->f = fopen(out, "wb");
    return o->f ? 0 : -1;
}

/* The file written aside (tmp) copied into target in place, where the
 * rename is refused (EPERM, EACCES; EBUSY: target is a mount point). */
static int copy_in_place(const char *tmp, const char *target) {
    int in = open(tmp, O_RDONLY | O_CLOEXEC);
    int out = in < 0 ? -1 : open(target, O_WRONLY | O_TRUNC | O_NOCTTY | O_CLOEXEC);
    int rc = out < 0 ? -1 : 0;
    char buf[65536];
    while (rc == 0) {
        ssize_t n = read(in, buf, sizeof buf), done = 0;
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            rc = n < 0 ? -1 : 0;
            break;
        }
        while (rc == 0 && done < n) {
            ssize_t w = write(out, buf + done, (size_t)(n - done));
            if (w > 0) {
                done += w;
            } else if (w == 0 || errno != EINTR) {
                if (w == 0) errno = EIO;
                rc = -1;
            }
        }
        if (rc != 0) break;
    }
    int e = errno;
    if (out >= 0 && close(out) != 0 && rc == 0) {
        rc = -1;
        e = errno;
    }
    if (in >= 0) close(in);
    errno = e;
    return rc;
}

int vr_out_close(struct vr_out *o, int ok) {
    int rc = fclose(o->f) == 0 ? 0 : -1;
    if (!o->tmp[0]) return rc;
    if (ok && rc == 0 && rename(o->tmp, o->target) == 0) {
        pending[0] = '\0';
        return 0;
    }
    int e = errno;
    if (ok && rc == 0 && (e == EPERM || e == EACCES || e == EBUSY)) {
        rc = copy_in_place(o->tmp, o->target);
        e = errno;
    } else {
        rc = -1;
    }
    unlink(o->tmp);
    pending[0] = '\0';
    errno = e;
    return rc;
}
