/* pystack_id.h -- the id of the calling thread's stack with its Python
 * frames spliced in, remembered from its last capture.
 *
 * A loop that allocates from one line of Python over and over has the
 * same native frames (the walker's replay says so without copying them)
 * and the same Python frames (same code, same line) at every call: its
 * merged stack is the last one, and so is its id. A loop that allocates
 * from line after line has the same native frames and the same Python
 * frames but for the lines that moved: those are patched into the last
 * merged stack (vt_pystack_patch), which is interned again; with other
 * native frames (another op's way to the allocator), the Python frames
 * read are patched so and spliced into them. Only a stack whose Python
 * frames differ otherwise is read, spliced and interned whole. */
#ifndef VT_PYSTACK_ID_H
#define VT_PYSTACK_ID_H

#include <stdint.h>

/* The interned id of this thread's native stack (at most `max` frames)
 * with its Python frames spliced in (pystack.h), as vt_tracker_stack_id
 * of vt_pystack_merge's frames would give, or vt_tracker_stack_id's
 * failure value. The thread's last native frames, Python frames read,
 * merged stack and id are kept (30 KiB, allocated at its first call and
 * freed when it ends); the id is reused when the native stack is the last one
 * (the walker's replay), the Python frames read the same values, neither
 * side borrowed another thread's frames, and no fork has renumbered
 * stacks since. */
uint32_t vt_pystack_id(int max);

#endif
