/* callsite.c -- the call-site rule and the call site's name. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "callsite.h"
#include "format.h"

int vt_cuda_frame(const char *module, const char *function) {
    if (module) {
        const char *b = strrchr(module, '/');
        b = b ? b + 1 : module;
        if (strncmp(b, "libcuda.", 8) == 0 || strncmp(b, "libcudart", 9) == 0) return 1;
    }
    const char *fn = function;
    if (!fn) return 0;
    if (strncmp(fn, "__cudart", 8) == 0) return 1;
    if (strncmp(fn, "cuda", 4) == 0 && fn[4] >= 'A' && fn[4] <= 'Z') return 1;
    if (strncmp(fn, "cu", 2) == 0 && fn[2] >= 'A' && fn[2] <= 'Z') return 1;
    return 0;
}

int vt_site_index(const struct vt_frame *frames, size_t n) {
    for (size_t j = 0; j < n; j++)
        if (frames[j].python) return (int)j;
    for (size_t j = 0; j < n; j++)
        if (!vt_cuda_frame(frames[j].module, frames[j].function)) return (int)j;
    return n > 0 ? 0 : -1;
}

const char *vt_frame_where(const struct vt_frame *f, char *buf, size_t size) {
    const char *fn = f->function ? f->function : "??";
    const char *m = f->module ? strrchr(f->module, '/') : NULL;
    if (f->file) snprintf(buf, size, "%s %s:%ld", fn, f->file, f->line);
    else if (f->python) snprintf(buf, size, "%s (Python)", fn);
    else if (f->module) snprintf(buf, size, "%s (%s+0x%" PRIx64 ")", fn, m ? m + 1 : f->module, f->offset);
    else snprintf(buf, size, "%s 0x%" PRIx64, fn, f->address);
    return vt_utf8_whole(buf, size);
}

const char *vt_site_name(const struct vt_frame *site, char *buf, size_t size) {
    if (site) return vt_frame_where(site, buf, size);
    snprintf(buf, size, "(no stack)");
    return buf;
}
