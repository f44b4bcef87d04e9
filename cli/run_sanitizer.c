/* run_sanitizer.c -- the sanitizer runtime that comes before the library
 * in a `vramtrace run` command's LD_PRELOAD.
 *
 * A program built with -fsanitize=address (and the other sanitizers that
 * link a runtime of their own) wants that runtime first in its initial
 * library list: ASan refuses to start otherwise ("ASan runtime does not
 * come first in initial library list"), and a preloaded library comes
 * before every library the program names. So a runtime the caller
 * already preloads stays before libvramtrace.so, and one the program
 * itself names (DT_NEEDED, read from its ELF file; a script's
 * interpreter is not looked at) is preloaded first, by the name the
 * program gives it, which the loader finds as it would have found it for
 * the program. */
#define _GNU_SOURCE
#include <elf.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

int vt_run_is_sanitizer(const char *entry, size_t n) {
    static const char *const names[] = {"asan", "hwasan", "tsan", "msan", "lsan", "ubsan"};
    const char *base = entry;
    for (size_t k = 0; k < n; k++)
        if (entry[k] == '/') base = entry + k + 1;
    size_t left = n - (size_t)(base - entry);
    if (left < 3 || strncmp(base, "lib", 3) != 0) return 0;
    base += 3, left -= 3;
    if (left >= 9 && strncmp(base, "clang_rt.", 9) == 0) base += 9, left -= 9; /* clang's */
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        size_t len = strlen(names[i]);
        if (left > len && strncmp(base, names[i], len) == 0 && strchr(".-_", base[len])) return 1;
    }
    return 0;
}

/* The file execvp would run for cmd: itself when it holds a '/', else the
 * first executable regular file of that name in PATH. 0, or -1. */
static int command_path(const char *cmd, char *out, size_t size) {
    if (strchr(cmd, '/')) return snprintf(out, size, "%s", cmd) < (int)size ? 0 : -1;
    const char *path = getenv("PATH");
    if (!path) path = "/bin:/usr/bin";
    for (const char *p = path;; p++) {
        size_t n = strcspn(p, ":");
        struct stat st;
        if (snprintf(out, size, "%.*s%s%s", (int)n, p, n ? "/" : "", cmd) < (int)size && stat(out, &st) == 0 &&
            S_ISREG(st.st_mode) && access(out, X_OK) == 0)
            return 0;
        p += n;
        if (!*p) return -1;
    }
}

static int read_at(int fd, void *buf, size_t n, off_t at) { return pread(fd, buf, n, at) == (ssize_t)n ? 0 : -1; }

/* The file offset of virtual address `addr` in the program's loaded
 * segments, or -1. */
static off_t file_offset(const ElfW(Phdr) *ph, int nph, ElfW(Addr) addr) {
    for (int i = 0; i < nph; i++)
        if (ph[i].p_type == PT_LOAD && addr >= ph[i].p_vaddr && addr - ph[i].p_vaddr < ph[i].p_filesz)
            return (off_t)(addr - ph[i].p_vaddr + ph[i].p_offset);
    return -1;
}

/* The first sanitizer runtime in the DT_NEEDED list of the ELF file open
 * on fd (this machine's class and byte order), into out; 0, or -1. */
static int needed_sanitizer(int fd, char *out, size_t size) {
    ElfW(Ehdr) eh;
    if (read_at(fd, &eh, sizeof eh, 0) != 0 || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
        eh.e_ident[EI_CLASS] != (sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32) ||
        eh.e_phentsize != sizeof(ElfW(Phdr)) || eh.e_phnum == 0 || eh.e_phnum > 512)
        return -1;
    ElfW(Phdr) ph[512];
    if (read_at(fd, ph, eh.e_phnum * sizeof ph[0], (off_t)eh.e_phoff) != 0) return -1;
    const ElfW(Phdr) *dyn = NULL;
    for (int i = 0; i < eh.e_phnum; i++)
        if (ph[i].p_type == PT_DYNAMIC) dyn = &ph[i];
    if (!dyn) return -1; /* static */
    size_t n = dyn->p_filesz / sizeof(ElfW(Dyn));
    if (n > 4096) n = 4096;
    ElfW(Dyn) *d = malloc(n * sizeof *d);
    if (!d || read_at(fd, d, n * sizeof *d, (off_t)dyn->p_offset) != 0) {
        free(d);
        return -1;
    }
    ElfW(Addr) strtab = 0;
    size_t strsz = 0;
    for (size_t i = 0; i < n && d[i].d_tag != DT_NULL; i++) {
        if (d[i].d_tag == DT_STRTAB) strtab = d[i].d_un.d_ptr;
        if (d[i].d_tag == DT_STRSZ) strsz = d[i].d_un.d_val;
    }
    off_t at = strtab ? file_offset(ph, eh.e_phnum, strtab) : -1;
    int found = -1;
    for (size_t i = 0; at >= 0 && found < 0 && i < n && d[i].d_tag != DT_NULL; i++) {
        if (d[i].d_tag != DT_NEEDED || d[i].d_un.d_val >= strsz) continue;
        char name[256] = "";
        ssize_t got = pread(fd, name, sizeof name - 1, at + (off_t)d[i].d_un.d_val);
        if (got <= 0) continue;
        name[got] = '\0';
        size_t len = strlen(name);
        if (len && len < size && !strpbrk(name, " :") && vt_run_is_sanitizer(name, len)) {
            memcpy(out, name, len + 1);
            found = 0;
        }
    }
    free(d);
    return found;
}

int vt_run_needed_sanitizer(const char *cmd, char *out, size_t size) {
    char path[PATH_MAX];
    if (command_path(cmd, path, sizeof path) != 0) return -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return -1;
    int rc = needed_sanitizer(fd, out, size);
    close(fd);
    return rc;
}
