/* t_norename.c -- preloaded before vramtrace, a file system without
 * renameat2's flags, as the Linux NFS client is (it refuses them with
 * EINVAL): RENAME_NOREPLACE and RENAME_EXCHANGE fail, a plain rename
 * works, 5 ms late, as over a network, which widens whatever window
 * writers of one name leave each other (tests/integration/test_files.py).
 * The kernel's answer is what it stands in for, by either way a program
 * asks: the C library's renameat2 and renameat, or syscall(2)
 * (vramtrace's, common/sysver.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The system call itself, its result the kernel's (a negative errno). */
static long raw(long n, long a, long b, long c, long d, long e, long f) {
    long r;
    register long r10 __asm__("r10") = d, r8 __asm__("r8") = e, r9 __asm__("r9") = f;
    __asm__ volatile("syscall" : "=a"(r) : "0"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
    return r;
}

static long answer(long r) {
    if (r < 0 && r > -4096) {
        errno = (int)-r;
        return -1;
    }
    return r;
}

static int plain(int olddirfd, const char *oldpath, int newdirfd, const char *newpath) {
    usleep(5000);
    return (int)answer(raw(SYS_renameat2, olddirfd, (long)oldpath, newdirfd, (long)newpath, 0, 0));
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

long syscall(long n, ...) {
    va_list ap;
    long a[6];
    va_start(ap, n);
    for (int i = 0; i < 6; i++) a[i] = va_arg(ap, long);
    va_end(ap);
    if (n == SYS_renameat2) return renameat2((int)a[0], (const char *)a[1], (int)a[2], (const char *)a[3], (unsigned)a[4]);
    return answer(raw(n, a[0], a[1], a[2], a[3], a[4], a[5]));
}
