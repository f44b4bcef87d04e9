/* debuglink.h -- a module's separate debug file found through its build
 * ID (/usr/lib/debug/.build-id/xx/rest.debug, as libdwfl's standard callback
 * looks first), else through the name and checksum its .gnu_debuglink
 * section gives (objcopy --only-keep-debug
 * and --add-gnu-debuglink, as Debian's and CMake's packaging split them),
 * where gdb and libdwfl's standard search look: beside the file, in a
 * .debug folder beside it, and under /usr/lib/debug with the file's own
 * folder. libdwfl's standard callback also asks debuginfod when nothing
 * is found; this one reads local files only.
 * Runs when a report is written, never in a hook. */
#ifndef VT_DEBUGLINK_H
#define VT_DEBUGLINK_H

#include <elfutils/libdwfl.h>

/* An open descriptor of module m's debug file, its name in *found
 * (malloc'd), or -1. file is m's file, link and crc its .gnu_debuglink's
 * name and CRC (link NULL: no such section, nothing to find). A file found
 * must be m's: the same build ID where m has one, else (a crc of 0 aside)
 * the CRC-32 of its whole content equal to crc, as libdwfl checks; the
 * module's own file under another name is never its debug file. */
int vt_debuglink_find(Dwfl_Module *m, const char *file, const char *link, GElf_Word crc, char **found);

/* An open descriptor of module m's debug file under
 * /usr/lib/debug/.build-id by m's build ID, its real name in *found
 * (malloc'd), or -1: the file found must carry the same build ID. Opened
 * here (vt_fd_open: out of the program's way, close on exec) and handed
 * back as a plain descriptor: libdwfl's own lookup opened it at the
 * program's lowest free number and made an Elf handle on it that reads
 * through that number, so it could not be moved. */
int vt_debuglink_by_build_id(Dwfl_Module *m, char **found);

#endif
