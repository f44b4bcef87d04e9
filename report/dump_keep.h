/* dump_keep.h -- a dump another process left at a name this one writes
 * is kept under its writer's pid (see dump_keep.c). */
#ifndef VT_DUMP_KEEP_H
#define VT_DUMP_KEEP_H

#include <sys/stat.h>

/* What became of the dump a new one replaced (vt_dump_keep_prev): kept
 * under `name` (in the dump's folder), or lost (no free name for it), and
 * whose it was, why it had been written. self, set by the caller: this
 * process's identity as its dumps' first bytes hold it (output.c), which
 * a dump must have to be replaced as this image's own. */
struct vt_kept {
    int kept, lost;
    char name[256];
    int pid;
    char reason[16];
    const char *self;
};

/* outfile.h's vt_prev function, arg a struct vt_kept: when the file at
 * `name` in dirfd is a vramtrace dump of this user that is not this
 * image's own at base (placed by it at base, and saying this process),
 * rename it to base with ".pid" and its writer's pid before ".json"
 * (`vt.json` -> `vt.pid1234.json`; ".pid1234.k" when that is taken, up
 * to 1,000; the part before cut to fit), never over another file, and
 * return 1; else 0 (it is replaced). */
int vt_dump_keep_prev(int dirfd, const char *name, const char *base, void *arg);

/* Where a dump meant for path goes when path holds a regular file of
 * this user that is neither empty nor a vramtrace dump (notes.txt, the
 * program itself), or a regular file of another user (a dump another
 * user's job left in a shared folder): that file is left as it is, and
 * the dump goes beside it under base with this process's pid
 * (".pid1234" before ".json", else at the end; ".pid1234.k" when that
 * holds such a file too), into out, with *why ("is not a vramtrace dump", "belongs to
 * another user"). Returns 1 when out was set, 0 when path itself takes
 * the dump, -1 when no name does, -2 when what path holds cannot be told
 * (no descriptor or memory left to open it; errno says which). */
int vt_dump_keep_foreign(const char *path, char *out, size_t size, const char **why);

/* After a dump was placed at path (its identity in *placed, outfile.h's;
 * self as in struct vt_kept): this image's earlier dumps placed at that
 * name that other writers kept aside under this pid (its out-of-memory
 * dump, moved by another process's exit dump) are removed, the new dump
 * being all of them and more (without it the folder held two dumps of one
 * process, which `vramtrace report` counted as two); then the new dump is
 * this image's to replace at that name. A file is removed only when it is
 * certainly such a dump: this image placed it at that very name (not an
 * on-demand dump of its own, placed at its own name) and its first bytes
 * say this process (not another process of the same pid). */
void vt_dump_keep_placed(const char *path, const struct stat *placed, const char *self);

/* In a forked child: nothing is its own yet (its parent's dumps are kept). */
void vt_dump_keep_reset_child(void);

#endif
