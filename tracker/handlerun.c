/* handlerun.c -- the run of handles a request made before it failed
 * (handlerun.h). */
#include "handlerun.h"

__thread struct vt_handle_run vt_handle_run __attribute__((tls_model("initial-exec")));

int vt_handle_run_take(int vmm, uint32_t stack, int device, struct vt_handle_run *out) {
    struct vt_handle_run *r = &vt_handle_run;
    int mine = vmm && r->count && r->stack == stack && r->device == device;
    *out = mine ? *r : (struct vt_handle_run){0, 0, 0, 0, 0};
    r->count = 0;
    return mine;
}
