/* cmd_run.c -- `vramtrace run [--out PATH] [--report DEST] [--depth N] --
 * CMD...`: set the environment, preload the library, run the command (its
 * exit status is the command's own).
 *
 * Plainly, vramtrace execs the command. It stays as the command's parent,
 * passing on the signals sent to it and ending as the command ends, in two
 * cases. When the library's path cannot go into LD_PRELOAD as it is (the
 * loader splits that list at spaces and colons), the command preloads a
 * link to the library made in a private directory, removed when the
 * command ends. When the verdict depends on tracing (the leak check, a
 * budget), a command the library never reached (a static or set-user-ID
 * program) would pass unchecked: the library creates a mark in that
 * directory when it starts (VRAMTRACE_MARK), and a run without it ends with
 * one line and a non-zero status. When the suppressions are a pipe (a
 * shell's `<(...)`), which only the first process to read it would get,
 * every process reads a copy in that directory (cli/run_pipe.c). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/display.h"
#include "../common/options.h"
#include "../common/suppfile.h"
#include "cli.h"

#ifndef VT_LIBDIR
#define VT_LIBDIR "/usr/local/lib"
#endif

/* Find libvramtrace.so next to this executable or in the install prefix. */
static int find_library(char *out, size_t size) {
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            const char *cands[] = {"%s/libvramtrace.so", "%s/../lib/libvramtrace.so"};
            for (size_t i = 0; i < 2; i++) {
                char p[PATH_MAX + 64];
                snprintf(p, sizeof p, cands[i], exe);
                if (access(p, R_OK) == 0 && realpath(p, out)) return 0;
            }
        }
    }
    snprintf(out, size, "%s/libvramtrace.so", VT_LIBDIR);
    return access(out, R_OK) == 0 ? 0 : -1;
}

/* The folder of the PyTorch companion's boot shim (a sitecustomize.py),
 * beside this executable: installed (PREFIX/share/vramtrace/python) or in
 * the source tree (build/../python). 0, or -1 when there is none. */
static int find_python_boot(char *out, size_t size) {
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return -1;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash) return -1;
    *slash = '\0';
    const char *cands[] = {"%s/../share/vramtrace/python/vramtrace_torch/_boot",
                           "%s/../python/vramtrace_torch/_boot"};
    for (size_t i = 0; i < 2; i++) {
        char p[PATH_MAX + 64], file[PATH_MAX + 32];
        snprintf(p, sizeof p, cands[i], exe);
        if (!realpath(p, out) || strlen(out) + 20 > size) continue;
        snprintf(file, sizeof file, "%s/sitecustomize.py", out);
        if (access(file, R_OK) == 0) return 0;
    }
    return -1;
}

/* Put the companion's boot folder first on PYTHONPATH (a Python program
 * then loads the companion once it imports torch; see
 * python/vramtrace_torch/_boot/sitecustomize.py). Nothing when there is no
 * such folder. */
static void set_pythonpath(void) {
    char boot[PATH_MAX];
    if (find_python_boot(boot, sizeof boot) != 0 || strchr(boot, ':')) return;
    const char *old = getenv("PYTHONPATH");
    size_t len = strlen(boot) + (old ? strlen(old) + 1 : 0) + 1;
    char *v = malloc(len);
    if (!v) return;
    snprintf(v, len, "%s%s%s", boot, old && *old ? ":" : "", old && *old ? old : "");
    setenv("PYTHONPATH", v, 1);
    free(v);
}

/* The caller's LD_PRELOAD without another copy of libvramtrace.so (one
 * of that name that is not the file lib is: an installed copy exported
 * for a launcher, and a build tree's vramtrace run), after one line
 * naming what was left out: two copies in one process call each other's
 * hooks until the stack overflows. NULL when nothing was left out (the
 * value stays as it is), else a string to free. */
static char *without_other_copies(const char *old, const char *lib) {
    struct stat mine, st;
    if (!old || stat(lib, &mine) != 0) return NULL;
    size_t len = strlen(old);
    char *kept = malloc(len + 1), *dropped = malloc(len + 1);
    if (!kept || !dropped) {
        free(kept);
        free(dropped);
        return NULL;
    }
    kept[0] = dropped[0] = '\0';
    for (const char *p = old; *p;) {
        size_t n = strcspn(p, " :");
        if (n) {
            char one[PATH_MAX];
            snprintf(one, sizeof one, "%.*s", (int)(n < sizeof one ? n : sizeof one - 1), p);
            const char *name = strrchr(one, '/') ? strrchr(one, '/') + 1 : one;
            int other = strcmp(name, "libvramtrace.so") == 0 && stat(one, &st) == 0 &&
                        (st.st_dev != mine.st_dev || st.st_ino != mine.st_ino);
            char *to = other ? dropped : kept;
            snprintf(to + strlen(to), len + 1 - strlen(to), "%s%.*s", to[0] ? (other ? " " : ":") : "", (int)n, p);
        }
        p += n;
        p += strspn(p, " :");
    }
    if (!dropped[0]) {
        free(kept);
        free(dropped);
        return NULL;
    }
    char safe[256], safelib[256];
    fprintf(stderr, "vramtrace run: leaving %s out of LD_PRELOAD: another copy of libvramtrace.so (this run "
                    "preloads %s; two in one process crash it)\n",
            vt_display(dropped, safe, sizeof safe), vt_display(lib, safelib, sizeof safelib));
    free(dropped);
    return kept;
}

/* Append the n bytes at entry to the LD_PRELOAD list `to`. */
static void add_entry(char *to, const char *entry, size_t n) {
    size_t k = strlen(to);
    if (k) to[k++] = ':';
    memcpy(to + k, entry, n);
    to[k + n] = '\0';
}

/* LD_PRELOAD for the command cmd: a sanitizer's runtime first, then lib,
 * then the rest of what the caller preloads (less another copy of the
 * library: without_other_copies). The runtime is one the caller preloads,
 * kept before the library, else the one the program needs
 * (cli/run_sanitizer.c), whose name goes into `needed` ("" when none). */
static int set_preload(const char *lib, const char *cmd, char *needed, size_t size) {
    char *less = without_other_copies(getenv("LD_PRELOAD"), lib);
    const char *old = less ? less : getenv("LD_PRELOAD");
    if (!old) old = "";
    if (vt_run_needed_sanitizer(cmd, needed, size) != 0) needed[0] = '\0';
    size_t len = strlen(lib) + strlen(old) + strlen(needed) + 3;
    char *first = malloc(len), *rest = malloc(len), *preload = malloc(len);
    int rc = -1;
    if (first && rest && preload) {
        first[0] = rest[0] = '\0';
        for (const char *p = old + strspn(old, " :"); *p; p += strspn(p, " :")) {
            size_t n = strcspn(p, " :");
            add_entry(vt_run_is_sanitizer(p, n) ? first : rest, p, n);
            p += n;
        }
        if (!first[0] && needed[0]) add_entry(first, needed, strlen(needed));
        snprintf(preload, len, "%s%s%s%s%s", first, first[0] ? ":" : "", lib, rest[0] ? ":" : "", rest);
        rc = setenv("LD_PRELOAD", preload, 1);
    }
    free(first);
    free(rest);
    free(preload);
    free(less);
    return rc;
}

struct run_plan {
    int needs_link; /* the library's path holds a space or a colon */
    int needs_mark; /* the leak check or a budget: tracing must be proven */
    int needs_copy; /* the suppressions are a pipe or FIFO: 1, 2 when given by the flag */
    int leak_check;
    char sanitizer[256]; /* the sanitizer runtime the program needs, or "" */
    char dir[PATH_MAX], link[PATH_MAX + 32], mark[PATH_MAX + 32], sup[PATH_MAX + 32];
};

/* The private directory: mode 0700 (mkdtemp), in TMPDIR when its path is
 * one LD_PRELOAD can hold, else in /tmp. */
static int make_private_dir(struct run_plan *p) {
    const char *tmp = getenv("TMPDIR");
    if (!tmp || tmp[0] != '/' || strpbrk(tmp, " :") || strlen(tmp) > 200) tmp = "/tmp";
    snprintf(p->dir, sizeof p->dir, "%s/vramtrace-run.XXXXXX", tmp);
    if (mkdtemp(p->dir)) return 0;
    if (strcmp(tmp, "/tmp") == 0) return -1;
    snprintf(p->dir, sizeof p->dir, "/tmp/vramtrace-run.XXXXXX");
    return mkdtemp(p->dir) ? 0 : -1;
}

static void remove_private_dir(struct run_plan *p) {
    if (p->link[0]) unlink(p->link);
    if (p->sup[0]) unlink(p->sup);
    if (p->mark[0]) {
        char v[sizeof p->mark + 16];
        snprintf(v, sizeof v, "%s.verdicts", p->mark);
        unlink(v);
        unlink(p->mark);
    }
    rmdir(p->dir);
}

/* The verdicts the command's processes other than `self` left beside the
 * mark at their exits (tracker/options.h vt_mark_verdict): how many found
 * leaks and how many could not check, and the first few pids of each. */
struct verdicts {
    int leaks, unchecked;
    char leak_pids[128], unchecked_pids[128];
};

static void add_pid(char *list, size_t size, long pid) {
    size_t n = strlen(list);
    if (n + 24 >= size) {
        if (n + 4 < size && strcmp(list + n - 3, "...") != 0) strcat(list, ", ...");
        return;
    }
    snprintf(list + n, size - n, "%s%ld", n ? ", " : "", pid);
}

/* Under an outer `vramtrace run` (its mark was in the environment: a test
 * launcher that wraps its tests in vramtrace run, itself run so in CI),
 * every verdict this run's processes left goes to the outer run's
 * verdicts too, a line a write, as the library writes them: the outer run
 * fails on a leak found here, as on one in any other process of its
 * command. */
static void pass_verdicts_up(const struct run_plan *p, const char *outer) {
    if (!outer || !outer[0] || !p->mark[0]) return;
    char path[sizeof p->mark + 16], up[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s.verdicts", p->mark);
    if (snprintf(up, sizeof up, "%s.verdicts", outer) >= (int)sizeof up) return;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
    if (!f) {
        if (fd >= 0) close(fd);
        return;
    }
    int out = open(up, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0600);
    char what[16];
    long pid;
    while (out >= 0 && fscanf(f, "%15s %ld", what, &pid) == 2) {
        char line[64];
        int n = snprintf(line, sizeof line, "%s %ld\n", what, pid);
        if (n > 0 && (size_t)n < sizeof line && write(out, line, (size_t)n) != n) break;
    }
    if (out >= 0) close(out);
    fclose(f);
}

static void read_verdicts(const struct run_plan *p, pid_t self, struct verdicts *v) {
    memset(v, 0, sizeof *v);
    char path[sizeof p->mark + 16];
    snprintf(path, sizeof path, "%s.verdicts", p->mark);
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
    if (!f) {
        if (fd >= 0) close(fd);
        return;
    }
    char what[16];
    long pid;
    while (fscanf(f, "%15s %ld", what, &pid) == 2) {
        if (pid == (long)self) continue;   /* its own status says it */
        if (strcmp(what, "leaks") == 0) {
            v->leaks++;
            add_pid(v->leak_pids, sizeof v->leak_pids, pid);
        } else if (strcmp(what, "unchecked") == 0) {
            v->unchecked++;
            add_pid(v->unchecked_pids, sizeof v->unchecked_pids, pid);
        }
    }
    fclose(f);
}

/* The leak check's exit status (VRAMTRACE_EXITCODE, checked when given as
 * --exitcode; the library's default when the variable is not valid). */
static int leak_exitcode(void) {
    const char *v = getenv("VRAMTRACE_EXITCODE");
    if (v && vt_option_valid(&vt_option_table[VT_O_EXITCODE], v)) return atoi(v);
    return atoi(vt_option_table[VT_O_EXITCODE].def);
}

static volatile sig_atomic_t child_pid;
/* A job-control stop that reached vramtrace (from the terminal, or passed
 * on): vramtrace stops too once the command has (stop_like). */
static volatile sig_atomic_t stop_asked;

static int is_stop(int sig) { return sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU; }

/* The faults a program's own error makes: the kernel's (si_code > 0)
 * are vramtrace's own, and end it as they would without the handler. */
static int is_fault(int sig) {
    return sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL || sig == SIGABRT;
}

/* A signal sent to vramtrace itself by another process (kill, a batch
 * system's TERM, the dump signal) goes on to the command. One the kernel
 * sent to the whole foreground process group (Ctrl-C, a hangup) has
 * reached the command already and is not sent twice. */
static void pass_on(int sig, siginfo_t *si, void *ctx) {
    (void)ctx;
    if (is_fault(sig) && si->si_code > 0) { /* vramtrace's own fault: its default end */
        signal(sig, SIG_DFL);
        return; /* the faulting instruction runs again, and ends it */
    }
    if (is_stop(sig)) stop_asked = sig;
    if (sig == SIGCONT) stop_asked = 0;
    /* Not one vramtrace sent itself (a SIGPIPE of its own write to a
     * closed stderr names this process: the write fails, and that is all). */
    if (child_pid > 0 && si->si_code <= 0 && si->si_pid != child_pid && si->si_pid != getpid()) {
        /* A TERM goes on with its sender's pid, which the library says
         * in the exit report ("ended by SIGTERM from pid 4242
         * (slurmstepd)"), not vramtrace's. */
        union sigval v = {.sival_int = si->si_pid};
        if (sig != SIGTERM || si->si_pid <= 0 || sigqueue(child_pid, sig, v) != 0) kill(child_pid, sig);
    }
}

/* vramtrace stops as the command stops, when a job-control stop reached
 * them both (Ctrl-Z, or one sent to vramtrace and passed on): when
 * waitpid then says the command stopped, vramtrace takes the same
 * signal's default action itself, so that the shell sees the job stop; or
 * not where the kernel discards a stop (an orphaned process group), as it
 * did the command's. A command that handles the stop and goes on leaves
 * vramtrace running too (it stopped itself at once, and stayed stopped
 * after the command had ended); a command stopped by its own pid alone
 * (kill -STOP) stops only itself, so that a SIGCONT to that pid finds
 * vramtrace still waiting (it stopped itself then too, for good). A
 * SIGCONT goes on to the command by pass_on. (vramtrace run has one
 * thread.) */
static void stop_like(int sig) {
    if (sig == SIGSTOP) {
        raise(SIGSTOP);
        return;
    }
    struct sigaction dfl, mine;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigset_t one, old;
    sigemptyset(&one);
    sigaddset(&one, sig);
    sigprocmask(SIG_BLOCK, &one, &old);
    sigaction(sig, &dfl, &mine);
    raise(sig);                              /* pending while blocked */
    sigprocmask(SIG_UNBLOCK, &one, NULL);    /* its default action now */
    sigaction(sig, &mine, NULL);
    sigprocmask(SIG_SETMASK, &old, NULL);
}

/* Every signal another process may send that would otherwise end or stop
 * vramtrace and leave the command running (the real-time ones are added
 * by number): all but those the kernel keeps for itself or for a
 * debugger, and SIGCHLD. */
static const int passed_signals[] = {SIGHUP,  SIGINT,  SIGQUIT, SIGTERM,   SIGUSR1,   SIGUSR2, SIGALRM, SIGWINCH,
                                     SIGURG,  SIGPWR,  SIGPROF, SIGCONT,   SIGTSTP,   SIGTTIN, SIGTTOU, SIGPIPE,
                                     SIGXCPU, SIGXFSZ, SIGSYS,  SIGSTKFLT, SIGVTALRM, SIGABRT, SIGSEGV, SIGBUS,
                                     SIGFPE,  SIGILL};
#define NPASSED (sizeof passed_signals / sizeof passed_signals[0])

/* The i-th signal passed on: the list's, then SIGRTMIN..SIGRTMAX; 0 past
 * the last. */
static int passed(size_t i) {
    if (i < NPASSED) return passed_signals[i];
    int rt = SIGRTMIN + (int)(i - NPASSED);
    return rt <= SIGRTMAX ? rt : 0;
}

/* End as the child ended: its exit status, or its signal, without a core
 * of this process. The kernel marks a status "core dumped" only where the
 * dying process's own core was written: a second core would take the
 * command's place where the core file's name holds no pid (core_pattern
 * "core"), and a core_pattern pipe (systemd-coredump, apport), which
 * RLIMIT_CORE does not stop, would record vramtrace as having crashed.
 * So the mark is lost, and said in one line where the command dumped
 * core. */
static int end_like(int status, const char *cmd, pid_t pid) {
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        if (WCOREDUMP(status)) {
            char safe[256];
            fprintf(stderr, "vramtrace run: %s (pid %d) dumped core; vramtrace run ends by the same signal without a "
                            "core of its own, so its status does not say so\n",
                    vt_display(cmd, safe, sizeof safe), (int)pid);
        }
        prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
        struct rlimit none = {0, 0};
        setrlimit(RLIMIT_CORE, &none);
        signal(sig, SIG_DFL);
        sigset_t one;
        sigemptyset(&one);
        sigaddset(&one, sig);
        sigprocmask(SIG_UNBLOCK, &one, NULL);
        raise(sig);
        return 128 + sig;
    }
    return 125;
}

/* Whether the suppressions at path (called `name`) are a file the
 * library would refuse, said in one line with the library's own words
 * (common/suppfile.h): the value of --suppressions is then refused. */
static int refused_suppressions(const char *path, const char *name) {
    char **pat, err[1024], safe[1024];
    size_t n;
    if (vt_supp_read(path, name, &pat, &n, err, sizeof err) == 0) {
        vt_supp_free(pat, n);
        return 0;
    }
    fprintf(stderr, "vramtrace run: --suppressions refused: %s\n", vt_display(err, safe, sizeof safe));
    return 1;
}

/* Run the command as a child (see the file's opening comment). Returns
 * the command's exit status, 125 when vramtrace could not prepare the run
 * or the command ran untraced and exited 0, 126/127 when it could not be
 * run. */
static int run_as_parent(struct run_plan *p, const char *lib, char **cmd) {
    if (make_private_dir(p) != 0) {
        fprintf(stderr, "vramtrace run: cannot make a private folder %s: %s\n", p->dir, strerror(errno));
        return 125;
    }
    p->link[0] = p->mark[0] = p->sup[0] = '\0';
    if (p->needs_copy) {
        /* Every process reads the pipe's text from a private file: the
         * variable's value read once. Nothing read leaves it as it was
         * (the library says so), or refuses the flag. */
        const char *pipe = getenv("VRAMTRACE_SUPPRESSIONS"), *why = NULL;
        snprintf(p->sup, sizeof p->sup, "%s/suppressions", p->dir);
        if (vt_run_copy_pipe(pipe, p->sup, &why) == 0) {
            setenv("VRAMTRACE_SUPPRESSIONS", p->sup, 1);
            if (p->needs_copy == 2 && refused_suppressions(p->sup, pipe)) {
                remove_private_dir(p);
                return 2;
            }
        } else {
            p->sup[0] = '\0';
            if (p->needs_copy == 2) {
                char safe[256];
                fprintf(stderr, "vramtrace run: --suppressions takes a readable file, not '%s': %s\n",
                        vt_display(pipe, safe, sizeof safe), why ? why : strerror(errno));
                remove_private_dir(p);
                return 2;
            }
        }
    }
    const char *preload = lib;
    if (p->needs_link) {
        snprintf(p->link, sizeof p->link, "%s/libvramtrace.so", p->dir);
        if (symlink(lib, p->link) != 0) {
            fprintf(stderr, "vramtrace run: cannot link %s from %s: %s\n", lib, p->dir, strerror(errno));
            p->link[0] = '\0';
            remove_private_dir(p);
            return 125;
        }
        preload = p->link;
    }
    char outer[PATH_MAX] = "";
    if (p->needs_mark) {
        const char *was = getenv("VRAMTRACE_MARK");
        if (was) snprintf(outer, sizeof outer, "%s", was);
        snprintf(p->mark, sizeof p->mark, "%s/loaded", p->dir);
        setenv("VRAMTRACE_MARK", p->mark, 1);
    }
    int ends[2];
    if (set_preload(preload, cmd[0], p->sanitizer, sizeof p->sanitizer) != 0 || pipe2(ends, O_CLOEXEC) != 0) {
        fprintf(stderr, "vramtrace run: %s\n", strerror(errno));
        remove_private_dir(p);
        return 125;
    }
    /* The signals wait until the handlers are in place; the child gets
     * the mask and the dispositions vramtrace was started with. */
    sigset_t all, old;
    sigemptyset(&all);
    for (size_t k = 0; passed(k); k++) sigaddset(&all, passed(k));
    sigprocmask(SIG_BLOCK, &all, &old);
    /* Children are waited for even when vramtrace was started with SIGCHLD
     * ignored; the command gets the disposition it would have had. */
    struct sigaction dfl, chld;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGCHLD, &dfl, &chld);
    pid_t pid = fork();
    if (pid == 0) {
        close(ends[0]);
        sigaction(SIGCHLD, &chld, NULL);
        sigprocmask(SIG_SETMASK, &old, NULL);
        execvp(cmd[0], cmd);
        int e = errno;
        ssize_t w = write(ends[1], &e, sizeof e);
        (void)w;
        _exit(127);
    }
    int fork_errno = errno;
    close(ends[1]);
    if (pid < 0) {
        sigprocmask(SIG_SETMASK, &old, NULL);
        close(ends[0]);
        remove_private_dir(p);
        fprintf(stderr, "vramtrace run: cannot start %s: %s\n", cmd[0], strerror(fork_errno));
        return 125;
    }
    child_pid = pid;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = pass_on;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    for (size_t k = 0; passed(k); k++) sigaction(passed(k), &sa, NULL);
    sigprocmask(SIG_SETMASK, &old, NULL);

    int exec_errno = 0;
    ssize_t got;
    while ((got = read(ends[0], &exec_errno, sizeof exec_errno)) < 0 && errno == EINTR) {
    }
    close(ends[0]);
    int status = 0;
    for (;;) {
        if (waitpid(pid, &status, WUNTRACED) < 0) {
            if (errno == EINTR) continue;
            break;
        }
        if (!WIFSTOPPED(status)) break;
        int sig = stop_asked;
        if (sig) {
            stop_asked = 0;
            stop_like(WSTOPSIG(status) == SIGSTOP ? SIGSTOP : sig);
        }
    }
    struct stat st;
    int traced = p->needs_mark && lstat(p->mark, &st) == 0;
    struct verdicts v = {0};
    if (p->needs_mark) {
        read_verdicts(p, pid, &v);
        pass_verdicts_up(p, outer);
    }
    remove_private_dir(p);
    if (got == (ssize_t)sizeof exec_errno) {
        fprintf(stderr, "vramtrace run: cannot run %s: %s\n", cmd[0], strerror(exec_errno));
        return exec_errno == ENOENT ? 127 : 126;
    }
    if (p->needs_mark && !traced) {
        const char *what = p->leak_check ? "no leak check was made" : "no budget applied";
        /* A sanitizer's runtime that refused to start where it was (the
         * program's own, not found by its name): the fix is a path. */
        if (p->sanitizer[0])
            fprintf(stderr, "vramtrace run: %s ran untraced (libvramtrace.so never loaded into it: it is built with "
                            "a sanitizer, whose runtime %s must come first in the initial library list; preload it "
                            "by its path, LD_PRELOAD=/path/to/%s vramtrace run ...); %s\n",
                    cmd[0], p->sanitizer, p->sanitizer, what);
        else
            fprintf(stderr, "vramtrace run: %s ran untraced (libvramtrace.so never loaded into it: a static or "
                            "set-user-ID program?); %s\n",
                    cmd[0], what);
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return 125;
    }
    /* A leak in another process of the command (a test runner's worker, a
     * child it forked or started) fails the run as one in the command
     * does: the process's own status went to its parent, which need not
     * pass it on. A status of the command's own that is already a failure
     * stays, and then nothing more is said (`sh -c PROG` passes PROG's
     * status on: the reports above say the rest). */
    int passed = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    char safe[256];
    if (passed && v.leaks) {
        int code = leak_exitcode();
        fprintf(stderr, "vramtrace run: the leak check found GPU memory leaks in %d other process%s of %s (pid %s); "
                        "exit status %d\n",
                v.leaks, v.leaks == 1 ? "" : "es", vt_display(cmd[0], safe, sizeof safe), v.leak_pids, code);
        return code;
    }
    if (passed && v.unchecked && p->leak_check) {
        fprintf(stderr, "vramtrace run: the leak check could not run in %d other process%s of %s (pid %s); "
                        "exit status 125\n",
                v.unchecked, v.unchecked == 1 ? "" : "es", vt_display(cmd[0], safe, sizeof safe), v.unchecked_pids);
        return 125;
    }
    return end_like(status, cmd[0], pid);
}

/* `--tensors`: backend:cudaMallocAsync in var (PYTORCH_CUDA_ALLOC_CONF or
 * PYTORCH_ALLOC_CONF), in place of any backend the program set, its other
 * settings kept in their order; taken from `other` (the other name) when
 * var is unset, since PyTorch reads only one of them. */
static int set_async_backend(const char *var, const char *other) {
    const char *old = getenv(var);
    if (!old) old = getenv(other);
    size_t len = (old ? strlen(old) : 0) + 32;
    char *v = malloc(len), *copy = strdup(old ? old : "");
    if (!v || !copy) {
        free(v);
        free(copy);
        return -1;
    }
    snprintf(v, len, "backend:cudaMallocAsync");
    char *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        const char *k = tok + strspn(tok, " ");
        if (!*k || strncmp(k, "backend", 7) == 0) continue;
        strcat(v, ",");
        strcat(v, tok);
    }
    int rc = setenv(var, v, 1);
    free(v);
    free(copy);
    return rc;
}

/* What a value of option d must look like, for the message that refuses
 * another. */
static const char *takes(const struct vt_option_desc *d, char *buf, size_t size) {
    switch (d->type) {
    case VT_OPT_NUMBER:
        if (d->lo == 0 && d->hi == 1) snprintf(buf, size, "0 or 1 (true/false, yes/no, on/off)");
        else snprintf(buf, size, "a number from %ld to %ld", d->lo, d->hi);
        break;
    case VT_OPT_SIZE: snprintf(buf, size, "a size such as 24G or 512M"); break;
    case VT_OPT_SIGNAL: snprintf(buf, size, "a signal vramtrace can use (a number or a name such as USR1)"); break;
    case VT_OPT_TEXT: snprintf(buf, size, "a path or a word that is not empty"); break;
    default: snprintf(buf, size, "one of %s", d->choices ? d->choices : "its values"); break;
    }
    return buf;
}

/* The table's option whose `run` flag `a` is, or NULL. A flag the table
 * writes "--NAME[=CHOICE]" is "--NAME" (*value NULL) or "--NAME=CHOICE"
 * (*value CHOICE); any other flag is itself (*value NULL). */
static const struct vt_option_desc *flag_of(const char *a, const char **value) {
    *value = NULL;
    for (int k = 0; k < VT_O_COUNT; k++) {
        const char *flag = vt_option_table[k].flag, *opt = flag ? strstr(flag, "[=") : NULL;
        if (!flag) continue;
        if (!opt) {
            if (strcmp(a, flag) == 0) return &vt_option_table[k];
            continue;
        }
        size_t n = (size_t)(opt - flag), cn = strcspn(opt + 2, "]");
        if (strncmp(a, flag, n) != 0) continue;
        if (a[n] == '\0') return &vt_option_table[k];
        if (a[n] == '=' && strlen(a + n + 1) == cn && strncmp(a + n + 1, opt + 2, cn) == 0) {
            *value = a + n + 1;
            return &vt_option_table[k];
        }
    }
    return NULL;
}

/* var (PYTORCH_CUDA_ALLOC_CONF or PYTORCH_ALLOC_CONF) without a setting
 * backend:cudaMallocAsync, its other settings kept in their order (unset
 * when none is left). 1 when there was one, else 0. */
static int without_async_backend(const char *var) {
    const char *old = getenv(var);
    if (!old || !strstr(old, "cudaMallocAsync")) return 0;
    char *v = malloc(strlen(old) + 1), *copy = strdup(old);
    int found = 0;
    if (!v || !copy) {
        free(v);
        free(copy);
        return 0;
    }
    v[0] = '\0';
    char *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        const char *k = tok + strspn(tok, " ");
        if (strncmp(k, "backend", 7) == 0 && strstr(k, "cudaMallocAsync")) {
            found = 1;
            continue;
        }
        if (v[0]) strcat(v, ",");
        strcat(v, tok);
    }
    if (found && v[0]) setenv(var, v, 1);
    else if (found) unsetenv(var);
    free(v);
    free(copy);
    return found;
}

/* --tensors: PyTorch's allocator in both of its settings variables becomes
 * backend:cudaMallocAsync, each tensor one live allocation; --tensors=nocache
 * (nocache 1) turns PyTorch's caching off instead, and, as --tensors takes
 * the place of the program's backend, takes the place of a
 * backend:cudaMallocAsync in the environment, which PyTorch would keep
 * (it reads PYTORCH_NO_CUDA_MEMORY_CACHING only for its own allocator),
 * after one line. 0, or -1 after a message. */
static int tensors(int nocache) {
    if (nocache) {
        setenv("PYTORCH_NO_CUDA_MEMORY_CACHING", "1", 1);
        int in_cuda = without_async_backend("PYTORCH_CUDA_ALLOC_CONF");
        int in_alloc = without_async_backend("PYTORCH_ALLOC_CONF");
        if (in_cuda || in_alloc)
            fprintf(stderr, "vramtrace run: --tensors=nocache: backend:cudaMallocAsync left out of %s%s%s (PyTorch "
                            "ignores PYTORCH_NO_CUDA_MEMORY_CACHING under it): one cudaMalloc per tensor\n",
                    in_cuda ? "PYTORCH_CUDA_ALLOC_CONF" : "", in_cuda && in_alloc ? " and " : "",
                    in_alloc ? "PYTORCH_ALLOC_CONF" : "");
        return 0;
    }
    /* Both from the environment as it was: the second reads the first's old value. */
    char *cuda = getenv("PYTORCH_CUDA_ALLOC_CONF") ? strdup(getenv("PYTORCH_CUDA_ALLOC_CONF")) : NULL;
    int rc = set_async_backend("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF");
    if (cuda) setenv("PYTORCH_CUDA_ALLOC_CONF", cuda, 1);
    free(cuda);
    if (rc != 0 || set_async_backend("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF") != 0) return -1;
    return 0;
}

/* v (relative) under the working folder into out, a '%' of the folder's
 * written "%%" where v is a pattern (%p...); 0 when the folder cannot be
 * read or the whole would not fit. */
static int absolute(const char *v, int pattern, char *out, size_t size) {
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd) || cwd[0] != '/') return 0;
    size_t k = 0;
    for (const char *c = cwd; *c; c++) {
        if (k + 3 >= size) return 0;
        if (pattern && *c == '%') out[k++] = '%';
        out[k++] = *c;
    }
    if (k && out[k - 1] != '/') out[k++] = '/';
    size_t n = strlen(v);
    if (k + n >= size) return 0;
    memcpy(out + k, v, n + 1);
    return 1;
}

/* Whether patterns a and b name one file: the same text, or the same
 * last component in one folder (by its identity, when both folders
 * exist: "./x" and "x"). */
static int one_file(const char *a, const char *b) {
    if (strcmp(a, b) == 0) return 1;
    const char *sa = strrchr(a, '/'), *sb = strrchr(b, '/');
    if (strcmp(sa ? sa + 1 : a, sb ? sb + 1 : b) != 0) return 0;
    char da[PATH_MAX], db[PATH_MAX];
    struct stat x, y;
    snprintf(da, sizeof da, "%.*s/", sa ? (int)(sa - a) : 1, sa ? a : ".");
    snprintf(db, sizeof db, "%.*s/", sb ? (int)(sb - b) : 1, sb ? b : ".");
    return stat(da, &x) == 0 && stat(db, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

/* The report and the dump given one file (--report X --out X, or one of
 * them by flag and the other in the environment): the report would be
 * appended to the dump, and the out-of-memory dump renamed over the
 * post-mortem. Refused with one line; 0 when they differ. */
static int report_into_dump(void) {
    const char *report = getenv("VRAMTRACE_REPORT"), *out = getenv("VRAMTRACE_OUT");
    if (!report || !out || !*out || strcmp(out, "off") == 0 || !vt_report_to_file(report)) return 0;
    if (!one_file(report, out)) return 0;
    char safe[256];
    fprintf(stderr, "vramtrace run: --report and --out name one file, '%s': the report would go into the dump\n",
            vt_display(out, safe, sizeof safe));
    return 2;
}

/* Whether a "--" comes after argv[i]. */
static int dashes_after(int argc, char **argv, int i) {
    for (int k = i + 1; k < argc; k++)
        if (strcmp(argv[k], "--") == 0) return 1;
    return 0;
}

/* Whether `word`, right after switch d given without '=' and before a
 * "--" of the command line, is the switch's value given after a space
 * (--leak-check yes, --tensors nocache): taken as the command, `yes` ran
 * for ever with "-- CMD" for its arguments. Any other word there is the
 * command, whose own arguments may hold a "--" (python3 x.py -- a). */
static int switch_value(const char *word, const struct vt_option_desc *d) {
    return d == &vt_option_table[VT_O_TENSORS] ? strcmp(word, "nocache") == 0 : vt_option_valid(d, word);
}

/* Refuses switch_value's word with one line; returns the usage status 2. */
static int word_before_dashes(const char *word, const char *sw) {
    char safe[256];
    vt_display(word, safe, sizeof safe);
    fprintf(stderr, "vramtrace run: '%s' before '--': %s takes no value after a space (did you mean %s=%s?)\n",
            safe, sw, sw, safe);
    return 2;
}

int vt_cmd_run(int argc, char **argv) {
    int i = 1, named = 0, sup_flag = 0, tensors_as = 0;
    /* The last flag when it was a switch without '=' (for word_before_dashes). */
    const char *sw = NULL;
    const struct vt_option_desc *swd = NULL;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) { i++; break; }
        /* Without a "--", the first word that is not a flag is the command. */
        if (a[0] != '-') {
            if (sw && switch_value(a, swd) && dashes_after(argc, argv, i)) return word_before_dashes(a, sw);
            break;
        }
        sw = NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) { vt_usage(stdout); return 0; }
        const char *value, *given = NULL;
        const struct vt_option_desc *d = flag_of(a, &value);
        /* --out=x.json, --leak-check=0: a value after '=', as GNU tools
         * take it (the flags of a choice, --tensors=nocache, are the
         * table's own). */
        char flag[64];
        const char *eq = strncmp(a, "--", 2) == 0 ? strchr(a, '=') : NULL;
        if (!d && eq && (size_t)(eq - a) < sizeof flag) {
            memcpy(flag, a, (size_t)(eq - a));
            flag[eq - a] = '\0';
            d = flag_of(flag, &value);
            if (d && d != &vt_option_table[VT_O_TENSORS]) {
                a = flag;
                given = eq + 1;
            } else {
                d = NULL;
            }
        }
        if (!d) {
            fprintf(stderr, "vramtrace run: unknown option %s (see vramtrace --help)\n", argv[i]);
            return 2;
        }
        if (d == &vt_option_table[VT_O_TENSORS]) {
            /* Set after the flags: the last of --tensors and --tensors=nocache wins. */
            tensors_as = value ? 2 : 1;
            if (!value) sw = a, swd = d;
            continue;
        }
        if (!d->arg) {
            if (given && !vt_option_valid(d, given)) {
                char what[96];
                fprintf(stderr, "vramtrace run: %s takes %s, not '%s'\n", a, takes(d, what, sizeof what), given);
                return 2;
            }
            setenv(d->name, given ? given : "1", 1);
            if (!given) sw = a, swd = d;
            continue;
        }
        /* `--out -- prog` forgot the value: "--" is the end of the flags,
         * never a value (it was taken as a path, and prog run without the
         * flag meant). */
        if (!given && (i + 1 >= argc || strcmp(argv[i + 1], "--") == 0)) {
            fprintf(stderr, "vramtrace run: %s needs a value\n", a);
            return 2;
        }
        const char *v = given ? given : argv[++i];
        /* A value the library would warn about and ignore is refused here. */
        if (!vt_option_valid(d, v)) {
            char what[96];
            if (strcmp(v, "-") == 0) /* --out or --report (vt_option_valid) */
                snprintf(what, sizeof what, "%s", d == &vt_option_table[VT_O_REPORT]
                                                      ? "stderr, stdout, off or a file ('-' names none: stdout)"
                                                      : "a path or off ('-' names none: a dump goes to a file)");
            else
                takes(d, what, sizeof what);
            fprintf(stderr, "vramtrace run: %s takes %s, not '%s'\n", a, what, v);
            return 2;
        }
        /* A suppressions file the library cannot read would make the check
         * run without it (a warning, then leaks it meant to suppress). */
        if (d == &vt_option_table[VT_O_SUPPRESSIONS] && *v) {
            struct stat st;
            const char *why = NULL;
            if (stat(v, &st) != 0) why = strerror(errno);
            else if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode)) why = "not a regular file, a pipe or a FIFO";
            else if (access(v, R_OK) != 0) why = strerror(errno);
            if (why) {
                char safe[256];
                fprintf(stderr, "vramtrace run: %s takes a readable file, not '%s': %s\n", a,
                        vt_display(v, safe, sizeof safe), why);
                return 2;
            }
            /* Nor one it would refuse for a line (a typo, an ASan rule):
             * every process would warn and check without it. A pipe is
             * read once, later, and its copy checked then. */
            if (S_ISREG(st.st_mode) && refused_suppressions(v, v)) return 2;
        }
        /* A relative path made absolute here, from vramtrace's folder: the
         * library takes it from the folder each process starts in, and a
         * child the command starts after a chdir() starts elsewhere. */
        char whole[PATH_MAX];
        int pattern = d == &vt_option_table[VT_O_OUT] || d == &vt_option_table[VT_O_REPORT];
        if ((pattern || d == &vt_option_table[VT_O_SUPPRESSIONS]) && *v && v[0] != '/' &&
            !(d == &vt_option_table[VT_O_OUT] && strcmp(v, "off") == 0) &&
            !(d == &vt_option_table[VT_O_REPORT] && !vt_report_to_file(v)) &&
            absolute(v, pattern, whole, sizeof whole))
            v = whole;
        setenv(d->name, v, 1);
        if (pattern) named = 1;
        if (d == &vt_option_table[VT_O_SUPPRESSIONS]) sup_flag = 1;
    }
    if (named && report_into_dump()) return 2;
    if (tensors_as && tensors(tensors_as == 2) != 0) return 127;
    if (i >= argc) {
        fprintf(stderr, "vramtrace run: no command given (vramtrace run -- CMD [ARG...])\n");
        return 2;
    }
    char lib[PATH_MAX];
    if (find_library(lib, sizeof lib) != 0) {
        fprintf(stderr, "vramtrace run: cannot find libvramtrace.so next to this program or in %s\n",
                VT_LIBDIR);
        return 127;
    }
    set_pythonpath();
    const char *leak = getenv("VRAMTRACE_LEAK_CHECK"), *limit = getenv("VRAMTRACE_LIMIT");
    struct run_plan plan = {
        .needs_link = strpbrk(lib, " :") != NULL,
        .needs_mark = vt_leak_check_wanted(leak) || (limit && *limit),
        .leak_check = vt_leak_check_wanted(leak),
    };
    const char *sup = getenv("VRAMTRACE_SUPPRESSIONS");
    struct stat st;
    if (sup && *sup && stat(sup, &st) == 0 && S_ISFIFO(st.st_mode)) plan.needs_copy = sup_flag ? 2 : 1;
    if (!plan.needs_link && !plan.needs_mark && !plan.needs_copy) {
        char needed[256];
        if (set_preload(lib, argv[i], needed, sizeof needed) != 0) return 127;
        execvp(argv[i], argv + i);
        fprintf(stderr, "vramtrace run: cannot run %s: %s\n", argv[i], strerror(errno));
        return errno == ENOENT ? 127 : 126;
    }
    return run_as_parent(&plan, lib, argv + i);
}
