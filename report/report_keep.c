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

/* Whether text (n bytes, a file's first) begins as a report of vramtrace
 * does, after the blank lines a leak report starts with: a post-mortem's,
 * an exit summary's or a forecast's "vramtrace", a leak report's rule of
 * '=' or its "==PID==" line, or the list of suppressions used that a leak
 * report whose leaks were all suppressed begins with. */
static int begins_as_report(const char *text, size_t n, int whole) {
    static const char rule[] = "=================================================================\n";
    static const char used[] = "-----------------------------------------------------\nSuppressions used:";
    size_t i = 0;
    while (i < n && (text[i] == '\n' || text[i] == ' ' || text[i] == '\t' || text[i] == '\r')) i++;
    /* Blank lines alone (`echo > report.log`, how a log is often
     * emptied) are as good as empty. */
    if (i == n && whole) return 1;
    const char *p = text + i;
    size_t left = n - i;
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
        int fd = vt_fd_open(dirfd, base, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, 0);
        int gone = fd < 0 && errno == ENOENT; /* removed meanwhile: a new one is made */
        if (fd >= 0) {
            n = pread(fd, head, sizeof head, 0);
            close(fd);
        }
        if (n > 0 && !begins_as_report(head, (size_t)n, (off_t)n >= st.st_size)) {
            ok = 0;
            /* A dump begins {"format":"vramtrace-dump" (spaced in one a
             * tool rewrote). */
            int dump = head[0] == '{' && memmem(head, (size_t)n, "\"vramtrace-dump\"", 16);
            *why = dump ? "is a vramtrace dump" : "is not a vramtrace report log";
        } else if (n < 0 && !gone) {
            ok = 0;
            *why = "is not a vramtrace report log";
        }
    }
    close(dirfd);
    return ok;
}
