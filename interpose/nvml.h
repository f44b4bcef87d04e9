/* nvml.h -- who else is on the GPU, through NVML.
 *
 * libnvidia-ml.so.1 is opened at run time, never linked; without it (no
 * driver, a container without NVML) the answer is "unknown", silently. */
#ifndef VT_NVML_H
#define VT_NVML_H

#include "../tracker/tracker.h"

/* The compute processes on the device with this UUID ("GPU-..."), other
 * than this one, with their names from /proc when readable. Returns how
 * many (at most max), or -1 when NVML cannot say. */
int vt_nvml_processes(const char *uuid, struct vt_proc *out, int max);

#endif
