/* suppfile.c -- a suppressions file's patterns (suppfile.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fdkeep.h"
#include "pipetext.h"
#include "suppfile.h"

/* A pipe's or FIFO's whole text (pipetext.h) as a stream; NULL with *why
 * when none came. fd is closed. */
static FILE *read_pipe(int fd, const char **why) {
    size_t len = 0;
    char *text = vt_pipe_text(fd, VT_PIPE_MAX, &len, why);
    close(fd);
    if (!text) return NULL;
    FILE *f = fmemopen(NULL, len + 1, "w+");
    if (f && (fwrite(text, 1, len, f) != len || fseek(f, 0, SEEK_SET) != 0)) {
        fclose(f);
        f = NULL;
    }
    free(text);
    if (!f) *why = "out of memory";
    return f;
}

/* The file at path as a stream from memory, or NULL with *why. Opened
 * without blocking: a FIFO with no writer there would hold the process at
 * exit forever. A regular file is read whole at once and its descriptor
 * closed only while it is still that file: where the program took the
 * number meanwhile (a daemon's closefrom and its own open, in another
 * thread), what was read is not used, the program's file is left open,
 * and the file is opened again (three times at most). Before, the rules
 * were read through the descriptor line by line, from the program's file
 * once it had the number, and it was closed at the end. */
static FILE *open_rules(const char *path, const char **why) {
    for (int tries = 0; tries < VT_FD_TRIES; tries++) {
        int fd = vt_fd_open(AT_FDCWD, path, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0);
        struct stat st;
        *why = NULL;
        if (fd < 0) {
            *why = strerror(errno);
            if (errno == EBADF) continue; /* the number taken by the program since the open */
            return NULL;
        }
        if (fstat(fd, &st) != 0) {
            *why = strerror(errno); /* closed already: the program's number */
            continue;
        }
        if (S_ISFIFO(st.st_mode)) return read_pipe(fd, why);
        if (!S_ISREG(st.st_mode)) {
            *why = "not a regular file";
            close(fd);
            return NULL;
        }
        FILE *f = vt_fd_fdopen(fd, VT_PIPE_MAX);
        if (f) return f;
        *why = errno == EBADF   ? "the program took the number of its descriptor while it was read"
               : errno == EFBIG ? "more text than any list of patterns"
                                : strerror(errno);
        if (errno != EBADF) return NULL;
    }
    return NULL;
}

void vt_supp_free(char **patterns, size_t n) {
    for (size_t i = 0; patterns && i < n; i++) free(patterns[i]);
    free(patterns);
}

int vt_supp_read(const char *path, const char *name, char ***patterns, size_t *n, char *err, size_t errsize) {
    *patterns = NULL;
    *n = 0;
    if (!name) name = path;
    const char *why = NULL;
    FILE *f = open_rules(path, &why);
    if (!f) {
        snprintf(err, errsize, "cannot read suppressions %s: %s", name, why);
        return -1;
    }
    char **pat = malloc(sizeof *pat);
    size_t npat = 0;
    /* Lines of any length (a C++ name can pass 4 KiB): a line cut at a
     * buffer's end read its rest as a line of its own. */
    char *line = NULL;
    size_t cap = 0;
    int lineno = 0, bad = !pat;
    ssize_t got;
    if (bad) snprintf(err, errsize, "cannot read suppressions %s: out of memory", name);
    while (!bad && (got = getline(&line, &cap, f)) >= 0) {
        lineno++;
        char *p = line;
        /* A UTF-8 byte order mark before the first line (an editor's) is
         * not part of it; a NUL byte would end the pattern early, so that
         * it suppressed more than was written: refused. */
        if (lineno == 1 && strncmp(p, "\xef\xbb\xbf", 3) == 0) p += 3;
        if (memchr(line, '\0', (size_t)got)) {
            snprintf(err, errsize, "%s:%d: a NUL byte in the line", name, lineno);
            bad = 1;
            break;
        }
        while (*p == ' ' || *p == '\t') p++;
        char *e = p + strlen(p);
        while (e > p && (e[-1] == '\n' || e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t')) *--e = '\0';
        if (*p == '\0' || *p == '#') continue;
        if (strncmp(p, "leak:", 5) != 0 || p[5] == '\0') {
            snprintf(err, errsize, "%s:%d: expected leak:PATTERN, got '%.100s'", name, lineno, p);
            bad = 1;
            break;
        }
        char **more = realloc(pat, (npat + 1) * sizeof *pat);
        char *copy = more ? strdup(p + 5) : NULL;
        if (more) pat = more;
        if (!copy) {
            snprintf(err, errsize, "cannot read suppressions %s: out of memory", name);
            bad = 1;
            break;
        }
        pat[npat++] = copy;
    }
    free(line);
    fclose(f);
    if (bad) {
        vt_supp_free(pat, npat);
        return -1;
    }
    *patterns = pat;
    *n = npat;
    return 0;
}
