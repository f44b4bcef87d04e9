/* procself.h -- where this process's own /proc entries are read.
 *
 * Once the main thread (the thread-group leader) has ended by pthread_exit,
 * it is a zombie until the process ends, and /proc/self is still its
 * folder: maps and cmdline read empty there, map_files, exe and auxv are
 * gone, and every report was "?? 0x..." without a module or a command.
 * /proc/TID of a thread that lives has them whole. */
#ifndef VT_PROCSELF_H
#define VT_PROCSELF_H

#include <sys/types.h>

/* Room for what vt_proc_self writes. */
#define VT_PROC_SELF_MAX 32

/* Into dir (VT_PROC_SELF_MAX bytes): "/proc/self" while the main thread
 * lives, else "/proc/TID" of the calling thread, TID as the /proc mounted
 * numbers it (/proc/thread-self's link). Returns dir. */
const char *vt_proc_self(char *dir);

/* The pid whose /proc entries a reader given a number (libdwfl's
 * dwfl_linux_proc_report) is to read: getpid() while the main thread
 * lives, else the calling thread's id. */
pid_t vt_proc_self_pid(void);

#endif
