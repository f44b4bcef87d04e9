/* pipetext.h -- a pipe's or FIFO's whole text, read without blocking.
 *
 * A shell's `<(...)` (as LeakSanitizer's suppressions= reads one) is a
 * pipe: what its writer writes comes until it closes it. Opened with
 * O_NONBLOCK (a FIFO nobody writes would hold its reader forever), it is
 * read until its writer closes it, waiting at most 10 s for each piece.
 * The library reads one at exit (report/leaks.c), `vramtrace run` once
 * for every process of its command (cli/run_pipe.c). */
#ifndef VT_PIPETEXT_H
#define VT_PIPETEXT_H

#include <stddef.h>

/* More than any list of patterns; a pipe that goes on past it is not one. */
#define VT_PIPE_MAX (64u << 20)

/* fd's text (malloc'd, *len bytes, not NUL-terminated), at most `max`
 * bytes; fd is left open. NULL with *why saying why when nothing came,
 * more than `max` came, memory ran out, a read failed or its writer wrote
 * nothing for 10 s (a list cut short is no list: the leaks it would have
 * suppressed would fail the check). */
char *vt_pipe_text(int fd, size_t max, size_t *len, const char **why);

#endif
