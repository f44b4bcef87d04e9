/* metrics.h -- `vramtrace metrics`: the exposition (cmd_metrics.c) and the
 * two ways it leaves, a textfile and an HTTP endpoint (metrics_serve.c). */
#ifndef VT_METRICS_H
#define VT_METRICS_H

#include <stddef.h>

struct vt_metrics_opts {
    const char *textfile, *listen;
    long top;         /* call sites per process */
    double interval;  /* seconds between textfile writes */
    int once;         /* one textfile write */
    int om;           /* OpenMetrics rather than the Prometheus text format */
};

/* The exposition of every traced process of this user now, as a malloc'd
 * text of *len bytes (NULL when memory ran out). */
char *vt_metrics_text(const struct vt_metrics_opts *o, size_t *len);

/* DIR/vramtrace.prom, rewritten whole every interval (once with o->once).
 * Returns the command's exit status. */
int vt_metrics_textfile(const struct vt_metrics_opts *o);

/* GET /metrics served on o->listen until SIGINT or SIGTERM. Returns the
 * command's exit status. */
int vt_metrics_listen(const struct vt_metrics_opts *o);

#endif
