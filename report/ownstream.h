/* ownstream.h -- a stream that writes through a descriptor of vramtrace's
 * only while the descriptor is still the file vramtrace opened.
 *
 * A dump takes from milliseconds to seconds to write. Meanwhile the
 * program may close every descriptor from 3 up and open a file of its own,
 * which takes the lowest number free (a daemon's closefrom in one thread,
 * while another thread's out-of-memory failure writes a dump): the rest of
 * the dump went into the program's file, and the close at the end closed
 * it. Here each write(2) is made only after an fstat of the descriptor
 * finds the file opened (its device and inode), at most once every 64 KiB
 * of the stream's buffer; once it does not, nothing more is written, the
 * stream is in error, and the descriptor (the program's now) is left open.
 * Between an fstat and its write the program may still take the number:
 * what that write wrote is counted, so that the user can be told. */
#ifndef VT_OWNSTREAM_H
#define VT_OWNSTREAM_H

#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "../common/fdkeep.h"

struct vt_own {
    struct vt_fd k;      /* the descriptor and its file's identity (fdkeep.h) */
    int taken;           /* the descriptor was found another file's */
    uint64_t unchecked;  /* bytes written since the last check that found it the file's */
    uint64_t lost;       /* when taken: bytes that may have gone to the other file */
    char *buffer;        /* the stream's, freed by its fclose */
};

/* o set up for descriptor fd, its file's identity read now: 0, or -1 with
 * errno (fd is left as it is). */
int vt_own_begin(struct vt_own *o, int fd);

/* 1 when o->k.fd is still the file opened; else 0, with o->taken set and
 * o->lost the bytes written since the last check. */
int vt_own_still(struct vt_own *o);

/* A stream that writes to o->k.fd as above, fully buffered in 64 KiB; its
 * fclose closes o->k.fd only when it is still the file opened. NULL with
 * errno when out of memory (fd then still open). o must outlive the
 * stream. */
FILE *vt_own_stream(struct vt_own *o);

#endif
