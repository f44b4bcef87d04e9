/* cmd_report.c -- `vramtrace report DUMP... [--format F] [-o FILE] [--top N]
 * [--at exit|peak|oom] [--folded-root site|none]`. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "report_out.h"
#include "reporters.h"
#include "runs.h"

static int usage_error(const char *fmt, const char *arg) {
    char safe[256];
    fprintf(stderr, "vramtrace report: ");
    fprintf(stderr, fmt, vr_safe(arg, safe, sizeof safe));
    fprintf(stderr, " (see vramtrace report --help)\n");
    return 2;
}

static void report_help(void) {
    printf("usage: vramtrace report DUMP... [--format FORMAT] [-o FILE] [--top N] [--at MOMENT]\n"
           "                        [--folded-root site|none]\n\n"
           "Turns one or more dumps (one per rank or process) into a report.\n\n"
           "  --format FORMAT  one of:\n");
    for (const struct vt_reporter *r = vt_reporters; r->name; r++)
        printf("                     %-7s %s\n", r->name, r->summary);
    printf("                   (default: text)\n"
           "  -o FILE          write to FILE instead of standard output\n"
           "  --top N          rows in the tables (default 10)\n"
           "  --at MOMENT      which holders weigh in the holders table and flame graph:\n"
           "                     exit  live when the dump was written (default)\n"
           "                     peak  at the peak of the process's device bytes\n"
           "                     oom   at the first out-of-memory failure (the failing\n"
           "                           device's alone when others held memory too)\n"
           "  --folded-root ROOT\n"
           "                   the root frame of each folded stack:\n"
           "                     site  its call-site label (the user's line -> the library\n"
           "                           line), so that a flame graph's first level is the\n"
           "                           holders table by call site (default)\n"
           "                     none  no root: the whole stack alone\n");
}

/* Write the report to out (standard output when NULL). Output that does not
 * reach its destination (a full disk, a closed pipe, /dev/full) is one
 * error line and status 1; a file at out is then left as it was
 * (vr_out_open), and a regular file written in place that this command
 * created or truncated is removed rather than left half written. */
static int write_report(const struct vt_reporter *rep, const struct vr_input *in, const struct vr_opts *o,
                        const char *out) {
    char err[1024], safe[1024];
    struct vr_out of = {.f = stdout};
    if (out && vr_out_open(out, &of) != 0) {
        fprintf(stderr, "vramtrace report: cannot write %s: %s\n", vr_safe(out, safe, sizeof safe),
                of.why ? of.why : strerror(errno));
        return 1;
    }
    FILE *f = of.f;
    /* Only a regular file of this user's at that very name is removed on
     * failure (not a device, not what a symbolic link points to, not a
     * file with other names, which would keep what was written). */
    struct stat st, at;
    int regular = out && !of.tmp[0] && of.fd < 0 && fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) &&
                  st.st_nlink == 1 && st.st_uid == geteuid() && lstat(out, &at) == 0 &&
                  S_ISREG(at.st_mode) && at.st_ino == st.st_ino && at.st_dev == st.st_dev;
    err[0] = '\0';
    errno = 0;
    int failed = rep->write(f, in, o, err, sizeof err) != 0, werr = errno;
    if (fflush(f) != 0) { failed = 1; werr = errno; }
    if (ferror(f)) failed = 1;
    if (out && vr_out_close(&of, !failed) != 0 && !failed) { failed = 1; werr = errno; }
    if (!failed) return 0;
    if (err[0]) fprintf(stderr, "vramtrace report: %s\n", vr_safe(err, safe, sizeof safe));
    else fprintf(stderr, "vramtrace report: writing %s failed: %s\n",
                 out ? vr_safe(out, safe, sizeof safe) : "to standard output", strerror(werr ? werr : EIO));
    if (regular) unlink(out);
    return 1;
}

/* The rank a dump's first bytes give (where the writer puts it, after the
 * pid), or INT_MAX when the file is unreadable or says none. */
static int head_rank(const char *path) {
    char head[1024];
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return INT_MAX;
    struct stat st;
    ssize_t n = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? read(fd, head, sizeof head - 1) : -1;
    close(fd);
    if (n <= 0) return INT_MAX;
    head[n] = '\0';
    const char *r = strstr(head, ",\"rank\":");
    if (!r || strncmp(head, "{\"format\":\"vramtrace-dump\"", 26) != 0) return INT_MAX;
    char *end;
    long v = strtol(r + 8, &end, 10);
    return end == r + 8 || v < 0 || v >= INT_MAX ? INT_MAX : (int)v;
}

struct ranked {
    int rank;
    size_t at;
    const char *path;
};

static int by_rank_then_place(const void *a, const void *b) {
    const struct ranked *x = a, *y = b;
    if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
    return x->at < y->at ? -1 : x->at > y->at;
}

/* paths[0..n) in the order of their dumps' ranks, the order given among
 * equal ones. */
static void sort_by_rank(const char **paths, size_t n) {
    struct ranked *r = malloc(n * sizeof *r);
    if (!r) return;
    for (size_t i = 0; i < n; i++) r[i] = (struct ranked){head_rank(paths[i]), i, paths[i]};
    qsort(r, n, sizeof *r, by_rank_then_place);
    for (size_t i = 0; i < n; i++) paths[i] = r[i].path;
    free(r);
}

int vt_cmd_report(int argc, char **argv) {
    const char *format = "text", *out = NULL;
    struct vr_opts o = {VR_AT_EXIT, 10, VR_ROOT_SITE, 0};
    const char **paths = calloc((size_t)argc, sizeof *paths);
    size_t npaths = 0;
    if (!paths) return 1;
    int rc = 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            report_help();
            rc = vt_cli_flush("vramtrace report");
            goto done;
        }
        if (strcmp(a, "--format") == 0 || strcmp(a, "-f") == 0) {
            if (!v) { rc = usage_error("%s needs a value", a); goto done; }
            format = v; i++;
        } else if (strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) {
            if (!v) { rc = usage_error("%s needs a value", a); goto done; }
            out = v; i++;
        } else if (strcmp(a, "--top") == 0) {
            long n;
            if (vt_cli_count(v, 1, 100000, &n) != 0) {
                rc = usage_error("--top takes a number from 1 to 100000, not '%s'", v ? v : "");
                goto done;
            }
            o.top = (int)n; i++;
            o.top_given = 1;
        } else if (strcmp(a, "--at") == 0) {
            if (v && strcmp(v, "exit") == 0) o.at = VR_AT_EXIT;
            else if (v && strcmp(v, "peak") == 0) o.at = VR_AT_PEAK;
            else if (v && strcmp(v, "oom") == 0) o.at = VR_AT_OOM;
            else { rc = usage_error("--at takes exit, peak or oom, not '%s'", v ? v : ""); goto done; }
            i++;
        } else if (strcmp(a, "--folded-root") == 0) {
            if (v && strcmp(v, "site") == 0) o.folded_root = VR_ROOT_SITE;
            else if (v && strcmp(v, "none") == 0) o.folded_root = VR_ROOT_NONE;
            else { rc = usage_error("--folded-root takes site or none, not '%s'", v ? v : ""); goto done; }
            i++;
        } else if (a[0] == '-' && a[1] != '\0') {
            rc = usage_error("unknown option %s", a);
            goto done;
        } else {
            paths[npaths++] = a;
        }
    }
    const struct vt_reporter *rep = NULL;
    for (const struct vt_reporter *r = vt_reporters; r->name; r++)
        if (strcmp(r->name, format) == 0) rep = r;
    if (!rep) { rc = usage_error("unknown format '%s'", format); goto done; }
    if (npaths == 0) { rc = usage_error("no dump given%s", ""); goto done; }
    /* -o naming a dump read (by any name: a link, another path) would
     * truncate it while it is read, and a failed write would remove it. */
    struct stat ost, dst;
    if (out && stat(out, &ost) == 0 && S_ISREG(ost.st_mode))
        for (size_t i = 0; i < npaths; i++)
            if (stat(paths[i], &dst) == 0 && dst.st_dev == ost.st_dev && dst.st_ino == ost.st_ino) {
                rc = usage_error("-o %s is a dump this report reads; write the report elsewhere", out);
                goto done;
            }
    /* A PyTorch snapshot is one process's allocator state: several dumps
     * would put several address spaces on the same device numbers. */
    if (strcmp(rep->name, "torch") == 0 && npaths > 1) {
        fprintf(stderr, "vramtrace report: --format torch takes one dump (a snapshot is one process); "
                        "run it once per dump\n");
        rc = 1;
        goto done;
    }

    /* Several dumps are read in the order of their ranks (a shell's glob
     * gives 0, 1, 10, 11, ..., 2), the order given among equal ranks. */
    if (npaths > 1) sort_by_rank(paths, npaths);
    struct vr_input in = {.dumps = calloc(npaths, sizeof(struct vm_dump))};
    if (!in.dumps) { rc = 1; goto done; }
    char err[1024], safe[1024];
    rc = 0;
    for (size_t i = 0; i < npaths; i++) {
        if (vm_load_with(paths[i], rep->needs_events ? 0 : VM_LOAD_COUNT_EVENTS, &in.dumps[in.n], err,
                         sizeof err) != 0) {
            fprintf(stderr, "vramtrace report: %s\n", vr_safe(err, safe, sizeof safe));
            rc = 1;
            break;
        }
        in.n++;
    }
    /* Dumps of an earlier run of the job (kept aside in the same folder)
     * are left out: the report is of the newest run. */
    if (rc == 0 && vr_newest_run(&in) != 0) {
        fputs("vramtrace report: out of memory\n", stderr);
        rc = 1;
    }
    if (rc == 0) rc = write_report(rep, &in, &o, out);
    in.n += in.nearlier;
    for (size_t i = 0; i < in.n; i++) vm_free(&in.dumps[i]);
    free(in.dumps);
done:
    free(paths);
    return rc;
}
