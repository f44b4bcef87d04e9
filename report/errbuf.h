/* errbuf.h -- a report meant for stderr, written in whole lines (see
 * errbuf.c). */
#ifndef VT_ERRBUF_H
#define VT_ERRBUF_H

#include <stdio.h>

struct vt_errbuf {
    FILE *f;
    int fd;      /* 2, or 1 for a report to stdout */
    char *text;
    size_t len, cap;
    int flushed; /* the program's own stream (stderr, stdout) flushed before the first write */
    int broke;   /* that flush met a pipe with no reader: the program's own
                    write would have raised SIGPIPE (the caller raises it
                    once SIGPIPE is the program's again) */
    int stuck;   /* descriptor 2 took nothing for 10 s, or failed: the rest is dropped */
};

/* The stream to print to instead of stderr (b must outlive it), or
 * stderr itself when none can be made. */
FILE *vt_errbuf_open(struct vt_errbuf *b);

/* The same for descriptor fd (1: VRAMTRACE_REPORT=stdout), or NULL
 * when none can be made. */
FILE *vt_errbuf_open_fd(struct vt_errbuf *b, int fd);

/* Write the rest of what was printed to its descriptor and free the
 * buffer. Nothing when vt_errbuf_open gave stderr. */
void vt_errbuf_close(struct vt_errbuf *b);

#endif
