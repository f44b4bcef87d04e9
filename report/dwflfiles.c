/* dwflfiles.c -- the files libdwfl reads to name this process's frames,
 * out of the program's way (dwflfiles.h). */
#define _GNU_SOURCE
#include <elfutils/libdwelf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "../common/fdkeep.h"
#include "../common/procself.h"
#include "debuglink.h"
#include "dwflfiles.h"

/* A descriptor libdwfl holds for a module (its file, its debug file, its
 * dwz file), noted as it is handed over, on a list in the module's user
 * data: libdwfl closes it when the session ends (vt_dwfl_end), by its
 * number, whatever file the program has put there meanwhile. At the end:
 * `mine`, whether the number still holds that file; `keep` and `flags`,
 * the program's file at that number, held aside across the end (-1:
 * none). */
struct held {
    struct held *next;
    struct vt_fd k;
    int mine, keep, flags;
};

/* fd, handed to libdwfl for module m's data `user`, noted there. Without
 * memory it is not noted: its end closes it unchecked, as before. */
static void note_held(void **user, int fd) {
    if (fd < 0 || !user) return;
    int e = errno;
    struct held *h = malloc(sizeof *h);
    if (h && vt_fd_note(fd, &h->k) == 0) {
        h->keep = h->flags = -1;
        h->next = *user;
        *user = h;
    } else {
        free(h);
    }
    errno = e;
}

/* A module's noted descriptors, moved onto the list `out`. */
static int gather(Dwfl_Module *m, void **user, const char *name, Dwarf_Addr base, void *out) {
    (void)m;
    (void)name;
    (void)base;
    struct held **all = out, *h = *user, *next;
    for (; h; h = next) {
        next = h->next;
        h->next = *all;
        *all = h;
    }
    *user = NULL;
    return DWARF_CB_OK;
}

/* Whether h's number holds a file handed to libdwfl: h's own, or another
 * noted one's (libdwfl closed h's on a failure, and a later file of the
 * session got its number). */
static int libdwfls(const struct held *h, const struct held *all) {
    for (; all; all = all->next)
        if (all->k.fd == h->k.fd && all->mine) return 1;
    return 0;
}

void vt_dwfl_end(Dwfl *d) {
    if (!d) return;
    int e = errno;
    struct held *all = NULL, *h, *next;
    dwfl_getmodules(d, gather, &all, 0);
    for (h = all; h; h = h->next) h->mine = vt_fd_mine(&h->k);
    /* A number that holds another file now holds the program's: held
     * aside across the end, which closes that number. */
    for (h = all; h; h = h->next)
        if (!libdwfls(h, all) && (h->flags = fcntl(h->k.fd, F_GETFD)) >= 0) {
            h->keep = fcntl(h->k.fd, F_DUPFD_CLOEXEC, VT_FD_LOW);
            if (h->keep < 0) h->keep = fcntl(h->k.fd, F_DUPFD_CLOEXEC, 3);
        }
    dwfl_end(d);
    /* Put back at its number, as it was (close on exec or not), where the
     * end closed that number and nothing took it since. */
    for (h = all; h; h = next) {
        next = h->next;
        if (h->keep >= 0) {
            if (fcntl(h->k.fd, F_GETFD) < 0 && errno == EBADF)
                dup3(h->keep, h->k.fd, h->flags & FD_CLOEXEC ? O_CLOEXEC : 0);
            close(h->keep);
        }
        free(h);
    }
    errno = e;
}

Dwfl_Module *vt_dwfl_report_file(Dwfl *d, const char *path, GElf_Addr base) {
    int fd = vt_fd_open(AT_FDCWD, path, O_RDONLY, 0);
    if (fd < 0) return NULL;
    /* libdwfl takes the descriptor (and closes it itself on a failure). */
    Dwfl_Module *m = dwfl_report_elf(d, path, path, fd, base, true);
    void **user = NULL;
    if (m && dwfl_module_info(m, &user, NULL, NULL, NULL, NULL, NULL, NULL)) note_held(user, fd);
    return m;
}

/* A descriptor a libdwfl callback hands back, made the library's own:
 * moved to 700 and up, close on exec. libdwfl keeps it with the Elf
 * handle it makes on it and closes it at dwfl_end. Where the callback
 * made that handle itself (elf), the handle reads through the number: it
 * is made to read what it needs now (ELF_C_FDREAD; a mapped file has it
 * all) and never the descriptor again, so that the number may change;
 * where that fails, the descriptor stays at its number, close on exec. */
static int handed_back(int fd, Elf *elf) {
    if (fd < 0) return fd;
    if (!elf || elf_cntl(elf, ELF_C_FDREAD) == 0) fd = vt_fd_high(fd);
    if (fd >= 0) {
        int e = errno;
        fcntl(fd, F_SETFD, FD_CLOEXEC);
        errno = e;
    }
    return fd;
}

/* The file a module of this process maps, named by the kernel through
 * /proc/self/map_files (its first mapping, found in /proc/self/maps by
 * the module's start; common/procself.h: where, once the main thread has
 * ended): -1 when not found. */
static int mapped_file(Dwfl_Module *m, char *out, size_t size) {
    Dwarf_Addr start = 0;
    if (!dwfl_module_info(m, NULL, &start, NULL, NULL, NULL, NULL, NULL)) return -1;
    char dir[VT_PROC_SELF_MAX], maps[VT_PROC_SELF_MAX + 16];
    snprintf(maps, sizeof maps, "%s/maps", vt_proc_self(dir));
    FILE *f = vt_fd_fopen(maps);
    if (!f) return -1;
    char line[256];
    unsigned long lo, hi;
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        found = sscanf(line, "%lx-%lx", &lo, &hi) == 2 && lo == start;
        /* The rest of a long line (its path) is not a line of its own. */
        while (!strchr(line, '\n') && fgets(line, sizeof line, f)) {}
    }
    fclose(f);
    if (!found) return -1;
    char link[VT_PROC_SELF_MAX + 64];
    snprintf(link, sizeof link, "%s/map_files/%lx-%lx", dir, lo, hi);
    ssize_t n = readlink(link, out, size - 1);
    if (n <= 0 || (size_t)n >= size - 1) return -1;
    out[n] = '\0';
    return 0;
}

/* A module's file by the name /proc/self/maps gives it, except where that
 * name holds the kernel's escape of a newline ("\012"), which names no
 * file (or another one): then by the name the kernel gives the mapping's
 * file itself. libdwfl's callback opens it (the vdso's image it reads
 * through /proc/PID/mem, opened and closed within the call; a deleted
 * file it does not open): what it hands back is moved. */
static int find_elf(Dwfl_Module *m, void **user, const char *name, Dwarf_Addr base, char **file, Elf **elf) {
    char real[PATH_MAX];
    if (name && strstr(name, "\\012") && mapped_file(m, real, sizeof real) == 0) name = real;
    int fd = handed_back(dwfl_linux_proc_find_elf(m, user, name, base, file, elf), *elf);
    note_held(user, fd);
    return fd;
}

/* Whether libdwfl asks for module m's own debug file (link and crc its
 * .gnu_debuglink's, NULL when it has none) rather than for the dwz file
 * its DWARF refers to (link the .gnu_debugaltlink's name, crc 0): both
 * come through the same callback. */
static int own_debug_file(Dwfl_Module *m, const char *link) {
    GElf_Addr bias = 0;
    GElf_Word crc = 0;
    Elf *e = dwfl_module_getelf(m, &bias);
    const char *own = e ? dwelf_elf_gnu_debuglink(e, &crc) : NULL;
    return own ? link && strcmp(own, link) == 0 : !link;
}

/* A module's separate debug file: by build ID under /usr/lib/debug/.build-id,
 * else by its .gnu_debuglink where gdb looks (debuglink.h), the order of
 * libdwfl's standard callback, both opened out of the program's way.
 * Local files only: never debuginfod, which that callback asks last,
 * whose client starts libcurl and OpenSSL (their atexit handlers race a
 * program's exit, and a lookup may go to the network) inside the program,
 * at an OOM or in the live publisher. A dwz file is found by libdwfl's
 * build-ID lookup, which makes an Elf handle on it out of reach here: its
 * descriptor stays at the number it got, close on exec. */
static int find_debuginfo(Dwfl_Module *m, void **user, const char *name, Dwarf_Addr base, const char *file,
                          const char *link, GElf_Word crc, char **found) {
    int fd;
    if (!own_debug_file(m, link)) {
        fd = dwfl_build_id_find_debuginfo(m, user, name, base, file, link, crc, found);
        if (fd >= 0) fcntl(fd, F_SETFD, FD_CLOEXEC);
    } else {
        fd = vt_debuglink_by_build_id(m, found);
        if (fd < 0) fd = vt_debuglink_find(m, file, link, crc, found);
    }
    note_held(user, fd);
    return fd;
}

const Dwfl_Callbacks vt_dwfl_callbacks = {
    .find_elf = find_elf,
    .find_debuginfo = find_debuginfo,
};

int vt_dwfl_report_self(Dwfl *d) {
    char dir[VT_PROC_SELF_MAX], maps[VT_PROC_SELF_MAX + 16];
    snprintf(maps, sizeof maps, "%s/maps", vt_proc_self(dir));
    FILE *f = vt_fd_fopen(maps);
    if (!f) return errno ? errno : -1;
    int r = dwfl_linux_proc_maps_report(d, f);
    /* The vdso has no file: dwfl_linux_proc_report finds it through the
     * auxiliary vector (opening /proc/PID/auxv at the lowest number) and
     * names it "[vdso: PID]", by which libdwfl's find_elf reads its image
     * from memory. The same here, from getauxval. */
    unsigned long vdso = getauxval(AT_SYSINFO_EHDR);
    if (r == 0 && vdso && fseek(f, 0, SEEK_SET) == 0) {
        char line[256];
        unsigned long lo, hi;
        while (fgets(line, sizeof line, f)) {
            if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && lo == vdso) {
                char name[32];
                snprintf(name, sizeof name, "[vdso: %d]", (int)vt_proc_self_pid());
                if (!dwfl_report_module(d, name, lo, hi)) r = -1;
                break;
            }
            while (!strchr(line, '\n') && fgets(line, sizeof line, f)) {}
        }
    }
    fclose(f);
    return r;
}
