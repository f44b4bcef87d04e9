/* t_fdswap.c -- a program whose own file takes the number of a descriptor
 * vramtrace is reading or writing through, in the middle of it
 * (tests/integration/test_files.py): a daemon's closefrom in one thread
 * and its first open, at once (dup2).
 *
 * t_fdswap read OWN [NAME]: the program's read(2) or pread(2) (the system
 * calls behind them) puts its file OWN (opened to read) at the number of the first
 * descriptor read that names a file of /proc called NAME (maps when not
 * given; stat, cmdline, boot_id), then reads as asked. A NAME that begins
 * with '/' is a file's whole path instead (a suppressions file, read at
 * exit): then the allocation is not freed (a leak for the exit's check),
 * and the swap is said on stderr ("t_fdswap: swapped at N").
 * t_fdswap write OWN FOLDER [named]: its write(2) puts OWN (opened empty)
 * at the number of the first descriptor written whose file lies in FOLDER
 * (a dump's temporary file), then writes as asked; with "named", its
 * openat(2) refuses O_TMPFILE (EOPNOTSUPP, as a file system without it
 * does), and the dump is written through a named temporary file.
 * t_fdswap folder OWN FOLDER [named]: the same moment, but OWN is a folder
 * of the program's (opened O_PATH), put at the number of the descriptor
 * that names FOLDER itself (the dump's folder, held while it is written);
 * with "moved" after the way (named or unnamed), it then renames FOLDER to
 * FOLDER.moved, where the dump's path no longer leads.
 * t_fdswap move OWN [NAME] and t_fdswap moveafter OWN [NAME]: as read, but
 * the swap is made by the program's fcntl(2) that copies the descriptor
 * out of the program's way (F_DUPFD_CLOEXEC, right after its open): before
 * the copy is made (move), or after it, before the number is closed
 * (moveafter).
 * t_fdswap module OWN: its mmap(2) puts OWN (opened to read) at the number
 * of the first descriptor mapped whose file is the program itself (the
 * symbolizer's reader mapping the module's file, which it keeps open
 * until the naming ends), once the mapping is made; it prints how many
 * other descriptors are open from 700 up after the dump, and whether its
 * own is close on exec there (dup2 made it not).
 *
 * main allocates 4096 bytes through the runtime (kept), asks vramtrace for
 * a dump (vramtrace_dump through vramtrace_load: it names the frames,
 * reading the maps, and writes the file), and prints whether the swap
 * happened, whether OWN is still open at that number, how many bytes OWN
 * holds, the dump's status and path, and the process's start time as its
 * /proc/self/stat says (read through the C library's stream, whose reads
 * are not these). */
#define _GNU_SOURCE
#include <cuda_runtime_api.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../../include/vramtrace.h"

static int own = -1, swapped_at = -1, on_write, on_folder, on_module, on_move, move_after, no_tmpfile, move_folder;
static const char *folder, *name = "maps";

/* OWN put at fd when fd's file is the one looked for (its path ends with
 * "/maps" under /proc, or lies in FOLDER). */
static void maybe_swap(int fd, int writing) {
    if (own < 0 || swapped_at >= 0 || fd <= 2 || writing != on_write || on_module) return;
    char link[64], target[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t k = readlink(link, target, sizeof target - 1);
    if (k <= 5) return;
    target[k] = '\0';
    size_t len = writing ? strlen(folder) : strlen(name);
    int match = writing         ? strncmp(target, folder, len) == 0 && target[len] == '/'
                : name[0] == '/' ? strcmp(target, name) == 0
                                 : strncmp(target, "/proc/", 6) == 0 && (size_t)k > len &&
                                       target[k - len - 1] == '/' && strcmp(target + k - len, name) == 0;
    if (match && on_folder) {
        /* The descriptor whose file is FOLDER itself, not one in it. */
        for (int d = 3; d < 1024 && swapped_at < 0; d++) {
            snprintf(link, sizeof link, "/proc/self/fd/%d", d);
            k = d == own ? -1 : readlink(link, target, sizeof target - 1);
            if (k <= 0) continue;
            target[k] = '\0';
            if (strcmp(target, folder) == 0 && dup2(own, d) == d) swapped_at = d;
        }
        char moved[4200];
        snprintf(moved, sizeof moved, "%s.moved", folder);
        if (swapped_at >= 0 && move_folder && rename(folder, moved) != 0) swapped_at = -1;
        return;
    }
    if (match && dup2(own, fd) == fd) {
        swapped_at = fd;
        if (name[0] == '/') {
            char said[64];
            int n = snprintf(said, sizeof said, "t_fdswap: swapped at %d\n", fd);
            syscall(SYS_write, 2, said, (size_t)n);
        }
    }
}

ssize_t read(int fd, void *buf, size_t n) {
    if (!on_move) maybe_swap(fd, 0);
    return syscall(SYS_read, fd, buf, n);
}

ssize_t pread(int fd, void *buf, size_t n, off_t at) {
    if (!on_move) maybe_swap(fd, 0);
    return syscall(SYS_pread64, fd, buf, n, at);
}

ssize_t write(int fd, const void *buf, size_t n) {
    maybe_swap(fd, 1);
    return syscall(SYS_write, fd, buf, n);
}

int fcntl(int fd, int cmd, ...) {
    va_list ap;
    va_start(ap, cmd);
    long arg = va_arg(ap, long);
    va_end(ap);
    int moving = on_move && cmd == F_DUPFD_CLOEXEC;
    if (moving && !move_after) maybe_swap(fd, 0);
    int r = (int)syscall(SYS_fcntl, fd, cmd, arg);
    if (moving && move_after && r >= 0) maybe_swap(fd, 0);
    return r;
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
    void *r = (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
    if (r == MAP_FAILED || !on_module || own < 0 || swapped_at >= 0 || fd <= 2) return r;
    char link[64], target[4096], self[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t k = readlink(link, target, sizeof target - 1), m = readlink("/proc/self/exe", self, sizeof self - 1);
    if (k <= 0 || m <= 0) return r;
    target[k] = self[m] = '\0';
    if (strcmp(target, self) == 0 && dup2(own, fd) == fd) swapped_at = fd;
    return r;
}

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

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    on_folder = strcmp(argv[1], "folder") == 0;
    on_write = on_folder || strcmp(argv[1], "write") == 0;
    on_module = strcmp(argv[1], "module") == 0;
    move_after = strcmp(argv[1], "moveafter") == 0;
    on_move = move_after || strcmp(argv[1], "move") == 0;
    if (on_write && argc < 4) return 2;
    folder = on_write ? argv[3] : NULL;
    no_tmpfile = on_write && argc > 4 && strcmp(argv[4], "named") == 0;
    move_folder = on_folder && argc > 5 && strcmp(argv[5], "moved") == 0;
    if (!on_write && !on_module && argc > 3) name = argv[3];
    own = on_folder  ? open(argv[2], O_PATH | O_DIRECTORY | O_CLOEXEC)
          : on_write ? open(argv[2], O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)
                     : open(argv[2], O_RDONLY | O_CLOEXEC);
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
    char stat_line[1024] = "", *field = stat_line;
    FILE *st = fopen("/proc/self/stat", "r");
    if (st && fgets(stat_line, sizeof stat_line, st)) {
        field = strrchr(stat_line, ')');
        for (int i = 2; field && i < 22; i++) field = strchr(field + 1, ' ');
    }
    if (st) fclose(st);
    printf("swapped %d own %s bytes %ld\ndump %d %s\nstart %ld\n", swapped_at >= 0, open_still ? "open" : "closed",
           bytes, r, path, field ? strtol(field + 1, NULL, 10) : -1L);
    if (on_module) {
        /* What else is open from 700 up: vramtrace's descriptors, none of
         * which a naming that ended leaves behind. */
        int others = 0;
        for (int d = 700; d < 1024; d++) others += d != swapped_at && fcntl(d, F_GETFD) >= 0;
        int fl = swapped_at >= 0 ? fcntl(swapped_at, F_GETFD) : -1;
        printf("others %d cloexec %d\n", others, fl < 0 ? -1 : (fl & FD_CLOEXEC) != 0);
    }
    if (!on_write && !on_module && name[0] == '/') return 0; /* p leaks */
    return cudaFree(p) == cudaSuccess ? 0 : 1;
}
