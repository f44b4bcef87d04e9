/* sysver.h -- system calls whose C library wrappers came late, made
 * through syscall(2) instead.
 *
 * Each symbol version the library needs is checked by the dynamic linker
 * at the start of every process the library is preloaded in, some 350
 * instructions each (20 versions were 7,000): process_vm_readv (glibc
 * 2.15), getrandom (2.25), renameat2 (2.28) and gettid (2.30) were the
 * only functions needing theirs. syscall(2) is as old as the C library's
 * first version; the arguments, the result and errno are the wrappers'. */
#ifndef VT_SYSVER_H
#define VT_SYSVER_H

#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

static inline ssize_t vt_process_vm_readv(pid_t pid, const struct iovec *local, unsigned long nlocal,
                                          const struct iovec *remote, unsigned long nremote, unsigned long flags) {
    return (ssize_t)syscall(SYS_process_vm_readv, pid, local, nlocal, remote, nremote, flags);
}

static inline ssize_t vt_getrandom(void *buf, size_t len, unsigned flags) {
    return (ssize_t)syscall(SYS_getrandom, buf, len, flags);
}

static inline int vt_renameat2(int olddir, const char *oldpath, int newdir, const char *newpath, unsigned flags) {
    return (int)syscall(SYS_renameat2, olddir, oldpath, newdir, newpath, flags);
}

static inline pid_t vt_gettid(void) { return (pid_t)syscall(SYS_gettid); }

#endif
