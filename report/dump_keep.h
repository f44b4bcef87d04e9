/* dump_keep.h -- a dump another process left at a name this one writes
 * is kept under its writer's pid (see dump_keep.c). */
#ifndef VT_DUMP_KEEP_H
#define VT_DUMP_KEEP_H

#include <sys/stat.h>

/* What became of the dump a new one replaced (vt_dump_keep_prev): kept
 * under `name` (in the dump's folder), or lost (no free name for it), and
 * whose it was, why it had been written. */
struct vt_kept {
    int kept, lost;
    char name[256];
    int pid;
    char reason[16];
};

/* outfile.h's vt_prev function, arg a struct vt_kept: when the file at
 * `name` in dirfd is a vramtrace dump of this user that this image did not
 * place, rename it to base with its writer's pid before ".json" (".pid.k"
 * when that is taken, up to 1,000; the part before cut to fit), never over
 * another file, and return 1; else 0 (it is replaced). */
int vt_dump_keep_prev(int dirfd, const char *name, const char *base, void *arg);

/* Where a dump meant for path goes when path holds a regular file of
 * this user that is neither empty nor a vramtrace dump (notes.txt, the
 * program itself), or a regular file of another user (a dump another
 * user's job left in a shared folder): that file is left as it is, and
 * the dump goes beside it under base with this process's pid (".pid"
 * before ".json", else at the end; ".pid.k" when that holds such a file
 * too), into out, with *why ("is not a vramtrace dump", "belongs to
 * another user"). Returns 1 when out was set, 0 when path itself takes
 * the dump, -1 when no name does. */
int vt_dump_keep_foreign(const char *path, char *out, size_t size, const char **why);

/* After a dump was placed: its identity (outfile.h's *placed), this
 * image's to replace from now on. */
void vt_dump_keep_placed(const struct stat *st);

/* After a dump was placed at path: this image's earlier dumps that other
 * writers of the name kept aside under this pid (its out-of-memory dump,
 * moved by another process's exit dump) are removed, the new dump being
 * all of them and more; without it the folder held two dumps of one
 * process, which `vramtrace report` counted as two. */
void vt_dump_keep_prune(const char *path, const struct stat *placed);

/* In a forked child: nothing is its own yet (its parent's dumps are kept). */
void vt_dump_keep_reset_child(void);

#endif
