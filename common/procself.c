/* procself.c -- where this process's own /proc entries are read
 * (procself.h). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fdkeep.h"
#include "procself.h"

const char *vt_stat_field(int pid, char *buf, size_t size, int field) {
    char path[48];
    if (pid > 0) snprintf(path, sizeof path, "/proc/%d/stat", pid);
    else snprintf(path, sizeof path, "/proc/self/stat");
    if (vt_fd_read_small(path, buf, size) <= 0) return NULL;
    const char *p = strrchr(buf, ')');
    for (int f = 2; p && f < field; f++) p = strchr(p + 1, ' ');
    return p && field > 2 ? p + 1 : NULL;
}

const char *vt_self_stat_field(char *buf, size_t size, int field) {
    return vt_stat_field(0, buf, size, field);
}

/* Whether the main thread has ended: the leader's state is Z (or X, as
 * the process ends). */
static int leader_ended(void) {
    char buf[512];
    const char *state = vt_self_stat_field(buf, sizeof buf, 3);
    return state && (*state == 'Z' || *state == 'X');
}

/* The calling thread's id as the mounted /proc numbers it: in another pid
 * namespace than the process's own, gettid's number names another task
 * there. */
static pid_t proc_tid(void) {
    char link[64];
    ssize_t n = readlink("/proc/thread-self", link, sizeof link - 1);
    if (n > 0) {
        link[n] = '\0';
        const char *t = strstr(link, "/task/");
        if (t && atoi(t + 6) > 0) return (pid_t)atoi(t + 6);
    }
    return (pid_t)syscall(SYS_gettid);
}

const char *vt_proc_self(char *dir) {
    if (leader_ended()) snprintf(dir, VT_PROC_SELF_MAX, "/proc/%d", (int)proc_tid());
    else snprintf(dir, VT_PROC_SELF_MAX, "/proc/self");
    return dir;
}

pid_t vt_proc_self_pid(void) { return leader_ended() ? proc_tid() : getpid(); }
