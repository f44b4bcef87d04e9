/* cmd_run.c -- `vramtrace run [--out PATH] [--report DEST] [--depth N] --
 * CMD...`: set the environment, preload the library, exec the command (its
 * exit status is the command's own). */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

#ifndef VT_LIBDIR
#define VT_LIBDIR "/usr/local/lib"
#endif

/* Find libvramtrace.so next to this executable or in the install prefix. */
static int find_library(char *out, size_t size) {
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            const char *cands[] = {"%s/libvramtrace.so", "%s/../lib/libvramtrace.so"};
            for (size_t i = 0; i < 2; i++) {
                char p[PATH_MAX + 64];
                snprintf(p, sizeof p, cands[i], exe);
                if (access(p, R_OK) == 0 && realpath(p, out)) return 0;
            }
        }
    }
    snprintf(out, size, "%s/libvramtrace.so", VT_LIBDIR);
    return access(out, R_OK) == 0 ? 0 : -1;
}

int vt_cmd_run(int argc, char **argv) {
    int i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) { i++; break; }
        if (a[0] != '-') break;
        const char *var = NULL;
        if (strcmp(a, "--out") == 0) var = "VRAMTRACE_OUT";
        else if (strcmp(a, "--report") == 0) var = "VRAMTRACE_REPORT";
        else if (strcmp(a, "--depth") == 0) var = "VRAMTRACE_DEPTH";
        else if (strcmp(a, "--leak-check") == 0) { setenv("VRAMTRACE_LEAK_CHECK", "1", 1); continue; }
        else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) { vt_usage(stdout); return 0; }
        else {
            fprintf(stderr, "vramtrace run: unknown option %s (see vramtrace --help)\n", a);
            return 2;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "vramtrace run: %s needs a value\n", a);
            return 2;
        }
        const char *v = argv[++i];
        if (strcmp(var, "VRAMTRACE_DEPTH") == 0) {
            char *end;
            long d = strtol(v, &end, 10);
            if (*v == '\0' || *end != '\0' || d < 1 || d > 256) {
                fprintf(stderr, "vramtrace run: --depth takes a number from 1 to 256, not '%s'\n", v);
                return 2;
            }
        }
        setenv(var, v, 1);
    }
    if (i >= argc) {
        fprintf(stderr, "vramtrace run: no command given (vramtrace run -- CMD [ARG...])\n");
        return 2;
    }
    char lib[PATH_MAX];
    if (find_library(lib, sizeof lib) != 0) {
        fprintf(stderr, "vramtrace run: cannot find libvramtrace.so next to this program or in %s\n",
                VT_LIBDIR);
        return 127;
    }
    const char *old = getenv("LD_PRELOAD");
    size_t len = strlen(lib) + (old ? strlen(old) + 1 : 0) + 1;
    char *preload = malloc(len);
    if (!preload) return 127;
    snprintf(preload, len, "%s%s%s", lib, old && *old ? ":" : "", old && *old ? old : "");
    setenv("LD_PRELOAD", preload, 1);
    free(preload);
    execvp(argv[i], argv + i);
    fprintf(stderr, "vramtrace run: cannot run %s: %s\n", argv[i], strerror(errno));
    return errno == ENOENT ? 127 : 126;
}

