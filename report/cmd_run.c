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

#include "../tracker/options.h"
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

/* Each flag sets one environment variable (see the option table). */
static const struct {
    const char *flag, *var, *fixed; /* fixed: the value for a flag without one */
} flags[] = {
    {"--out", "VRAMTRACE_OUT", NULL},
    {"--report", "VRAMTRACE_REPORT", NULL},
    {"--depth", "VRAMTRACE_DEPTH", NULL},
    {"--events", "VRAMTRACE_EVENTS", NULL},
    {"--top", "VRAMTRACE_TOP", NULL},
    {"--python", "VRAMTRACE_PYTHON", NULL},
    {"--limit", "VRAMTRACE_LIMIT", NULL},
    {"--signal", "VRAMTRACE_SIGNAL", NULL},
    {"--suppressions", "VRAMTRACE_SUPPRESSIONS", NULL},
    {"--exitcode", "VRAMTRACE_EXITCODE", NULL},
    {"--leak-check", "VRAMTRACE_LEAK_CHECK", "1"},
    {"--tensors", "PYTORCH_NO_CUDA_MEMORY_CACHING", "1"},
};

int vt_cmd_run(int argc, char **argv) {
    int i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) { i++; break; }
        if (a[0] != '-') break;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) { vt_usage(stdout); return 0; }
        size_t k = 0, nflags = sizeof flags / sizeof flags[0];
        while (k < nflags && strcmp(a, flags[k].flag) != 0) k++;
        if (k == nflags) {
            fprintf(stderr, "vramtrace run: unknown option %s (see vramtrace --help)\n", a);
            return 2;
        }
        if (flags[k].fixed) {
            setenv(flags[k].var, flags[k].fixed, 1);
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "vramtrace run: %s needs a value\n", a);
            return 2;
        }
        const char *v = argv[++i];
        if (strcmp(flags[k].var, "VRAMTRACE_DEPTH") == 0) {
            char *end;
            long d = strtol(v, &end, 10);
            if (*v == '\0' || *end != '\0' || d < 1 || d > 256) {
                fprintf(stderr, "vramtrace run: --depth takes a number from 1 to 256, not '%s'\n", v);
                return 2;
            }
        }
        if (strcmp(flags[k].var, "VRAMTRACE_LIMIT") == 0) {
            uint64_t bytes;
            if (vt_parse_size(v, &bytes) != 0 || bytes == 0) {
                fprintf(stderr, "vramtrace run: --limit takes a size such as 24G or 512M, not '%s'\n", v);
                return 2;
            }
        }
        setenv(flags[k].var, v, 1);
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

