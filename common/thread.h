/* thread.h -- the library's own helper threads (the on-demand dump's
 * watcher, the live segment's publisher). */
#ifndef VT_THREAD_H
#define VT_THREAD_H

/* Start fn(NULL) on a detached thread named `name` (at most 15 bytes)
 * that takes no signals, so that every signal stays with the program's
 * threads; the caller's signal mask is unchanged on return. Returns 0, or
 * pthread_create's error number (then no thread runs). */
int vt_thread_start_quiet(void *(*fn)(void *), const char *name);

#endif
