/* cli.h -- the vramtrace command's subcommands, one file each. */
#ifndef VT_CLI_H
#define VT_CLI_H

#include <stdio.h>

int vt_cmd_run(int argc, char **argv);
int vt_cmd_report(int argc, char **argv);
int vt_cmd_diff(int argc, char **argv);

/* The top-level help. */
void vt_usage(FILE *f);

#endif
