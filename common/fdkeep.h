/* fdkeep.h -- the descriptors the library keeps open in the program (the
 * live segment's file), and those it opens for a
 * while (a dump's files, the report file, the files of /proc it reads).
 *
 * The program owns the descriptor table: a daemon closes every descriptor
 * from 3 up (closefrom) and opens its own files, which get the lowest
 * numbers free; a program started with stdin closed gets its first open
 * at 0. So a kept descriptor is moved above the numbers a program uses,
 * and it is used, or closed in a forked child, only while it is still the
 * file the library opened. */
#ifndef VT_FDKEEP_H
#define VT_FDKEEP_H

#include <stdio.h>
#include <sys/types.h>

struct vt_fd {
    int fd;         /* -1: none */
    dev_t dev;
    ino_t ino;
};

#define VT_FD_NONE {-1, 0, 0}

/* Keep fd: moved to a number of at least VT_FD_LOW where the descriptor
 * limit allows (else the lowest free from 3 up, never 0, 1 or 2), close on
 * exec, and its file's identity noted in *k. 0, or -1 with k->fd -1 and fd
 * closed, unless the program took fd's number meanwhile (fd holds another
 * file than it did at the call: EBADF, fd left open, the program's). */
int vt_fd_keep(int fd, struct vt_fd *k);

/* Grow the process's descriptor table past VT_FD_LOW now, while it has
 * one thread (a dup there, closed at once; the table never shrinks): the
 * kernel grows a table that threads share only after an RCU grace period,
 * so a first kept descriptor in a program that had started threads (every
 * PyTorch program before its first allocation) waited 5 to 20 ms. Four
 * system calls (an O_PATH open of "/", its dup at 716, both closed);
 * nothing where the limit keeps the kept descriptors low anyway; errno
 * unchanged. */
void vt_fd_reserve(void);

/* Open path (openat(dirfd, path, flags | O_CLOEXEC, mode)) for the
 * library's own use for a while: a dump's temporary file and its folder,
 * the report file, the files of /proc and the modules it reads. Opened at
 * a number out of the program's way, as a kept descriptor is (above
 * VT_FD_LOW where the limit allows, else the lowest free from 3 up), and
 * never at 0, 1 or 2, not even for an instant: a program that closed its
 * stdout and stderr and keeps writing to them (a daemon) wrote into the
 * file that took their number, the dump's temporary file among them.
 * Those of 0, 1 and 2 that are closed are held meanwhile by descriptors
 * that refuse every read and write (O_PATH: EBADF, as a closed one's).
 * The descriptor, or -1 with errno: EBADF where the program took the
 * number between the open and the move (a daemon's closefrom and its own
 * open, in another thread), whose descriptor is then left open; the caller
 * may open the path again. */
int vt_fd_open(int dirfd, const char *path, int flags, mode_t mode);

/* The file at path, opened with vt_fd_open and read whole at once, as a
 * stream to read from memory (fclose frees it), or NULL with errno. The
 * descriptor is open only while it is read, and closed only when it is
 * still the file opened: a program may close every descriptor from 3 up
 * and open its own file at that number meanwhile (a daemon's closefrom in
 * another thread); then what was read is not used, the descriptor, the
 * program's now, is left open, and the file is opened again (three times
 * at most, then EBADF). A stream read from the descriptor, as before, read
 * the program's file for as long as the reader took and closed it at the
 * end. */
FILE *vt_fd_fopen(const char *path);

/* The same for a descriptor the library opened (vt_fd_open) and may not
 * open again by its path (the suppressions file, checked to be a regular
 * file after its open): read whole at once, closed if it is still the
 * file it was when first looked at, else left open (the program's) and
 * NULL with EBADF, for the caller to open it again. More than max bytes:
 * NULL with EFBIG. fd is closed on every other failure. */
FILE *vt_fd_fdopen(int fd, size_t max);

/* At most size - 1 bytes of the file at path, read as vt_fd_fopen reads
 * it (the descriptor checked before it is closed, the file read again
 * when the program took its number), into buf, a NUL after them: how
 * many, or -1 with errno. For the small files of /proc (a process's stat,
 * the boot id). */
ssize_t vt_fd_read_small(const char *path, char *buf, size_t size);

/* The same for a descriptor made another way (a pipe's): nothing of 0, 1
 * and 2 taken while vt_fd_std_held's hold lasts. held[3] says which of
 * them were closed and are held now (-1: not held); vt_fd_std_free lets
 * them go, errno unchanged. */
void vt_fd_std_hold(int held[3]);
void vt_fd_std_free(const int held[3]);

/* fd (of the library's) moved out of the program's way as vt_fd_open's
 * are: the descriptor it is at now, close on exec; where it cannot move,
 * fd itself, unless fd is 0, 1 or 2: then it is closed and -1 returned
 * (EMFILE). -1 with EBADF where fd's number holds the program's file by
 * the move (left open). */
int vt_fd_high(int fd);

/* fd's file's identity noted in *k, fd left where it is: 0, or -1 with
 * errno and k->fd -1 (fd left open). */
int vt_fd_note(int fd, struct vt_fd *k);

/* 1 when k->fd is still the file kept (fstat: safe in a signal handler). */
int vt_fd_mine(const struct vt_fd *k);

/* Close k->fd if it is still the file kept (another file at that number
 * is the program's); k->fd -1 after. */
void vt_fd_drop(struct vt_fd *k);

/* The lowest number a kept descriptor is moved to: above what programs
 * use (their first files, a shell's 10 and up), below the usual soft
 * limit of 1024. */
#define VT_FD_LOW 700

/* How many times in all a file is opened, read or written again while the
 * program takes the number of the descriptor that goes to it (a daemon's
 * closefrom and its own open, in another thread, each time); past that,
 * the program is taken to be doing so for ever. */
#define VT_FD_TRIES 3

#endif
