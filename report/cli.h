/* cli.h -- the vramtrace command's subcommands, one file each. */
#ifndef VT_CLI_H
#define VT_CLI_H

int vt_cmd_report(int argc, char **argv);

#endif
