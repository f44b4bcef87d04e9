/* fdkeep.c -- descriptors the library keeps, out of the program's way
 * (fdkeep.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
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

int vt_fd_keep(int fd, struct vt_fd *k) {
    k->fd = -1;
    if (fd < 0) return -1;
    int low = low_number();
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

int vt_fd_high(int fd) {
    if (fd < 0) return -1;
    int low = low_number(), e = errno;
    int moved = fd < low ? fcntl(fd, F_DUPFD_CLOEXEC, low) : -1;
    if (moved < 0 && fd <= 2) moved = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    if (moved >= 0) {
        close(fd);
        errno = e;
        return moved;
    }
    if (fd <= 2) {
        close(fd);
        errno = EMFILE;
        return -1;
    }
    errno = e;
    return fd;
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
    return vt_fd_high(fd); /* one of 0..2 closed by the program meanwhile: moved too */
}

FILE *vt_fd_fopen(const char *path) {
    int fd = vt_fd_open(AT_FDCWD, path, O_RDONLY, 0);
    FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
    if (!f && fd >= 0) {
        int e = errno;
        close(fd);
        errno = e;
    }
    return f;
}
