/* inlines.h -- the compilation unit, the function and the functions the
 * compiler inlined at an address, from DWARF.
 *
 * libdw's dwarf_getscopes answers one address by walking its whole
 * compilation unit (three times for an address in inlined code: the
 * scopes, the inlined function's definition, the DIE's own scopes), so a
 * report over thousands of addresses in one large unit took half a minute.
 * Here each unit is walked once, at its first address: every function and
 * inlined call with code is kept with its address ranges, the ranges
 * sorted, each knowing the range it lies in; an address is then a binary
 * search and a few steps out. The unit itself is found through
 * .debug_aranges, else (clang writes none unless asked) through the
 * units' own ranges, each module's units read once.
 * Runs when a report is written, never in a hook. */
#ifndef VT_INLINES_H
#define VT_INLINES_H

#include <elfutils/libdwfl.h>

/* The most functions inlined at one address that a chain keeps (deeper
 * nests keep their innermost, and the place the outermost was inlined). */
#define VT_INLINES_MAX 32

struct vt_inlines;

/* An empty set of units; NULL when memory ran out. */
struct vt_inlines *vt_inlines_new(void);

/* Every unit and module read freed: before the Dwfl they came from ends. */
void vt_inlines_free(struct vt_inlines *x);

/* The unit that holds pc (an address of module m, as libdwfl numbers
 * them) into *cu, the module's bias (pc - bias is the unit's address) into
 * *bias: 0, or -1 when there is none (no DWARF, or pc in none of its
 * units). */
int vt_inlines_unit(struct vt_inlines *x, Dwfl_Module *m, Dwarf_Addr pc, Dwarf_Die *cu, Dwarf_Addr *bias);

/* What DWARF says is at pc: the functions inlined there, innermost first
 * (DW_TAG_inlined_subroutine: in[0..n-1]; `total` of them in all, and
 * when that is more than kept, `outermost` is the last, whose call site is
 * in the function), and the function that holds them (has_func). */
struct vt_inline_chain {
    Dwarf_Die cu;
    Dwarf_Die in[VT_INLINES_MAX];
    int n, total;
    Dwarf_Die outermost;
    Dwarf_Die func;
    int has_func;
};

/* The chain at pc, keeping at most max (<= VT_INLINES_MAX) inlined
 * functions: 0 (n may be 0: nothing inlined there), or -1 when DWARF says
 * nothing of pc. The DIEs are valid while m's Dwfl is. */
int vt_inlines_at(struct vt_inlines *x, Dwfl_Module *m, Dwarf_Addr pc, struct vt_inline_chain *c, int max);

#endif
