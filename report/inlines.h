/* inlines.h -- the functions the compiler inlined at an address, from
 * DWARF.
 *
 * libdw's dwarf_getscopes answers one address by walking its whole
 * compilation unit (three times for an address in inlined code: the
 * scopes, the inlined function's definition, the DIE's own scopes), so a
 * report over thousands of addresses in one large unit took half a minute.
 * Here each unit is walked once, at its first address: every function and
 * inlined call with code is kept with its address ranges and the one it
 * sits in, and an address is then found in the function that holds it.
 * Runs when a report is written, never in a hook. */
#ifndef VT_INLINES_H
#define VT_INLINES_H

#include <elfutils/libdwfl.h>

struct vt_inlines;

/* An empty set of units; NULL when memory ran out. */
struct vt_inlines *vt_inlines_new(void);

/* Every unit walked freed: before the Dwfl they came from ends. */
void vt_inlines_free(struct vt_inlines *x);

/* The DW_TAG_inlined_subroutine DIEs that hold pc (an address of module
 * m, as libdwfl numbers it), innermost first, into out (room for max);
 * returns how many (0: none, or no DWARF), and the unit's DIE in *cu (for
 * the unit's file table: DW_AT_call_file). The DIEs are valid while m's
 * Dwfl is. */
int vt_inlines_at(struct vt_inlines *x, Dwfl_Module *m, Dwarf_Addr pc, Dwarf_Die *out, int max, Dwarf_Die *cu);

#endif
