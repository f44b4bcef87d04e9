/* ownstream.c -- writes only while the descriptor is vramtrace's file
 * (ownstream.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ownstream.h"
#include "writing.h"

#define OWN_BUFFER (64 << 10)

int vt_own_begin(struct vt_own *o, int fd) {
    struct vt_fd k;
    if (vt_fd_note(fd, &k) != 0) return -1;
    *o = (struct vt_own){k, 0, 0, 0, NULL};
    return 0;
}

int vt_own_still(struct vt_own *o) {
    if (!o->taken && vt_fd_mine(&o->k)) {
        o->unchecked = 0;
        return 1;
    }
    if (!o->taken) o->lost = o->unchecked;
    o->taken = 1;
    return 0;
}

static ssize_t own_write(void *cookie, const char *buf, size_t n) {
    if (vt_writing_abandoned()) return vt_writing_refused();
    struct vt_own *o = cookie;
    if (!vt_own_still(o)) {
        errno = EBADF;
        return -1;
    }
    size_t done = 0;
    while (done < n) {
        ssize_t w = write(o->k.fd, buf + done, n - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        done += (size_t)w;
        o->unchecked += (uint64_t)w;
        vt_writing_count((uint64_t)w);
    }
    return done ? (ssize_t)done : -1;
}

static int own_close(void *cookie) {
    struct vt_own *o = cookie;
    free(o->buffer);
    o->buffer = NULL;
    return vt_own_still(o) ? close(o->k.fd) : 0;
}

FILE *vt_own_stream(struct vt_own *o) {
    FILE *f = fopencookie(o, "w", (cookie_io_functions_t){.write = own_write, .close = own_close});
    /* The C library sizes a buffer it makes itself by BUFSIZ: one given. */
    o->buffer = f ? malloc(OWN_BUFFER) : NULL;
    if (o->buffer) setvbuf(f, o->buffer, _IOFBF, OWN_BUFFER);
    return f;
}
