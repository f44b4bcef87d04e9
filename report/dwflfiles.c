/* dwflfiles.c -- the files libdwfl reads to name this process's frames,
 * out of the program's way (dwflfiles.h). */
#define _GNU_SOURCE
#include <elfutils/libdwelf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "../common/fdkeep.h"
#include "../common/procself.h"
#include "debuglink.h"
#include "dwflfiles.h"

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
    int fd = dwfl_linux_proc_find_elf(m, user, name, base, file, elf);
    return handed_back(fd, *elf);
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
    if (!own_debug_file(m, link)) {
        int fd = dwfl_build_id_find_debuginfo(m, user, name, base, file, link, crc, found);
        if (fd >= 0) fcntl(fd, F_SETFD, FD_CLOEXEC);
        return fd;
    }
    int fd = vt_debuglink_by_build_id(m, found);
    return fd >= 0 ? fd : vt_debuglink_find(m, file, link, crc, found);
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
