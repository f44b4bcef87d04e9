/* ondemand.c -- the dump signal, and the watcher thread that writes what
 * the signals ask for (ondemand.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../common/fdkeep.h"
#include "../common/thread.h"
#include "../common/warn.h"
#include "../report/output.h"
#include "../tracker/options.h"
#include "ondemand.h"
#include "onterm.h"
#include "sigview.h"

/* The pipe from the handlers to the watcher, kept out of the program's way
 * (fdkeep.h): a program that closes every descriptor and opens its own
 * files at those numbers must not get the handler's byte in them. */
static struct vt_fd rd = VT_FD_NONE, wr = VT_FD_NONE;
static int started;
static int installed_signal; /* the dump signal, while on_signal was installed by this process */
static int watching;         /* 1 while the watcher reads the pipe */
/* The process that installed the handlers. */
static pid_t owner;
static int signal_refused;   /* the program held the dump signal: said once, not again in a child */
static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;

int vt_ondemand_mine(void) { return (pid_t)syscall(SYS_getpid) == __atomic_load_n(&owner, __ATOMIC_RELAXED); }

int vt_ondemand_tell(char c) {
    if (!__atomic_load_n(&watching, __ATOMIC_ACQUIRE) || !vt_fd_mine(&wr)) return -1;
    return write(wr.fd, &c, 1) == 1 ? 0 : -1;
}

static void on_signal(int sig) {
    (void)sig;
    int saved = errno;
    if (vt_ondemand_mine()) vt_ondemand_tell(VT_BYTE_DUMP);
    errno = saved;
}

int vt_ondemand_handler_is_ours(int sig, void (*h)(int)) {
    return sig > 0 && sig == installed_signal && h == on_signal;
}

static void *watcher(void *arg) {
    (void)arg;
    for (;;) {
        char buf[64];
        if (!vt_fd_mine(&rd)) break; /* the number is the program's now: never read its file */
        ssize_t n = read(rd.fd, buf, sizeof buf);
        if (n > 0) {
            if (memchr(buf, VT_BYTE_TERM, (size_t)n)) {
                vt_onterm_heard();
                break;
            }
            if (memchr(buf, VT_BYTE_QUIT, (size_t)n)) break; /* the program's threads are all gone */
            vt_output_signal();
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else {
            break; /* the program closed the pipe (or its end): dumps on demand end */
        }
    }
    __atomic_store_n(&watching, 0, __ATOMIC_RELEASE);
    return NULL;
}

/* The watcher returns (common/thread.h). */
static void quit(void) { vt_ondemand_tell(VT_BYTE_QUIT); }

void vt_ondemand_start(void) {
    if (__atomic_load_n(&started, __ATOMIC_ACQUIRE) || (vt_opt.signal <= 0 && !vt_opt.on_term)) return;
    pthread_mutex_lock(&start_lock);
    if (__atomic_load_n(&started, __ATOMIC_RELAXED)) goto out;
    __atomic_store_n(&started, 1, __ATOMIC_RELEASE);
    struct sigaction old;
    int dump_signal = vt_opt.signal > 0;
    if (dump_signal && (vt_real_sigaction(vt_opt.signal, NULL, &old) != 0 || old.sa_handler != SIG_DFL ||
                        (old.sa_flags & SA_SIGINFO))) {
        if (!signal_refused)
            vt_warn("signal %d has a handler of the program's; on-demand dumps are off "
                    "(set VRAMTRACE_SIGNAL to another signal)", vt_opt.signal);
        signal_refused = 1;
        dump_signal = 0;
    }
    if (!dump_signal && !vt_opt.on_term) goto out;
    int p[2];
    int held[3];
    vt_fd_std_hold(held); /* the pipe never at 0..2, not even before it is kept */
    int piped = pipe2(p, O_CLOEXEC);
    vt_fd_std_free(held);
    if (piped != 0) goto out;
    if (vt_fd_keep(p[0], &rd) != 0) {
        close(p[1]);
        goto out;
    }
    if (vt_fd_keep(p[1], &wr) != 0) {
        vt_fd_drop(&rd);
        goto out;
    }
    fcntl(wr.fd, F_SETFL, O_NONBLOCK);
    if (vt_opt.on_term) vt_onterm_prepare();
    __atomic_store_n(&watching, 1, __ATOMIC_RELEASE);
    if (vt_thread_start_quiet(watcher, NULL) != 0) {
        __atomic_store_n(&watching, 0, __ATOMIC_RELEASE);
        vt_fd_drop(&rd);
        vt_fd_drop(&wr);
        goto out;
    }
    owner = getpid();
    vt_thread_stop_with(quit);
    if (dump_signal && vt_sig_install(vt_opt.signal, on_signal, NULL)) installed_signal = vt_opt.signal;
    if (vt_opt.on_term) vt_onterm_install();
out:
    pthread_mutex_unlock(&start_lock);
}

/* Only what is still vramtrace's is undone: a handler the program put in
 * place of on_signal or SIGTERM's after it was installed stays. The child
 * starts its own watcher when it uses a GPU only where the parent's was
 * working or was never started: where the program holds the dump signal
 * (it had a handler first, or replaced ours) the child leaves it alone and
 * does not warn again. */
void vt_ondemand_reset_child(void) {
    int saved = errno;
    pthread_mutex_init(&start_lock, NULL);
    int restart = !started;
    struct sigaction cur;
    if (installed_signal) {
        if (vt_real_sigaction(installed_signal, NULL, &cur) == 0 && !(cur.sa_flags & SA_SIGINFO) &&
            cur.sa_handler == on_signal) {
            vt_sig_set_default(installed_signal);
            restart = 1;
        }
        installed_signal = 0;
    }
    if (vt_onterm_reset_child()) restart = 1;
    watching = 0;
    vt_fd_drop(&rd); /* only where still the pipe: the number may be the program's now */
    vt_fd_drop(&wr);
    started = !restart;
    errno = saved;
}
