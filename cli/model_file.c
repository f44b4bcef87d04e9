/* model_file.c -- reading a dump from its file (vm_load of model.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "model.h"
#include "model_v2.h"

int vm_load(const char *path, struct vm_dump *d, char *err, size_t errsize) {
    memset(d, 0, sizeof *d);
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
            int rc = vm_load_text(m, (size_t)sb.st_size, 1, path, d, err, errsize);
            munmap(m, (size_t)sb.st_size);
            return rc;
        }
    }
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t n = fread(buf + len, 1, cap - len, f);
        len += n;
        if (n == 0) break;
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
    int rc = vm_load_text(buf, len, 0, path, d, err, errsize);
    free(buf);
    return rc;
}

