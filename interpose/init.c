/* init.c -- the library's start and end inside the host process. */
#define _GNU_SOURCE /* fcloseall */
#include <errno.h>
#include <stddef.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "../common/fdkeep.h"
#include "../common/thread.h"
#include "../report/live.h"
#include "../report/output.h"
#include "../report/owntime.h"
#include "../report/torch.h"
#include "../report/writing.h"
#include "../tracker/clock.h"
#include "../tracker/lsanroot.h"
#include "../tracker/tracker.h"
#include "../tracker/options.h"
#include "../tracker/stack.h"
#include "canload.h"
#include "exports.h"
#include "hook.h"
#include "graphs.h"
#include "infront.h"
#include "ipc.h"
#include "mainexit.h"
#include "vmm.h"
#include "pools.h"
#include "ondemand.h"
#include "resolve.h"
#include "startpage.h"
#include "unload.h"

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

/* What pthread_atfork and at_quick_exit are (glibc's libc_nonshared.a
 * links those into the library, far from the start-up code: a page fault
 * each). */
extern int __register_atfork(void (*)(void), void (*)(void), void (*)(void), void *);
extern int __cxa_at_quick_exit(void (*)(void *), void *);
extern void *__dso_handle __attribute__((visibility("hidden")));

/* What the start and the exit write (startpage.h). Aligned to 1 KiB, not
 * to a page: its first KiB is then on one page, and the C library's own
 * variables at the start of .bss stay on the page the loader clears at
 * the end of .data (a page's alignment moved them onto one of their own,
 * two faults more). */
struct vt_start_page vt_start_page __attribute__((aligned(1024)));
_Static_assert(offsetof(struct vt_start_page, env.text) + 256 <= 1024,
               "the start's fields and the kept variables' first bytes within the first KiB");
/* STAGE_STOPPED: the exit came first; vt_init may still run after it (a
 * thread allocating while the process exits) but starts no live view,
 * which no one would take down. */
enum { STAGE_NONE, STAGE_INIT, STAGE_STOPPED };
/* Held while vt_init runs and across a fork (before_fork to the after_fork
 * handlers), so that a child never starts with half an initialisation. */
static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;

/* Options, tracker and unwinder. This runs at the first call that needs
 * them (a hook, the API), not at start: a
 * process that never touches a GPU, most of those an LD_PRELOAD reaches,
 * pays only for vt_start. The options are those the process started with
 * (vt_options_keep). */
static void grow_fd_table(void);

static void init_all_once(void) {
    /* Not grown at the start where no GPU could come into the process
     * (canload.h): a way in that those checks do not know of lands here,
     * before any descriptor is kept. */
    if (!vt_start_page.fd_grown) grow_fd_table();
    pthread_mutex_lock(&init_lock);
    /* Here, not at start: a process that never touches a GPU makes no
     * system call of vramtrace's but the descriptor table's growth. */
    __atomic_store_n(&vt_start_page.started_pid, getpid(), __ATOMIC_RELAXED);
    vt_resolve_init();
    vt_options_load(&vt_start_page.env);
    int none = STAGE_NONE;
    if (!__atomic_compare_exchange_n(&vt_start_page.stage, &none, STAGE_INIT, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        vt_opt.live = 0;
    vt_tracker_on_failure(vt_output_oom);
    vt_torch_on_oom(vt_output_torch_oom);
    vt_torch_on_unseen_oom(vt_hook_torch_oom);
    vt_clock_adopt(&vt_start_page.clock);
    /* Before the tracker maps anything: a sanitizer runtime's leak search
     * is shown vramtrace's mappings (tracker/lsanroot.h). */
    vt_lsan_find(vt_global_symbol);
    vt_tracker_init(vt_opt.depth, (size_t)vt_opt.events);
    vt_tracker_spill((size_t)vt_opt.spill << 20, getenv("TMPDIR"));
    vt_stack_init(vt_opt.unwind == VT_UNWIND_LIBUNWIND ? VT_STACK_LIBUNWIND
                  : vt_opt.unwind == VT_UNWIND_CHECK   ? VT_STACK_CHECK
                                                       : VT_STACK_WALKER);
    if (vt_opt.limit == 0) __atomic_store_n(&vt_budget_off, 1, __ATOMIC_RELEASE);
    __atomic_store_n(&vt_start_page.init_done, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&init_lock);
}

void vt_init(void) {
    if (__builtin_expect(__atomic_load_n(&vt_start_page.init_done, __ATOMIC_ACQUIRE), 1)) return;
    pthread_once(&init_once, init_all_once);
}

/* Between the fork handlers the forking thread holds every lock: it is
 * busy (see vt_busy), so a signal handler's allocation passes through.
 * No helper thread is in its start-up, nor the publisher in a round. */
static void before_fork(void) {
    vt_busy++;
    vt_ipc_fork_prepare(); /* first: held while an IPC open records, which may take any of the others */
    pthread_mutex_lock(&init_lock);
    vt_thread_fork_prepare();
    vt_live_fork_prepare();
    vt_stack_fork_prepare();
    vt_vmm_fork_prepare(); /* before the tracker's: held while cuMemUnmap frees a record */
    vt_tracker_lock_all();
    vt_graphs_fork_prepare();
}

static void after_fork_parent(void) {
    vt_graphs_fork_parent();
    vt_tracker_unlock_all();
    vt_vmm_fork_parent();
    vt_stack_fork_done();
    vt_live_fork_parent();
    pthread_mutex_unlock(&init_lock);
    vt_ipc_fork_parent();
    vt_busy--;
}

/* A forked child starts with no records: what the parent held is the
 * parent's to report. The child writes a dump only if it allocates. The
 * locks before_fork took are this thread's, the child's only one: they are
 * released as in the parent before each part starts anew. */
static void after_fork_child(void) {
    __atomic_store_n(&vt_start_page.started_pid, getpid(), __ATOMIC_RELAXED);
    vt_exit_reset_child();
    vt_unload_reset_child();
    vt_thread_reset_child();
    vt_exit_watch_child_main();
    vt_graphs_fork_parent(); /* given back, then the tables emptied below */
    vt_tracker_unlock_all();
    vt_vmm_fork_parent();
    vt_stack_fork_done();
    vt_live_fork_parent();
    vt_tracker_reset_child();
    vt_hook_reset_child();
    vt_pools_reset_child();
    vt_graphs_reset_child();
    vt_vmm_reset_child();
    vt_output_reset_child();
    vt_live_reset_child();
    vt_ondemand_reset_child();
    pthread_mutex_unlock(&init_lock);
    vt_ipc_fork_parent(); /* nothing of its own to forget: the counts are the records' */
    vt_busy--;
}

/* The status the program exits with: the exit dump says it (a rank that
 * ended with a failure's status is told from one that exited cleanly),
 * and a leak check that could not run turns a 0 into 125, as `vramtrace
 * run` does for a command the library never reached, leaving a failure's
 * own status alone. on_exit's handler gets it; registered at the first GPU
 * allocation (not in the constructor, which runs before the C library
 * registers the destructors' run: handlers run in reverse order, and ours
 * must come before it). */
int __cxa_atexit(void (*fn)(void *), void *arg, void *dso);

static int exit_status;
static void note_exit_status(int status, void *arg) {
    (void)arg;
    exit_status = status;
    vt_output_exit_status(status);
}

void vt_exit_status_watch(void) { on_exit(note_exit_status, NULL); }

/* How the exit's outputs may end the process: not at all (a signal ends it
 * next), as exit ends it (the program's stdio buffers written first), or as
 * quick_exit does, which writes none (C11 7.22.4.7): a line the program
 * left in stdout's buffer came out under the leak check alone. */
enum { END_NOT, END_AS_EXIT, END_AS_QUICK_EXIT };

/* The process ends now with `status`, as `how` says (not END_NOT). Where
 * the exit gave up on a dump another thread is writing (report/writing.h),
 * that thread may hold its stream's lock, waiting on a stalled reader:
 * the streams are flushed as the C library's exit flushes them, without
 * their locks (fcloseall), the writer's refusing at once; fflush(NULL)
 * waited for its lock up to 10 s. */
static void end_now(int how, int status) {
    if (how == END_AS_EXIT) {
        if (vt_writing_abandoned()) fcloseall();
        else fflush(NULL);
    }
    _exit(status);
}

/* The leak check was to run at exit and could not: the run does not pass. */
static void check_not_run(int how) {
    if (exit_status != 0) return;
    fputs("vramtrace: the leak check could not run; exit status 125\n", stderr);
    end_now(how, 125);
}

/* At start: the clock's zero, whether vramtrace stands in front of the C
 * library (infront.h: the link map the loader has just walked, read), the
 * VRAMTRACE_* variables kept and the fork handlers. Nothing else: no file
 * read, no memory mapped, no library loaded, no page touched but
 * `start`'s and this code's. Variables too
 * many to keep have the options read now, as they are. The wire from the
 * tracker to the writer is laid by vt_init (an out-of-memory failure the
 * tracker records has the post-mortem written, vt_output_oom with its rate
 * limit, by the tracker's failure listener, inside the failing call, once
 * the tracker's locks are free; no hook calls the writer for a failure
 * itself), before anything can be tracked: the companion's out-of-memory
 * record follows the failed allocation's hook. */
static void exit_outputs_quick(void *arg);

/* The descriptor table grown past where the library keeps its
 * descriptors (common/fdkeep.h), once. */
__attribute__((section(".text.startup"))) static void grow_fd_table(void) {
    vt_fd_reserve();
    vt_start_page.fd_grown = 1;
}

/* The program's errno is kept: what may change it (a warning written, the
 * whole set-up) runs between a save and a restore of its own; the rest
 * sets none (system calls made raw, the C library's two registrations,
 * which touch errno only where they fail for want of memory), so that the
 * start of a process binds no __errno_location (a symbol look-up, a
 * thousand instructions). */
__attribute__((constructor)) static void vt_start(void) {
    vt_busy++;
    vt_clock_mark(&vt_start_page.clock);
    /* Behind the C library nothing is tracked (infront.h): nothing to set
     * up, and nothing for the exit to write. */
    if (vt_front_find()) {
        int e = errno;
        vt_front_check();
        vt_busy--;
        errno = e;
        return;
    }
    /* The descriptor table grown while the process has one thread, where a
     * GPU may come into it: a CUDA library is here, or an object can load
     * one later. Elsewhere (/bin/true, a shell tool) the four system
     * calls, 6 us, are spared. */
    if (vt_exports_cuda_mapped() || vt_start_can_load()) grow_fd_table();
    if (!vt_options_keep(&vt_start_page.env)) {
        int e = errno;
        vt_init();
        errno = e;
    }
    /* Tied to no library (a NULL handle), as the program's own are: tied
     * to this one, the C library's exit unregistered them when it ran this
     * library's finalizers, and a fork in another thread at that moment
     * had run before_fork (every tracker lock taken) and then found no
     * after_fork handler of ours to run: the parent's locks stayed held
     * (its exit outputs waited a second and were skipped, its other
     * threads' CUDA calls hung). The library is never unloaded (-z
     * nodelete), so the handlers stay valid. */
    __register_atfork(before_fork, after_fork_parent, after_fork_child, NULL);
    /* quick_exit runs its own handlers and no other: the exit's outputs
     * and leak check are one of them (registered first, so run last). */
    __cxa_at_quick_exit(exit_outputs_quick, &__dso_handle);
    vt_busy--;
}

/* The exit's outputs written once (vt_stop, or vt_exit_before_signal): 1
 * from the moment one caller began them, 2 once it is done
 * (vt_start_page.exit_written). */

int vt_exit_outputs_state(void) { return __atomic_load_n(&vt_start_page.exit_written, __ATOMIC_ACQUIRE); }

/* A vfork child ran the exit handlers in this process's memory: the C
 * library's list of them is spent, vramtrace's among them
 * (vt_start_page.handlers_lost). */

__attribute__((section(".text.startup"))) static void exit_outputs(int may_end);

void vt_exit_outputs_if_lost(void) {
    if (vt_exit_in_borrowed_memory() || !__atomic_exchange_n(&vt_start_page.handlers_lost, 0, __ATOMIC_ACQ_REL)) return;
    exit_outputs(END_AS_EXIT);
}


int vt_exit_in_borrowed_memory(void) {
    pid_t p = __atomic_load_n(&vt_start_page.started_pid, __ATOMIC_RELAXED);
    return p && getpid() != p;
}

/* At exit: the dump and a short summary, for a process that used a GPU;
 * with the leak check, the leak report and, when leaks remain, the exit
 * status VRAMTRACE_EXITCODE (as LeakSanitizer does: _exit).
 * No CUDA call happens here; the runtime may already be torn down. An exit
 * from a signal handler that interrupted vramtrace's own code on this
 * thread (its locks, or malloc's, may be held) writes nothing but a line
 * saying so; one that interrupted the real driver call of a hook writes as
 * usual. `may_end` (END_*): a leak found ends the process with
 * VRAMTRACE_EXITCODE, a check that could not run with 125, the stdio
 * buffers written only on exit's way; with END_NOT (a signal ends it next)
 * the status is the signal's. Beside the constructor, as vt_stop: every
 * process's exit passes here. */
__attribute__((section(".text.startup"))) static void exit_outputs_once(int may_end);
static __thread int exit_writer __attribute__((tls_model("initial-exec"))); /* this thread writes them */
static int exit_for_signal; /* written for a signal that ends the process next (SIGTERM's watcher) */

/* Until the outputs another thread is writing are done, at most within_ns:
 * 0 when they are. */
static int exit_outputs_wait(uint64_t within_ns) {
    for (uint64_t waited = 0; __atomic_load_n(&vt_start_page.exit_written, __ATOMIC_ACQUIRE) != 2; waited += 10000000) {
        if (waited >= within_ns) return -1;
        struct timespec ms10 = {0, 10000000};
        nanosleep(&ms10, NULL);
    }
    return 0;
}

__attribute__((section(".text.startup"))) static void exit_outputs(int may_end) {
    /* Behind the C library (infront.h) vramtrace tracks nothing: no dump,
     * no summary, no leak check, the exit status the program's. */
    if (vt_behind()) return;
    /* A vfork child that calls exit runs the handlers in its parent's
     * memory: the outputs are the parent's to write (the child wrote the
     * parent's report and took its leak check's status). */
    if (vt_exit_in_borrowed_memory()) {
        __atomic_store_n(&vt_start_page.handlers_lost, 1, __ATOMIC_RELEASE);
        return;
    }
    int was = 0;
    if (!__atomic_compare_exchange_n(&vt_start_page.exit_written, &was, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        /* Another thread writes them (SIGTERM's watcher while the program
         * exits): the exit waits for them, as long as a dump may take,
         * rather than end the process in the middle of the writing. */
        if (was == 1 && !exit_writer) {
            exit_outputs_wait(30000000000ull);
            /* Written for SIGTERM, which ends the process next: this exit
             * waits for that end (its own status, not the signal's, went
             * to the parent otherwise), as long as the outputs took. */
            if (__atomic_load_n(&exit_for_signal, __ATOMIC_ACQUIRE))
                for (int i = 0; i < 3000; i++) {
                    struct timespec ms10 = {0, 10000000};
                    nanosleep(&ms10, NULL);
                }
        }
        return;
    }
    exit_writer = 1;
    exit_outputs_once(may_end);
    __atomic_store_n(&vt_start_page.exit_written, 2, __ATOMIC_RELEASE);
}

__attribute__((section(".text.startup"))) static void exit_outputs_once(int may_end) {
    int e = errno;
    /* Nothing initialised, so nothing tracked nor started: the one line
     * still owed is VRAMTRACE_UNWIND=check's count. */
    int none = STAGE_NONE;
    if (__atomic_compare_exchange_n(&vt_start_page.stage, &none, STAGE_STOPPED, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        char unwind[] = {'U', 'N', 'W', 'I', 'N', 'D', 0}; /* on the stack: no constant data's page */
        if (!vt_options_set(&vt_start_page.env, unwind)) {
            errno = e;
            return;
        }
        vt_busy++;
        vt_init();
        vt_busy--;
    }
    /* What vramtrace does at exit before its outputs are asked for (the
     * live view's last round waited for) is its own time, not the
     * program's work (report/owntime.h). */
    uint64_t own_from = vt_now_ns();
    vt_live_stop();
    if (vt_busy > 0 && !vt_in_real) {
        struct vt_sigpipe held;
        vt_sigpipe_hold(&held);
        if (vt_output_exit_skipped() < 0) {
            vt_mark_verdict("unchecked");
            if (may_end) check_not_run(may_end);
        }
        vt_sigpipe_release(&held);
        errno = e;
        return;
    }
    vt_busy++;
    struct vt_sigpipe held;
    vt_sigpipe_hold(&held);
    uint64_t stacks, differ, fallbacks;
    if (vt_stack_check(&stacks, &differ, &fallbacks))
        fprintf(stderr, "vramtrace: unwind check: %llu stacks, %llu differ from libunwind, %llu handed to libunwind\n",
                (unsigned long long)stacks, (unsigned long long)differ, (unsigned long long)fallbacks);
    vt_own_time_add(own_from, vt_now_ns());
    int leaked = vt_output_exit();
    /* Under `vramtrace run`, the run's status hears of it too (a child's
     * leak: a test worker's, a multiprocessing worker's). */
    if (leaked > 0 && vt_opt.leak_check && vt_opt.exitcode) vt_mark_verdict("leaks");
    if (leaked < 0) vt_mark_verdict("unchecked");
    if (leaked > 0 && vt_opt.leak_check && vt_opt.exitcode && may_end) end_now(may_end, vt_opt.exitcode);
    if (leaked < 0 && may_end) check_not_run(may_end);
    vt_sigpipe_release(&held);
    vt_busy--;
    errno = e;
}

/* The exit's outputs, once every other library's destructors have run:
 * the C library's exit runs the loader's finalizers (_dl_fini) as its last
 * exit handler, and there a library unrelated to vramtrace and loaded
 * after it (one the program links, whose global object frees its GPU
 * memory in its destructor) is finalized after vt_stop. A handler
 * registered now runs when _dl_fini returns, after them all (exit runs
 * what its handlers register). Where none can be registered, now. The
 * library is never unloaded (-z nodelete): the handler, and every wrapper
 * pointer handed out, stay valid. */
__attribute__((section(".text.startup"))) static void exit_outputs_last(void *arg) {
    (void)arg;
    exit_outputs(END_AS_EXIT);
}

__attribute__((destructor, section(".text.startup"))) static void vt_stop(void) {
    if (__cxa_atexit(exit_outputs_last, NULL, NULL) != 0) exit_outputs(END_AS_EXIT);
}

/* The library's DT_FINI (the Makefile's LIB_LINK): nothing to do, the
 * destructors are vt_stop's; here so that the exit touches no code page
 * the start did not. */
__attribute__((section(".text.startup"), visibility("hidden"))) void vt_fini(void) {}

void vt_exit_before_signal(void) { exit_outputs(END_NOT); }

int vt_exit_before_signal_wait(uint64_t within_ns, int sig, int from_pid) {
    int was = 0;
    if (!vt_exit_in_borrowed_memory() &&
        __atomic_compare_exchange_n(&vt_start_page.exit_written, &was, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        /* Written for the signal, which ends the process next. */
        vt_output_ended_by(sig, from_pid);
        __atomic_store_n(&exit_for_signal, 1, __ATOMIC_RELEASE);
        exit_writer = 1;
        exit_outputs_once(END_NOT);
        __atomic_store_n(&vt_start_page.exit_written, 2, __ATOMIC_RELEASE);
        return 0;
    }
    /* The program's own exit is writing them (a SIGTERM in the middle of
     * it killed it mid-write: no dump, no leak report; then its outputs
     * said "ended by SIGTERM" of a process that ended with the exit's
     * status): the signal waits for the end of that, at most within_ns. */
    exit_outputs_wait(within_ns);
    return 1;
}

static void exit_outputs_quick(void *arg) {
    (void)arg;
    exit_outputs(END_AS_QUICK_EXIT);
}
