/* t_mapsswap.c -- a program whose own file takes the number of the
 * descriptor vramtrace reads /proc/self/maps through, in the middle of the
 * read (tests/integration/test_files.py).
 *
 * The program defines read(2) (the system call behind it): at the first
 * read of a descriptor that names a maps file of /proc, it puts a file of
 * its own at that number (dup2: a daemon's closefrom in one thread and its
 * first open, at once), then reads as asked, from its file now. main
 * allocates 4096 bytes through the runtime (kept), asks vramtrace for a
 * dump (vramtrace_dump through vramtrace_load, which names the frames, reading the maps), and
 * prints whether the swap happened and whether its file is still open at
 * that number ("swapped 1 own open"), then the dump's path. */
#define _GNU_SOURCE
#include <cuda_runtime_api.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../../include/vramtrace.h"

static int own = -1, swapped_at = -1;

ssize_t read(int fd, void *buf, size_t n) {
    if (own >= 0 && swapped_at < 0) {
        char link[64], target[256];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t k = readlink(link, target, sizeof target - 1);
        if (k > 5) {
            target[k] = '\0';
            if (strncmp(target, "/proc/", 6) == 0 && strcmp(target + k - 5, "/maps") == 0 && dup2(own, fd) == fd)
                swapped_at = fd;
        }
    }
    return syscall(SYS_read, fd, buf, n);
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    own = open(argv[1], O_RDONLY | O_CLOEXEC);
    void *p = NULL;
    if (own < 0 || cudaMalloc(&p, 4096) != cudaSuccess) return 2;
    char path[4096] = "";
    struct vramtrace_api api;
    vramtrace_load(&api);
    int r = api.dump("swap", path, sizeof path);
    /* The file at the swapped number is the program's: the same as `own`. */
    struct stat a, b;
    int open_still = swapped_at >= 0 && fstat(swapped_at, &a) == 0 && fstat(own, &b) == 0 &&
                     a.st_ino == b.st_ino && a.st_dev == b.st_dev;
    printf("swapped %d own %s\ndump %d %s\n", swapped_at >= 0, open_still ? "open" : "closed", r, path);
    return cudaFree(p) == cudaSuccess ? 0 : 1;
}
