/* dump_keep.c -- a dump another process left at a name this one is about
 * to write is kept under its writer's pid, not replaced.
 *
 * A dump name without %p (`vt.%h.%r.json`, `leak.json`) is the same for
 * every process that writes it: a rank restarted by its launcher, the next
 * test of a CI run, the image after an exec. Replacing what is there would
 * lose the run before's out-of-memory dump, the one a restart follows. So
 * a vramtrace dump found there that this image did not write is first
 * renamed to add its writer's pid (`vt.h.3.json` -> `vt.h.3.1234.json`),
 * as LeakSanitizer's log_path adds the pid to every name. What this image
 * wrote itself (an out-of-memory dump, then the exit dump) is replaced as
 * before; anything that is not a dump is left to the writer's rules
 * (outfile.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dump_keep.h"
#include "outfile.h"

/* The files this image placed (device and inode), newest last: a name it
 * wrote before is its own to replace. A ring: the exit and out-of-memory
 * dumps reuse one name; on-demand dumps each get their own. */
#define MINE 16
static struct {
    dev_t dev;
    ino_t ino;
} mine[MINE];
static unsigned nmine;

void vt_dump_keep_placed(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode)) return;
    mine[nmine % MINE].dev = st.st_dev;
    mine[nmine % MINE].ino = st.st_ino;
    nmine++;
}

static int placed_here(const struct stat *st) {
    for (unsigned i = 0; i < MINE && i < nmine; i++)
        if (mine[i].dev == st->st_dev && mine[i].ino == st->st_ino) return 1;
    return 0;
}

void vt_dump_keep_reset_child(void) {
    nmine = 0;
}

/* The writer's pid, read from the dump's first bytes (where the dump
 * writer puts it, with the reason it was written), or -1 when base is no
 * vramtrace dump. */
static int dump_writer(int dirfd, const char *base, const struct stat *st, char *reason, size_t rsize) {
    int fd = openat(dirfd, base, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) return -1;
    struct stat now;
    char head[512];
    ssize_t n = -1;
    if (fstat(fd, &now) == 0 && now.st_dev == st->st_dev && now.st_ino == st->st_ino)
        n = read(fd, head, sizeof head - 1);
    close(fd);
    if (n <= 0) return -1;
    head[n] = '\0';
    if (strncmp(head, "{\"format\":\"vramtrace-dump\"", 26) != 0) return -1;
    const char *p = strstr(head, ",\"pid\":");
    if (!p) return -1;
    char *end;
    long pid = strtol(p + 7, &end, 10);
    if (end == p + 7 || pid <= 0 || pid > 0x7fffffff) return -1;
    const char *r = strstr(head, ",\"reason\":\"");
    size_t len = r ? strspn(r + 11, "abcdefghijklmnopqrstuvwxyz_") : 0;
    snprintf(reason, rsize, "%.*s", (int)len, r ? r + 11 : "");
    return (int)pid;
}

/* base with ".pid" (and ".k" past the first) before ".json". */
static int aside_name(const char *base, int pid, int k, char *out, size_t size) {
    size_t len = strlen(base);
    int json = len > 5 && strcmp(base + len - 5, ".json") == 0;
    char tail[32];
    if (k > 1) snprintf(tail, sizeof tail, ".%d.%d", pid, k);
    else snprintf(tail, sizeof tail, ".%d", pid);
    int n = snprintf(out, size, "%.*s%s%s", (int)(json ? len - 5 : len), base, tail, json ? ".json" : "");
    return n < 0 || (size_t)n >= size ? -1 : 0;
}

int vt_dump_keep_other(const char *path, struct vt_kept *k) {
    const char *base;
    int dirfd = vt_file_dir_of(path, &base);
    if (dirfd < 0) return 0;
    int rc = 0;
    struct stat st;
    if (fstatat(dirfd, base, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) ||
        st.st_uid != geteuid() || placed_here(&st))
        goto out;
    int pid = dump_writer(dirfd, base, &st, k->reason, sizeof k->reason);
    if (pid < 0) goto out;
    for (int n = 1; n < 100; n++) {
        char to[256];
        if (aside_name(base, pid, n, to, sizeof to) != 0) break;
        /* Never over anything: a name taken is the next k. */
        if (renameat2(dirfd, base, dirfd, to, RENAME_NOREPLACE) == 0) {
            rc = 1;
        } else if (errno == EEXIST) {
            continue;
        } else if (errno == EINVAL || errno == ENOSYS) {
            /* A file system without RENAME_NOREPLACE: a hard link does not
             * replace either. */
            if (linkat(dirfd, base, dirfd, to, 0) == 0) rc = unlinkat(dirfd, base, 0) == 0 ? 1 : -1;
            else if (errno == EEXIST) continue;
            else rc = -1;
        } else {
            rc = -1;
        }
        if (rc == 1) {
            size_t dirlen = (size_t)(base - path);
            int w = snprintf(k->path, sizeof k->path, "%.*s%s", (int)dirlen, path, to);
            if (w < 0 || (size_t)w >= sizeof k->path) snprintf(k->path, sizeof k->path, "%s", to);
            k->pid = pid;
        }
        break;
    }
out:
    close(dirfd);
    return rc;
}
