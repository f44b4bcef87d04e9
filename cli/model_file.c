/* model_file.c -- reading a dump from its file (vm_load of model.h). */
#include <errno.h>
#include <malloc.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

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
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errsize, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    /* A regular file is mapped, not copied: the model keeps no pointer
     * into it, and its pages are given back as they are read (a dump is
     * renamed into place whole, never rewritten where it lies). */
    struct stat sb;
    if (fstat(fileno(f), &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0) {
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
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    int cut = 0;
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
    fclose(f);
    if (!buf || rerr) {
        snprintf(err, errsize, "%s: cannot read%s", path, buf ? "" : ": out of memory");
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

