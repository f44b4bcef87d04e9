/* infront.h -- whether vramtrace stands in front of the C library
 * (infront.c): loaded at start-up, where what it wraps reaches it. */
#ifndef VT_INFRONT_H
#define VT_INFRONT_H

/* Whether vramtrace stands behind the C library, found out the first time
 * (the link map walked): called while the library is relocated (exports.c),
 * it calls nothing. */
int vt_front_find(void);

/* At the library's constructor: find out once, and when vramtrace stands
 * behind (loaded by dlopen after the process started, linked after the C
 * library, or a second copy beside one in front) say which in one warning
 * line. */
void vt_front_check(void);

/* Whether vramtrace was found behind the C library: it then tracks
 * nothing (its CUDA names withdrawn, nothing written at exit), and the API
 * answers as without vramtrace. */
int vt_behind(void);

#endif
