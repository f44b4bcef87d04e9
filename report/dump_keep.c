/* dump_keep.c -- a dump another process left at a name this one is about
 * to write is kept under its writer's pid, not replaced.
 *
 * A dump name without %p (`vt.%h.%r.json`, `leak.json`) is the same for
 * every process that writes it: a rank restarted by its launcher, the next
 * test of a CI run, the image after an exec, the workers of one job that
 * end at once. A name with %p is the same for the processes of one pid:
 * each container's pid 1 (ranks, each in its own container, writing into
 * one shared folder). Replacing what is there would lose the run before's
 * out-of-memory dump, the one a restart follows. So the vramtrace dump a
 * new one replaces, when this image did not place it, is renamed to add
 * its writer's pid (`vt.h.3.json` -> `vt.h.3.pid1234.json`), as
 * LeakSanitizer's log_path adds the pid to every name. The writer swaps
 * the new dump in and the old one out in one step (outfile.h's vt_prev),
 * so no other process's dump can land in between and be lost, and the old
 * one is read and renamed from a name only this process uses. What this
 * image placed itself (an out-of-memory dump, then the exit dump) is
 * replaced, known by the inode it wrote. A file of this user that is not
 * a dump (notes.txt, the program itself, named by a typo) is never
 * replaced, nor is another user's file: the dump goes beside it, under
 * the name with this process's pid (vt_dump_keep_foreign). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/fdkeep.h"
#include "../common/sysver.h"
#include "dump_keep.h"
#include "outfile.h"

/* The files this image placed (device and inode), each with the name it
 * was placed at: a name it wrote before is its own to replace, and a dump
 * of its own that another writer kept aside is known by the name it had
 * when placed (an on-demand dump of this image, placed at its own name, is
 * never taken for one). A ring: the exit and out-of-memory dumps reuse one
 * name; on-demand dumps each get their own. */
#define MINE 16
static struct {
    dev_t dev;
    ino_t ino;
    char at[NAME_MAX + 1];
} mine[MINE];
static unsigned nmine;

/* Whether this image placed the file st at the name `at`. */
static int placed_at(const struct stat *st, const char *at) {
    for (unsigned i = 0; i < MINE && i < nmine; i++)
        if (mine[i].dev == st->st_dev && mine[i].ino == st->st_ino && strcmp(mine[i].at, at) == 0) return 1;
    return 0;
}

void vt_dump_keep_reset_child(void) {
    nmine = 0;
}

/* The writer's pid, read from the dump's first bytes (where the dump
 * writer puts it, with the reason it was written), or -1 when the file
 * open as fd is no vramtrace dump. *is_self: whether those bytes hold
 * `self` (the process's identity as its dumps begin with it; NULL or
 * empty: never). */
static int dump_writer(int fd, char *reason, size_t rsize, const char *self, int *is_self) {
    char head[512];
    *is_self = 0;
    ssize_t n = read(fd, head, sizeof head - 1);
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
    *is_self = self && *self && strstr(head, self) != NULL;
    return (int)pid;
}

/* base with ".pidPID" (".pidPID.k" past the first) before ".json", the
 * part before cut to fit a file name (255 bytes). The word keeps these
 * names apart from the numbers of on-demand dumps (".N" before ".json"):
 * with a bare ".PID", dump 1 of pid 1 and pid 1's dump kept aside were
 * both NAME.1.1.json. */
static int aside_name(const char *base, int pid, int k, char *out, size_t size) {
    size_t len = strlen(base);
    int json = len > 5 && strcmp(base + len - 5, ".json") == 0;
    char tail[48];
    if (k > 1) snprintf(tail, sizeof tail, ".pid%d.%d%s", pid, k, json ? ".json" : "");
    else snprintf(tail, sizeof tail, ".pid%d%s", pid, json ? ".json" : "");
    size_t stem = json ? len - 5 : len;
    if (stem + strlen(tail) > 255) stem = 255 - strlen(tail);
    int n = snprintf(out, size, "%.*s%s", (int)stem, base, tail);
    return n < 0 || (size_t)n >= size ? -1 : 0;
}

int vt_dump_keep_prev(int dirfd, const char *name, const char *base, void *arg) {
    struct vt_kept *k = arg;
    struct stat st;
    int pid = -1, self = 0, read_ok = 0;
    for (int tries = 0; tries < VT_FD_TRIES && !read_ok; tries++) {
        int fd = vt_fd_open(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, 0);
        if (fd < 0 && errno == EBADF) continue; /* the number taken by the program since the open */
        if (fd < 0) return 0;
        if (fstat(fd, &st) != 0) continue; /* closed already: the number is the program's */
        struct vt_fd kf = {fd, st.st_dev, st.st_ino};
        pid = -1;
        if (S_ISREG(st.st_mode) && st.st_uid == geteuid())
            pid = dump_writer(fd, k->reason, sizeof k->reason, k->self, &self);
        /* What was read came from the program's file if it took the
         * number meanwhile (a daemon's closefrom and its own open): not
         * used, not closed, and the file read again. */
        if ((read_ok = vt_fd_mine(&kf))) close(fd);
    }
    if (!read_ok) return 0;
    /* This image's own dump at this name (its out-of-memory dump under the
     * exit's) is replaced: placed by this image at this name, and its
     * first bytes say this process. */
    if (pid < 0 || (placed_at(&st, base) && self)) return 0;
    for (int n = 1; n <= 1000; n++) {
        char to[256];
        if (aside_name(base, pid, n, to, sizeof to) != 0) break;
        /* Never over anything: a name taken is the next n. */
        int rc = vt_renameat2(dirfd, name, dirfd, to, RENAME_NOREPLACE);
        if (rc != 0 && (errno == EINVAL || errno == ENOSYS)) {
            /* A file system without RENAME_NOREPLACE: a hard link does not
             * replace either. */
            rc = linkat(dirfd, name, dirfd, to, 0);
            if (rc == 0) unlinkat(dirfd, name, 0);
        }
        if (rc != 0 && errno == EEXIST) continue;
        if (rc != 0) break;
        k->pid = pid;
        snprintf(k->name, sizeof k->name, "%s", to);
        k->kept = 1;
        return 1;
    }
    k->pid = pid;
    k->lost = 1;
    return 0;
}

/* Whether the regular file at base in dirfd is one a dump may replace:
 * a vramtrace dump of this user's, an empty file of this user's (`--out
 * $(mktemp)`), or none there. Where not, *why says what is in the way: a
 * file that is not a dump, or another user's file (a shared folder, where
 * another user's job left a dump at the same name: refused, it left this
 * job with no dump at all). 1 or 0; -1 when it cannot be told (errno),
 * -3 when the program took the number of the descriptor it was read
 * through. */
static int replaceable_once(int dirfd, const char *base, const char **why) {
    static const char *theirs = "belongs to another user", *not_dump = "is not a vramtrace dump";
    int fd = vt_fd_open(dirfd, base, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, 0);
    if (fd < 0 && errno == EACCES) {
        /* A file of this user's it cannot read (mode 0200, a log another
         * tool appends to) is no dump of vramtrace's, which are 0600: it
         * was replaced. */
        struct stat st;
        if (fstatat(dirfd, base, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) return 1;
        *why = st.st_uid == geteuid() ? not_dump : theirs;
        return st.st_uid == geteuid() && st.st_size == 0;
    }
    /* A name past NAME_MAX holds no file either: the write that follows
     * says why it fails ("File name too long"), not that a file of the
     * user's is in the way. */
    if (fd < 0 && (errno == ENOENT || errno == ELOOP || errno == ENAMETOOLONG)) return 1;
    /* Not opened for want of a descriptor or of memory (a program that has
     * used them all): what the name holds cannot be told (it was said to
     * hold a file that is not a vramtrace dump, of a name that held
     * none); -1, errno kept. */
    if (fd < 0 && (errno == EMFILE || errno == ENFILE || errno == ENOMEM || errno == ENOBUFS)) return -1;
    if (fd < 0 && errno == EBADF) return -3; /* the number taken by the program since the open */
    if (fd < 0) return 0;
    struct stat st;
    char head[32];
    ssize_t n = 0;
    if (fstat(fd, &st) != 0) return 1; /* closed already (the program's number): as before, the write says */
    struct vt_fd kf = {fd, st.st_dev, st.st_ino};
    int ok = !S_ISREG(st.st_mode) ||
             (st.st_uid == geteuid() &&
              (st.st_size == 0 ||
               ((n = read(fd, head, 26)) == 26 && memcmp(head, "{\"format\":\"vramtrace-dump\"", 26) == 0)));
    if (!ok) *why = st.st_uid == geteuid() ? not_dump : theirs;
    /* Read from the program's file if it took the number meanwhile: what
     * the name holds is not known from it (-3), and the program's
     * descriptor is not closed. */
    if (!vt_fd_mine(&kf)) return -3;
    close(fd);
    return ok;
}

/* replaceable_once, again (three times in all) while the program takes
 * the number of the descriptor it reads through; then -1, EBADF. */
static int replaceable(int dirfd, const char *base, const char **why) {
    for (int tries = 0; tries < VT_FD_TRIES; tries++) {
        int r = replaceable_once(dirfd, base, why);
        if (r != -3) return r;
    }
    errno = EBADF;
    return -1;
}

int vt_dump_keep_foreign(const char *path, char *out, size_t size, const char **why) {
    const char *base;
    int dirfd = vt_file_dir_of(path, &base);
    if (dirfd < 0) return 0;
    int rc = 0, r = replaceable(dirfd, base, why);
    if (r < 0) {
        int e = errno;
        close(dirfd);
        errno = e;
        return -2;
    }
    if (!r) {
        rc = -1;
        for (int k = 1; k <= 16; k++) {
            char name[256];
            const char *also;
            if (aside_name(base, (int)getpid(), k, name, sizeof name) != 0) break;
            if (replaceable(dirfd, name, &also) <= 0) continue;
            int n = snprintf(out, size, "%.*s%s", (int)(base - path), path, name);
            if (n >= 0 && (size_t)n < size) rc = 1;
            break;
        }
    }
    close(dirfd);
    return rc;
}

void vt_dump_keep_placed(const char *path, const struct stat *placed, const char *self) {
    if (!placed->st_ino) return;
    const char *base;
    int dirfd = vt_file_dir_of(path, &base);
    if (dirfd < 0) return;
    int pid = (int)getpid();
    for (int k = 1; k <= 16; k++) {
        char name[256], reason[16];
        if (aside_name(base, pid, k, name, sizeof name) != 0) break;
        int fd = vt_fd_open(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, 0);
        if (fd < 0) continue;
        struct stat st;
        int is_self = 0;
        /* Only what is certainly this image's earlier dump at this name:
         * placed by it at base (not at the name it is found at: an
         * on-demand dump of its own), and saying this process in its
         * first bytes (not another process of the same pid, another
         * container's pid 1). */
        if (fstat(fd, &st) != 0) continue; /* closed already: the program's number */
        struct vt_fd kf = {fd, st.st_dev, st.st_ino};
        int drop = S_ISREG(st.st_mode) && placed_at(&st, base) &&
                   !(st.st_dev == placed->st_dev && st.st_ino == placed->st_ino) &&
                   dump_writer(fd, reason, sizeof reason, self, &is_self) == pid && is_self;
        /* Read from the program's file if it took the number meanwhile:
         * nothing removed, and its descriptor not closed. */
        if (!vt_fd_mine(&kf)) continue;
        close(fd);
        if (drop) unlinkat(dirfd, name, 0);
    }
    close(dirfd);
    /* What this image placed at base before is replaced or removed now:
     * its entries go (their inodes may be another file's later), the new
     * dump's comes. */
    for (unsigned i = 0; i < MINE && i < nmine; i++)
        if (strcmp(mine[i].at, base) == 0) mine[i].at[0] = '\0';
    unsigned at = nmine % MINE;
    mine[at].dev = placed->st_dev;
    mine[at].ino = placed->st_ino;
    snprintf(mine[at].at, sizeof mine[at].at, "%s", base);
    nmine++;
}
