/* mainexit.h -- how the program's threads end (mainexit.c). */
#ifndef VT_MAINEXIT_H
#define VT_MAINEXIT_H

/* After fork, in the child: no thread of its own is in exit. */
void vt_exit_reset_child(void);

/* After fork, in the child: its only thread is its main thread, which may
 * end by returning from a thread's start routine (a fork from another
 * thread than the main one); the helper threads then end once the
 * program's are all gone, as after pthread_exit. */
void vt_exit_watch_child_main(void);

/* Where the exit's outputs are (init.c): 0 not begun, 1 being written, 2
 * written. */
int vt_exit_outputs_state(void);

/* Whether this is a vfork child (or a clone without fork's handlers)
 * running in its parent's memory: its pid is not the one vramtrace
 * started or last forked in. Its exit writes nothing of the parent's. */
int vt_exit_in_borrowed_memory(void);

/* The exit's outputs, now, where a vfork child's exit spent the exit
 * handlers (vramtrace's among them) in this process's memory: the
 * parent's exit would otherwise check and write nothing. */
void vt_exit_outputs_if_lost(void);

#endif
