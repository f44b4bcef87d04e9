/* dump_keep.h -- a dump another process left at a name this one writes
 * is kept under its writer's pid (see dump_keep.c). */
#ifndef VT_DUMP_KEEP_H
#define VT_DUMP_KEEP_H

#include <limits.h>

/* A dump kept: where it went, whose it was, why it had been written. */
struct vt_kept {
    char path[PATH_MAX];
    int pid;
    char reason[16];
};

/* Before a dump is written at path: when a vramtrace dump that this image
 * did not place is there (a regular file of this user), rename it to add
 * its writer's pid before ".json" (".pid.k" when that is taken), never
 * over another file. Returns 1 with *k filled in, 0 when nothing was
 * there to keep, -1 when it could not be moved (it is then replaced, as
 * before). */
int vt_dump_keep_other(const char *path, struct vt_kept *k);

/* After a dump was placed at path: this image's to replace from now on. */
void vt_dump_keep_placed(const char *path);

/* In a forked child: nothing is its own yet (its parent's dumps are kept). */
void vt_dump_keep_reset_child(void);

#endif
