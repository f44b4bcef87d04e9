/* t_dumpswap.c -- a program whose own file takes the number of the
 * descriptor vramtrace writes a dump through, in the middle of the write
 * (tests/integration/test_files.py).
 *
 * t_dumpswap OWN FOLDER [named]: the program defines write(2) (the system call
 * behind it): at the first write to a descriptor whose file lies in
 * FOLDER (the dump's temporary file), it puts its file OWN (opened empty)
 * at that number (dup2: a daemon's closefrom in one thread and its first
 * open, at once), then writes as asked, into its file now. main allocates
 * 4096 bytes through the runtime (kept), asks vramtrace for a dump
 * (vramtrace_dump through vramtrace_load), and prints whether the swap
 * happened, whether its file is still open at that number, how many bytes
 * its file holds, and the dump's status and path. With "named", its
 * openat(2) refuses O_TMPFILE (EOPNOTSUPP, as a file system without it
 * does), and the dump is written through a named temporary file. */
#define _GNU_SOURCE
#include <cuda_runtime_api.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../../include/vramtrace.h"

static int own = -1, swapped_at = -1;
static const char *folder;
static int no_tmpfile;

int openat(int dirfd, const char *path, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    mode_t mode = (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? va_arg(ap, mode_t) : 0;
    va_end(ap);
    if (no_tmpfile && (flags & O_TMPFILE) == O_TMPFILE) {
        errno = EOPNOTSUPP;
        return -1;
    }
    return (int)syscall(SYS_openat, dirfd, path, flags, mode);
}

ssize_t write(int fd, const void *buf, size_t n) {
    if (own >= 0 && swapped_at < 0 && fd > 2) {
        char link[64], target[4096];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t k = readlink(link, target, sizeof target - 1);
        size_t len = strlen(folder);
        if (k > 0) {
            target[k] = '\0';
            if (strncmp(target, folder, len) == 0 && target[len] == '/' && dup2(own, fd) == fd) swapped_at = fd;
        }
    }
    return syscall(SYS_write, fd, buf, n);
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    folder = argv[2];
    no_tmpfile = argc > 3 && strcmp(argv[3], "named") == 0;
    own = open(argv[1], O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    void *p = NULL;
    if (own < 0 || cudaMalloc(&p, 4096) != cudaSuccess) return 2;
    char path[4096] = "";
    struct vramtrace_api api;
    vramtrace_load(&api);
    int r = api.dump("swap", path, sizeof path);
    struct stat a, b;
    int open_still = swapped_at >= 0 && fstat(swapped_at, &a) == 0 && fstat(own, &b) == 0 &&
                     a.st_ino == b.st_ino && a.st_dev == b.st_dev;
    long bytes = fstat(own, &b) == 0 ? (long)b.st_size : -1;
    printf("swapped %d own %s bytes %ld\ndump %d %s\n", swapped_at >= 0, open_still ? "open" : "closed", bytes, r,
           path);
    return cudaFree(p) == cudaSuccess ? 0 : 1;
}
