/* live_torch.c -- PyTorch's own figures for the live segment, as the
 * PyTorch companion hands them over at an optimizer step (live.h). */
#include <pthread.h>
#include <string.h>

#include "../common/live.h"
#include "../tracker/clock.h"
#include "live.h"

/* Written by the companion's thread, read by the publisher: both under
 * `lock`, which no one holds across a call. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    uint64_t allocated, reserved;
    int set;
    uint64_t low, high, last_ns;   /* allocated: the least and most sampled, and when the last was */
} dev[VT_LIVE_DEVICES];
static uint64_t steps, given, filled;

void vt_torch_live(int device, uint64_t allocated, uint64_t reserved, uint64_t nsteps) {
    if (device < 0 || device >= VT_LIVE_DEVICES) return;
    pthread_mutex_lock(&lock);
    dev[device].allocated = allocated;
    dev[device].reserved = reserved;
    if (!dev[device].set || allocated < dev[device].low) dev[device].low = allocated;
    if (!dev[device].set || allocated > dev[device].high) dev[device].high = allocated;
    dev[device].last_ns = vt_now_ns();
    dev[device].set = 1;
    steps = nsteps;
    given++;
    pthread_mutex_unlock(&lock);
}

int vt_live_torch_fill(struct vt_live_segment *n) {
    pthread_mutex_lock(&lock);
    for (int i = 0; i < n->ndevices && i < VT_LIVE_DEVICES; i++) {
        struct vt_live_device *o = &n->devices[i];
        if (o->ordinal < 0 || o->ordinal >= VT_LIVE_DEVICES || !dev[o->ordinal].set) continue;
        o->flags |= VT_LIVE_DEV_TORCH;
        o->torch_allocated_bytes = dev[o->ordinal].allocated;
        o->torch_reserved_bytes = dev[o->ordinal].reserved;
    }
    if (given) {
        n->flags |= VT_LIVE_STEPS;
        n->steps = steps;
    }
    int changed = given != filled;
    filled = given;
    pthread_mutex_unlock(&lock);
    return changed;
}

int vt_torch_live_range(int device, uint64_t *spread, uint64_t *last_ns) {
    if (device < 0 || device >= VT_LIVE_DEVICES) return 0;
    pthread_mutex_lock(&lock);
    int set = dev[device].set;
    *spread = set ? dev[device].high - dev[device].low : 0;
    *last_ns = set ? dev[device].last_ns : 0;
    pthread_mutex_unlock(&lock);
    return set;
}

int vt_torch_live_last(int device, uint64_t *allocated, uint64_t *reserved) {
    if (device < 0 || device >= VT_LIVE_DEVICES) return 0;
    pthread_mutex_lock(&lock);
    int set = dev[device].set;
    *allocated = set ? dev[device].allocated : 0;
    *reserved = set ? dev[device].reserved : 0;
    pthread_mutex_unlock(&lock);
    return set;
}

void vt_live_torch_reset_child(void) {
    pthread_mutex_init(&lock, NULL);
    memset(dev, 0, sizeof dev);
    steps = given = filled = 0;
}
