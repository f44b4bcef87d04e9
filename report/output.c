/* output.c -- writing dumps and reports from inside the traced process. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../common/display.h"
#include "../common/fdkeep.h"
#include "../common/procself.h"
#include "../common/rankvars.h"
#include "../common/warn.h"
#include "../tracker/options.h"
#include "../tracker/tracker.h"
#include "../tracker/pystack.h"
#include "analysis.h"
#include "dump.h"
#include "dump_keep.h"
#include "errbuf.h"
#include "growth.h"
#include "holders.h"
#include "leaks.h"
#include "live.h"
#include "outfile.h"
#include "report_keep.h"
#include "owntime.h"
#include "place.h"
#include "output.h"
#include "writing.h"
#include "postmortem.h"
#include "symbolize.h"
#include "torch.h"

#define VT_OOM_INTERVAL_NS 1000000000ull
/* How long the exit path waits for each lock it needs before it gives up
 * (see exit_skipped). */
#define VT_EXIT_WAIT_NS 1000000000ull

/* Paths are whole or refused: a dump or report path that does not fit in
 * PATH_MAX is one warning, never a shorter name. */
_Static_assert(PATH_MAX == 4096, "the warning below says 4095");
#define TOO_LONG "the path is longer than 4095 characters"

/* Take signal sig off this thread, unseen, if the writing raised it (it
 * was not pending before). */
static void take_off(int sig, int pending_before) {
    sigset_t only, pending;
    sigemptyset(&only);
    sigaddset(&only, sig);
    if (!pending_before && sigpending(&pending) == 0 && sigismember(&pending, sig)) {
        struct timespec now = {0, 0};
        while (sigtimedwait(&only, NULL, &now) < 0 && errno == EINTR) {
        }
    }
}

void vt_sigpipe_hold(struct vt_sigpipe *h) {
    sigset_t held, pending;
    sigemptyset(&held);
    sigaddset(&held, SIGPIPE);
    sigaddset(&held, SIGXFSZ);
    int known = sigpending(&pending) == 0;
    h->pending_before = known && sigismember(&pending, SIGPIPE);
    h->xfsz_before = known && sigismember(&pending, SIGXFSZ);
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &h->cancel_state);
    pthread_sigmask(SIG_BLOCK, &held, &h->mask);
}

/* A SIGPIPE the program's own output earned while held (errbuf.h's
 * `broke`): raised when the outermost hold is released. */
static int sigpipe_owed;

void vt_sigpipe_release(const struct vt_sigpipe *h) {
    take_off(SIGPIPE, h->pending_before);
    take_off(SIGXFSZ, h->xfsz_before);
    pthread_sigmask(SIG_SETMASK, &h->mask, NULL);
    int ignored;
    pthread_setcancelstate(h->cancel_state, &ignored);
    if (!sigismember(&h->mask, SIGPIPE) && __atomic_exchange_n(&sigpipe_owed, 0, __ATOMIC_RELAXED)) raise(SIGPIPE);
}

static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;

/* What holds out_lock, for the exit that waits for it (exit_take): the
 * holder's CPU clock and what it writes (a HOLDS_*), in one word the exit
 * reads without the lock: HELD_BIT | HOLDS_* << 32 | the clock; 0 while
 * nobody holds it, or the exit does. */
enum { HOLDS_OOM = 1, HOLDS_SIGNAL, HOLDS_NAMED };
#define HELD_BIT (1ull << 63)
#define CLOCK_BIT (1ull << 62)
static uint64_t out_holder;

static uint64_t holder_word(int what) {
    clockid_t c;
    uint64_t w = HELD_BIT | (uint64_t)what << 32;
    if (pthread_getcpuclockid(pthread_self(), &c) == 0) w |= CLOCK_BIT | (uint32_t)c;
    return w;
}

static void out_take(int what) {
    pthread_mutex_lock(&out_lock);
    __atomic_store_n(&out_holder, holder_word(what), __ATOMIC_RELEASE);
}

static void out_give(void) {
    __atomic_store_n(&out_holder, 0, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&out_lock);
}

/* The CPU time of holder w's thread (ns), or UINT64_MAX where it cannot
 * be read (no clock noted; the thread is gone). */
static uint64_t holder_cpu(uint64_t w) {
    struct timespec t;
    if (!(w & CLOCK_BIT) || clock_gettime((clockid_t)(int32_t)(uint32_t)w, &t) != 0) return UINT64_MAX;
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}
static unsigned signal_seq;
static int warned_sup;
/* The OOM dumps' pace: the first at once, then at most one a
 * VT_OOM_INTERVAL_NS after the previous one was written; one pace for the
 * tracker's records and one for PyTorch's (out_lock held). */
struct pace {
    int written;
    uint64_t last_ns;
};
static struct pace oom_pace, torch_oom_pace;
/* The post-mortems written and the failures counted at the last (out_lock
 * held): the exit report tells of the last failure if it got none. */
static struct vt_oom_told told;
static int warned_dump, warned_report, warned_out_codes, warned_report_codes;

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

/* One warning line for an output that was not written: `why` when the path
 * was refused on purpose, else errno's message. Paths longer than a line
 * reads well are cut in the warning only. */
/* A path in a warning: its display form (common/display.h: a newline or
 * an escape in it can neither break the line nor reach the terminal),
 * cut to 200 bytes. */
static const char *warn_path(const char *path, char *buf, size_t size) {
    vt_display(path, buf, size);
    if (strlen(buf) > 200) snprintf(buf + 200, size - 200, "...");
    return buf;
}

static void warn_once(int *flag, const char *what, const char *path, const char *why) {
    if (*flag) return;
    *flag = 1;
    int e = errno;
    char shown[1024];
    vt_warn("cannot write %s %s: %s", what, warn_path(path, shown, sizeof shown), why ? why : strerror(e));
}

/* argv of this process, from its cmdline (common/procself.h: where, once
 * the main thread has ended). */
static int read_argv(char *buf, size_t size, char **argv, int max) {
    char dir[VT_PROC_SELF_MAX], path[VT_PROC_SELF_MAX + 16];
    snprintf(path, sizeof path, "%s/cmdline", vt_proc_self(dir));
    ssize_t n = vt_fd_read_small(path, buf, size);
    if (n <= 0) return 0;
    int argc = 0;
    for (ssize_t i = 0; i < n && argc < max; i += (ssize_t)strlen(buf + i) + 1) argv[argc++] = buf + i;
    return argc;
}

/* A launcher's variable that holds no number (RANK=-1, RANK=abc) is
 * passed over, said once for each variable: silently it made a process
 * that claims no rank. */
static void warn_bad_number(const char *name, const char *value) {
    static const char *warned[16];
    for (size_t i = 0; i < sizeof warned / sizeof *warned; i++) {
        const char *was = NULL;
        if (__atomic_compare_exchange_n(&warned[i], &was, name, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) break;
        if (was == name) return;
    }
    size_t n = strlen(value);
    vt_warn("%s=%.*s%s is not a whole number from 0 to 2147483647; it is passed over", name,
            n > 64 ? 64 : (int)n, value, n > 64 ? "..." : "");
}

/* The first of the variables that holds a rank: digits only, below 2^31
 * (atoi took "1;2" as 1, wrapped a number too big, and stopped at a RANK
 * of "abc" instead of going on to SLURM_PROCID). */
static int env_int_named(const char *const *names, int *known, const char **name) {
    for (; *names; names++) {
        const char *v = getenv(*names);
        long n;
        if (v && *v && vt_parse_number(v, 0, INT32_MAX, &n) == 0) {
            *known = 1;
            if (name) *name = *names;
            return (int)n;
        }
        if (v && *v) warn_bad_number(*names, v);
    }
    *known = 0;
    return 0;
}

static int env_int_known(const char *const *names, int *known) {
    return env_int_named(names, known, NULL);
}

static int env_int(const char *const *names) {
    int known;
    return env_int_known(names, &known);
}

/* The rank: the global one's variable, else the local one's (a launcher on
 * one node that sets only that); *known 0 when neither is set (0). *from
 * (NULL to leave it) names the variable that gave it, NULL for none. */
static int rank_from(int *known, const char **from) {
    const char *name = NULL, *size_name = NULL;
    int r = env_int_named(vt_rank_vars, known, &name);
    if (!*known) r = env_int_named(vt_local_rank_vars, known, &name);
    if (from) *from = *known ? name : NULL;
    if (!*known || vt_rank_var_is_local(name)) return r;
    /* A rank past the job's size (RANK=7 of WORLD_SIZE=4) is kept, but
     * said once: "rank 7 of 4" passed silently. */
    static int warned;
    int sized, world = env_int_named(vt_world_size_vars, &sized, &size_name);
    if (sized && world > 0 && r >= world && !__atomic_exchange_n(&warned, 1, __ATOMIC_ACQ_REL))
        vt_warn("%s=%d is past the job's size (%s=%d: ranks 0 to %d); the rank is kept", name, r, size_name, world,
                world - 1);
    return r;
}

static int rank_known(int *known) { return rank_from(known, NULL); }

static int rank_of(void) {
    int known;
    return rank_known(&known);
}

/* A dump path that names the rank (%r) and not the pid, in a process with
 * no rank variable (torch.multiprocessing.spawn's workers): every such
 * process is rank 0 and writes one file. Said once. */
static void warn_rankless(const char *pattern) {
    static int warned;
    int known, has_r = 0, has_p = 0;
    for (const char *p = pattern; *p; p++)
        if (*p == '%' && p[1]) {
            p++;
            has_r |= *p == 'r';
            has_p |= *p == 'p';
        }
    if (!has_r || has_p || warned) return;
    rank_known(&known);
    if (known) return;
    warned = 1;
    vt_warn("VRAMTRACE_OUT names the rank (%%r) but no rank variable holds a rank (RANK, OMPI_COMM_WORLD_RANK, "
            "SLURM_PROCID, PMI_RANK, LOCAL_RANK...): %%r is 0 here, and every such process of the job writes the "
            "same file; add %%p");
}

/* A path pattern with a % that stands for nothing (%q, %P: a typo of %p
 * makes every process write one file) keeps it as it is, said once for
 * each of VRAMTRACE_OUT and VRAMTRACE_REPORT. */
static void warn_unknown_codes(const char *name, const char *pattern, int *warned) {
    if (*warned) return;
    for (const char *p = pattern; *p; p++) {
        if (*p != '%') continue;
        if (p[1] && strchr("phrn%", p[1])) {
            p++;
            continue;
        }
        *warned = 1;
        size_t n = strlen(pattern);
        vt_warn("%s=%.*s%s has %%%s, which stands for nothing (%%p pid, %%h host, %%r rank, %%n dump number, %%%% a "
                "percent sign): kept as it is", name, n > 200 ? 200 : (int)n, pattern, n > 200 ? "..." : "",
                p[1] ? (char[]){p[1], 0} : "");
        return;
    }
}

/* ------------------------------------------------------ the process */

/* What tells this process from any other that had its pid: the boot, the
 * process's start time in clock ticks (field 22 of /proc/self/stat, the
 * same in every image of a process across exec) and its pid namespace
 * (containers started in the same tick on one machine each have a pid 1;
 * 0 when /proc cannot say). Read at the first dump, again after fork;
 * boot_id is empty when /proc cannot say. */
static struct {
    int read;
    char boot_id[40];
    unsigned long long start, pid_ns;
} self_id;

/* Read once by whichever thread asks first (the live publisher, a dump's
 * writer); the others wait for it. */
static pthread_mutex_t self_id_lock = PTHREAD_MUTEX_INITIALIZER;
static void read_self_id_locked(void);

static void read_self_id(void) {
    if (__atomic_load_n(&self_id.read, __ATOMIC_ACQUIRE)) return;
    pthread_mutex_lock(&self_id_lock);
    if (!self_id.read) {
        read_self_id_locked();
        __atomic_store_n(&self_id.read, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&self_id_lock);
}

static void read_self_id_locked(void) {
    self_id.boot_id[0] = '\0';
    char buf[1024];
    const char *p = vt_self_stat_field(buf, sizeof buf, 22);
    if (!p) return;
    char *end;
    unsigned long long start = strtoull(p, &end, 10);
    if (end == p) return;
    if (vt_fd_read_small("/proc/sys/kernel/random/boot_id", self_id.boot_id, sizeof self_id.boot_id) < 0)
        self_id.boot_id[0] = '\0';
    self_id.boot_id[strcspn(self_id.boot_id, "\n\"\\")] = '\0';
    self_id.start = start;
    struct stat ns;
    self_id.pid_ns = stat("/proc/self/ns/pid", &ns) == 0 ? (unsigned long long)ns.st_ino : 0;
}

void vt_process_facts(struct vt_process_facts *f) {
    memset(f, 0, sizeof *f);
    read_self_id();
    f->pid = (int)getpid();
    f->rank = rank_of();
    f->local_rank = env_int(vt_local_rank_vars);
    f->start = self_id.start;
    snprintf(f->boot_id, sizeof f->boot_id, "%s", self_id.boot_id);
    gethostname(f->host, sizeof f->host - 1);
    char buf[4096], *argv[64];
    int argc = read_argv(buf, sizeof buf, argv, 64);
    size_t k = 0;
    for (int i = 0; i < argc && k + 1 < sizeof f->command; i++)
        k += (size_t)snprintf(f->command + k, sizeof f->command - k, "%s%s", i ? " " : "", argv[i]);
}

/* This process as its dumps' first bytes say it (report/dump.c writes
 * them right after the pid): its pid, boot, start time and pid namespace;
 * where /proc could not say them, its pid followed by the rank, as a dump
 * then has it. Read once self_id is. */
static void self_mark(char *out, size_t size, int pid) {
    if (self_id.boot_id[0])
        snprintf(out, size, ",\"pid\":%d,\"boot_id\":\"%s\",\"process_start\":%llu,\"pid_ns\":%llu,", pid,
                 self_id.boot_id, self_id.start, self_id.pid_ns);
    else
        snprintf(out, size, ",\"pid\":%d,\"rank\":", pid);
}

/* 1 when the file at path is a dump written by an image of this very
 * process (same pid, boot, start time and pid namespace), read from its first bytes,
 * where the dump writer puts those fields. */
static int written_by_this_process(const char *path, int pid) {
    struct stat st;
    /* Only a regular file is opened: opening a device may do something. */
    if (!self_id.boot_id[0] || lstat(path, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
    int fd = vt_fd_open(AT_FDCWD, path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, 0);
    if (fd < 0) return 0;
    char head[512];
    ssize_t n = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? read(fd, head, sizeof head - 1) : -1;
    close(fd);
    if (n <= 0) return 0;
    head[n] = '\0';
    char want[160];
    self_mark(want, sizeof want, pid);
    return strncmp(head, "{\"format\":\"vramtrace-dump\"", 26) == 0 && strstr(head, want) != NULL;
}

/* -------------------------------------------------------- the paths */

/* A dump name already taken by a dump of an earlier image of this process
 * (the program exec'd: same pid, LD_PRELOAD kept) gets ".execN" before
 * ".json", the first N whose name is free or holds a dump of another
 * process; decided at this image's first dump and kept for its later ones.
 * A dump left by another process of the same pid (a container's pid 1,
 * another rank's in its own container) is kept aside as any name's is
 * (dump_keep.c). Only for patterns with %p. Returns 0, or -1 when the name
 * does not fit in size. */
static char image_suffix[24]; /* ".exec" and a number below 1000 */
static int image_decided;

static int with_suffix(const char *path, const char *suffix, char *out, size_t size) {
    size_t len = strlen(path);
    int json = len > 5 && strcmp(path + len - 5, ".json") == 0;
    int n = snprintf(out, size, "%.*s%s%s", (int)(json ? len - 5 : len), path, suffix, json ? ".json" : "");
    return n < 0 || (size_t)n >= size ? -1 : 0;
}

/* 1 when the pattern has %p (not "%%p", a percent sign and a p). */
static int names_pid(const char *pattern) {
    for (const char *c = pattern; *c; c++)
        if (*c == '%' && *++c == 'p') return 1;
        else if (!*c) break;
    return 0;
}

static int image_path(const char *pattern, char *path, size_t size, int pid) {
    if (!image_decided) {
        image_decided = 1;
        if (names_pid(pattern) && written_by_this_process(path, pid)) {
            for (int n = 1; n < 1000; n++) {
                char cand[PATH_MAX], suffix[24];
                snprintf(suffix, sizeof suffix, ".exec%d", n);
                if (with_suffix(path, suffix, cand, sizeof cand) != 0) break;
                if (!written_by_this_process(cand, pid)) {
                    memcpy(image_suffix, suffix, sizeof suffix);
                    break;
                }
            }
        }
    }
    if (!image_suffix[0]) return 0;
    char out[PATH_MAX];
    if (with_suffix(path, image_suffix, out, sizeof out) != 0 || strlen(out) >= size) return -1;
    memcpy(path, out, strlen(out) + 1);
    return 0;
}

/* The path as the report shows it: absolute when it fits, else as given
 * (a relative path opens from the working directory either way). */
static void shown_path(const char *path, char *out, size_t size) {
    char cwd[PATH_MAX];
    if (path[0] != '/' && getcwd(cwd, sizeof cwd)) {
        int n = snprintf(out, size, "%s/%s", cwd, path);
        if (n >= 0 && (size_t)n < size) return;
    }
    snprintf(out, size, "%s", path);
}

/* A dump path that holds a file of the user's that is not a dump, or
 * another user's file, is left alone, the dump written beside it (dump_keep.h
 * vt_dump_keep_foreign): path becomes that name, after one warning.
 * Returns -1 when no name beside it is free (path unchanged), -2 when
 * what path holds cannot be told (errno says why), else 0. */
static int beside_foreign(char *path, size_t size) {
    static int warned;
    char beside[PATH_MAX], was[PATH_MAX], now[PATH_MAX];
    const char *why = "is not a vramtrace dump";
    int rc = vt_dump_keep_foreign(path, beside, sizeof beside, &why);
    if (rc <= 0) return rc; /* -2: errno says why the name could not be read */
    if (!warned) {
        warned = 1;
        shown_path(path, was, sizeof was);
        shown_path(beside, now, sizeof now);
        char a[2 * PATH_MAX], b[2 * PATH_MAX];
        vt_warn("%s %s: it is left as it is, and the dump written to %s", vt_display(was, a, sizeof a), why,
                vt_display(now, b, sizeof b));
    }
    snprintf(path, size, "%s", beside);
    return 0;
}

/* What goes into the dump file (vt_file_write_whole's fill). */
struct dump_parts {
    const struct vt_snapshot *s;
    const struct vt_symbols *sym;
    const struct vt_analysis *an;
    const struct vt_dump_meta *meta;
};

static int fill_dump(FILE *f, void *arg) {
    const struct dump_parts *d = arg;
    return vt_dump_write(f, d->s, d->sym, d->an, d->meta);
}

/* Whether the report's file at path (expanded) is the dump's, the two
 * options naming one file after expansion (VRAMTRACE_REPORT equal to
 * VRAMTRACE_OUT): the report appended to the dump made it invalid JSON,
 * and an out-of-memory dump renamed over the report lost the
 * post-mortem. The dump's path goes into dump (PATH_MAX bytes). */
static int report_is_dump(const char *path, unsigned seq, char *dump) {
    if (strcmp(vt_opt.out, "off") == 0) return 0;
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    if (vt_expand_path(vt_opt.out, dump, PATH_MAX, (int)getpid(), host, rank_of(), seq) != 0) return 0;
    return vt_file_same_name(path, dump);
}

/* The report's file cannot be opened (a folder, a missing folder, a file
 * this user may not write, another user's, a FIFO with no reader, a path
 * too long): one warning, and the report goes to stderr, as it does when
 * the file stops taking it. Before, the post-mortem was lost, with only
 * the warning left to say there had been one. */
static void warn_report_elsewhere(const char *path, const char *why) {
    char said[512];
    snprintf(said, sizeof said, "%s; the report goes to stderr", why ? why : strerror(errno));
    warn_once(&warned_report, "the report to", path, said);
}

/* The human report's stream: stderr, stdout, none ("off"), or the file
 * at path, which sends what it cannot take to fb (NULL: none); stderr,
 * after one warning, when that file cannot be opened (path NULL: the
 * caller warned for a path too long), is the dump's (report_is_dump;
 * seq: the %n path was expanded with) or holds something that is no
 * report log (report_keep.h). */
static FILE *open_report(const char *path, unsigned seq, int *close_it, struct vt_report_fallback *fb) {
    *close_it = 0;
    if (strcmp(vt_opt.report, "off") == 0) return NULL;
    if (strcmp(vt_opt.report, "stderr") == 0) return stderr;
    if (strcmp(vt_opt.report, "stdout") == 0) return stdout;
    if (!path) return stderr;
    char dump[PATH_MAX];
    if (report_is_dump(path, seq, dump)) {
        static int warned_same;
        if (!warned_same) {
            warned_same = 1;
            char shown[1024];
            vt_warn("VRAMTRACE_REPORT names the dump's file %s (VRAMTRACE_OUT); the report goes to stderr",
                    warn_path(dump, shown, sizeof shown));
        }
        return stderr;
    }
    /* An earlier run's dump, a source file or notes at the name are not
     * appended to (report_keep.h): the report goes to stderr. */
    const char *why = NULL;
    if (!vt_report_keep_appendable(path, &why)) {
        static int warned_kept;
        if (!warned_kept) {
            warned_kept = 1;
            char shown[1024];
            vt_warn("the report file %s %s: it is left as it is, and the report goes to stderr",
                    warn_path(path, shown, sizeof shown), why);
        }
        return stderr;
    }
    FILE *f = vt_file_open_report(path, &why, fb);
    if (!f) {
        warn_report_elsewhere(path, why);
        return stderr;
    }
    *close_it = 1;
    return f;
}

int vt_output_job_place(char *buf, size_t size) {
    int world = env_int(vt_world_size_vars);
    if (size) buf[0] = '\0';
    if (world <= 1) return 0;
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    int known;
    const char *from;
    int rank = rank_from(&known, &from);
    char place[1200];
    snprintf(buf, size, "pid %d, %s", (int)getpid(), vt_job_place(place, sizeof place, world, rank, from, host));
    return 1;
}

int vt_output_report_line(const char *line) {
    if (strcmp(vt_opt.report, "stdout") == 0) {
        char full[4096];
        int n = snprintf(full, sizeof full, "%s\n", line);
        if (n < 0 || (size_t)n >= sizeof full) return -1;
        int stuck = 0;
        vt_file_write_waiting(1, full, (size_t)n, &stuck);
        return stuck ? -1 : 0;
    }
    if (!vt_report_to_file(vt_opt.report)) return -1;
    char rpath[PATH_MAX], host[256] = "";
    gethostname(host, sizeof host - 1);
    if (vt_expand_path(vt_opt.report, rpath, sizeof rpath, (int)getpid(), host, rank_of(), 0) != 0) return -1;
    int close_it;
    FILE *f = open_report(rpath, 0, &close_it, NULL);
    if (!f) return -1;
    fprintf(f, "%s\n", line);
    int bad = fflush(f) != 0 || ferror(f);
    if (close_it && fclose(f) != 0) bad = 1;
    return bad ? -1 : 0;
}

/* The dump path pattern for this write: on-demand dumps get a sequence
 * number even when the pattern has no %n. */
static const char *dump_name; /* vt_output_named's name, under out_lock */

static void dump_pattern(const char *reason, char *out, size_t size) {
    snprintf(out, size, "%s", vt_opt.out);
    if (strcmp(reason, "named") == 0) {
        size_t len = strlen(out);
        int json = len > 5 && strcmp(out + len - 5, ".json") == 0;
        char tail[8];
        snprintf(tail, sizeof tail, "%s", json ? ".json" : "");
        snprintf(out + (json ? len - 5 : len), size - (json ? len - 5 : len), ".%s%s", dump_name, tail);
        return;
    }
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

/* The exit gave up waiting for another thread's writing (exit_take):
 * what it was writing, and why the exit went on without it (`going`: it
 * still went on when the wait ran out; else it made no progress). */
static void exit_overran(uint64_t w, int going, uint64_t waited_ns) {
    int what = (int)(w >> 32 & 0xff);
    char why[64];
    if (going) snprintf(why, sizeof why, "was still not done after %llu s", (unsigned long long)(waited_ns / 1000000000u));
    else snprintf(why, sizeof why, "made no progress for a second");
    fprintf(stderr, "vramtrace: no exit dump or report: %s another thread was writing %s\n",
            what == HOLDS_SIGNAL  ? "the dump asked for by signal that"
            : what == HOLDS_NAMED ? "the named dump that"
            : what == HOLDS_OOM   ? "the out-of-memory post-mortem that"
                                  : "the output that",
            why);
}

static char named_path[PATH_MAX]; /* the last named dump written */

/* Write the dump and the human report for `reason` ("oom", "exit",
 * "signal", "named"). Returns 1 when the exit leak check found leaks, -1
 * when it could not run (the tracker's locks not let go in time). At exit it
 * waits for the tracker's locks VT_EXIT_WAIT_NS at most. With torch_only
 * 1 (an "oom" dump again once PyTorch's record of it came) the report gets
 * PyTorch's breakdown alone; 2 (a failure PyTorch's record made) the
 * post-mortem, then the breakdown. */
static int write_outputs_from(const char *reason, unsigned seq, int torch_only, uint64_t asked,
                              struct vt_symbols_ahead **given);

/* The outputs, and the time they took kept as vramtrace's own
 * (owntime.h): growth measured in time does not count it as the
 * program's (a dump of many stacks takes seconds). `given`: the symbols
 * made ahead by the caller (NULL: made here). */
static int write_outputs_given(const char *reason, unsigned seq, int torch_only, struct vt_symbols_ahead **given) {
    /* The moment the outputs were asked for: the end of the program's work
     * that growth counts (symbolizing a big program's libraries below
     * takes seconds, which are vramtrace's own and no work of its). */
    uint64_t asked = vt_now_ns();
    int rc = write_outputs_from(reason, seq, torch_only, asked, given);
    vt_own_time_add(asked, vt_now_ns());
    return rc;
}

static int write_outputs(const char *reason, unsigned seq, int torch_only) {
    return write_outputs_given(reason, seq, torch_only, NULL);
}

/* The signal that ends the process after the exit's outputs (0 none), its
 * sender and the sender's command name (vt_output_ended_by). */
static struct {
    int sig, from_pid;
    char name[16], from[64];
} ended;

void vt_output_ended_by(int sig, int from_pid) {
    const char *abbrev = sigabbrev_np(sig);
    if (!abbrev) return;
    snprintf(ended.name, sizeof ended.name, "SIG%s", abbrev);
    ended.from_pid = from_pid;
    ended.from[0] = 0;
    if (from_pid > 0) {
        char p[64];
        snprintf(p, sizeof p, "/proc/%d/comm", from_pid);
        int fd = vt_fd_open(AT_FDCWD, p, O_RDONLY, 0);
        if (fd >= 0) {
            ssize_t n = read(fd, ended.from, sizeof ended.from - 1);
            close(fd);
            if (n < 0) n = 0;
            while (n > 0 && ended.from[n - 1] == '\n') n--;
            ended.from[n] = 0;
        }
    }
    __atomic_store_n(&ended.sig, sig, __ATOMIC_RELEASE);
}

/* The status exit() was given, once known (vt_output_exit_status). */
static struct {
    int known, status;
} exit_status;

void vt_output_exit_status(int status) {
    exit_status.status = status;
    __atomic_store_n(&exit_status.known, 1, __ATOMIC_RELEASE);
}

static int write_outputs_from(const char *reason, unsigned seq, int torch_only, uint64_t asked,
                              struct vt_symbols_ahead **given) {
    int leaked = 0;
    int at_exit = strcmp(reason, "exit") == 0;
    /* The frames first: libdwfl's memory is gone before the live list is
     * copied (symbolize.h). */
    struct vt_symbols_ahead *ahead = given ? *given : vt_symbolize_ahead(at_exit ? VT_EXIT_WAIT_NS : 0);
    struct vt_snapshot *s = at_exit ? vt_tracker_snapshot_within(VT_EXIT_WAIT_NS) : vt_tracker_snapshot();
    if (!s) {
        vt_symbols_ahead_free(ahead);
        if (at_exit) exit_skipped();
        return at_exit && vt_opt.leak_check ? -1 : 0;
    }
    /* A failure's outputs are this thread's failure's: another thread's
     * failure recorded after it, before the snapshot, is left out of them
     * (its own outputs are paced; the exit tells it as the last failure
     * without a post-mortem). Before: the post-mortem told the later one,
     * and this thread's, whose error the program raises, went untold. */
    size_t all_ooms = s->nooms;
    uint64_t oom_count = s->totals.oom_count;
    int oom = strcmp(reason, "oom") == 0;
    if (oom && torch_only != 1 && vt_thread_oom_seq && vt_thread_oom_seq < s->totals.oom_count)
        vt_postmortem_upto(s, vt_thread_oom_seq);
    struct vt_sigpipe hold;
    vt_sigpipe_hold(&hold);
    read_self_id();
    vt_sort_live(s);
    struct vt_symbols *sym = vt_symbolize_with(s, ahead);

    char argbuf[8192], forecast[256];
    char *argv[64];
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    int rank_said;
    const char *rank_var;
    struct vt_dump_meta meta = {
        .reason = reason,
        .pid = (int)getpid(),
        .argc = read_argv(argbuf, sizeof argbuf, argv, 64),
        .argv = argv,
        .host = host,
        .rank = rank_from(&rank_said, &rank_var),
        .rank_unknown = !rank_said,
        .rank_from = rank_var,
        .dump_number = strcmp(reason, "signal") == 0 ? seq : 0,
        .local_rank = env_int(vt_local_rank_vars),
        .world_size = env_int(vt_world_size_vars),
        .python_version = vt_pystack_version(),
        .boot_id = self_id.boot_id[0] ? self_id.boot_id : NULL,
        .process_start = self_id.start,
        .pid_ns = self_id.pid_ns,
        .forecast = vt_live_forecast_at(s, forecast, sizeof forecast),
    };
    if (at_exit && __atomic_load_n(&ended.sig, __ATOMIC_ACQUIRE)) {
        meta.ended_signal = ended.name;
        meta.ended_from_pid = ended.from_pid;
        meta.ended_from = ended.from;
    } else if (at_exit && __atomic_load_n(&exit_status.known, __ATOMIC_ACQUIRE)) {
        meta.exit_status_known = 1;
        meta.exit_status = exit_status.status;
    }
    /* Growth over the whole run is for exit and on-demand dumps: at an
     * out-of-memory failure each failure's findings speak of it. */
    struct vt_analysis *an = vt_analyse(s, sym, strcmp(reason, "oom") != 0 ? vt_growth_end(s, asked) : 0);

    char path[PATH_MAX], shown[PATH_MAX];
    const char *dump_path = NULL;
    struct vt_kept kept = {0};
    if (strcmp(vt_opt.out, "off") != 0) {
        char pattern[sizeof vt_opt.out + 128]; /* room for a name (vt_output_named) */
        const char *why = NULL;
        int foreign;
        dump_pattern(reason, pattern, sizeof pattern);
        warn_rankless(pattern);
        warn_unknown_codes("VRAMTRACE_OUT", vt_opt.out, &warned_out_codes);
        if (vt_expand_path(pattern, path, sizeof path, meta.pid, host, meta.rank, seq) != 0 ||
            image_path(pattern, path, sizeof path, meta.pid) != 0) {
            warn_once(&warned_dump, "the dump to", pattern, TOO_LONG);
        } else if ((foreign = beside_foreign(path, sizeof path)) != 0) {
            int e = errno;
            shown_path(path, shown, sizeof shown);
            warn_once(&warned_dump, "the dump to", shown,
                      foreign == -2 ? strerror(e) : "it holds a file that is not a vramtrace dump (kept)");
        } else {
            shown_path(path, shown, sizeof shown);
            struct dump_parts parts = {s, sym, an, &meta};
            /* A name without %p: what another process left there is kept. */
            char self[160];
            self_mark(self, sizeof self, meta.pid);
            kept.self = self;
            struct vt_prev keep = {vt_dump_keep_prev, &kept};
            struct stat placed;
            if (vt_file_write_dump(path, fill_dump, &parts, &why, &keep, &placed) == 0) {
                dump_path = shown;
                vt_dump_keep_placed(path, &placed, self);
            }
            else warn_once(&warned_dump, "the dump to", shown, why);
            if (dump_path && strcmp(reason, "named") == 0) snprintf(named_path, sizeof named_path, "%s", shown);
        }
    }

    char rpath[PATH_MAX];
    const char *report_path = rpath;
    if (vt_report_to_file(vt_opt.report)) warn_unknown_codes("VRAMTRACE_REPORT", vt_opt.report, &warned_report_codes);
    if (vt_expand_path(vt_opt.report, rpath, sizeof rpath, meta.pid, host, meta.rank, seq) != 0) {
        report_path = NULL;
        if (vt_report_to_file(vt_opt.report)) warn_report_elsewhere(vt_opt.report, TOO_LONG);
    }
    int close_it;
    /* What the report's file cannot take (a full disk) goes to stderr,
     * from the first line it did not take whole: the post-mortem and the
     * dump's path are what the user runs vramtrace for. */
    struct vt_report_fallback fb = {.taken_fd = -1};
    FILE *f = open_report(report_path, seq, &close_it, &fb);
    /* What goes to stderr (or stdout) is gathered and written in whole
     * lines. */
    struct vt_errbuf eb, ob = {0};
    FILE *errf = vt_errbuf_open(&eb);
    fb.to = errf;
    if (f == stderr) f = errf;
    if (f == stdout) {
        FILE *outf = vt_errbuf_open_fd(&ob, 1);
        if (outf) f = outf;
    }
    if (kept.kept || kept.lost) {
        /* Beside the dump: the folder of its shown path. */
        char keptshown[PATH_MAX];
        const char *slash = strrchr(shown, '/');
        int n = slash ? (int)(slash - shown) + 1 : 0;
        snprintf(keptshown, sizeof keptshown, "%.*s%s", n, shown, kept.name);
        char a[2 * PATH_MAX], b[2 * PATH_MAX];
        vt_display(shown, a, sizeof a);
        vt_display(keptshown, b, sizeof b);
        if (kept.lost)
            vt_warn("%s held a dump of pid %d (%s) that no free name could keep; replaced", a, kept.pid,
                    kept.reason[0] ? kept.reason : "?");
        else if (f)
            fprintf(f, "vramtrace: %s held a dump of pid %d (%s); it is kept as %s\n", a, kept.pid,
                    kept.reason[0] ? kept.reason : "?", b);
    }
    if (strcmp(reason, "exit") == 0 && vt_opt.leak_check) {
        char err[512];
        struct vt_suppressions *sup = vt_suppressions_load(vt_opt.suppressions, err, sizeof err);
        if (!sup && !warned_sup) {
            warned_sup = 1;
            vt_warn("%s; checking without suppressions", err);
        }
        if (f) vt_postmortem_exit_brief(f, s, sym, an, &meta, &told);
        /* The leak report goes where LSan's would, even with the human
         * report turned off: CI reads it. */
        FILE *lf = f ? f : errf;
        char place[1200];
        vt_job_place_of(&meta, place, sizeof place);
        struct vt_leak_result lr = vt_leak_report(lf, s, sym, sup, meta.pid, place, NULL);
        leaked = lr.count > 0;
        if (lf != errf && (fflush(lf) != 0 || ferror(lf))) {
            /* A report file that could not take it and had no fallback
             * (no memory for its line writer): said, and the leak report
             * on stderr instead, where CI reads it. */
            warn_once(&warned_report, "the report to", report_path ? report_path : vt_opt.report, NULL);
            vt_leak_report(errf, s, sym, sup, meta.pid, place, NULL);
        }
        vt_suppressions_free(sup);
    } else if (f) {
        /* PyTorch raised the error of a failure no post-mortem told of (a
         * job's fatal failure after failures PyTorch's retry survived):
         * its post-mortem, then PyTorch's part. */
        if (torch_only == 1 && strcmp(reason, "oom") == 0 && !vt_postmortem_told(s, sym, &told)) torch_only = 2;
        if (torch_only == 1)
        {
            vt_torch_print_oom(f, s, sym, an->latest ? &an->latest->growth : NULL, 1);
            if (an->latest) vt_torch_print_oom_findings(f, an->latest->f, an->latest->n);
        }
        else if (strcmp(reason, "oom") == 0)
            vt_postmortem_oom(f, s, sym, an, &meta, dump_path, vt_opt.top, &told);
        else if (strcmp(reason, "named") == 0)
            ; /* the caller has the path */
        else if (strcmp(reason, "signal") == 0)
        {
            char a[2 * PATH_MAX];
            fprintf(f, "vramtrace: dump %u of pid %d on request: %s\n", seq, meta.pid,
                    dump_path ? vt_display(dump_path, a, sizeof a) : "(not written)");
        }
        else
            vt_postmortem_exit(f, s, sym, an, &meta, dump_path, vt_opt.top, &told);
        if (torch_only == 2) vt_torch_print_oom(f, s, sym, an->latest ? &an->latest->growth : NULL, 1);
        if (!torch_only) vt_torch_print_top(f, s, sym, reason, an->growth, an->ngrowth);
        if ((fflush(f) != 0 || ferror(f)) && f != errf)
            warn_once(&warned_report, "the report to", report_path ? report_path : vt_opt.report, NULL);
    }
    /* Closed before stderr's stream, which takes what it could not. */
    if (f && close_it && fclose(f) != 0)
        warn_once(&warned_report, "the report to", report_path ? report_path : vt_opt.report, NULL);
    if (fb.err == EBADF && fb.taken_fd >= 0 && (fb.lost || fb.moved)) {
        char why[300];
        snprintf(why, sizeof why,
                 "the program closed its descriptor and opened a file of its own at its number (%d): up to %llu "
                 "bytes of the report may have gone into that file; %s",
                 fb.taken_fd, (unsigned long long)fb.lost,
                 fb.moved ? "what it could not take is on stderr" : "nothing else was lost");
        warn_once(&warned_report, "the report to", report_path ? report_path : vt_opt.report, why);
    } else if (fb.err) {
        char why[200];
        snprintf(why, sizeof why, "%s; %s", strerror(fb.err),
                 fb.moved ? "what it could not take is on stderr" : "nothing was lost");
        warn_once(&warned_report, "the report to", report_path ? report_path : vt_opt.report, why);
    }
    vt_errbuf_close(&ob);
    vt_errbuf_close(&eb);
    if (f && torch_only != 1 && oom) vt_postmortem_told_now(&told, s);
    s->nooms = all_ooms;
    s->totals.oom_count = oom_count;
    vt_analysis_free(an);
    vt_symbols_free(sym);
    vt_snapshot_free(s);
    /* The program's own output, flushed ahead of the report, met a pipe
     * nobody reads: the signal its own flush would have had, once SIGPIPE
     * is the program's again. */
    if (ob.broke || eb.broke) __atomic_store_n(&sigpipe_owed, 1, __ATOMIC_RELAXED);
    vt_sigpipe_release(&hold);
    return leaked;
}

/* Set as the exit's outputs begin (vt_output_exit, or their skipping): no
 * other writing begins after that; one holding out_lock then finishes
 * before the exit's, which waits for it. A dump the signal asked for while
 * the exit wrote its own waited for the lock, then began its snapshot and
 * its file as the exit went on, and the C library's exit flushed and
 * unbuffered every open stream, the dump's among them, underneath the
 * thread writing it (it flushes without the streams' locks). The exit
 * dump is the process's last word; an on-request or named dump, or an
 * out-of-memory failure's post-mortem, asked for after it is not begun. */
static int outputs_closed;

static int closed(void) { return __atomic_load_n(&outputs_closed, __ATOMIC_ACQUIRE); }

static void close_outputs(void) { __atomic_store_n(&outputs_closed, 1, __ATOMIC_RELEASE); }

/* The "oom" outputs (torch_only: PyTorch's record), unless p says it is
 * too soon. */
static void paced_oom(struct pace *p, int torch_only) {
    /* Nowhere to write: no snapshot, symbols or analysis either (a loop of
     * failures with both off paid a quarter of a second each second at a
     * million live for nothing). */
    if (strcmp(vt_opt.out, "off") == 0 && strcmp(vt_opt.report, "off") == 0) return;
    /* No cancellation point in the failure's work, inside the program's
     * CUDA call (the symbols' files are opened and read before the
     * writing's own hold): a thread the program cancels is cancelled at
     * its own next one, as without vramtrace. */
    int cancel_state, ignored;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel_state);
    out_take(HOLDS_OOM);
    uint64_t now = vt_now_ns();
    if (!closed() && (!p->written || now - p->last_ns >= VT_OOM_INTERVAL_NS)) {
        p->written = 1;
        write_outputs("oom", 0, torch_only);
        /* Counted from the end of this writing, not its start: a writing
         * that took a second (symbols of a large program) would otherwise
         * let the very next failure write again at once (PyTorch's retry
         * after it frees its cache), and a loop of failures spend all its
         * time writing. */
        p->last_ns = vt_now_ns();
    }
    out_give();
    pthread_setcancelstate(cancel_state, &ignored);
}

/* A failure PyTorch's record made, on this thread: its post-mortem waits
 * for the record. */
static __thread int deferring __attribute__((tls_model("initial-exec"))), deferred __attribute__((tls_model("initial-exec")));

void vt_output_defer_oom(void) { deferring = 1; }

void vt_output_oom(void) {
    if (deferring) {
        deferring = 0;
        deferred = 1;
        return;
    }
    paced_oom(&oom_pace, 0);
}

int vt_output_exit_skipped(void) {
    close_outputs();
    if (!vt_tracker_touched()) return 0;
    if (strcmp(vt_opt.out, "off") == 0 && strcmp(vt_opt.report, "off") == 0 && !vt_opt.leak_check) return 0;
    exit_skipped();
    return vt_opt.leak_check ? -1 : 0;
}

/* Dumps asked for by signal (counted by the handler, as it hears the
 * signal) and those a written dump stood for (the count when its writing
 * began): one the exit overtakes is said, not lost without a word. Looked
 * at once the exit holds the lock (or gave up waiting for it): a dump the
 * watcher finished meanwhile is not said to be missing, and a signal the
 * watcher had not yet woken for is. */
static unsigned long signals_asked, signals_done;

void vt_output_signal_asked(void) { __atomic_add_fetch(&signals_asked, 1, __ATOMIC_RELEASE); }

static void signal_overtaken(int exit_writes) {
    if (__atomic_load_n(&signals_asked, __ATOMIC_ACQUIRE) == __atomic_load_n(&signals_done, __ATOMIC_ACQUIRE))
        return;
    if (exit_writes)
        vt_warn("a dump asked for by signal was not written yet when the process exited; the exit dump stands "
                "for it");
    else
        vt_warn("a dump asked for by signal was not written when the process exited");
}

/* How long the exit waits for a writing under way in another thread (an
 * on-request or named dump, a failure's post-mortem) that goes on: a
 * dump of ten million live allocations takes 5 s here. */
#define VT_EXIT_WAIT_WRITING_NS 30000000000ull

/* Why the exit went on without out_lock: the holder's word and whether
 * its writing still went on (exit_overran's line), or holder 0
 * (exit_skipped's). */
struct exit_said {
    uint64_t holder;
    int going;
};

/* out_lock for the exit: 0 taken; else -1, not, with *said. A writing
 * under way in another thread finishes first, however long it takes,
 * while it goes on (each second, its thread's CPU time rose by a
 * millisecond or more, or the outputs wrote more bytes), up to
 * VT_EXIT_WAIT_WRITING_NS; before, the exit waited a second, then wrote
 * nothing at all, and said a CUDA call had not finished. A writing that
 * makes no progress for a second (a file whose reader stalled, a lock
 * never let go) is not waited for longer. Nor is the calling thread's own
 * (an exit from a signal handler that interrupted it): at once. */
static int exit_take(struct exit_said *said) {
    *said = (struct exit_said){0, 0};
    uint64_t w = __atomic_load_n(&out_holder, __ATOMIC_ACQUIRE);
    if (w && (w & CLOCK_BIT) && w == holder_word((int)(w >> 32 & 0xff))) return -1;
    uint64_t cpu = holder_cpu(w), bytes = vt_writing_bytes(), waited = 0;
    for (;;) {
        struct timespec until;
        vt_deadline(&until, VT_EXIT_WAIT_NS);
        if (pthread_mutex_timedlock(&out_lock, &until) == 0) return 0;
        waited += VT_EXIT_WAIT_NS;
        uint64_t w2 = __atomic_load_n(&out_holder, __ATOMIC_ACQUIRE), cpu2 = holder_cpu(w2),
                 bytes2 = vt_writing_bytes();
        int on = w2 != w || bytes2 != bytes || (cpu != UINT64_MAX && cpu2 != UINT64_MAX && cpu2 - cpu >= 1000000);
        if (!w2 && !on) return -1; /* none noted: a lock not let go */
        if (!on || waited >= VT_EXIT_WAIT_WRITING_NS) {
            *said = (struct exit_said){w2, on};
            return -1;
        }
        w = w2;
        cpu = cpu2;
        bytes = bytes2;
    }
}

int vt_output_exit(void) {
    /* From here on nothing else begins writing (closed()): what holds the
     * lock now finishes first, what would begin after is the exit's. */
    close_outputs();
    if (!vt_tracker_touched()) return 0;
    /* Nothing to write: skip the snapshot and the symbols (the count of
     * warnings not shown is still owed: they went to stderr). */
    if (strcmp(vt_opt.out, "off") == 0 && strcmp(vt_opt.report, "off") == 0 && !vt_opt.leak_check) {
        signal_overtaken(0);
        vt_warn_summary();
        return 0;
    }
    struct exit_said said;
    if (exit_take(&said) != 0) {
        /* The writing goes on in its thread: the C library's exit, next,
         * flushes its streams (writing.h). */
        vt_writing_abandon();
        signal_overtaken(0);
        if (said.holder) exit_overran(said.holder, said.going, VT_EXIT_WAIT_WRITING_NS);
        else exit_skipped();
        return vt_opt.leak_check ? -1 : 0;
    }
    signal_overtaken(1);
    int leaked = write_outputs("exit", 0, 0);
    vt_warn_summary();
    pthread_mutex_unlock(&out_lock);
    return leaked;
}

void vt_output_torch_oom(void) {
    if (!deferred) {
        paced_oom(&torch_oom_pace, 1);
        return;
    }
    /* The failure's post-mortem with the record's part, once: both paces
     * are this one writing's. */
    deferred = 0;
    paced_oom(&oom_pace, 2);
    torch_oom_pace = oom_pace;
}

void vt_output_signal(void) {
    if (!vt_tracker_touched()) return;
    /* The frames known now symbolized first (a big program's libraries
     * take most of a second), then PyTorch's record, taken at the
     * program's next step boundary, then the snapshot at once: symbolized
     * between the two, the snapshot came 10 to 13 steps after the record
     * (0.6 s), and the dump's tracked bytes and PyTorch's were of two
     * moments. What the snapshot has that the frames do not is symbolized
     * with it. */
    /* The signals heard so far: this dump stands for them all. */
    unsigned long upto = __atomic_load_n(&signals_asked, __ATOMIC_ACQUIRE);
    if (closed()) return; /* the exit's dump stands for it (said there) */
    uint64_t t0 = vt_now_ns();
    struct vt_symbols_ahead *ahead = vt_symbolize_ahead(0);
    vt_own_time_add(t0, vt_now_ns());
    vt_torch_refresh();
    out_take(HOLDS_SIGNAL);
    if (!closed()) {
        write_outputs_given("signal", ++signal_seq, 0, &ahead);
        __atomic_store_n(&signals_done, upto, __ATOMIC_RELEASE);
    } else {
        vt_symbols_ahead_free(ahead); /* the exit's dump stands for it (said there) */
    }
    out_give();
}

int vt_output_named(const char *name, char *path, size_t size) {
    char clean[101];
    size_t n = 0;
    /* A longer name is refused: cut, two names would write one file. */
    if (!name || strnlen(name, sizeof clean) >= sizeof clean) return -1;
    for (; name && name[n] && n < sizeof clean - 1; n++) {
        char c = name[n];
        int keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-' ||
                   c == '_';
        clean[n] = keep && !(n == 0 && c == '.') ? c : '_';
    }
    clean[n] = '\0';
    if (n == 0 || strcmp(vt_opt.out, "off") == 0) return -1;
    out_take(HOLDS_NAMED);
    if (closed()) {
        out_give();
        return -1;
    }
    dump_name = clean;
    named_path[0] = '\0';
    write_outputs("named", 0, 0);
    int ok = named_path[0] != '\0';
    if (ok && path && size) snprintf(path, size, "%s", named_path);
    dump_name = NULL;
    out_give();
    return ok ? 0 : -1;
}

void vt_output_reset_child(void) {
    outputs_closed = 0;
    out_holder = 0;
    vt_writing_reset_child();
    vt_symbolize_reset_child();
    signals_asked = signals_done = 0; /* the parent's signals, not the child's */
    vt_own_time_reset();
    pthread_mutex_init(&out_lock, NULL);
    vt_warn_reset_child();
    vt_analysis_reset_child();
    image_decided = 0;
    image_suffix[0] = '\0';
    vt_dump_keep_reset_child();
    self_id.read = 0;
    pthread_mutex_init(&self_id_lock, NULL); /* another thread may have held it at the fork */
    oom_pace = torch_oom_pace = (struct pace){0, 0};
    vt_postmortem_told_reset(&told);
    vt_torch_reset_child();
    signal_seq = 0;
}
