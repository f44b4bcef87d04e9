/* t_start_pages.c -- how many pages of a preloaded library's own data the
 * process's start has written (or read as zeros) by the time main runs.
 *
 *   t_start_pages NAME
 *
 * Counts, over the mappings of the library whose path ends with NAME and
 * the anonymous mapping right after its last one (its zeroed area), the
 * pages present in memory that are no file's page (/proc/self/pagemap:
 * present, not file-backed): each is a page fault the start took in the
 * library's relocated tables, its data or its zeroed area (its code and
 * constant data, file pages, are not counted). Prints "pages N". */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int count_range(int pm, uintptr_t lo, uintptr_t hi) {
    int n = 0;
    for (uintptr_t a = lo; a < hi; a += 4096) {
        uint64_t e;
        if (pread(pm, &e, sizeof e, (off_t)(a / 4096 * sizeof e)) != sizeof e) return -1;
        if ((e >> 63) & 1 && !((e >> 61) & 1)) n++;
    }
    return n;
}

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    FILE *maps = fopen("/proc/self/maps", "r");
    int pm = open("/proc/self/pagemap", O_RDONLY);
    if (!maps || pm < 0) return 1;
    char line[4096];
    int pages = 0, in = 0;
    size_t nlen = strlen(argv[1]);
    while (fgets(line, sizeof line, maps)) {
        uintptr_t lo, hi;
        char path[4096] = "";
        if (sscanf(line, "%lx-%lx %*s %*s %*s %*s %4095s", &lo, &hi, path) < 2) continue;
        size_t plen = strlen(path);
        int ours = plen >= nlen && strcmp(path + plen - nlen, argv[1]) == 0;
        if (ours || (in && path[0] == '\0')) {
            int n = count_range(pm, lo, hi);
            if (n < 0) return 1;
            pages += n;
        }
        if (!ours && in) break; /* past the zeroed area */
        in = ours;
    }
    printf("pages %d\n", pages);
    return 0;
}
