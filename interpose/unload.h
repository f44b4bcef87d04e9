/* unload.h -- which libraries a dlclose took out of the process (unload.c).
 *
 * The dlclose door lists the loaded libraries before the real dlclose and
 * compares after it: those gone are told to the tracker (departed.h), so
 * that the stacks walked through them are still named after them. */
#ifndef VT_UNLOAD_H
#define VT_UNLOAD_H

struct vt_loaded;

/* The libraries loaded now, before dlclose(handle) (NULL when memory ran
 * out, or in a signal handler that interrupted vramtrace: nothing is
 * told). */
struct vt_loaded *vt_unload_before(void *handle);

/* After the real dlclose: those of `before` no longer loaded told to the
 * tracker; `before` freed. */
void vt_unload_after(struct vt_loaded *before);

/* In a forked child: nothing more is told (see unload.c). */
void vt_unload_reset_child(void);

#endif
