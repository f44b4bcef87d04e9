/* suppfile.h -- a suppressions file's patterns, read one way for the
 * library's leak check (report/leaks.c) and for `vramtrace run`'s check of
 * its --suppressions flag (cli/cmd_run.c), so that the flag is refused for
 * exactly what every process of the command would refuse, in the same
 * words.
 *
 * The file: `leak:PATTERN` lines of any length, `#` comments and blank
 * lines, spaces and tabs around a line and a CR before its newline left
 * out, a UTF-8 byte order mark before the first line skipped. A line that
 * is anything else, or holds a NUL byte, refuses the whole file (LSan dies
 * on a file it cannot parse; a list read in part would suppress other
 * leaks than it says). A regular file is read as it is, a pipe or FIFO as
 * long as its writer writes (common/pipetext.h). */
#ifndef VT_SUPPFILE_H
#define VT_SUPPFILE_H

#include <stddef.h>

/* The patterns of the file at path: 0 with *patterns (malloc'd, each
 * pattern malloc'd; vt_supp_free) and *n of them, none for a file with no
 * rule; or -1 with err saying why, in one line: "cannot read suppressions
 * NAME: WHY" or "NAME:LINE: WHAT". NAME is `name`, or path when NULL (the
 * name the user gave, where path is a copy). */
int vt_supp_read(const char *path, const char *name, char ***patterns, size_t *n, char *err, size_t errsize);
void vt_supp_free(char **patterns, size_t n);

#endif
