/* t_norename.c -- preloaded before vramtrace, a file system without
 * renameat2's flags, as the Linux NFS client is (it refuses them with
 * EINVAL): RENAME_NOREPLACE and RENAME_EXCHANGE fail, a plain rename
 * works, 5 ms late, as over a network, which widens whatever window
 * writers of one name leave each other (tests/integration/test_files.py). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

static int plain(int olddirfd, const char *oldpath, int newdirfd, const char *newpath) {
    usleep(5000);
    return (int)syscall(SYS_renameat2, olddirfd, oldpath, newdirfd, newpath, 0);
}

int renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, unsigned int flags) {
    if (flags) {
        errno = EINVAL;
        return -1;
    }
    return plain(olddirfd, oldpath, newdirfd, newpath);
}

int renameat(int olddirfd, const char *oldpath, int newdirfd, const char *newpath) {
    return plain(olddirfd, oldpath, newdirfd, newpath);
}
