/* cli.c -- the vramtrace command: `vramtrace run -- CMD...` and friends.
 *
 * Each subcommand is one function registered in the table below. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../tracker/options.h"
#include "cli.h"

#ifndef VT_VERSION
#define VT_VERSION "0.1.0"
#endif
#ifndef VT_LIBDIR
#define VT_LIBDIR "/usr/local/lib"
#endif

static int cmd_run(int argc, char **argv);

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *summary;
} commands[] = {
    {"run", cmd_run, "run a command with vramtrace preloaded"},
    {"report", vt_cmd_report, "turn dumps into text, json, folded stacks, html or a torch snapshot"},
};

static void usage(FILE *f) {
    fprintf(f,
            "usage: vramtrace run [--out PATH] [--report DEST] [--depth N] -- CMD [ARG...]\n"
            "       vramtrace report DUMP... [--format text|json|folded|html|torch] [-o FILE]\n"
            "                        [--top N] [--at exit|peak|oom]\n"
            "       vramtrace --help | --version\n\n"
            "vramtrace records every GPU memory allocation of a program (CUDA runtime and\n"
            "driver, stream-ordered pools, virtual-memory handles, managed and pinned\n"
            "memory) with its stack. At an out-of-memory failure it writes a post-mortem\n"
            "at once; at exit it reports what is still live and leaves a JSON dump.\n\n"
            "commands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].summary);
    fprintf(f,
            "\nrun options (each sets the environment variable after it):\n"
            "  --out PATH      dump path pattern (VRAMTRACE_OUT)\n"
            "  --report DEST   stderr, off or a file (VRAMTRACE_REPORT)\n"
            "  --depth N       native frames per stack (VRAMTRACE_DEPTH)\n\n"
            "The same works without this command: LD_PRELOAD=/path/to/libvramtrace.so CMD\n\n"
            "environment:\n");
    for (const struct vt_option_desc *d = vt_option_table; d->name; d++)
        fprintf(f, "  %-18s default %-18s %s\n", d->name, d->def, d->meaning);
}

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

static int cmd_run(int argc, char **argv) {
    int i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) { i++; break; }
        if (a[0] != '-') break;
        const char *var = NULL;
        if (strcmp(a, "--out") == 0) var = "VRAMTRACE_OUT";
        else if (strcmp(a, "--report") == 0) var = "VRAMTRACE_REPORT";
        else if (strcmp(a, "--depth") == 0) var = "VRAMTRACE_DEPTH";
        else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) { usage(stdout); return 0; }
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

int main(int argc, char **argv) {
    if (argc < 2) { usage(stderr); return 2; }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("vramtrace %s\n", VT_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0) return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "vramtrace: unknown command '%s' (see vramtrace --help)\n", argv[1]);
    return 2;
}
