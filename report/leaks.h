/* leaks.h -- the leak check at exit, in LeakSanitizer's words.
 *
 * Every live allocation at exit that no suppression matches is a leak, and
 * so is memory a context's reset released without a free (the program
 * never freed it; compute-sanitizer reports it at the reset). A leak is
 * memory this process allocated (LeakSanitizer's rule): an IPC mapping of
 * another process's memory left open is listed after the leaks as what it
 * is, "Open IPC mapping of N byte(s) in M mapping(s) (another process's
 * memory) opened from:", and counted in neither the SUMMARY nor the
 * result's leaks (a reset that unmaps one closes it: no leak either).
 * Leaks are grouped by stack, largest first, and printed as LSan prints
 * them, so that CI tooling that reads LSan reports reads these (a Python
 * frame, which has no address, without one):
 *
 *   ==PID==ERROR: vramtrace: detected GPU memory leaks
 *   ==PID==vramtrace: rank 3 of 8 on node1      (in a job of several ranks)
 *
 *   Direct leak of 4096 byte(s) in 1 object(s) allocated from:
 *       call site: train model.py:40 -> make_buffer src/buf.c:12
 *       kind: device memory (cudaMalloc)
 *       #0 0x55d0c2a1b1f3 in make_buffer src/buf.c:12
 *       #1 in train model.py:40
 *
 *   SUMMARY: vramtrace: 4096 byte(s) leaked in 1 allocation(s).
 *
 * The two lines of vramtrace's own: "call site:", the stack's call-site
 * label (vt_site_label), the holders table's: the user's line, then the
 * library line it went through; "kind:", what memory it is
 * (vt_leak_kind_label) and the API that made it when one made all of the
 * entry's (an entry is one stack's memory of one kind). They start with
 * neither "#" nor a leak header, so a reader of LSan's lines passes over
 * them.
 *
 * Suppressions: a file of `leak:PATTERN` lines (`#` comments); `*` matches
 * any run of characters, `^` and `$` anchor at the start and end, and an
 * unanchored pattern matches anywhere (LSan's rules). A stack is credited
 * to the rule LSan would credit: return addresses innermost first, at each
 * the first rule matching the module, else frame by frame the first
 * matching the function, else the file (leaks.c's suppressed_by). */
#ifndef VT_LEAKS_H
#define VT_LEAKS_H

#include <stdint.h>
#include <stdio.h>

#include "../tracker/tracker.h"
#include "symbolize.h"

struct vt_suppressions;

/* Read a suppressions file. NULL path: none. On a bad file or line, err
 * says why and NULL is returned. */
struct vt_suppressions *vt_suppressions_load(const char *path, char *err, size_t errsize);
void vt_suppressions_free(struct vt_suppressions *s);


struct vt_leak_result {
    uint64_t bytes, count;          /* unsuppressed */
    uint64_t suppressed_bytes, suppressed_count;
    uint64_t ipc_bytes, ipc_count;  /* IPC mappings left open: not leaks */
};

/* The leak report's name for memory of kind k (enum vt_kind): "device
 * memory", "pinned host memory", "managed memory"... */
const char *vt_leak_kind_label(int kind);

/* Each holder as a leak report prints it: a line "LEADN byte(s) in M
 * object(s) allocated from:" (LEAD "Direct leak of " in the leak report)
 * after an empty line, its "    call site: LABEL" line, then its frames as
 * LSan prints them; a stack also in `released` (nreleased of them, in
 * stack order: what a context's reset released without a free,
 * tracker/released.h) says that part after the call site, in a line of
 * vramtrace's own. */
void vt_leak_holders(FILE *f, const struct vt_holder *h, size_t n, const struct vt_symbols *sym,
                     const char *lead, const struct vt_holder *released, size_t nreleased);

/* Which stacks a leak report covers: nonzero for those it keeps. */
typedef int (*vt_leak_keep)(const struct vt_symbols *sym, uint32_t stack);

/* Print the leak report for the live allocations of s to f (nothing when
 * there is no leak and no suppression was used) and return the figures:
 * of every stack, or (keep) of those that keep accepts. place: the
 * process's place in its job (place.h's "rank 3 of 8 on node1"), said in a
 * line of vramtrace's own after the ERROR line, "==PID==vramtrace: rank 3
 * of 8 on node1", so that the leak reports of ranks sharing one log can be
 * told apart; NULL or "" for none. */
struct vt_leak_result vt_leak_report(FILE *f, const struct vt_snapshot *s, const struct vt_symbols *sym,
                                     struct vt_suppressions *sup, int pid, const char *place, vt_leak_keep keep);

#endif
