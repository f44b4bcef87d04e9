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

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *summary;
} commands[] = {
    {"run", vt_cmd_run, "run a command with vramtrace preloaded"},
    {"diff", vt_cmd_diff, "compare two dumps: live bytes per call site, largest growth first"},
    {"report", vt_cmd_report, "turn dumps into text, json, folded stacks, html or a torch snapshot"},
};

void vt_usage(FILE *f) {
    fprintf(f,
            "usage: vramtrace run [OPTIONS] -- CMD [ARG...]\n"
            "       vramtrace report DUMP... [--format text|json|folded|html|torch] [-o FILE]\n"
            "                        [--top N] [--at exit|peak|oom]\n"
            "       vramtrace diff OLD.json NEW.json [--fail-over SIZE] [--top N]\n"
            "       vramtrace --help | --version\n\n"
            "vramtrace records every GPU memory allocation of a program (CUDA runtime and\n"
            "driver, stream-ordered pools, virtual-memory handles, managed and pinned\n"
            "memory) with its stack. At an out-of-memory failure it writes a post-mortem\n"
            "at once; at exit it reports what is still live and leaves a JSON dump.\n\n"
            "commands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].summary);
    fprintf(f,
            "\nrun options (each sets the environment variable after it; see below):\n"
            "  --out PATH          dump path pattern (VRAMTRACE_OUT)\n"
            "  --report DEST       stderr, off or a file (VRAMTRACE_REPORT)\n"
            "  --depth N           native frames per stack (VRAMTRACE_DEPTH)\n"
            "  --events N          events kept in the history (VRAMTRACE_EVENTS)\n"
            "  --top N             rows in the report's tables (VRAMTRACE_TOP)\n"
            "  --python 0|1        Python frames (VRAMTRACE_PYTHON)\n"
            "  --limit SIZE        a per-device budget, as if the GPU had SIZE (VRAMTRACE_LIMIT)\n"
            "  --leak-check        report leaks at exit and fail with status 23 (VRAMTRACE_LEAK_CHECK=1)\n"
            "  --suppressions FILE leak:PATTERN lines the leak check ignores (VRAMTRACE_SUPPRESSIONS)\n"
            "  --exitcode N        exit status when leaks remain (VRAMTRACE_EXITCODE)\n"
            "  --signal SIG        signal for on-demand dumps, 0 none (VRAMTRACE_SIGNAL)\n"
            "  --tensors           PYTORCH_NO_CUDA_MEMORY_CACHING=1: PyTorch asks CUDA for every tensor,\n"
            "                      so each live allocation is one tensor. Slower: every free becomes a\n"
            "                      cudaFree, which synchronizes the device (steps can take several\n"
            "                      times longer); use it to find which tensors hold the memory.\n\n"
            "The same works without this command: LD_PRELOAD=/path/to/libvramtrace.so CMD\n\n"
            "environment:\n");
    for (const struct vt_option_desc *d = vt_option_table; d->name; d++)
        fprintf(f, "  %-18s default %-18s %s\n", d->name, d->def, d->meaning);
}

int main(int argc, char **argv) {
    if (argc < 2) { vt_usage(stderr); return 2; }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        vt_usage(stdout);
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
