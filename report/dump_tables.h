/* dump_tables.h -- the tables of a version 2 dump: strings, frames and
 * stacks, each stored once.
 *
 * A stack is a node of a prefix tree of frames (heaptrack's trace tree): a
 * node is (its caller's node, its frame), so stacks that share their
 * callers share those nodes, and a frame (a return address with its
 * function, file, line, module and offset) is written once however many
 * stacks go through it. A return address in inlined code is several
 * frames (one for each function inlined there, then the one holding
 * them) and so several nodes, one under the other. Every string (a function, a file, a module, an
 * allocation's api and kind) is one entry of "strings". The writer streams:
 * what it keeps in memory is one index entry per distinct string, frame and
 * node, never the text it writes. */
#ifndef VT_DUMP_TABLES_H
#define VT_DUMP_TABLES_H

#include <stdint.h>
#include <stdio.h>

#include "../tracker/tracker.h"
#include "symbolize.h"

struct vt_strtab;

/* A new, empty string table, or NULL when memory ran out. */
struct vt_strtab *vt_strtab_new(void);
void vt_strtab_free(struct vt_strtab *t);

/* The index of string s (NULL: -1) in t, added when new; s must stay valid
 * until t is written. -2 when memory ran out. */
int64_t vt_strtab_index(struct vt_strtab *t, const char *s);

/* Write ,"strings":[...] (every string in index order). */
void vt_strtab_write(FILE *f, const struct vt_strtab *t);

/* Write "nodes", "stacks" and "frames" of snapshot s (docs/dump-format.md,
 * version 2), adding their strings to t; each begins with a comma. Returns
 * 0, or -1 when memory ran out (the dump is then cut short: the caller
 * fails the write). */
int vt_dump_write_stacks(FILE *f, const struct vt_snapshot *s, const struct vt_symbols *sym, struct vt_strtab *t);

/* Write ,"event_kinds":[...],"events":"BASE64" (the packed ring). */
void vt_dump_write_events(FILE *f, const struct vt_snapshot *s);

#endif
