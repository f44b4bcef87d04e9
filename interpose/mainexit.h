/* mainexit.h -- how the program's threads end (mainexit.c). */
#ifndef VT_MAINEXIT_H
#define VT_MAINEXIT_H

/* After fork, in the child: no thread of its own is in exit. */
void vt_exit_reset_child(void);

#endif
