/* t_start_pages.c -- how many pages of a preloaded library's own data the
 * process's start has written (or read as zeros) by the time main runs.
 *
 *   t_start_pages NAME
 *
 * Counts, over the loadable segments of the library whose path ends with
 * NAME (as its program headers give them, its zeroed area included, and
 * nothing of a neighbouring mapping the kernel may have merged with it),
 * the pages present in memory that are no file's page (/proc/self/pagemap:
 * present, not file-backed): each is a page fault the start took in the
 * library's relocated tables, its data or its zeroed area (its code and
 * constant data, file pages, are not counted). Prints "pages N"; exits 1
 * when the library is not loaded. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char *want;
static int pagemap = -1, pages = -1;

static int count_range(uintptr_t lo, uintptr_t hi) {
    int n = 0;
    for (uintptr_t a = lo & ~(uintptr_t)4095; a < hi; a += 4096) {
        uint64_t e;
        if (pread(pagemap, &e, sizeof e, (off_t)(a / 4096 * sizeof e)) != sizeof e) return -1;
        if ((e >> 63) & 1 && !((e >> 61) & 1)) n++;
    }
    return n;
}

static int each_object(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size, (void)arg;
    size_t plen = strlen(info->dlpi_name), nlen = strlen(want);
    if (plen < nlen || strcmp(info->dlpi_name + plen - nlen, want) != 0) return 0;
    pages = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *p = &info->dlpi_phdr[i];
        if (p->p_type != PT_LOAD) continue;
        uintptr_t lo = info->dlpi_addr + p->p_vaddr;
        int n = count_range(lo, lo + p->p_memsz);
        if (n < 0) return pages = -1, 1;
        pages += n;
    }
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    want = argv[1];
    if ((pagemap = open("/proc/self/pagemap", O_RDONLY)) < 0) return 1;
    dl_iterate_phdr(each_object, NULL);
    if (pages < 0) return 1;
    printf("pages %d\n", pages);
    return 0;
}
