/* model_file.c -- reading a dump from its file (vm_load of model.h). */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model.h"
#include "model_v2.h"

static sigjmp_buf *bus_jump;

static void on_bus(int sig) {
    (void)sig;
    siglongjmp(*bus_jump, 1);
}

/* vm_load_text over the file at path mapped at m (len bytes). A file that
 * shrinks while it is read (truncated by another process) raises SIGBUS on
 * the pages past its new end: that is caught here and said as one error
 * (what was built of d is freed), never a crash. The CLI reads on one
 * thread. */
static int load_mapped(const char *path, const char *m, size_t len, unsigned flags, struct vm_dump *d, char *err,
                       size_t errsize) {
    sigjmp_buf jump;
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_bus;
    sigemptyset(&sa.sa_mask);
    int rc = -1;
    if (sigaction(SIGBUS, &sa, &old) != 0) return vm_load_text(m, len, flags | VM_LOAD_MAPPED, path, d, err, errsize);
    if (sigsetjmp(jump, 1) == 0) {
        bus_jump = &jump;
        rc = vm_load_text(m, len, flags | VM_LOAD_MAPPED, path, d, err, errsize);
    } else {
        struct stat sb;
        vm_free(d);
        if (stat(path, &sb) == 0 && (size_t)sb.st_size < len)
            snprintf(err, errsize, "%s: the file shrank to %lld bytes while it was read (it had %zu)", path,
                     (long long)sb.st_size, len);
        else
            snprintf(err, errsize, "%s: cannot read: the file's pages could not be read", path);
    }
    bus_jump = NULL;
    sigaction(SIGBUS, &old, NULL);
    return rc;
}

int vm_load(const char *path, struct vm_dump *d, char *err, size_t errsize) {
    return vm_load_with(path, 0, d, err, errsize);
}

int vm_load_with(const char *path, unsigned flags, struct vm_dump *d, char *err, size_t errsize) {
    flags &= VM_LOAD_COUNT_EVENTS;
    memset(d, 0, sizeof *d);
    /* A model's big arrays (the live allocations, the events, the node
     * table read and freed on the way) are each made once: with malloc's
     * threshold for its own mapping kept at its default rather than raised
     * by the first such free, each stays a mapping, and what is freed goes
     * back to the system instead of staying resident in the heap. */
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
    /* Opened without blocking: a FIFO nobody writes held the command
     * for ever, without a word. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errsize, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    size_t cap = 1 << 16, len = 0;
    char *buf = NULL;
    const char *refused = NULL;
    struct stat sb;
    if (fstat(fd, &sb) != 0) refused = strerror(errno);
    else if (S_ISDIR(sb.st_mode)) refused = strerror(EISDIR);
    else if (S_ISFIFO(sb.st_mode) && (buf = malloc(cap))) {
        /* A FIFO read without blocking says at once whether anyone writes
         * it: nothing and no writer reads as its end. It is refused then,
         * as the library and --suppressions refuse one; a FIFO with a
         * writer is read until the writer closes it, as cat reads it. */
        ssize_t got;
        do got = read(fd, buf, 4096); /* less than cap: the loop below goes on */
        while (got < 0 && errno == EINTR);
        if (got == 0) refused = "a FIFO nobody writes (not waited for)";
        else if (got < 0 && errno != EAGAIN) refused = strerror(errno);
        else if (got > 0) len = (size_t)got;
    }
    int fl = refused ? -1 : fcntl(fd, F_GETFL);
    FILE *f = fl >= 0 && fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) == 0 ? fdopen(fd, "rb") : NULL;
    if (!f) {
        snprintf(err, errsize, "%s: cannot read: %s", path, refused ? refused : strerror(errno));
        free(buf);
        close(fd);
        return -1;
    }
    /* A regular file is mapped, not copied: the model keeps no pointer
     * into it, and its pages are given back as they are read (a dump is
     * renamed into place whole, never rewritten where it lies). */
    if (S_ISREG(sb.st_mode) && sb.st_size > 0) {
        void *m = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fileno(f), 0);
        if (m != MAP_FAILED) {
            fclose(f);
            madvise(m, (size_t)sb.st_size, MADV_SEQUENTIAL);
            int rc = load_mapped(path, m, (size_t)sb.st_size, flags, d, err, errsize);
            munmap(m, (size_t)sb.st_size);
            return rc;
        }
    }
    /* Anything else (a pipe, a FIFO, a device) is read whole, unless its
     * first 64 KiB show it cannot be a dump: not one that begins with '{'
     * there. Then only they are parsed, for the error jansson gives of its
     * first token: /dev/zero or an endless FIFO filled memory before. */
    if (!buf) buf = malloc(cap);
    int cut = 0, rerrno = 0;
    while (buf) {
        size_t n = fread(buf + len, 1, cap - len, f);
        len += n;
        if (n == 0) break;
        if (len == cap && cap == 1 << 16) {
            size_t i = 0;
            while (i < len && strchr(" \t\r\n", buf[i]) && buf[i]) i++;
            if (i == len || buf[i] != '{') {
                cut = 1;
                break;
            }
        }
        if (len == cap) {
            char *b = realloc(buf, cap * 2);
            if (!b) { free(buf); buf = NULL; break; }
            buf = b;
            cap *= 2;
        }
    }
    int rerr = ferror(f);
    if (rerr) rerrno = errno;
    fclose(f);
    if (!buf || rerr) {
        snprintf(err, errsize, "%s: cannot read: %s", path, buf ? strerror(rerrno ? rerrno : EIO) : "out of memory");
        free(buf);
        return -1;
    }
    int rc = vm_load_text(buf, len, flags, path, d, err, errsize);
    free(buf);
    size_t at = strlen(err);
    if (rc != 0 && cut && at < errsize)
        snprintf(err + at, errsize - at, "; read no further than its first %zu bytes, as a dump begins with '{'", len);
    return rc;
}

