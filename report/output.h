/* output.h -- when and where the library writes its dump and reports.
 *
 * At the first out-of-memory failure (then at most one a second after the
 * last was written) and at exit, for a process that used a GPU: the JSON
 * dump to VRAMTRACE_OUT (written to a temporary file, then renamed, so it
 * is whole or absent) and the human report to VRAMTRACE_REPORT. */
#ifndef VT_OUTPUT_H
#define VT_OUTPUT_H

#include <signal.h>
#include <stddef.h>

/* Around writing a report: a write to a pipe nobody reads (stderr piped to
 * `head`, which has exited) must not raise a SIGPIPE the program would not
 * have had without vramtrace, nor a dump past the file size limit
 * (`ulimit -f`) a SIGXFSZ, whose default kills the program; and the
 * writing is no cancellation point (write and open are: a thread the
 * program cancelled died inside its CUDA call, holding its own locks).
 * Held: SIGPIPE and SIGXFSZ are blocked on this thread and cancellation is
 * off; released: those the writing raised are taken off, unseen, and the
 * thread's mask and cancel state are put back (a cancel asked meanwhile is
 * acted on at the program's next cancellation point). */
struct vt_sigpipe {
    sigset_t mask;
    int pending_before, xfsz_before, cancel_state;
};
void vt_sigpipe_hold(struct vt_sigpipe *h);
void vt_sigpipe_release(const struct vt_sigpipe *h);

/* After an out-of-memory record: the dump and the post-mortem, at most
 * once a second after the last ones were written. The tracker's failure
 * listener (vt_tracker_on_failure, set by interpose/init.c), called on the
 * failing thread with no tracker lock held. */
void vt_output_oom(void);

/* PyTorch's record of an out-of-memory error came (report/torch.c): the
 * OOM dump again, with it, and its breakdown on the report, at most once a
 * second. */
void vt_output_torch_oom(void);

/* The failure this thread is about to record is PyTorch's own, made by its
 * record (report/torch.c's unseen failure): its post-mortem waits for the
 * record (vt_output_torch_oom), so that its findings have what the record
 * says (the memory fraction, the allocator's settings). */
void vt_output_defer_oom(void);

/* At exit. Returns 1 when the leak check (VRAMTRACE_LEAK_CHECK) found
 * unsuppressed leaks, -1 when it was to run and could not (a lock not let
 * go: nothing written but a line saying so), so the caller can set the
 * exit status; else 0. */
int vt_output_exit(void);

/* Before vt_output_exit, when a signal ends the process right after it
 * (SIGTERM from another process, or one the process sends itself): the
 * signal and its sender's pid (0 unknown), said in the exit dump and
 * report. The sender's command name is read here, from /proc. */
void vt_output_ended_by(int sig, int from_pid);

/* The status the process exits with, as exit() was given it (on_exit's
 * handler, before vt_output_exit): said in the exit dump. Not called for
 * a process ended by a signal or _exit, whose dump says no status. */
void vt_output_exit_status(int status);

/* One line of vramtrace's (ended by a newline here) added to the report
 * file of VRAMTRACE_REPORT. -1 when the reports do not go to a file
 * (stderr or off) or it could not be written. */
int vt_output_report_line(const char *line);

/* In a job of several ranks (the launchers' world size over 1), which
 * process this is, "pid N, rank R of W on HOST", in buf; returns 1. In a
 * process alone, 0 and buf empty. */
int vt_output_job_place(char *buf, size_t size);

/* At exit, instead of vt_output_exit, where writing could wait forever:
 * one line on stderr saying the exit dump was skipped (nothing when there
 * would have been nothing to write). -1 when the leak check was to run,
 * else 0. */
int vt_output_exit_skipped(void);

/* An on-demand dump (the dump signal): written with the next sequence
 * number (%n; ".N" before ".json" when the pattern has no %n), unless the
 * exit's outputs began first (the exit then says the dump was not
 * written). */
void vt_output_signal(void);

/* The dump signal was heard (its handler: async-signal-safe, an atomic
 * count), so that an exit before the dump is written says so. */
void vt_output_signal_asked(void);

/* A dump on request, named: written where VRAMTRACE_OUT says with
 * ".NAME" before ".json" (NAME: `name` with every character but letters,
 * digits, '.', '-' and '_' made '_', at most 100), its reason "named"; no
 * report. Returns 0 and the dump's path in path (when size > 0), or -1
 * when it was not written (dumps off, an empty name, the exit's outputs
 * begun, or a warning said why). */
int vt_output_named(const char *name, char *path, size_t size);

/* After fork, in the child: forget the parent's rate limit. */
void vt_output_reset_child(void);

/* Expand a VRAMTRACE_OUT pattern: %p pid, %h host, %r rank, %n sequence
 * number, %% percent. Returns 0, or -1 when the result does not fit. */
int vt_expand_path(const char *pattern, char *out, size_t size, int pid,
                   const char *host, int rank, unsigned seq);

/* Who this process is, as its dump and its live segment name it: pid,
 * rank and local rank (the launchers' variables), start time and boot,
 * host, and argv joined by spaces (cut to fit). */
struct vt_process_facts {
    int pid, rank, local_rank;
    unsigned long long start;
    char boot_id[40];
    char host[64];
    char command[128];
};
void vt_process_facts(struct vt_process_facts *f);

#endif
