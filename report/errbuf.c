/* errbuf.c -- a report meant for stderr, written in whole lines.
 *
 * Names and frames are printed piece by piece (a byte at a time where a
 * name is made safe for a terminal), and stderr is unbuffered: a leak
 * report took 194 writes for 5 lines, and the reports of processes that
 * share a stderr (pytest-xdist workers, `make -j` test runs) came out
 * interleaved inside their lines. LeakSanitizer writes whole lines. Here
 * what is printed is kept in a buffer of its own and written to
 * descriptor 2 (1 for VRAMTRACE_REPORT=stdout) in chunks of whole lines of at most PIPE_BUF bytes each (a
 * longer line alone), which a pipe never interleaves with another
 * writer's; the buffer is written out whenever it holds more than
 * ERRBUF_HIGH bytes, so a report of any size costs at most that. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "errbuf.h"
#include "writing.h"
#include "outfile.h"

#define ERRBUF_HIGH (64 * 1024)

/* The descriptor a report waited for in vain (a pipe nobody reads
 * until the program ends): later reports to the same file are dropped at
 * once, so that the process waits once, not at each out-of-memory error
 * and again at its exit (20 s for two). Another file put at that number
 * is written again. */
static struct {
    int fd; /* -1: none */
    dev_t dev;
    ino_t ino;
} stalled = {-1, 0, 0};
static pthread_mutex_t stalled_lock = PTHREAD_MUTEX_INITIALIZER;

static int is_stalled(int fd) {
    struct stat st;
    pthread_mutex_lock(&stalled_lock);
    int yes = stalled.fd == fd && fstat(fd, &st) == 0 && st.st_dev == stalled.dev && st.st_ino == stalled.ino;
    pthread_mutex_unlock(&stalled_lock);
    return yes;
}

static void note_stalled(int fd) {
    struct stat st;
    if (fstat(fd, &st) != 0) return;
    pthread_mutex_lock(&stalled_lock);
    stalled.fd = fd;
    stalled.dev = st.st_dev;
    stalled.ino = st.st_ino;
    pthread_mutex_unlock(&stalled_lock);
}

/* All of it to the descriptor, waiting for one that is full (a pipe
 * whose reader does not read, blocking or not) 10 s without progress,
 * once (b->stuck, and for the process: is_stalled): then the rest is
 * dropped. */
static void write_all(struct vt_errbuf *b, const char *p, size_t n) {
    if (!b->flushed) {   /* what the program left in its buffer goes first */
        b->flushed = 1;
        if (fflush(b->fd == 1 ? stdout : stderr) == EOF && errno == EPIPE) b->broke = 1;
    }
    if (!b->stuck && is_stalled(b->fd)) b->stuck = 1;
    if (b->stuck) return;
    vt_file_write_waiting(b->fd, p, n, &b->stuck);
    if (b->stuck && errno == ETIMEDOUT) note_stalled(b->fd);
}

/* Write the buffer's whole lines (with `all`, the rest too), keeping a
 * last line not yet ended. */
static void drain(struct vt_errbuf *b, int all) {
    if (b->len == 0) return;
    size_t at = 0;
    while (at < b->len) {
        size_t end = at, limit = b->len - at > PIPE_BUF ? at + PIPE_BUF : b->len;
        for (const char *nl; end < limit && (nl = memchr(b->text + end, '\n', limit - end));)
            end = (size_t)(nl - b->text) + 1;
        if (end == at) {   /* a line longer than PIPE_BUF, or one not ended */
            const char *nl = memchr(b->text + at, '\n', b->len - at);
            if (!nl && !all) break;
            end = nl ? (size_t)(nl - b->text) + 1 : b->len;
        }
        write_all(b, b->text + at, end - at);
        at = end;
    }
    memmove(b->text, b->text + at, b->len - at);
    b->len -= at;
}

static ssize_t cookie_write(void *c, const char *buf, size_t n) {
    if (vt_writing_abandoned()) return vt_writing_refused();
    struct vt_errbuf *b = c;
    if (b->len + n > b->cap) {
        size_t want = b->cap ? b->cap : 4096;
        while (want < b->len + n) want *= 2;
        char *more = realloc(b->text, want);
        if (!more) {   /* no room: what is kept, then this, as they are */
            drain(b, 1);
            write_all(b, buf, n);
            return (ssize_t)n;
        }
        b->text = more;
        b->cap = want;
    }
    memcpy(b->text + b->len, buf, n);
    b->len += n;
    if (b->len > ERRBUF_HIGH) drain(b, 0);
    return (ssize_t)n;
}

static int cookie_close(void *c) {
    struct vt_errbuf *b = c;
    drain(b, 1);
    free(b->text);
    b->text = NULL;
    b->len = b->cap = 0;
    return 0;
}

FILE *vt_errbuf_open_fd(struct vt_errbuf *b, int fd) {
    memset(b, 0, sizeof *b);
    b->fd = fd;
    b->f = fopencookie(b, "w", (cookie_io_functions_t){.write = cookie_write, .close = cookie_close});
    /* Its own FILE buffer only delays: the cookie's is what keeps lines. */
    if (b->f) setvbuf(b->f, NULL, _IOFBF, 4096);
    return b->f;
}

FILE *vt_errbuf_open(struct vt_errbuf *b) {
    FILE *f = vt_errbuf_open_fd(b, 2);
    return f ? f : stderr;
}

void vt_errbuf_close(struct vt_errbuf *b) {
    if (b->f) fclose(b->f);
    b->f = NULL;
}
