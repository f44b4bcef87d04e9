/* thread.h -- the library's own helper threads (the on-demand dump's
 * watcher, the live segment's publisher). */
#ifndef VT_THREAD_H
#define VT_THREAD_H

/* Start fn(NULL) on a detached thread named `name` (at most 15 bytes)
 * that takes no signals, so that every signal stays with the program's
 * threads; the caller's signal mask is unchanged on return. Returns 0, or
 * pthread_create's error number (then no thread runs). */
int vt_thread_start_quiet(void *(*fn)(void *), const char *name);

/* Before fork: waits (up to 2 seconds) until every helper thread started
 * has reached its start routine, so that no thread is inside its start-up
 * (the C library's and a sanitizer's, which allocate) while the process
 * forks; a child would inherit the allocator's lock held. From its start
 * routine on, a helper itself keeps what it does apart from fork (the
 * publisher's round lock, report/live.c). */
void vt_thread_fork_prepare(void);

/* After fork, in the child: no helper thread is starting there. */
void vt_thread_reset_child(void);

/* A process whose main thread ends by pthread_exit lives on while any
 * thread does, and ends (as by exit(0)) when the last one does: the helper
 * threads must not keep it alive once the program's own threads are all
 * gone. `stop` (at most four) makes one kind of helper return; called once
 * that happens, from another helper. */
void vt_thread_stop_with(void (*stop)(void));

/* The main thread is ending by pthread_exit (interpose/mainexit.c): from
 * now on, while a helper runs, one more helper looks every 20 ms at how
 * many threads the process has, and when none is the program's it stops
 * the others and returns. */
void vt_thread_main_exits(void);

#endif
