/* ondemand.c -- the dump signal and its watcher thread. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../common/fdkeep.h"
#include "../common/thread.h"
#include "../common/warn.h"
#include "../report/output.h"
#include "../tracker/options.h"
#include "ondemand.h"

/* The pipe from the handler to the watcher, kept out of the program's way
 * (fdkeep.h): a program that closes every descriptor and opens its own
 * files at those numbers must not get the handler's byte in them. */
static struct vt_fd rd = VT_FD_NONE, wr = VT_FD_NONE;
static int started;
static int installed_signal;
static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;

static void on_signal(int sig) {
    (void)sig;
    int saved = errno;
    char c = 1;
    if (vt_fd_mine(&wr)) {
        ssize_t w = write(wr.fd, &c, 1);
        (void)w;
    }
    errno = saved;
}

static void *watcher(void *arg) {
    (void)arg;
    for (;;) {
        char buf[64];
        if (!vt_fd_mine(&rd)) return NULL; /* the number is the program's now: never read its file */
        ssize_t n = read(rd.fd, buf, sizeof buf);
        if (n > 0) {
            vt_output_signal();
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else {
            return NULL; /* the program closed the pipe (or its end): dumps on demand end */
        }
    }
}

void vt_ondemand_start(void) {
    if (__atomic_load_n(&started, __ATOMIC_ACQUIRE) || vt_opt.signal <= 0) return;
    pthread_mutex_lock(&start_lock);
    if (__atomic_load_n(&started, __ATOMIC_RELAXED)) goto out;
    __atomic_store_n(&started, 1, __ATOMIC_RELEASE);
    struct sigaction old;
    if (sigaction(vt_opt.signal, NULL, &old) != 0) goto out;
    if (old.sa_handler != SIG_DFL || (old.sa_flags & SA_SIGINFO)) {
        vt_warn("signal %d has a handler of the program's; on-demand dumps are off "
                "(set VRAMTRACE_SIGNAL to another signal)", vt_opt.signal);
        goto out;
    }
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) goto out;
    if (vt_fd_keep(p[0], &rd) != 0) {
        close(p[1]);
        goto out;
    }
    if (vt_fd_keep(p[1], &wr) != 0) {
        vt_fd_drop(&rd);
        goto out;
    }
    fcntl(wr.fd, F_SETFL, O_NONBLOCK);
    if (vt_thread_start_quiet(watcher, NULL) != 0) {
        vt_fd_drop(&rd);
        vt_fd_drop(&wr);
        goto out;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(vt_opt.signal, &sa, NULL) == 0) installed_signal = vt_opt.signal;
out:
    pthread_mutex_unlock(&start_lock);
}

/* Only what is still vramtrace's is undone: a handler the program put in
 * place of on_signal after it was installed stays. The child starts its
 * own watcher when it uses a GPU only where the parent's was working: where
 * the program holds the signal (it had a handler first, or replaced ours)
 * the child leaves it alone and does not warn again. */
void vt_ondemand_reset_child(void) {
    int saved = errno;
    pthread_mutex_init(&start_lock, NULL);
    int restart = !started;
    if (installed_signal) {
        struct sigaction cur;
        if (sigaction(installed_signal, NULL, &cur) == 0 && !(cur.sa_flags & SA_SIGINFO) &&
            cur.sa_handler == on_signal) {
            struct sigaction dfl;
            memset(&dfl, 0, sizeof dfl);
            dfl.sa_handler = SIG_DFL;
            sigemptyset(&dfl.sa_mask);
            sigaction(installed_signal, &dfl, NULL);
            restart = 1;
        }
        installed_signal = 0;
    }
    vt_fd_drop(&rd); /* only where still the pipe: the number may be the program's now */
    vt_fd_drop(&wr);
    started = !restart;
    errno = saved;
}
