/* cli.h -- the vramtrace command's subcommands, one file each. */
#ifndef VT_CLI_H
#define VT_CLI_H

#include <stdint.h>
#include <stdio.h>

int vt_cmd_run(int argc, char **argv);
int vt_cmd_report(int argc, char **argv);
int vt_cmd_diff(int argc, char **argv);
int vt_cmd_top(int argc, char **argv);
int vt_cmd_metrics(int argc, char **argv);

/* A whole number from lo to hi written in decimal, nothing else (no sign
 * unless lo < 0, no spaces, no suffix). Returns 0, or -1 with *out
 * unchanged: a value out of range is refused, never wrapped. */
int vt_cli_count(const char *s, long lo, long hi, long *out);

/* Flush standard output; 0, or 1 after one error line "CMD: writing to
 * standard output failed: REASON" when the output did not get through. */
int vt_cli_flush(const char *cmd);

/* `vramtrace run`'s suppressions pipe or FIFO at path, read once (until
 * its writer closes it, at most 10 s for each piece, 64 MiB), written to
 * the new file `to`, mode 0600 (cli/run_pipe.c). 0, or -1 with errno or
 * *why (nothing came). */
int vt_run_copy_pipe(const char *path, const char *to, const char **why);

/* Whether the LD_PRELOAD entry of n bytes at entry names a sanitizer's
 * runtime (libasan.so.8, libclang_rt.asan-x86_64.so, and those of
 * hwasan, tsan, msan, lsan, ubsan), which must come before libvramtrace.so
 * (cli/run_sanitizer.c). */
int vt_run_is_sanitizer(const char *entry, size_t n);

/* The sanitizer runtime the program cmd (found in PATH as execvp finds
 * it) names among the libraries it needs, as it names it, into out: 0,
 * or -1 when it names none or is no dynamic ELF program of this machine's
 * (a script, a static program). */
int vt_run_needed_sanitizer(const char *cmd, char *out, size_t size);

/* The top-level help. */
void vt_usage(FILE *f);

/* The README's options table in markdown (`vramtrace --options-markdown`,
 * cli/options_md.c). */
void vt_options_markdown(FILE *f);

#endif
