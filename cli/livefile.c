/* livefile.c -- finding, checking and copying live segments (livefile.h). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "livefile.h"
#include "../common/procself.h"

/* Field 22 of /proc/PID/stat (the start time in clock ticks), 0 when the
 * process is not there. */
static unsigned long long start_of(int pid) {
    char buf[1024];
    const char *p = vt_stat_field(pid, buf, sizeof buf, 22);
    return p ? strtoull(p, NULL, 10) : 0;
}

/* The first line of a small file that starts with `start`, the rest of
 * it in out; 0 when there is none. */
static int line_of(const char *path, const char *start, char *out, size_t size) {
    FILE *f = fopen(path, "re");
    if (!f) return 0;
    char line[4096];
    size_t n = strlen(start);
    int found = 0;
    while (!found && fgets(line, sizeof line, f))
        if (strncmp(line, start, n) == 0) {
            line[strcspn(line, "\n")] = '\0';
            snprintf(out, size, "%s", line + n);
            found = 1;
        }
    fclose(f);
    return found;
}

/* Where this reader sees the cgroup hierarchy of file system `type`
 * ("cgroup2", or "cgroup" with `option` among its options: the v1
 * freezer), from /proc/self/mountinfo; "" when it is not mounted. */
static void cgroup_mount(const char *type, const char *option, char *out, size_t size) {
    out[0] = '\0';
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (!f) return;
    char line[4096];
    while (!out[0] && fgets(line, sizeof line, f)) {
        /* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [TAGS...] - TYPE SOURCE SUPEROPTIONS */
        char *sep = strstr(line, " - "), *save = NULL;
        if (!sep) continue;
        *sep = '\0';
        char *fields[5] = {0};
        char *t = strtok_r(line, " ", &save);
        for (int i = 0; i < 5 && t; i++, t = strtok_r(NULL, " ", &save)) fields[i] = t;
        char *fstype = strtok_r(sep + 3, " ", &save), *source = strtok_r(NULL, " ", &save);
        char *opts = strtok_r(NULL, " \n", &save);
        if (!fields[4] || !fstype || !source || strcmp(fstype, type) != 0) continue;
        int has = !option;
        for (char *o = opts ? strtok_r(opts, ",", &save) : NULL; o && !has; o = strtok_r(NULL, ",", &save))
            has = strcmp(o, option) == 0;
        if (has) snprintf(out, size, "%s", fields[4]);
    }
    fclose(f);
}

/* Whether the cgroup of `pid` is frozen: its line in /proc/PID/cgroup
 * under the v2 hierarchy ("0::PATH") or the v1 freezer ("N:freezer:PATH"). */
static int frozen(int pid) {
    char path[8192], line[4096], mount[4096], state[64];
    snprintf(path, sizeof path, "/proc/%d/cgroup", pid);
    FILE *f = fopen(path, "re");
    if (!f) return 0;
    int is = 0;
    while (!is && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2) continue;
        *c2 = '\0';
        if (strcmp(line, "0:") == 0) {
            cgroup_mount("cgroup2", NULL, mount, sizeof mount);
            snprintf(path, sizeof path, "%s%s/cgroup.events", mount, c2 + 1);
            is = mount[0] && line_of(path, "frozen ", state, sizeof state) && strcmp(state, "1") == 0;
        } else {
            int freezer = 0;
            char *save = NULL;
            for (char *o = strtok_r(c1 + 1, ",", &save); o && !freezer; o = strtok_r(NULL, ",", &save))
                freezer = strcmp(o, "freezer") == 0;
            if (!freezer) continue;
            cgroup_mount("cgroup", "freezer", mount, sizeof mount);
            snprintf(path, sizeof path, "%s%s/freezer.state", mount, c2 + 1);
            is = mount[0] && line_of(path, "FROZEN", state, sizeof state);
        }
    }
    fclose(f);
    return is;
}

int vt_live_stopped(int pid) {
    char buf[1024];
    const char *state = vt_stat_field(pid, buf, sizeof buf, 3);
    if (!state) return 0;
    if (*state == 'T' || *state == 't') return 1;
    return frozen(pid);
}

/* A consistent copy of a mapped segment, 1, or 0 when the writer was busy
 * each of `tries` times. The reader's half of the sequence lock: the count before (even), the
 * copy, a fence so that the copy's loads are done, the count after. */
static int read_copy(const volatile struct vt_live_segment *seg, struct vt_live_segment *out, int tries) {
    for (int i = 0; i < tries; i++) {
        uint64_t before = __atomic_load_n(&seg->seq, __ATOMIC_ACQUIRE);
        if (before & 1) {
#if defined(__x86_64__)
            __builtin_ia32_pause();
#endif
            continue;
        }
        memcpy(out, (const void *)seg, sizeof *out);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&seg->seq, __ATOMIC_RELAXED) == before) {
            out->seq = before;
            return 1;
        }
    }
    return 0;
}

/* Remove a stale segment, if the name still holds the file found stale
 * (a new process of that pid may have put its own there since). */
static void remove_stale(const char *path, const struct stat *seen) {
    struct stat now;
    if (lstat(path, &now) == 0 && now.st_ino == seen->st_ino && now.st_dev == seen->st_dev) unlink(path);
}

/* A copy's counts kept within its arrays and its strings ended, once, so
 * that no reader trusts what another process wrote (a segment is only this
 * user's, but any program of theirs may have written it). */
static void bound(struct vt_live_segment *s) {
    if (s->ndevices < 0) s->ndevices = 0;
    if (s->ndevices > VT_LIVE_DEVICES) s->ndevices = VT_LIVE_DEVICES;
    if (s->nsites < 0) s->nsites = 0;
    if (s->nsites > VT_LIVE_SITES) s->nsites = VT_LIVE_SITES;
    s->boot_id[sizeof s->boot_id - 1] = '\0';
    s->host[sizeof s->host - 1] = '\0';
    s->command[sizeof s->command - 1] = '\0';
    s->forecast[sizeof s->forecast - 1] = '\0';
    for (int i = 0; i < VT_LIVE_SITES; i++) s->sites[i].label[sizeof s->sites[i].label - 1] = '\0';
}

/* One segment: 1 with a consistent copy in out, 0 when it is not one of
 * this user's live processes (stale ones removed). */
static int read_one(const char *path, int want_pid, struct vt_live_segment *out) {
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return 0;
    struct stat st;
    int got = 0;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != getuid() || (st.st_mode & 077) ||
        (size_t)st.st_size != sizeof *out)
        goto done;
    /* The writer holds its lock for as long as it lives (it locks the file
     * before renaming it into place): a segment whose lock nobody holds is
     * stale whatever it holds, a writer killed in mid-publication (an odd
     * count forever) too. Looked at first, so that such a file costs no
     * wait and is removed. */
    if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
        remove_stale(path, &st);
        goto done;
    }
    void *m = mmap(NULL, sizeof *out, PROT_READ, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) goto done;
    /* A writer descheduled in the middle of a publication holds the lock
     * for a time slice: a few tries a millisecond apart, up to 50 ms. */
    for (int i = 0; i < 50 && !(got = read_copy(m, out, 100)); i++) {
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    munmap(m, sizeof *out);
    if (!got || out->magic != VT_LIVE_MAGIC || out->version != VT_LIVE_VERSION || out->size != sizeof *out) {
        got = 0;
        goto done;
    }
    bound(out);
    if (want_pid > 0 && out->pid != want_pid) {
        got = 0;
        goto done;
    }
    /* Alive: its pid runs, started when the segment says, and the writer
     * still holds the lock (an exec'd or crashed writer does not: asked
     * again, it may have ended meanwhile). */
    if (start_of(out->pid) != out->process_start || flock(fd, LOCK_SH | LOCK_NB) == 0) {
        remove_stale(path, &st);
        got = 0;
    }
done:
    close(fd);
    return got;
}

/* A writer's temporary segment (".PREFIX<pid>.tmp", before its first
 * publication) left by a process killed then (SIGKILL, the OOM killer):
 * removed when its pid runs no more and nobody holds its lock. A writer
 * creates the file before it locks it, so the lock alone could remove a
 * living one's. */
static void remove_stale_tmp(const char *dir, const char *name) {
    size_t plen = strlen(VT_LIVE_PREFIX), len = strlen(name);
    if (len <= 1 + plen + 4 || name[0] != '.' || strncmp(name + 1, VT_LIVE_PREFIX, plen) != 0 ||
        strcmp(name + len - 4, ".tmp") != 0)
        return;
    long pid = 0;
    for (const char *p = name + 1 + plen; p < name + len - 4; p++) {
        if (*p < '0' || *p > '9' || pid > INT32_MAX / 10) return;
        pid = pid * 10 + (*p - '0');
    }
    if (pid <= 0 || kill((pid_t)pid, 0) == 0 || errno != ESRCH) return;
    char path[8192];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return;
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == getuid() && flock(fd, LOCK_SH | LOCK_NB) == 0)
        remove_stale(path, &st);
    close(fd);
}

static int by_pid(const void *a, const void *b) {
    const struct vt_live_segment *x = a, *y = b;
    return (x->pid > y->pid) - (x->pid < y->pid);
}

struct vt_live_segment *vt_live_scan(int pid, size_t *n) {
    char dir[4096];
    vt_live_dir(dir, sizeof dir);
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) return NULL;
    struct vt_live_segment *segs = NULL;
    size_t cap = 0;
    struct dirent *e;
    size_t plen = strlen(VT_LIVE_PREFIX), slen = strlen(VT_LIVE_SUFFIX);
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (e->d_name[0] == '.') {
            remove_stale_tmp(dir, e->d_name);
            continue;
        }
        if (len <= plen + slen || strncmp(e->d_name, VT_LIVE_PREFIX, plen) != 0 ||
            strcmp(e->d_name + len - slen, VT_LIVE_SUFFIX) != 0)
            continue;
        if (pid > 0 && atoi(e->d_name + plen) != pid) continue;
        if (*n == cap) {
            size_t want = cap ? cap * 2 : 16;
            struct vt_live_segment *bigger = realloc(segs, want * sizeof *bigger);
            if (!bigger) break;
            segs = bigger;
            cap = want;
        }
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (read_one(path, pid, &segs[*n])) (*n)++;
    }
    closedir(d);
    if (*n == 0) {
        free(segs);
        return NULL;
    }
    qsort(segs, *n, sizeof *segs, by_pid);
    return segs;
}
