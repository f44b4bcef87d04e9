/* fdkeep.c -- descriptors the library keeps, out of the program's way
 * (fdkeep.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fdkeep.h"

int vt_fd_keep(int fd, struct vt_fd *k) {
    k->fd = -1;
    if (fd < 0) return -1;
    struct rlimit rl;
    int low = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur <= VT_FD_LOW + 16
                  ? 3 : VT_FD_LOW;
    int moved = fcntl(fd, F_DUPFD_CLOEXEC, low);
    if (moved < 0 && low != 3) moved = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    struct stat st;
    int ok = moved >= 0 && fstat(moved, &st) == 0, e = errno;
    close(fd);
    if (!ok) {
        if (moved >= 0) close(moved);
        errno = e;
        return -1;
    }
    *k = (struct vt_fd){moved, st.st_dev, st.st_ino};
    return 0;
}

void vt_fd_reserve(void) {
    /* A descriptor of the library's own, not a dup of the program's: a
     * close of any descriptor of a file drops the process's record locks
     * on it (a lock the program took on its stdin, kept across exec, was
     * lost). Under a lower descriptor limit the dup fails (EINVAL):
     * nothing to do, the kept descriptors go low then. */
    int e = errno, own = open("/", O_PATH | O_CLOEXEC);
    if (own >= 0) {
        int high = fcntl(own, F_DUPFD_CLOEXEC, VT_FD_LOW + 16);
        if (high >= 0) close(high);
        close(own);
    }
    errno = e;
}

int vt_fd_mine(const struct vt_fd *k) {
    struct stat st;
    return k->fd >= 0 && fstat(k->fd, &st) == 0 && st.st_dev == k->dev && st.st_ino == k->ino;
}

void vt_fd_drop(struct vt_fd *k) {
    if (vt_fd_mine(k)) close(k->fd);
    k->fd = -1;
}
