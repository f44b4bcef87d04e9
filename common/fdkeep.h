/* fdkeep.h -- the descriptors the library keeps open in the program (the
 * dump signal's pipe, the live segment's file).
 *
 * The program owns the descriptor table: a daemon closes every descriptor
 * from 3 up (closefrom) and opens its own files, which get the lowest
 * numbers free; a program started with stdin closed gets its first open
 * at 0. So a kept descriptor is moved above the numbers a program uses,
 * and it is used, or closed in a forked child, only while it is still the
 * file the library opened. */
#ifndef VT_FDKEEP_H
#define VT_FDKEEP_H

#include <sys/types.h>

struct vt_fd {
    int fd;         /* -1: none */
    dev_t dev;
    ino_t ino;
};

#define VT_FD_NONE {-1, 0, 0}

/* Keep fd: moved to a number of at least VT_FD_LOW where the descriptor
 * limit allows (else the lowest free from 3 up, never 0, 1 or 2), close on
 * exec, and its file's identity noted in *k. 0, or -1 with fd closed and
 * k->fd -1. */
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

/* 1 when k->fd is still the file kept (fstat: safe in a signal handler). */
int vt_fd_mine(const struct vt_fd *k);

/* Close k->fd if it is still the file kept (another file at that number
 * is the program's); k->fd -1 after. */
void vt_fd_drop(struct vt_fd *k);

/* The lowest number a kept descriptor is moved to: above what programs
 * use (their first files, a shell's 10 and up), below the usual soft
 * limit of 1024. */
#define VT_FD_LOW 700

#endif
