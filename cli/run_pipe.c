/* run_pipe.c -- a suppressions pipe read once for every process of a
 * `vramtrace run` command.
 *
 * A shell's `<(...)` is a pipe: the first process that reads it drains
 * it, and every later process of the command (a test runner's workers,
 * a script's second program) found it empty and checked without
 * suppressions, another verdict for the same leaks. vramtrace run reads
 * it once, as the library reads one (common/pipetext.h: until its
 * writer closes it, at most 10 s for each piece), into a private file
 * that every process then reads. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "../common/pipetext.h"

int vt_run_copy_pipe(const char *path, const char *to, const char **why) {
    int in = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (in < 0) return -1;
    size_t len = 0;
    char *text = vt_pipe_text(in, VT_PIPE_MAX, &len, why);
    int e = errno;
    close(in);
    errno = e;
    int out = *why ? -1 : open(to, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    int rc = -1;
    if (out >= 0) {
        /* Past the file size limit (ulimit -f) the write fails with EFBIG
         * and raises SIGXFSZ, whose default killed vramtrace run before
         * the program ran: blocked, and taken off if it came. */
        sigset_t xfsz, was, pending;
        sigemptyset(&xfsz);
        sigaddset(&xfsz, SIGXFSZ);
        sigprocmask(SIG_BLOCK, &xfsz, &was);
        rc = write(out, text, len) == (ssize_t)len ? 0 : -1;
        e = errno;
        if (sigpending(&pending) == 0 && sigismember(&pending, SIGXFSZ) && !sigismember(&was, SIGXFSZ)) {
            struct timespec now = {0, 0};
            while (sigtimedwait(&xfsz, NULL, &now) < 0 && errno == EINTR) {
            }
        }
        sigprocmask(SIG_SETMASK, &was, NULL);
        errno = e;
        if (close(out) != 0) rc = -1;
        if (rc != 0) {
            e = errno;
            unlink(to);
            errno = e;
        }
    }
    free(text);
    return rc;
}
