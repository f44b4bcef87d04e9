/* errbuf.h -- a report meant for stderr, written in whole lines (see
 * errbuf.c). */
#ifndef VT_ERRBUF_H
#define VT_ERRBUF_H

#include <stdio.h>

struct vt_errbuf {
    FILE *f;
    char *text;
    size_t len, cap;
    int stuck;   /* descriptor 2 took nothing for 10 s, or failed: the rest is dropped */
};

/* The stream to print to instead of stderr (b must outlive it), or
 * stderr itself when none can be made. */
FILE *vt_errbuf_open(struct vt_errbuf *b);

/* Write the rest of what was printed to descriptor 2 and free the
 * buffer. Nothing when vt_errbuf_open gave stderr. */
void vt_errbuf_close(struct vt_errbuf *b);

#endif
