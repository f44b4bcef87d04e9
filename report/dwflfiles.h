/* dwflfiles.h -- the files libdwfl reads to name this process's frames:
 * its module list, the modules' files and their separate debug files.
 *
 * A symbolizing session holds each module's file and debug file open
 * from the first frame in it to its end: a second at an out-of-memory
 * failure or at exit, seconds in the live publisher's thread while the
 * program runs on. libdwfl opens them with a plain open(), at the
 * program's lowest free numbers and inherited across exec: a child the
 * program started meanwhile held libtorch's descriptors, the program's
 * own open() got 5 instead of 3, and one that dup2'd onto a number it
 * took for free closed the symbolizer's file under it. So every
 * descriptor that a session keeps is the library's own (common/fdkeep.h:
 * close on exec, 700 and up): the module list and the debug files are
 * opened here, and a module's file, which libdwfl's callback opens, is
 * moved there before libdwfl sees it. */
#ifndef VT_DWFLFILES_H
#define VT_DWFLFILES_H

#include <elfutils/libdwfl.h>

/* find_elf and find_debuginfo for a Dwfl on this process or on a file
 * (a library that has left it): local files only, never debuginfod. */
extern const Dwfl_Callbacks vt_dwfl_callbacks;

/* This process's modules reported to d (between dwfl_begin or
 * dwfl_report_begin and dwfl_report_end), from its maps read where they
 * are whole (common/procself.h), the vdso among them: 0, else nonzero
 * (an errno, or -1). */
int vt_dwfl_report_self(Dwfl *d);

/* The module of the ELF file at path, reported to d at load bias `base`
 * (dwfl_report_elf, the descriptor opened here, out of the program's
 * way): NULL when it cannot be. */
Dwfl_Module *vt_dwfl_report_file(Dwfl *d, const char *path, GElf_Addr base);

/* dwfl_end, for a Dwfl made with vt_dwfl_callbacks: libdwfl closes the
 * descriptors it holds by their numbers, so a number whose file the
 * program replaced meanwhile (a daemon's closefrom and its own open, a
 * dup2) has the program's file held aside across the end and put back
 * at it, as it was. errno unchanged. */
void vt_dwfl_end(Dwfl *d);

#endif
