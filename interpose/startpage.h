/* startpage.h -- the library's variables that a process's start and exit
 * write, together on one page.
 *
 * Every page of the library's that the start or the exit touches is a page
 * fault (2 to 3 us each on a virtual machine; a read of a page never
 * written and then a write of it, two), paid by every process LD_PRELOAD
 * reaches, most of which never touch a GPU. So the start and the exit of
 * such a process touch these and no other variable of the library's, and
 * every field they write lies in the struct's first KiB (init.c aligns it
 * to 1 KiB and asserts the layout; the kept variables' text is written
 * from its start, the working folder after it, tracker/options.h: many or
 * long variables run onto a second page). Internal to interpose/. */
#ifndef VT_STARTPAGE_H
#define VT_STARTPAGE_H

#include <sys/types.h>

#include "../tracker/clock.h"
#include "../tracker/options.h"

struct vt_start_page {
    struct vt_clock clock;     /* the start's readings, adopted by the tracker's clock */
    int init_done;             /* vt_init has run: the hooks test it and skip pthread_once */
    int stage;                 /* init.c's STAGE_* */
    int front;                 /* infront.c: 0 not looked for yet, else FOUND_* */
    pid_t started_pid;         /* init.c: the pid vramtrace was set up in (its
                                  first GPU call), or the child's after a fork:
                                  another one is a vfork child's, in its parent's
                                  memory; 0 before the set-up */
    int exit_written;          /* init.c: the exit's outputs begun (1), done (2) */
    int handlers_lost;         /* init.c: a vfork child ran the exit handlers */
    int fd_grown;              /* init.c: the descriptor table grown (common/fdkeep.h) */
    struct vt_options_env env; /* the VRAMTRACE_* variables as the process started */
};

extern struct vt_start_page vt_start_page __attribute__((visibility("hidden")));

#endif
