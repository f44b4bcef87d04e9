/* t_shrink.c -- a preloaded shim for tests/integration/test_dump.py: the
 * first read-only mapping of a whole regular file that it sees, it shrinks
 * that file (truncate) to T_SHRINK_TO bytes right after the file is
 * mapped, as another process truncating a dump while `vramtrace report`
 * reads it would. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
    static void *(*real)(void *, size_t, int, int, int, off_t);
    static int done;
    if (!real) *(void **)&real = dlsym(RTLD_NEXT, "mmap");
    void *m = real(addr, len, prot, flags, fd, off);
    const char *to = getenv("T_SHRINK_TO");
    struct stat sb;
    if (m != MAP_FAILED && to && !done && fd >= 0 && prot == PROT_READ && off == 0 && fstat(fd, &sb) == 0 &&
        S_ISREG(sb.st_mode) && (off_t)len == sb.st_size) {
        char link[64], path[4096];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t n = readlink(link, path, sizeof path - 1);
        if (n > 0) {
            path[n] = '\0';
            done = 1;
            if (truncate(path, atol(to)) != 0) perror("t_shrink: truncate");
        }
    }
    return m;
}
