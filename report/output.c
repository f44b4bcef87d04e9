/* output.c -- writing dumps and reports from inside the traced process. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../tracker/options.h"
#include "../tracker/tracker.h"
#include "../tracker/pystack.h"
#include "dump.h"
#include "growth.h"
#include "holders.h"
#include "leaks.h"
#include "output.h"
#include "postmortem.h"
#include "symbolize.h"

#define VT_OOM_INTERVAL_NS 1000000000ull
/* How long the exit path waits for each lock it needs before it gives up
 * (see exit_skipped). */
#define VT_EXIT_WAIT_NS 1000000000ull

static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;
static int oom_written;
static unsigned signal_seq;
static int warned_sup;
static uint64_t last_oom_ns;
static int warned_dump, warned_report;

int vt_expand_path(const char *pattern, char *out, size_t size, int pid,
                   const char *host, int rank, unsigned seq) {
    size_t k = 0;
    for (const char *p = pattern; *p; p++) {
        char tmp[300];
        const char *add = tmp;
        if (*p == '%' && p[1]) {
            p++;
            switch (*p) {
            case 'p': snprintf(tmp, sizeof tmp, "%d", pid); break;
            case 'h': snprintf(tmp, sizeof tmp, "%s", host); break;
            case 'r': snprintf(tmp, sizeof tmp, "%d", rank); break;
            case 'n': snprintf(tmp, sizeof tmp, "%u", seq); break;
            case '%': add = "%"; break;
            default: snprintf(tmp, sizeof tmp, "%%%c", *p); break;
            }
        } else {
            tmp[0] = *p;
            tmp[1] = '\0';
        }
        size_t n = strlen(add);
        if (k + n >= size) return -1;
        memcpy(out + k, add, n);
        k += n;
    }
    out[k] = '\0';
    return 0;
}

static void warn_once(int *flag, const char *what, const char *path) {
    if (*flag) return;
    *flag = 1;
    fprintf(stderr, "vramtrace: warning: cannot write %s %s: %s\n", what, path, strerror(errno));
}

/* argv of this process, from /proc/self/cmdline. */
static int read_argv(char *buf, size_t size, char **argv, int max) {
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = read(fd, buf, size - 1);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = '\0';
    int argc = 0;
    for (ssize_t i = 0; i < n && argc < max; i += (ssize_t)strlen(buf + i) + 1) argv[argc++] = buf + i;
    return argc;
}

/* The first of these set in the environment, as a number; else 0. */
static int env_int(const char *const *names) {
    for (; *names; names++) {
        const char *v = getenv(*names);
        if (v && *v) return atoi(v);
    }
    return 0;
}

/* The launchers' names for the global and the node-local rank: torchrun,
 * Open MPI, Slurm, MPICH/PMI. */
static const char *const rank_vars[] = {"RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "PMI_RANK", NULL};
static const char *const local_rank_vars[] = {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID",
                                              "MPI_LOCALRANKID", NULL};

/* A dump name already taken by an earlier image of this process (the
 * program exec'd: same pid, LD_PRELOAD kept) gets ".execN" before ".json",
 * decided at this image's first dump and kept for its later ones. Only for
 * patterns with %p: a fixed name is meant to be overwritten. */
static char image_suffix[24]; /* ".exec" and a number below 1000 */
static int image_decided;

static void image_path(const char *pattern, char *path, size_t size) {
    if (!image_decided) {
        image_decided = 1;
        struct stat st;
        if (strstr(pattern, "%p") && lstat(path, &st) == 0) {
            for (int n = 1; n < 1000; n++) {
                char cand[4200];
                size_t len = strlen(path);
                if (len > 5 && strcmp(path + len - 5, ".json") == 0)
                    snprintf(cand, sizeof cand, "%.*s.exec%d.json", (int)(len - 5), path, n);
                else
                    snprintf(cand, sizeof cand, "%s.exec%d", path, n);
                if (lstat(cand, &st) != 0) {
                    snprintf(image_suffix, sizeof image_suffix, ".exec%d", n);
                    break;
                }
            }
        }
    }
    if (!image_suffix[0]) return;
    size_t len = strlen(path);
    char tail[8] = "";
    if (len > 5 && strcmp(path + len - 5, ".json") == 0) {
        memcpy(tail, ".json", 6);
        path[len - 5] = '\0';
    }
    size_t n = strlen(path);
    snprintf(path + n, size - n, "%s%s", image_suffix, tail);
}

/* Write the dump to path through a temporary file; 0 on success. */
static int write_dump(const char *path, const struct vt_snapshot *s, const struct vt_symbols *sym,
                      const struct vt_dump_meta *meta) {
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    unlink(tmp);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return -1;
    FILE *f = fdopen(fd, "w");
    if (!f) { close(fd); unlink(tmp); return -1; }
    int rc = vt_dump_write(f, s, sym, meta);
    if (fclose(f) != 0) rc = -1;
    if (rc == 0 && rename(tmp, path) != 0) rc = -1;
    if (rc != 0) {
        int e = errno;
        unlink(tmp);
        errno = e;
    }
    return rc;
}

static FILE *open_report(const char *path, int *close_it) {
    *close_it = 0;
    if (strcmp(vt_opt.report, "off") == 0) return NULL;
    if (strcmp(vt_opt.report, "stderr") == 0) return stderr;
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
    FILE *f = fd >= 0 ? fdopen(fd, "a") : NULL;
    if (!f) {
        if (fd >= 0) close(fd);
        warn_once(&warned_report, "the report to", path);
        return NULL;
    }
    *close_it = 1;
    return f;
}

/* The dump path pattern for this write: on-demand dumps get a sequence
 * number even when the pattern has no %n. */
static void dump_pattern(const char *reason, char *out, size_t size) {
    snprintf(out, size, "%s", vt_opt.out);
    if (strcmp(reason, "signal") != 0 || strstr(vt_opt.out, "%n")) return;
    size_t len = strlen(out);
    if (len > 5 && strcmp(out + len - 5, ".json") == 0) snprintf(out + len - 5, size - (len - 5), ".%%n.json");
    else snprintf(out + len, size - len, ".%%n");
}

/* The exit path found a lock held that is not let go (the process exits
 * from a signal handler that interrupted a hooked call, or another thread
 * is stuck inside one): one line instead of the dump and the report. */
static void exit_skipped(void) {
    fputs("vramtrace: no exit dump or report: a CUDA call vramtrace was recording did not finish "
          "(exit from a signal handler?)\n", stderr);
}

/* Write the dump and the human report for `reason` ("oom", "exit",
 * "signal"). Returns 1 when the exit leak check found leaks. At exit it
 * waits for the tracker's locks VT_EXIT_WAIT_NS at most. */
static int write_outputs(const char *reason, unsigned seq) {
    int leaked = 0;
    int at_exit = strcmp(reason, "exit") == 0;
    struct vt_snapshot *s = at_exit ? vt_tracker_snapshot_within(VT_EXIT_WAIT_NS) : vt_tracker_snapshot();
    if (!s) {
        if (at_exit) exit_skipped();
        return 0;
    }
    vt_sort_live(s);
    struct vt_symbols *sym = vt_symbolize(s);

    char argbuf[8192];
    char *argv[64];
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    struct vt_dump_meta meta = {
        .reason = reason,
        .pid = (int)getpid(),
        .argc = read_argv(argbuf, sizeof argbuf, argv, 64),
        .argv = argv,
        .host = host,
        .rank = env_int(rank_vars),
        .local_rank = env_int(local_rank_vars),
        .python_version = vt_pystack_version(),
    };
    struct vt_growth *growth = NULL;
    if (strcmp(reason, "oom") != 0) growth = vt_find_growth(s, sym, s->now_ns, &meta.ngrowth);
    meta.growth = growth;

    char path[4096];
    const char *dump_path = NULL;
    if (strcmp(vt_opt.out, "off") != 0) {
        char rel[4096], pattern[1100];
        dump_pattern(reason, pattern, sizeof pattern);
        if (vt_expand_path(pattern, rel, sizeof rel, meta.pid, host, meta.rank, seq) == 0) {
            char cwd[2048];
            if (rel[0] != '/' && getcwd(cwd, sizeof cwd))
                snprintf(path, sizeof path, "%s/%.*s", cwd, (int)(sizeof path - sizeof cwd - 2), rel);
            else
                snprintf(path, sizeof path, "%s", rel);
            image_path(pattern, path, sizeof path);
            if (write_dump(path, s, sym, &meta) == 0) dump_path = path;
            else warn_once(&warned_dump, "the dump to", path);
        }
    }

    char rpath[4096];
    if (vt_expand_path(vt_opt.report, rpath, sizeof rpath, meta.pid, host, meta.rank, seq) != 0)
        snprintf(rpath, sizeof rpath, "%s", vt_opt.report);
    int close_it;
    FILE *f = open_report(rpath, &close_it);
    if (strcmp(reason, "exit") == 0 && vt_opt.leak_check) {
        char err[512];
        struct vt_suppressions *sup = vt_suppressions_load(vt_opt.suppressions, err, sizeof err);
        if (!sup && !warned_sup) {
            warned_sup = 1;
            fprintf(stderr, "vramtrace: warning: %s; checking without suppressions\n", err);
        }
        /* The leak report goes where LSan's would, even with the human
         * report turned off: CI reads it. */
        FILE *lf = f ? f : stderr;
        struct vt_leak_result lr = vt_leak_report(lf, s, sym, sup, meta.pid);
        leaked = lr.count > 0;
        vt_suppressions_free(sup);
    } else if (f) {
        if (strcmp(reason, "oom") == 0)
            vt_postmortem_oom(f, s, sym, &meta, dump_path, vt_opt.top);
        else if (strcmp(reason, "signal") == 0)
            fprintf(f, "vramtrace: dump %u of pid %d on request: %s\n", seq, meta.pid,
                    dump_path ? dump_path : "(not written)");
        else
            vt_postmortem_exit(f, s, sym, &meta, dump_path, vt_opt.top);
        fflush(f);
    }
    if (f && close_it) fclose(f);
    free(growth);
    vt_symbols_free(sym);
    vt_snapshot_free(s);
    return leaked;
}

void vt_output_oom(void) {
    pthread_mutex_lock(&out_lock);
    uint64_t now = vt_now_ns();
    if (!oom_written || now - last_oom_ns >= VT_OOM_INTERVAL_NS) {
        oom_written = 1;
        last_oom_ns = now;
        write_outputs("oom", 0);
    }
    pthread_mutex_unlock(&out_lock);
}

void vt_output_exit_skipped(void) {
    if (!vt_tracker_touched()) return;
    if (strcmp(vt_opt.out, "off") == 0 && strcmp(vt_opt.report, "off") == 0 && !vt_opt.leak_check) return;
    exit_skipped();
}

int vt_output_exit(void) {
    if (!vt_tracker_touched()) return 0;
    /* Nothing to write: skip the snapshot and the symbols. */
    if (strcmp(vt_opt.out, "off") == 0 && strcmp(vt_opt.report, "off") == 0 && !vt_opt.leak_check) return 0;
    struct timespec until;
    vt_deadline(&until, VT_EXIT_WAIT_NS);
    if (pthread_mutex_timedlock(&out_lock, &until) != 0) {
        exit_skipped();
        return 0;
    }
    int leaked = write_outputs("exit", 0);
    pthread_mutex_unlock(&out_lock);
    return leaked;
}

void vt_output_signal(void) {
    if (!vt_tracker_touched()) return;
    pthread_mutex_lock(&out_lock);
    write_outputs("signal", ++signal_seq);
    pthread_mutex_unlock(&out_lock);
}

void vt_output_reset_child(void) {
    pthread_mutex_init(&out_lock, NULL);
    image_decided = 0;
    image_suffix[0] = '\0';
    oom_written = 0;
    last_oom_ns = 0;
    signal_seq = 0;
}
