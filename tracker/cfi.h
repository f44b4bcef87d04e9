/* cfi.h -- one frame's unwind rule, decoded from .eh_frame bytes.
 *
 * The decoder reads the call frame information a compiler emits (the
 * .eh_frame_hdr search table, an FDE and its CIE, the CFA program) and boils
 * what the stack walker needs for one code address down to one 8-byte rule.
 * It reads only the bytes it is given and calls nothing: its callers own the
 * memory and keep it mapped while it reads. Internal to tracker/. */
#ifndef VT_CFI_H
#define VT_CFI_H

#include <stdint.h>

/* How to step from a frame whose return address (or pc) is `ip` to its
 * caller. */
enum {
    VT_RULE_CFA_BP = 1,   /* the CFA is rbp + cfa_off, else rsp + cfa_off */
    VT_RULE_BP_SAVED = 2, /* the caller's rbp is at CFA + bp_off, else rbp is unchanged */
    VT_RULE_END = 4,      /* the outermost frame: the CFI says the return address is undefined */
    VT_RULE_OTHER = 8,    /* not walkable here: libunwind does the capture */
};

/* Laid out so that, held in one 64-bit register, the flags are one shift
 * away and bp_off one arithmetic shift (the walker reads both a frame). */
struct vt_rule {
    int32_t cfa_off;
    uint8_t flags;
    uint8_t known; /* 1 in every rule made here: a stored rule is never all zero */
    int16_t bp_off;
};

/* The FDE whose range holds `pc`, from the .eh_frame_hdr at `hdr` (its
 * search table must be datarel sdata4, what linkers write); NULL when none
 * does or the header is not one this reader knows. */
const uint8_t *vt_cfi_find_fde(const uint8_t *hdr, uintptr_t pc);

/* The rule at `pc` from the FDE at `fde` (and the CIE it points back to):
 * VT_RULE_OTHER for anything malformed, for a pc outside the FDE's range,
 * and for any rule the walker cannot follow (a CFA expression, a return
 * address not just below the CFA, rbp kept other than unchanged or at a
 * constant offset at least 8 bytes below the CFA, a signal frame). */
struct vt_rule vt_cfi_rule(const uint8_t *fde, uintptr_t pc);

#endif
