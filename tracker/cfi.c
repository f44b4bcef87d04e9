/* cfi.c -- the .eh_frame decoder: from CFI bytes to one frame's rule.
 *
 * The rule for a pc comes from the CFI of the object that holds it (the
 * sorted table of .eh_frame_hdr, then the FDE and its CIE). Only what the
 * walker needs is kept: where the CFA is, where the return address and rbp
 * are. Anything else the CFI says about them makes the rule VT_RULE_OTHER.
 * Every read is bounded by the lengths the CFI itself gives. */
#include <string.h>

#include "cfi.h"

struct cursor {
    const uint8_t *p, *end;
    int bad;
};

static uint8_t u8(struct cursor *c) {
    if (c->p >= c->end) { c->bad = 1; return 0; }
    return *c->p++;
}

static uint64_t uleb(struct cursor *c) {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        uint8_t b = u8(c);
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) return v;
    }
    c->bad = 1;
    return v;
}

static int64_t sleb(struct cursor *c) {
    int64_t v = 0;
    int shift = 0;
    uint8_t b;
    do {
        b = u8(c);
        if (shift < 64) v |= (int64_t)((uint64_t)(b & 0x7f) << shift);
        shift += 7;
    } while ((b & 0x80) && !c->bad);
    if (shift < 64 && (b & 0x40)) v |= -((int64_t)1 << shift);
    return v;
}

static uint64_t fixed(struct cursor *c, int n) {
    if (c->end - c->p < n) { c->bad = 1; return 0; }
    uint64_t v = 0;
    memcpy(&v, c->p, (size_t)n); /* little-endian */
    c->p += n;
    return v;
}

/* A DW_EH_PE_* encoded pointer. `datarel` is the base for datarel
 * (the .eh_frame_hdr). */
static uintptr_t pointer(struct cursor *c, uint8_t enc, uintptr_t datarel) {
    if (enc == 0xff) return 0; /* omit */
    uintptr_t field = (uintptr_t)c->p;
    uint64_t v;
    switch (enc & 0x0f) {
    case 0x00: v = fixed(c, 8); break;
    case 0x01: v = uleb(c); break;
    case 0x02: v = fixed(c, 2); break;
    case 0x03: v = fixed(c, 4); break;
    case 0x04: v = fixed(c, 8); break;
    case 0x09: v = (uint64_t)sleb(c); break;
    case 0x0a: v = (uint64_t)(int64_t)(int16_t)fixed(c, 2); break;
    case 0x0b: v = (uint64_t)(int64_t)(int32_t)fixed(c, 4); break;
    case 0x0c: v = fixed(c, 8); break;
    default: c->bad = 1; return 0;
    }
    switch (enc & 0x70) {
    case 0x00: break;
    case 0x10: v += field; break;
    case 0x30: v += datarel; break;
    default: c->bad = 1; return 0;
    }
    if (enc & 0x80) { c->bad = 1; return 0; } /* indirect: not in CFI of code we walk */
    return (uintptr_t)v;
}

/* One register's rule, for the two registers the walker follows. */
enum { REG_SAME, REG_UNDEF, REG_OFFSET, REG_OTHER };
struct reg_rule { int how; int64_t off; };
struct cfi_row {
    int cfa_reg, cfa_other;
    int64_t cfa_off;
    struct reg_rule bp, ra;
};

struct cie {
    uint64_t code_align;
    int64_t data_align;
    uint64_t ra_reg;
    uint8_t fde_enc;
    int has_z, signal;
    const uint8_t *insns, *end;
};

static int parse_cie(const uint8_t *at, struct cie *cie) {
    struct cursor c = {at, at + 4, 0};
    uint64_t len = fixed(&c, 4);
    if (len == 0 || len == 0xffffffff) return 0;
    c.end = at + 4 + len;
    if (fixed(&c, 4) != 0) return 0; /* a CIE's id is 0 in .eh_frame */
    uint8_t version = u8(&c);
    if (version != 1 && version != 3) return 0;
    const char *aug = (const char *)c.p;
    size_t auglen = strnlen(aug, (size_t)(c.end - c.p));
    c.p += auglen + 1;
    if (c.p > c.end) return 0;
    memset(cie, 0, sizeof *cie);
    cie->fde_enc = 0; /* absptr */
    cie->code_align = uleb(&c);
    cie->data_align = sleb(&c);
    cie->ra_reg = version == 1 ? u8(&c) : uleb(&c);
    if (aug[0] == 'z') {
        cie->has_z = 1;
        uint64_t n = uleb(&c);
        const uint8_t *after = c.p + n;
        for (size_t i = 1; i < auglen && !c.bad; i++) {
            switch (aug[i]) {
            case 'R': cie->fde_enc = u8(&c); break;
            case 'L': (void)u8(&c); break;
            case 'P': { uint8_t e = u8(&c); (void)pointer(&c, e & 0x7f, 0); break; }
            case 'S': cie->signal = 1; break;
            default: c.p = after; i = auglen; break; /* unknown: data length says where it ends */
            }
        }
        c.p = after;
    } else if (auglen) {
        return 0;
    }
    if (c.bad || c.p > c.end) return 0;
    cie->insns = c.p;
    cie->end = c.end;
    return 1;
}

static void set_reg(struct cfi_row *row, uint64_t reg, int how, int64_t off) {
    struct reg_rule r = {how, off};
    if (reg == 6) row->bp = r;
    else if (reg == 16) row->ra = r;
}

/* Run CFA instructions until the row for `pc`; `init` is the CIE's row
 * (for DW_CFA_restore). Returns 0 on anything malformed. */
static int run_cfa(struct cursor *c, const struct cie *cie, uintptr_t loc, uintptr_t pc,
                   struct cfi_row *row, const struct cfi_row *init) {
    struct cfi_row stack[8];
    int depth = 0;
    while (c->p < c->end && !c->bad) {
        uint8_t op = u8(c);
        uint64_t reg, delta = 0;
        int advance = 0;
        switch (op >> 6) {
        case 1: delta = op & 0x3f; advance = 1; break;
        case 2: reg = op & 0x3f; set_reg(row, reg, REG_OFFSET, (int64_t)uleb(c) * cie->data_align); continue;
        case 3:
            reg = op & 0x3f;
            if (reg == 6) row->bp = init->bp;
            else if (reg == 16) row->ra = init->ra;
            continue;
        default: break;
        }
        if (!advance) {
            switch (op) {
            case 0x00: break;                                          /* nop */
            case 0x01: return 0;                                       /* set_loc: not in .eh_frame of compiled code */
            case 0x02: delta = u8(c); advance = 1; break;
            case 0x03: delta = fixed(c, 2); advance = 1; break;
            case 0x04: delta = fixed(c, 4); advance = 1; break;
            case 0x05: reg = uleb(c); set_reg(row, reg, REG_OFFSET, (int64_t)uleb(c) * cie->data_align); break;
            case 0x06:
                reg = uleb(c);
                if (reg == 6) row->bp = init->bp;
                else if (reg == 16) row->ra = init->ra;
                break;
            case 0x07: set_reg(row, uleb(c), REG_UNDEF, 0); break;
            case 0x08: set_reg(row, uleb(c), REG_SAME, 0); break;
            case 0x09: reg = uleb(c); (void)uleb(c); set_reg(row, reg, REG_OTHER, 0); break;
            case 0x0a:
                if (depth == 8) return 0;
                stack[depth++] = *row;
                break;
            case 0x0b: {
                if (depth == 0) return 0;
                /* The CFA comes back too, as in libgcc's and libunwind's
                 * unwinders. */
                *row = stack[--depth];
                break;
            }
            case 0x0c: row->cfa_reg = (int)uleb(c); row->cfa_off = (int64_t)uleb(c); row->cfa_other = 0; break;
            case 0x0d: row->cfa_reg = (int)uleb(c); break;
            case 0x0e: row->cfa_off = (int64_t)uleb(c); break;
            case 0x0f: { uint64_t n = uleb(c); c->p += n; row->cfa_other = 1; break; }
            case 0x10: { reg = uleb(c); uint64_t n = uleb(c); c->p += n; set_reg(row, reg, REG_OTHER, 0); break; }
            case 0x11: reg = uleb(c); set_reg(row, reg, REG_OFFSET, sleb(c) * cie->data_align); break;
            case 0x12: row->cfa_reg = (int)uleb(c); row->cfa_off = sleb(c) * cie->data_align; row->cfa_other = 0; break;
            case 0x13: row->cfa_off = sleb(c) * cie->data_align; break;
            case 0x14: reg = uleb(c); (void)uleb(c); set_reg(row, reg, REG_OTHER, 0); break;
            case 0x15: reg = uleb(c); (void)sleb(c); set_reg(row, reg, REG_OTHER, 0); break;
            case 0x16: { reg = uleb(c); uint64_t n = uleb(c); c->p += n; set_reg(row, reg, REG_OTHER, 0); break; }
            case 0x2e: (void)uleb(c); break;                          /* GNU_args_size */
            case 0x2f: reg = uleb(c); set_reg(row, reg, REG_OFFSET, -(int64_t)uleb(c) * cie->data_align); break;
            default: return 0;
            }
        }
        if (advance) {
            uintptr_t next = loc + (uintptr_t)(delta * cie->code_align);
            if (next > pc) return !c->bad;
            loc = next;
        }
    }
    return !c->bad;
}

/* The FDE whose range holds pc, from the .eh_frame_hdr search table. */
const uint8_t *vt_cfi_find_fde(const uint8_t *hdr, uintptr_t pc) {
    struct cursor c = {hdr, hdr + 4, 0};
    if (u8(&c) != 1) return NULL;
    uint8_t frame_enc = u8(&c), count_enc = u8(&c), table_enc = u8(&c);
    c.end = hdr + 4 + 16;
    (void)pointer(&c, frame_enc, (uintptr_t)hdr);
    uint64_t count = pointer(&c, count_enc, (uintptr_t)hdr);
    if (c.bad || table_enc != 0x3b || count == 0) return NULL; /* datarel sdata4: what linkers write */
    const int32_t *table = (const int32_t *)c.p;
    uint64_t lo = 0, hi = count;
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        if ((uintptr_t)hdr + (intptr_t)table[2 * mid] <= pc) lo = mid;
        else hi = mid;
    }
    if ((uintptr_t)hdr + (intptr_t)table[2 * lo] > pc) return NULL;
    return hdr + (intptr_t)table[2 * lo + 1];
}

struct vt_rule vt_cfi_rule(const uint8_t *fde, uintptr_t pc) {
    struct vt_rule r = {.flags = VT_RULE_OTHER, .known = 1};
    struct cursor c = {fde, fde + 4, 0};
    uint64_t len = fixed(&c, 4);
    if (len == 0 || len == 0xffffffff) return r;
    c.end = fde + 4 + len;
    const uint8_t *idp = c.p;
    uint32_t cie_off = (uint32_t)fixed(&c, 4);
    if (cie_off == 0) return r;
    struct cie cie;
    if (!parse_cie(idp - cie_off, &cie) || cie.ra_reg != 16 || cie.signal) return r;
    uintptr_t start = pointer(&c, cie.fde_enc, 0);
    uintptr_t range = pointer(&c, cie.fde_enc & 0x0f, 0);
    if (c.bad || pc < start || pc - start >= range) return r;
    if (cie.has_z) c.p += uleb(&c);
    if (c.bad || c.p > c.end) return r;

    struct cfi_row row = {.cfa_reg = -1};
    row.bp.how = REG_SAME;
    row.ra.how = REG_SAME;
    struct cursor ci = {cie.insns, cie.end, 0};
    if (!run_cfa(&ci, &cie, start, (uintptr_t)-1, &row, &row)) return r;
    struct cfi_row init = row;
    if (!run_cfa(&c, &cie, start, pc, &row, &init)) return r;

    if (row.ra.how == REG_UNDEF) {
        r.flags = VT_RULE_END;
        return r;
    }
    if (row.ra.how != REG_OFFSET || row.ra.off != -8) return r;
    if (row.cfa_other || (row.cfa_reg != 6 && row.cfa_reg != 7)) return r;
    if (row.cfa_off < -65536 || row.cfa_off > (1 << 30)) return r;
    if (row.bp.how == REG_OTHER) return r;
    int saved = row.bp.how == REG_OFFSET;
    if (saved && (row.bp.off > -8 || row.bp.off < -32768)) return r;
    r.cfa_off = (int32_t)row.cfa_off;
    r.bp_off = saved ? (int16_t)row.bp.off : 0;
    r.flags = (uint8_t)((row.cfa_reg == 6 ? VT_RULE_CFA_BP : 0) | (saved ? VT_RULE_BP_SAVED : 0));
    return r;
}