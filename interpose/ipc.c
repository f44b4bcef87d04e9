/* ipc.c -- an IPC mapping opened more than once (ipc.h). */
#include <pthread.h>

#include "ipc.h"

/* Held while the tracker is asked and told: a new record's stack capture
 * and first use of the GPU (vt_hook_alloc) take other locks meanwhile, so
 * a fork takes this one before all of vramtrace's (init.c). */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

void vt_ipc_opened(const char *api, int ok, int oom, uint64_t address, uint64_t bytes) {
    if (!ok || !address) {
        vt_hook_alloc(api, VT_KIND_IMPORTED, VT_DEVICE_CURRENT, ok, oom, address, bytes);
        return;
    }
    vt_init(); /* its lock not under this one */
    pthread_mutex_lock(&lock);
    if (!vt_tracker_ref(VT_SPACE_IMPORTED, address))
        vt_hook_alloc(api, VT_KIND_IMPORTED, VT_DEVICE_CURRENT, ok, oom, address, bytes);
    pthread_mutex_unlock(&lock);
}

struct vt_ipc_close vt_ipc_close_begin(uint64_t address) {
    struct vt_ipc_close c = {.address = address};
    pthread_mutex_lock(&lock);
    c.kept = vt_tracker_unref(VT_SPACE_IMPORTED, address);
    if (!c.kept) c.f = vt_tracker_free_begin(VT_SPACE_IMPORTED, address);
    pthread_mutex_unlock(&lock);
    return c;
}

void vt_ipc_close_end(const struct vt_ipc_close *c, int ok) {
    if (!c->kept) {
        vt_hook_free(&c->f, ok);
        return;
    }
    if (ok) return;
    pthread_mutex_lock(&lock);
    vt_tracker_ref(VT_SPACE_IMPORTED, c->address);
    pthread_mutex_unlock(&lock);
}

void vt_ipc_fork_prepare(void) { pthread_mutex_lock(&lock); }

void vt_ipc_fork_parent(void) { pthread_mutex_unlock(&lock); }
