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

#include "../common/options.h"
#include "cli.h"

#ifndef VT_VERSION
#define VT_VERSION "0.1.0"
#endif
#ifndef VT_LIBDIR
#define VT_LIBDIR "/usr/local/lib"
#endif

/* `valued`: the command's options that take a value, which split_values
 * lets it also take after '=' (run reads its own, the options table's). */
static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *summary;
    const char *valued;
} commands[] = {
    {"run", vt_cmd_run, "run a command with vramtrace preloaded", NULL},
    {"diff", vt_cmd_diff, "compare two dumps: live bytes per call site, largest growth first", "--fail-over --top"},
    {"report", vt_cmd_report, "turn dumps into text, json, folded stacks, html or a torch snapshot",
     "--format --output --top --at --folded-root"},
    {"metrics", vt_cmd_metrics, "the traced processes' live counters for Prometheus (text, file or HTTP)",
     "--textfile --listen --top --interval"},
    {"top", vt_cmd_top, "the traced processes running now: live and peak bytes, growth, call sites",
     "--interval --sort"},
};

/* argv with each word `--NAME=VALUE` whose --NAME is one of `valued`
 * (space-separated) made two words, `--NAME` and `VALUE`, as GNU tools
 * take them: one reading for every command, which then sees only the
 * value after a space. Any other word stays as it is (`--once=1`, a
 * switch's, is still an unknown option); the name is cut in place (its
 * '=' made the end), so that only the list is allocated, for the caller
 * to free; argv itself for a command without `valued` or when memory ran
 * out. */
static char **split_values(int *argc, char **argv, const char *valued) {
    if (!valued) return argv;
    char **out = calloc((size_t)*argc * 2 + 1, sizeof *out);
    if (!out) return argv;
    int n = 0;
    for (int i = 0; i < *argc; i++) {
        const char *a = argv[i], *eq = strncmp(a, "--", 2) == 0 ? strchr(a, '=') : NULL;
        size_t len = eq ? (size_t)(eq - a) : 0;
        int known = 0;
        for (const char *w = valued; eq && *w; w += strspn(w, " ")) {
            size_t k = strcspn(w, " ");
            known |= k == len && strncmp(w, a, len) == 0;
            w += k;
        }
        if (known) {
            argv[i][len] = '\0';
            out[n++] = argv[i];
            out[n++] = (char *)eq + 1;
        } else {
            out[n++] = argv[i];
        }
    }
    *argc = n;
    return out;
}

int vt_cli_count(const char *s, long lo, long hi, long *out) {
    if (!s || !((s[0] >= '0' && s[0] <= '9') || (s[0] == '-' && lo < 0))) return -1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end != '\0' || end == s || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

void vt_usage(FILE *f) {
    fprintf(f,
            "usage: vramtrace run [OPTIONS] -- CMD [ARG...]\n"
            "       vramtrace report DUMP... [--format text|json|folded|html|torch] [-o FILE]\n"
            "                        [--top N] [--at exit|peak|oom] [--folded-root site|none]\n"
            "       vramtrace diff OLD.json NEW.json [--fail-over SIZE] [--top N]\n"
            "       vramtrace top [PID] [--once] [--bytes] [--interval S] [--sort KEY]\n"
            "       vramtrace metrics [--textfile DIR | --listen [HOST:]PORT] [--top N]\n"
            "                         [--interval S] [--once] [--openmetrics]\n"
            "       vramtrace --help | --version\n\n"
            "vramtrace records every GPU memory allocation of a program (CUDA runtime and\n"
            "driver, stream-ordered pools, virtual-memory handles, managed and pinned\n"
            "memory) with its stack. At an out-of-memory failure it writes a post-mortem\n"
            "at once; at exit it reports what is still live and leaves a JSON dump.\n\n"
            "commands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].summary);
    fprintf(f,
            "\nrun options (each sets the environment variable after it; see below):\n");
    for (int i = 0; i < VT_O_COUNT; i++) {
        const struct vt_option_desc *d = &vt_option_table[i];
        if (!d->flag) continue;
        char flag[64];
        snprintf(flag, sizeof flag, "%s%s%s", d->flag, d->arg ? " " : "", d->arg ? d->arg : "");
        if (d->type == VT_OPT_FOREIGN) {
            fprintf(f, "  %-19s ", flag);
            for (const char *p = d->flag_help; *p; p++) {
                fputc(*p, f);
                if (*p == '\n') fprintf(f, "%22s", "");
            }
            fputc('\n', f);
        } else {
            fprintf(f, "  %-19s %s (%s%s)\n", flag, d->flag_help, d->name, d->arg ? "" : "=1");
        }
    }
    fputs("\nThe same works without this command: LD_PRELOAD=/path/to/libvramtrace.so CMD\n\n"
          "environment:\n", f);
    /* Columns as wide as their widest entry: names and defaults vary. */
    int wname = 0, wdef = 0;
    for (int i = 0; i < VT_O_COUNT; i++) {
        const struct vt_option_desc *d = &vt_option_table[i];
        if (d->type == VT_OPT_FOREIGN) continue;
        if ((int)strlen(d->name) > wname) wname = (int)strlen(d->name);
        if ((int)strlen(d->def) > wdef) wdef = (int)strlen(d->def);
    }
    for (int i = 0; i < VT_O_COUNT; i++) {
        const struct vt_option_desc *d = &vt_option_table[i];
        if (d->type != VT_OPT_FOREIGN)
            fprintf(f, "  %-*s  default %-*s  %s\n", wname, d->name, wdef, d->def, d->meaning);
    }
}

int vt_cli_flush(const char *cmd) {
    if (fflush(stdout) == 0 && !ferror(stdout)) return 0;
    fprintf(stderr, "%s: writing to standard output failed: %s\n", cmd, strerror(errno ? errno : EIO));
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 2) { vt_usage(stderr); return 2; }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        vt_usage(stdout);
        return vt_cli_flush("vramtrace");
    }
    if (strcmp(argv[1], "--options-markdown") == 0) {
        vt_options_markdown(stdout);
        return vt_cli_flush("vramtrace");
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("vramtrace %s\n", VT_VERSION);
        return vt_cli_flush("vramtrace");
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0) {
            int n = argc - 1;
            char **args = split_values(&n, argv + 1, commands[i].valued);
            int rc = commands[i].fn(n, args);
            if (args != argv + 1) free(args);
            return rc;
        }
    fprintf(stderr, "vramtrace: unknown command '%s' (see vramtrace --help)\n", argv[1]);
    return 2;
}
