/* hook.h -- what every wrapper does after calling the real function.
 *
 * A wrapper is: find the real function, call it, report the result here,
 * return the result unchanged. These helpers capture the stack, find the
 * device, record into the tracker, and on out-of-memory read the device
 * state into the failure record (the tracker's failure listener then has
 * the post-mortem written). They never change what the caller sees. */
#ifndef VT_HOOK_H
#define VT_HOOK_H

#include <errno.h>
#include <signal.h>
#include <stdint.h>

#include "../tracker/tracker.h"
#include "resolve.h"

#define VT_DEVICE_CURRENT (-2)

/* True while the calling thread is inside a runtime call that vramtrace
 * records itself: the driver calls it makes are then not recorded again. */
extern __thread int vt_in_runtime __attribute__((tls_model("initial-exec")));

static inline int vt_nested(void) { return vt_in_runtime > 0; }

/* Greater than zero while the calling thread runs vramtrace code that may
 * hold one of its locks: a hook (from entry to return, the real call
 * included), the exit path, the fork handlers, the start-up. A hooked call
 * that finds it set was made by a signal handler that interrupted that
 * code: it goes straight to the real function, unrecorded, and is counted
 * as missed (recording it could wait forever on a lock the interrupted
 * code holds). Async-signal-safe. */
extern __thread int vt_busy __attribute__((tls_model("initial-exec")));

/* Set while the innermost busy vramtrace frame of the thread is in the
 * real function's call (VT_REAL_CALL): vramtrace itself then holds no lock
 * on this thread, and an exit from a signal handler may write its dump. */
extern __thread int vt_in_real __attribute__((tls_model("initial-exec")));

/* Whether a wrapper passes the call straight through: nested inside a
 * runtime call that records it itself, or re-entered from a signal
 * handler (then counted as missed). */
static inline int vt_pass(void) {
    if (vt_in_runtime > 0) return 1;
    if (__builtin_expect(vt_busy > 0, 0)) {
        vt_tracker_missed();
        return 1;
    }
    return 0;
}

/* A wrapper's frame between vt_pass and its return: the thread is busy,
 * and the caller's errno is kept. The real function starts with the errno
 * the caller had (VT_REAL_CALL), the caller gets back the errno the real
 * function left (or, when the real function was not called, the one it
 * had), whatever vramtrace's own work did to it. */
struct vt_frame_state { int *where; int err; };
#define VT_ENTER struct vt_frame_state vt_fs_ = {&errno, 0}; vt_fs_.err = *vt_fs_.where; vt_busy++
#define VT_REAL_CALL(stmt) do { int vt_prev_ = vt_in_real; vt_in_real = 1; *vt_fs_.where = vt_fs_.err; stmt; \
    vt_fs_.err = *vt_fs_.where; vt_in_real = vt_prev_; } while (0)
#define VT_LEAVE do { vt_busy--; *vt_fs_.where = vt_fs_.err; } while (0)

/* The real function behind a hook, resolved (the first time) without
 * changing errno. */
static inline void *vt_real_quiet(int id) {
    void *p = __atomic_load_n(&vt_real_fn[id], __ATOMIC_ACQUIRE);
    if (__builtin_expect(p != NULL, 1)) return p;
    int e = errno;
    p = vt_real_slow(id);
    errno = e;
    return p;
}
#define VT_REAL_QUIET(sym) ((__typeof__(&sym))vt_real_quiet(VT_ID_##sym))

/* Record the outcome of an allocation call. `ok`: it succeeded and
 * `address` is the new allocation; `oom`: it failed for lack of memory;
 * neither: it failed otherwise. `device` may be VT_DEVICE_CURRENT. */
void vt_hook_alloc(const char *api, int kind, int device, int ok, int oom,
                   uint64_t address, uint64_t bytes);

/* A CUDA graph's allocation node was made (`ok`) at `address` in the
 * graph captured into or built, `key` (graphs.h): noted with this call's
 * stack, not recorded (no memory until a launch). A failure is recorded as
 * vt_hook_alloc records one. */
void vt_hook_node(const char *api, int kind, int device, int ok, int oom, uint64_t address, uint64_t bytes,
                  void *key);

/* A graph launch's record of allocation node `a` (its stack the node's),
 * the device's facts read first as for any allocation. */
void vt_hook_record(const struct vt_alloc *a);

/* A graph launch the driver refused for want of memory, its allocation
 * nodes taking need[d] on device d: an out-of-memory failure asking, on
 * the first device that has less free than its need (the most needed
 * where the driver cannot say), for that device's need. */
void vt_hook_launch_refused(const char *api, const uint64_t need[VT_MAX_DEVICES]);

/* VRAMTRACE_LIMIT at a graph launch: whether `bytes` more on `device`
 * would pass the budget (then recorded as an OOM marked "budget", of
 * `api`, and the launch refused). No promise is kept: the launch's records
 * follow the launch. */
int vt_budget_refuse_launch(const char *api, int device, uint64_t bytes);

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

/* vt_budget_refuse for a call whose arguments the API would take (`valid`,
 * looked at only under a budget): others get the API's own answer. */
#define VT_BUDGET_REFUSE(api, kind, device, bytes, valid)                            \
    (!__builtin_expect(__atomic_load_n(&vt_budget_off, __ATOMIC_ACQUIRE), 1) && (valid) && \
     vt_budget_refuse_slow(api, kind, device, bytes))

/* An allocation whose size the driver set (a pitched one: pitch * height,
 * where vt_budget_refuse was asked for width * height) succeeded with
 * `bytes`: this thread's promise grows to them. Returns 1 when they pass
 * the budget: the promise is then ended and the refusal recorded as
 * vt_budget_refuse records one, and the caller gives the memory back and
 * returns its API's out-of-memory code. 0 (the usual case) otherwise. */
int vt_budget_settle(const char *api, int kind, uint64_t bytes);

/* Record a free begun with vt_tracker_free_begin before the real call;
 * `ok`: the driver freed it. */
static inline void vt_hook_free(const struct vt_free *f, int ok) { vt_tracker_free_end(f, ok); }

/* The bytes an array (a CUarray, the same as a cudaArray_t; a
 * CUmipmappedArray when `mipmapped`) takes, as the driver's memory
 * requirements say (cuArrayGetMemoryRequirements), or `otherwise` when the
 * driver cannot say (driver.c). */
uint64_t vt_array_size(void *array, int mipmapped, uint64_t otherwise);

/* After fork, in the child: the device-facts lock, which another thread of
 * the parent may have held, is made anew. */
void vt_hook_reset_child(void);

/* PyTorch refused a request itself (no CUDA call failed: a memory
 * fraction, its own limit) and its companion said so: the OOM recorded
 * (stack, device state, post-mortem) as a failed allocation's is, its API
 * "PyTorch" (report/torch.c's vt_torch_on_unseen_oom). raised_allocated:
 * what PyTorch's error says it had allocated when it refused, where the
 * companion learnt of it only as the error reached Python (0: at the
 * refusal itself); rounded: the request is that error's two-decimal
 * figure ("1.07 GiB"), not the bytes asked. */
void vt_hook_torch_oom(int device, uint64_t request, uint64_t raised_allocated, int rounded);

/* Make sure options, tracker and unwinder are set up (hooks can run before
 * the library's constructor). */
void vt_init(void);

/* The exit's dump and summary now, once: the process is about to end by a
 * signal it sent itself (selfkill.c), which runs no destructor. */
void vt_exit_before_signal(void);

/* The same from a thread of vramtrace's about to end the process by
 * signal `sig` from `from_pid` (SIGTERM's watcher): the outputs say the
 * signal ended it (vt_output_ended_by) when they are written for it; 0.
 * When the program's own exit began first, that exit stands (its status,
 * its outputs without the signal, which would contradict the status the
 * process ends with): waits until it is written, at most within_ns, and
 * returns 1. */
int vt_exit_before_signal_wait(uint64_t within_ns, int sig, int from_pid);

/* Note the status the program exits with, for the exit's leak check
 * (init.c); at the first GPU allocation. */
void vt_exit_status_watch(void);

#endif
