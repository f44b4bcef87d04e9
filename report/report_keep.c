/* report_keep.c -- the report is appended only to a report log.
 *
 * VRAMTRACE_REPORT names a file the report is appended to, so that the
 * reports of many processes and runs gather in one log. Appended to a
 * file that held something else, it spoilt that file without a word: an
 * earlier run's dump (then no JSON: `vramtrace report` refused it), a
 * source file or notes named by a typo. The dump never replaces such a
 * file (dump_keep.c); the report, likewise, is appended only to a file
 * that is empty or begins as a vramtrace report does, and otherwise goes
 * to stderr after one warning (report/output.c): not beside the file, as
 * the dump goes, where a name like the dump's (`old.4242.json`) would be
 * read as a dump. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/fdkeep.h"
#include "outfile.h"
#include "report_keep.h"

/* Whether text (n bytes, from a file's first byte that is not blank)
 * begins as a report of vramtrace does: a post-mortem's, an exit
 * summary's or a forecast's "vramtrace", a leak report's rule of '=' or
 * its "==PID==" line (after the blank lines a leak report starts with),
 * or the list of suppressions used that a leak report whose leaks were
 * all suppressed begins with. */
static int begins_as_report(const char *p, size_t left) {
    static const char rule[] = "=================================================================\n";
    static const char used[] = "-----------------------------------------------------\nSuppressions used:";
#define STARTS(s) (left >= sizeof s - 1 && memcmp(p, s, sizeof s - 1) == 0)
    /* "vramtrace:" with its colon, as every line the library writes: a
     * file of notes that begins with the word is not a report. */
    if (STARTS("vramtrace:") || STARTS(rule) || STARTS(used)) return 1;
#undef STARTS
    if (left < 3 || p[0] != '=' || p[1] != '=') return 0;
    size_t k = 2;
    while (k < left && p[k] >= '0' && p[k] <= '9') k++;
    return k > 2 && left - k >= 2 && p[k] == '=' && p[k + 1] == '=';
}

/* How many blank bytes a file may begin with: a file of blank lines up
 * to a MiB is as good as empty, a longer one is no report log (it is left
 * as it is), so that the look at each report stays short. */
#define BLANK_MAX (1 << 20)

/* Where the first byte of fd that is not a space, a tab, a CR or a LF
 * lies, read in chunks (blank lines alone, `echo > report.log` or a log
 * emptied with many, are as good as empty: before, only a file of 128
 * bytes or fewer was). -1 when the whole file is blank, -2 when more
 * than its first BLANK_MAX bytes are, -3 when it cannot be read. */
static off_t first_text(int fd) {
    char buf[8192];
    off_t at = 0;
    while (at <= BLANK_MAX) {
        size_t want = BLANK_MAX + 1 - (size_t)at < sizeof buf ? BLANK_MAX + 1 - (size_t)at : sizeof buf;
        ssize_t n = pread(fd, buf, want, at);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return -3;
        if (n == 0) return -1;
        for (ssize_t i = 0; i < n; i++)
            if (buf[i] != '\n' && buf[i] != ' ' && buf[i] != '\t' && buf[i] != '\r') return at + i;
        at += n;
    }
    return -2;
}

int vt_report_keep_appendable(const char *path, const char **why) {
    const char *base;
    int dirfd = vt_file_dir_of(path, &base);
    if (dirfd < 0) return 1; /* the open that follows says why it fails */
    struct stat st;
    int ok = 1;
    if (fstatat(dirfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
        st.st_size > 0) {
        /* A file of this user's it cannot read (mode 0200) was no report
         * of vramtrace's, which are 0600. */
        char head[128];
        ssize_t n = -1;
        off_t at = -3;
        int gone = 0;
        for (int tries = 0; tries < VT_FD_TRIES; tries++) {
            int fd = vt_fd_open(dirfd, base, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, 0);
            struct vt_fd kf;
            gone = fd < 0 && errno == ENOENT; /* removed meanwhile: a new one is made */
            n = -1;
            at = -3;
            if (fd < 0 && errno == EBADF) continue; /* the number taken by the program since the open */
            if (fd < 0 || vt_fd_note(fd, &kf) != 0) break;
            at = first_text(fd);
            if (at >= 0) n = pread(fd, head, sizeof head, at);
            /* Read from the program's file if it took the number meanwhile
             * (a daemon's closefrom and its own open): not used, not
             * closed, and the file read again. */
            if (vt_fd_mine(&kf)) {
                close(fd);
                break;
            }
            n = -1;
            at = -3;
        }
        if (at == -1 || gone || (at >= 0 && n == 0)) {
            /* blank lines alone, or emptied or removed meanwhile */
        } else if (n <= 0 || !begins_as_report(head, (size_t)n)) {
            ok = 0;
            /* A dump begins {"format":"vramtrace-dump" (spaced in one a
             * tool rewrote). */
            int dump = n > 0 && head[0] == '{' && memmem(head, (size_t)n, "\"vramtrace-dump\"", 16);
            *why = dump ? "is a vramtrace dump" : "is not a vramtrace report log";
        }
    }
    close(dirfd);
    return ok;
}
