/* pipetext.c -- a pipe's or FIFO's whole text, read without blocking. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pipetext.h"

char *vt_pipe_text(int fd, size_t max, size_t *len, const char **why) {
    char *text = NULL;
    size_t n = 0, cap = 0;
    *why = NULL;
    for (;;) {
        if (n + 4096 > cap) {
            char *more = n + 4096 > max ? NULL : realloc(text, cap = cap ? cap * 2 : 8192);
            if (!more) {
                *why = n + 4096 > max ? "more text than any list of patterns" : "out of memory";
                break;
            }
            text = more;
        }
        ssize_t got = read(fd, text + n, cap - n);
        if (got > 0) {
            n += (size_t)got;
            continue;
        }
        if (got == 0) break; /* its writer closed it, or there was none */
        if (errno == EINTR) continue;
        if (errno != EAGAIN) {
            *why = strerror(errno);
            break;
        }
        struct pollfd p = {fd, POLLIN, 0};
        int r = poll(&p, 1, 10000);
        if (r > 0 || (r < 0 && errno == EINTR)) continue;
        *why = r == 0 ? "its writer wrote nothing for 10 s" : strerror(errno);
        break;
    }
    if (!*why && n == 0) *why = "a pipe or FIFO with nothing to read (no writer)";
    if (*why) {
        free(text);
        text = NULL;
        n = 0;
    }
    *len = n;
    return text;
}
