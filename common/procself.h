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

/* /proc/PID/stat (pid > 0; else /proc/self/stat) read into buf (size bytes), and where its field `field`
 * (1 the pid, 3 the state, 20 num_threads, 22 starttime: proc(5)'s
 * numbers) begins in it; NULL when it cannot be read or has fewer fields.
 * The command (field 2) may hold spaces and parentheses: fields count
 * from its last ')'. Fields of the leader, which it still gives whole. */
const char *vt_stat_field(int pid, char *buf, size_t size, int field);

/* vt_stat_field of /proc/self/stat. */
const char *vt_self_stat_field(char *buf, size_t size, int field);

#endif
