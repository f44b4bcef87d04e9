/* hook.h -- what every wrapper does after calling the real function.
 *
 * A wrapper is: find the real function, call it, report the result here,
 * return the result unchanged. These helpers capture the stack, find the
 * device, record into the tracker, and on out-of-memory read the device
 * state and have the post-mortem written. They never change what the
 * caller sees. */
#ifndef VT_HOOK_H
#define VT_HOOK_H

#include <stdint.h>

#include "../tracker/tracker.h"

#define VT_DEVICE_CURRENT (-2)

/* True while the calling thread is inside a runtime call that vramtrace
 * records itself: the driver calls it makes are then not recorded again. */
extern __thread int vt_in_runtime __attribute__((tls_model("initial-exec")));

static inline int vt_nested(void) { return vt_in_runtime > 0; }

/* Record the outcome of an allocation call. `ok`: it succeeded and
 * `address` is the new allocation; `oom`: it failed for lack of memory;
 * neither: it failed otherwise. `device` may be VT_DEVICE_CURRENT. */
void vt_hook_alloc(const char *api, int kind, int device, int ok, int oom,
                   uint64_t address, uint64_t bytes);

/* VRAMTRACE_LIMIT: whether an allocation of `bytes` would take the
 * device's live bytes past the budget. If so it is recorded as an OOM
 * marked "budget" and the caller returns its API's out-of-memory code
 * without calling the driver. */
int vt_budget_refuse_slow(const char *api, int kind, int device, uint64_t bytes);
extern int vt_budget_off __attribute__((visibility("hidden")));

/* Inline: with no budget (the usual case) this is one load. */
static inline int vt_budget_refuse(const char *api, int kind, int device, uint64_t bytes) {
    if (__builtin_expect(__atomic_load_n(&vt_budget_off, __ATOMIC_ACQUIRE), 1)) return 0;
    return vt_budget_refuse_slow(api, kind, device, bytes);
}

/* Record a free begun with vt_tracker_free_begin before the real call;
 * `ok`: the driver freed it. */
void vt_hook_free(const struct vt_free *f, int ok);

/* Make sure options, tracker and unwinder are set up (hooks can run before
 * the library's constructor). */
void vt_init(void);

#endif
