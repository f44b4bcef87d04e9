/* debuglink.c -- separate debug files by build ID and .gnu_debuglink
 * (debuglink.h). */
#define _GNU_SOURCE
#include <elfutils/libdwelf.h>
#include <errno.h>
#include <fcntl.h>
#include <libelf.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/fdkeep.h"
#include "debuglink.h"

/* Where distributions install debug files named after the file's path. */
#define DEBUG_ROOT "/usr/lib/debug"

/* The CRC-32 .gnu_debuglink holds (ISO 3309, the polynomial zlib uses),
 * table-driven: a C library's debug file is tens of megabytes. */
static uint32_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
        crc_table[i] = c;
    }
}

/* Whether fd's whole content has the CRC-32 crc. */
static int crc_matches(int fd, uint32_t crc) {
    pthread_once(&crc_once, crc_init);
    unsigned char buf[65536];
    uint32_t c = 0xffffffffu;
    off_t at = 0;
    for (;;) {
        ssize_t n = pread(fd, buf, sizeof buf, at);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return 0;
        if (n == 0) break;
        for (ssize_t i = 0; i < n; i++) c = crc_table[(c ^ buf[i]) & 0xff] ^ (c >> 8);
        at += n;
    }
    return (c ^ 0xffffffffu) == crc;
}

/* Whether the ELF file open at fd carries the build ID id (len bytes). */
static int build_id_matches(int fd, const unsigned char *id, int len) {
    Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    if (!e) return 0;
    const void *got = NULL;
    ssize_t n = dwelf_elf_gnu_build_id(e, &got);
    int same = n == len && got && memcmp(got, id, (size_t)len) == 0;
    elf_end(e);
    return same;
}

/* The candidate path, opened when it is m's debug file (see debuglink.h);
 * main_st the module's file, never taken for its own debug file. */
static int try_path(Dwfl_Module *m, const char *path, const struct stat *main_st, GElf_Word crc) {
    int fd = vt_fd_open(AT_FDCWD, path, O_RDONLY, 0);
    if (fd < 0) return -1;
    struct stat st;
    int ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
             !(main_st && st.st_dev == main_st->st_dev && st.st_ino == main_st->st_ino);
    if (ok) {
        const unsigned char *id = NULL;
        GElf_Addr vaddr;
        int len = dwfl_module_build_id(m, &id, &vaddr);
        ok = len > 0 ? build_id_matches(fd, id, len) : crc == 0 || crc_matches(fd, crc);
    }
    if (!ok) {
        close(fd);
        return -1;
    }
    return fd;
}

/* The search for one name of the module's file: its folder, its .debug
 * folder, then DEBUG_ROOT with the folder's path under it, shorter and
 * shorter as libdwfl goes on (a tree installed under a prefix that was
 * not its build's), last DEBUG_ROOT itself. */
static int search(Dwfl_Module *m, const char *file, const char *link, GElf_Word crc, char **found) {
    const char *slash = strrchr(file, '/');
    char dir[PATH_MAX];
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if ((size_t)(slash - file) >= sizeof dir) return -1;
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash - file), file);
    struct stat main_st;
    int have_main = stat(file, &main_st) == 0;
    char path[PATH_MAX * 2];
    int fd = -1;
    snprintf(path, sizeof path, "%s/%s", dir, link);
    fd = try_path(m, path, have_main ? &main_st : NULL, crc);
    if (fd < 0) {
        snprintf(path, sizeof path, "%s/.debug/%s", dir, link);
        fd = try_path(m, path, have_main ? &main_st : NULL, crc);
    }
    for (const char *sub = dir[0] == '/' ? dir : NULL; fd < 0 && sub; sub = strchr(sub + 1, '/')) {
        snprintf(path, sizeof path, DEBUG_ROOT "%s/%s", sub, link);
        fd = try_path(m, path, have_main ? &main_st : NULL, crc);
    }
    if (fd < 0 && dir[0] == '/') {
        snprintf(path, sizeof path, DEBUG_ROOT "/%s", link);
        fd = try_path(m, path, have_main ? &main_st : NULL, crc);
    }
    if (fd >= 0 && !(*found = strdup(path))) {
        close(fd);
        fd = -1;
    }
    return fd;
}

int vt_debuglink_by_build_id(Dwfl_Module *m, char **found) {
    const unsigned char *id = NULL;
    GElf_Addr vaddr;
    int len = m && found ? dwfl_module_build_id(m, &id, &vaddr) : -1;
    /* libdwfl's bounds: shorter or longer IDs are no lookup key. */
    if (len < 3 || len > 64) return -1;
    char path[sizeof DEBUG_ROOT "/.build-id/" + 2 * 64 + sizeof ".debug"];
    int n = snprintf(path, sizeof path, DEBUG_ROOT "/.build-id/%02x/", id[0]);
    for (int i = 1; i < len; i++) n += snprintf(path + n, sizeof path - (size_t)n, "%02x", id[i]);
    snprintf(path + n, sizeof path - (size_t)n, ".debug");
    int fd = vt_fd_open(AT_FDCWD, path, O_RDONLY, 0);
    if (fd < 0) return -1;
    char *real = realpath(path, NULL);
    if (!build_id_matches(fd, id, len) || !(*found = real ? real : strdup(path))) {
        free(real);
        close(fd);
        return -1;
    }
    return fd;
}

int vt_debuglink_find(Dwfl_Module *m, const char *file, const char *link, GElf_Word crc, char **found) {
    if (!m || !file || !link || !link[0] || !found) return -1;
    int fd = search(m, file, link, crc, found);
    if (fd >= 0) return fd;
    /* Reached through a symbolic link, the file may have its debug file
     * beside its target instead. */
    char *real = realpath(file, NULL);
    if (real && strcmp(real, file) != 0) fd = search(m, real, link, crc, found);
    free(real);
    return fd;
}
