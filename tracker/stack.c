/* stack.c -- native stack capture: a frame walker over cached CFI rules.
 *
 * An allocation's stack is walked from the call frame information
 * (.eh_frame) of each return address, as libunwind's fast path does, but
 * with what each address needs boiled down to one 8-byte rule, computed
 * once (from the .eh_frame the loader mapped) and kept in a table that
 * threads read without a lock. A frame then costs a table probe and one or
 * two loads from the stack; a frame met at the same depth last time costs
 * no probe, and a stack walked the time before is checked, not walked
 * (see struct memo).
 *
 * The walker handles the rules compilers emit for ordinary x86-64 code:
 * the CFA is rsp or rbp plus a constant, the return address sits just
 * below the CFA, rbp is either unchanged or saved at a constant offset. A
 * frame it cannot walk that way (a signal frame, a CFA expression, code
 * with no CFI, a stack other than the thread's own) hands the whole
 * capture to libunwind, which is what vramtrace used before; so the walker
 * is never the only judge of a stack it does not understand. */
#define _GNU_SOURCE
#define UNW_LOCAL_ONLY
#include <libunwind.h>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif
#include <execinfo.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "stack.h"

#define VT_NO_ASAN __attribute__((no_sanitize("address")))

/* The text of this library, whose frames a stack must not show. */
static uintptr_t self_lo, self_hi;

static int find_self(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    uintptr_t probe = (uintptr_t)data;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X)) continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        uintptr_t hi = lo + ph->p_memsz;
        if (probe >= lo && probe < hi) {
            self_lo = lo;
            self_hi = hi;
            return 1;
        }
    }
    return 0;
}

/* ---- rules ------------------------------------------------------------ */

/* How to step from a frame whose return address (or pc) is `ip` to its
 * caller. */
enum {
    R_CFA_BP = 1,   /* the CFA is rbp + cfa_off, else rsp + cfa_off */
    R_BP_SAVED = 2, /* the caller's rbp is at CFA + bp_off, else rbp is unchanged */
    R_END = 4,      /* the outermost frame: the CFI says the return address is undefined */
    R_OTHER = 8,    /* not walkable here: libunwind does the capture */
};

struct rule {
    int32_t cfa_off;
    int16_t bp_off;
    uint8_t flags;
    uint8_t known; /* 1 in every stored rule: a stored rule is never all zero */
};

struct slot {
    uintptr_t ip; /* 0: empty; written last, with release order */
    uint64_t rule;
};

#define TABLE_BITS 16
#define TABLE_SIZE (1u << TABLE_BITS)
#define PROBES 32

/* The table, mapped once. A dlclose empties it (a library loaded later
 * could reuse the addresses) by dropping its pages, and bumps `generation`
 * so that threads drop what they remember too. */
static struct slot *table;
static size_t table_used;
static uint64_t generation;
static pthread_mutex_t rule_lock = PTHREAD_MUTEX_INITIALIZER;
static int walker_off, walker_check;
/* VRAMTRACE_UNWIND=check: every capture taken both ways and compared. */
static uint64_t check_stacks, check_differ, check_fallbacks;

static inline uint32_t slot_of(uintptr_t ip) {
    return (uint32_t)(((uint64_t)ip * 0x9e3779b97f4a7c15ull) >> (64 - TABLE_BITS));
}

static inline int lookup(const struct slot *t, uintptr_t ip, struct rule *out) {
    uint32_t i = slot_of(ip);
    for (int p = 0; p < PROBES; p++, i = (i + 1) & (TABLE_SIZE - 1)) {
        uintptr_t k = __atomic_load_n(&t[i].ip, __ATOMIC_ACQUIRE);
        if (k == ip) {
            uint64_t r = __atomic_load_n(&t[i].rule, __ATOMIC_ACQUIRE);
            /* Still the same slot? (A dlclose may have emptied it, and a
             * new rule taken it, between the two loads.) */
            if (__atomic_load_n(&t[i].ip, __ATOMIC_RELAXED) != ip) return 0;
            memcpy(out, &r, sizeof r);
            return 1;
        }
        if (k == 0) return 0;
    }
    return 0;
}

/* Rule lock held. A full probe run leaves the rule uncached. */
static void store(struct slot *t, uintptr_t ip, struct rule r) {
    uint64_t v;
    memcpy(&v, &r, sizeof v);
    uint32_t i = slot_of(ip);
    for (int p = 0; p < PROBES; p++, i = (i + 1) & (TABLE_SIZE - 1)) {
        if (t[i].ip == 0) {
            __atomic_store_n(&t[i].rule, v, __ATOMIC_RELAXED);
            __atomic_store_n(&t[i].ip, ip, __ATOMIC_RELEASE);
            table_used++;
            return;
        }
        if (t[i].ip == ip) return;
    }
}

/* ---- reading .eh_frame ------------------------------------------------
 *
 * The rule for a pc comes from the CFI of the object that holds it, read
 * where the dynamic loader mapped it (PT_GNU_EH_FRAME, the sorted table of
 * .eh_frame_hdr, then the FDE and its CIE), inside dl_iterate_phdr, which
 * keeps the object from being unloaded meanwhile. Only what the walker
 * needs is kept: where the CFA is, where the return address and rbp are.
 * Anything else the CFI says about them makes the rule R_OTHER. */

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
static const uint8_t *find_fde(const uint8_t *hdr, uintptr_t pc) {
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

static struct rule rule_from_fde(const uint8_t *fde, uintptr_t pc) {
    struct rule r = {0, 0, R_OTHER, 1};
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
        r.flags = R_END;
        return r;
    }
    if (row.ra.how != REG_OFFSET || row.ra.off != -8) return r;
    if (row.cfa_other || (row.cfa_reg != 6 && row.cfa_reg != 7)) return r;
    if (row.cfa_off < -65536 || row.cfa_off > (1 << 30)) return r;
    if (row.bp.how == REG_OTHER) return r;
    int saved = row.bp.how == REG_OFFSET;
    if (saved && (row.bp.off >= 0 || row.bp.off < -32768)) return r;
    r.cfa_off = (int32_t)row.cfa_off;
    r.bp_off = saved ? (int16_t)row.bp.off : 0;
    r.flags = (uint8_t)((row.cfa_reg == 6 ? R_CFA_BP : 0) | (saved ? R_BP_SAVED : 0));
    return r;
}

struct find {
    uintptr_t pc;
    struct rule r;
};

static int find_object(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    struct find *f = data;
    const ElfW(Phdr) *eh = NULL;
    int inside = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_GNU_EH_FRAME) eh = ph;
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
            uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
            if (f->pc >= lo && f->pc - lo < ph->p_memsz) inside = 1;
        }
    }
    if (!inside) return 0;
    if (eh) {
        const uint8_t *fde = find_fde((const uint8_t *)(info->dlpi_addr + eh->p_vaddr), f->pc);
        if (fde) f->r = rule_from_fde(fde, f->pc);
    }
    return 1;
}

/* The rule for code address `pc` (a return address minus one). Rule lock
 * held. */
static struct rule compute(uintptr_t pc) {
    struct find f = {pc, {0, 0, R_OTHER, 1}};
    dl_iterate_phdr(find_object, &f);
    return f.r;
}

__attribute__((noinline)) static struct rule slow_rule(uintptr_t pc) {
    struct rule r = {0, 0, R_OTHER, 1};
    pthread_mutex_lock(&rule_lock);
    struct slot *t = table;
    if (t && !lookup(t, pc, &r)) {
        r = compute(pc);
        store(t, pc, r);
    }
    pthread_mutex_unlock(&rule_lock);
    return r;
}

void vt_stack_forget(void) {
    pthread_mutex_lock(&rule_lock);
    if (table && table_used) {
        /* Private anonymous pages read as zeros once dropped: an empty
         * table, without a new mapping or a write to every slot. A reader
         * that meets a slot as it goes sees the slot change and misses. */
        madvise(table, TABLE_SIZE * sizeof(struct slot), MADV_DONTNEED);
        table_used = 0;
    }
    __atomic_add_fetch(&generation, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&rule_lock);
    /* libunwind's own caches, for the stacks it takes (its per-thread
     * fast-trace cache, in 1.6, it keeps whatever is said). */
    unw_flush_cache(unw_local_addr_space, 0, 0);
}

void vt_stack_fork_prepare(void) { pthread_mutex_lock(&rule_lock); }
void vt_stack_fork_done(void) { pthread_mutex_unlock(&rule_lock); }

/* libunwind is set up at its first use, not at start: its set-up opens a
 * pipe (to validate the addresses it reads), two descriptors a process
 * that never allocates GPU memory must not have. */
static pthread_once_t unw_once = PTHREAD_ONCE_INIT;

static void unw_setup(void) { unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD); }

void vt_stack_init(int mode) {
    dl_iterate_phdr(find_self, (void *)(uintptr_t)&vt_stack_init);
    walker_off = mode == VT_STACK_LIBUNWIND;
    walker_check = mode == VT_STACK_CHECK;
    pthread_mutex_lock(&rule_lock);
    if (!table && !walker_off) {
        void *m = mmap(NULL, TABLE_SIZE * sizeof(struct slot), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m != MAP_FAILED) __atomic_store_n(&table, (struct slot *)m, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&rule_lock);
}

/* ---- capture ----------------------------------------------------------- */

/* This thread's stack, learnt once: the walker reads only inside it. */
static __thread uintptr_t stack_lo __attribute__((tls_model("initial-exec")));
static __thread uintptr_t stack_hi __attribute__((tls_model("initial-exec")));

/* What this thread's walks remember. By depth: the return address last
 * seen there and its rule, so that a frame seen before needs no table
 * probe. And the last walk as a replay: where it started (pc, stack
 * pointer and, if the walk used it, rbp), every stack word it read and
 * what it found there, and the frames it returned. The walk is a function
 * of its start and of the words it reads, so a walk that starts in the same
 * state and finds the same words at the same places would return the same
 * frames: checking that is a run of independent loads and compares, about
 * a cycle a word. A loop that allocates from one place pays that. */
#define MEMO_FRAMES (VT_STACK_MAX + 32)
struct memo {
    uint64_t generation;      /* of the rule table the rules came from */
    uintptr_t ip[MEMO_FRAMES];
    struct rule rule[MEMO_FRAMES];
    /* the replay; valid when nout >= 0 */
    uintptr_t start_ip, start_sp, start_bp;
    int need_bp, max, nout, nreads;
    struct { uint32_t off; uint32_t pad; uintptr_t val; } read[2 * MEMO_FRAMES]; /* off: from start_sp */
    /* The same words for the replay: adjacent ones in pairs (a saved rbp
     * and the return address above it, in code with frame pointers), the
     * rest single. */
    int npairs, nsingles;
    uint32_t pair_off[MEMO_FRAMES];
    uint32_t single_off[2 * MEMO_FRAMES];
    uintptr_t single_val[2 * MEMO_FRAMES];
    uintptr_t pair_val[MEMO_FRAMES][2] __attribute__((aligned(16)));
    uintptr_t out[VT_STACK_MAX];
};
static __thread struct memo *memo __attribute__((tls_model("initial-exec")));
static __thread struct vt_stack_counts counts __attribute__((tls_model("initial-exec")));

struct vt_stack_counts vt_stack_thread_counts(void) { return counts; }

uint64_t vt_stack_serial(void) { return counts.walks + counts.fallbacks; }
static pthread_key_t memo_key;
static pthread_once_t memo_once = PTHREAD_ONCE_INIT;

static void memo_free(void *m) { free(m); }
static void memo_key_make(void) { pthread_key_create(&memo_key, memo_free); }

/* This thread's stack bounds and memo, on its first capture. */
__attribute__((noinline)) static struct memo *thread_setup(void) {
    if (!stack_hi) {
        pthread_attr_t a;
        void *addr = NULL;
        size_t size = 0;
        if (pthread_getattr_np(pthread_self(), &a) != 0) return NULL;
        int ok = pthread_attr_getstack(&a, &addr, &size) == 0 && size > 0;
        pthread_attr_destroy(&a);
        if (!ok) return NULL;
        stack_lo = (uintptr_t)addr;
        stack_hi = (uintptr_t)addr + size;
    }
    if (!memo) {
        pthread_once(&memo_once, memo_key_make);
        struct memo *m = calloc(1, sizeof *m);
        if (!m) return NULL;
        m->nout = -1;
        pthread_setspecific(memo_key, m);
        memo = m;
    }
    return memo;
}

/* Keep frames past this library's own, innermost first. */
static int keep(uintptr_t *out, int max, const uintptr_t *ips, int n) {
    int i = 0;
    while (i < n && ips[i] >= self_lo && ips[i] < self_hi) i++;
    int depth = 0;
    for (; i < n && depth < max; i++) out[depth++] = ips[i];
    return depth;
}

static int capture_libunwind(uintptr_t *out, int max) {
    pthread_once(&unw_once, unw_setup);
    void *buf[VT_STACK_MAX + 16];
    int want = max + 16;
    if (want > (int)(sizeof buf / sizeof buf[0])) want = (int)(sizeof buf / sizeof buf[0]);
#ifdef VT_TSAN_BUILD
    /* The TSan build checks vramtrace's own locking; libunwind's per-thread
     * cache is freed by a thread-exit destructor that runs after TSan has
     * let go of the thread, so it unwinds with glibc's backtrace instead. */
    int n = backtrace(buf, want);
#else
    int n = unw_backtrace(buf, want);
#endif
    return keep(out, max, (const uintptr_t *)buf, n);
}

/* Whether any word the last walk read has changed: one 16-byte load and
 * compare for a pair of adjacent words, one 8-byte for the others. */
VT_NO_ASAN static uintptr_t replay_diff(const struct memo *m, const char *base) {
    uintptr_t diff = 0;
#if defined(__x86_64__)
#define PAIR_DIFF(k)                                                            \
    _mm_xor_si128(_mm_loadu_si128((const __m128i *)(base + m->pair_off[k])),   \
                  _mm_load_si128((const __m128i *)m->pair_val[k]))
    /* Four at a time into two accumulators: the loop's overhead and the
     * chain of ORs were half its cost. */
    __m128i acc = _mm_setzero_si128(), acc2 = _mm_setzero_si128();
    int k = 0;
    for (; k + 4 <= m->npairs; k += 4) {
        acc = _mm_or_si128(acc, _mm_or_si128(PAIR_DIFF(k), PAIR_DIFF(k + 1)));
        acc2 = _mm_or_si128(acc2, _mm_or_si128(PAIR_DIFF(k + 2), PAIR_DIFF(k + 3)));
    }
    for (; k < m->npairs; k++) acc = _mm_or_si128(acc, PAIR_DIFF(k));
#undef PAIR_DIFF
    acc = _mm_or_si128(acc, acc2);
    diff = _mm_movemask_epi8(_mm_cmpeq_epi8(acc, _mm_setzero_si128())) != 0xffff;
#else
    for (int k = 0; k < m->npairs; k++)
        diff |= (*(const uintptr_t *)(base + m->pair_off[k]) ^ m->pair_val[k][0]) |
                (*(const uintptr_t *)(base + m->pair_off[k] + 8) ^ m->pair_val[k][1]);
#endif
    for (int k = 0; k < m->nsingles; k++) diff |= *(const uintptr_t *)(base + m->single_off[k]) ^ m->single_val[k];
    return diff;
}

/* The walk. Returns the number of frames, or -1 when libunwind must do it.
 * Reads only this thread's stack, above the walker's own frame. */
VT_NO_ASAN __attribute__((noinline)) static int walk(uintptr_t *out, int max, uint64_t since) {
    const struct slot *t = __atomic_load_n(&table, __ATOMIC_ACQUIRE);
    if (!t) return -1;
    struct memo *m = memo;
    if (!m && !(m = thread_setup())) return -1;
    uint64_t gen = __atomic_load_n(&generation, __ATOMIC_ACQUIRE);
    if (m->generation != gen) {
        memset(m->ip, 0, sizeof m->ip);
        m->nout = -1;
        m->generation = gen;
    }
    /* This function's frame (it keeps rbp as its frame pointer, since it
     * asks for its frame address): the caller's pc, rsp and rbp. */
    const uintptr_t *fp = __builtin_frame_address(0);
    uintptr_t sp = (uintptr_t)(fp + 2);
    uintptr_t bp = fp[0];
    uintptr_t ip = (uintptr_t)__builtin_return_address(0);
    const uintptr_t hi = stack_hi;
    if (sp <= stack_lo || sp >= hi) return -1; /* on another stack (a signal stack, a coroutine) */

    /* Replay offsets are 32 bits: a stack of 4 GiB or more is not replayed. */
    int replayable = hi - sp < UINT32_MAX;
    if (m->nout >= 0 && ip == m->start_ip && sp == m->start_sp && max == m->max &&
        (!m->need_bp || bp == m->start_bp)) {
        uintptr_t diff = 0;
        const char *base = (const char *)sp;
        diff = replay_diff(m, base);
        if (diff == 0) {
            counts.replays++;
            if (since == counts.walks + counts.fallbacks) return VT_STACK_SAME;
            memcpy(out, m->out, (size_t)m->nout * sizeof *out);
            return m->nout;
        }
    }

    m->nout = -1;
    m->start_ip = ip;
    m->start_sp = sp;
    m->start_bp = bp;
    m->max = max;
    /* A saved rbp the walk reads is a word the replay must check only if the
     * walk then uses it (a CFA rbp-based): most code keeps other values in
     * rbp (a loop counter, say), which would spoil every replay. So the
     * last rbp read stays in the log only once it is used. */
    int need_bp = 0, nr = 0, bp_read = -1, bp_used = 0;
    int n = 0, mine = 1;
    for (int i = 0; n < max && i < MEMO_FRAMES; i++) {
        /* Frames of this library are walked through, not kept. */
        if (mine && (ip < self_lo || ip >= self_hi)) mine = 0;
        if (!mine) out[n++] = ip;
        struct rule r;
        if (__builtin_expect(ip == m->ip[i], 1)) {
            r = m->rule[i];
        } else {
            if (!lookup(t, ip - 1, &r)) r = slow_rule(ip - 1);
            m->ip[i] = ip;
            m->rule[i] = r;
        }
        if (r.flags & (R_END | R_OTHER)) {
            if (r.flags & R_END) break;
            return -1;
        }
        if (r.flags & R_CFA_BP) {
            if (bp_read < 0) need_bp = 1; /* the rbp the walk started with */
            else bp_used = 1;
        }
        uintptr_t cfa = ((r.flags & R_CFA_BP) ? bp : sp) + (uintptr_t)(intptr_t)r.cfa_off;
        if (cfa < sp + 8 || cfa > hi) return -1;
        if (r.flags & R_BP_SAVED) {
            uintptr_t at = cfa + (uintptr_t)(intptr_t)r.bp_off;
            if (at < sp || at + 8 > hi) return -1;
            bp = *(const uintptr_t *)at;
            if (bp_read >= 0 && !bp_used) { /* the one before was never used */
                memmove(&m->read[bp_read], &m->read[bp_read + 1], (size_t)(nr - bp_read - 1) * sizeof m->read[0]);
                nr--;
            }
            bp_read = nr;
            bp_used = 0;
            m->read[nr].off = (uint32_t)(at - m->start_sp);
            m->read[nr++].val = bp;
        }
        ip = ((const uintptr_t *)cfa)[-1];
        m->read[nr].off = (uint32_t)(cfa - 8 - m->start_sp);
        m->read[nr++].val = ip;
        sp = cfa;
        if (ip == 0) break;
    }
    if (bp_read >= 0 && !bp_used) {
        memmove(&m->read[bp_read], &m->read[bp_read + 1], (size_t)(nr - bp_read - 1) * sizeof m->read[0]);
        nr--;
    }
    m->need_bp = need_bp;
    m->nreads = nr;
    /* The log is in stack order: pair up adjacent words. */
    m->npairs = m->nsingles = 0;
    for (int k = 0; k < nr; k++) {
        if (k + 1 < nr && m->read[k + 1].off == m->read[k].off + 8) {
            m->pair_off[m->npairs] = m->read[k].off;
            m->pair_val[m->npairs][0] = m->read[k].val;
            m->pair_val[m->npairs++][1] = m->read[k + 1].val;
            k++;
        } else {
            m->single_off[m->nsingles] = m->read[k].off;
            m->single_val[m->nsingles++] = m->read[k].val;
        }
    }
    memcpy(m->out, out, (size_t)n * sizeof *out);
    m->nout = replayable ? n : -1;
    counts.walks++;
    return n;
}

int vt_stack_capture(uintptr_t *out, int max) { return vt_stack_capture_since(out, max, UINT64_MAX); }

int vt_stack_capture_since(uintptr_t *out, int max, uint64_t since) {
    if (max > VT_STACK_MAX) max = VT_STACK_MAX;
    if (max <= 0) return 0;
    if (__builtin_expect(walker_check, 0)) {
        uintptr_t ref[VT_STACK_MAX];
        int n = walk(out, max, UINT64_MAX);
        int m = capture_libunwind(ref, max);
        __atomic_add_fetch(&check_stacks, 1, __ATOMIC_RELAXED);
        if (n < 0) {
            __atomic_add_fetch(&check_fallbacks, 1, __ATOMIC_RELAXED);
            counts.fallbacks++;
        } else if (n != m || memcmp(out, ref, (size_t)n * sizeof *out) != 0) {
            __atomic_add_fetch(&check_differ, 1, __ATOMIC_RELAXED);
        }
        memcpy(out, ref, (size_t)m * sizeof *out);
        return m;
    }
    if (!walker_off) {
        int n = walk(out, max, since);
        if (n >= 0 || n == VT_STACK_SAME) return n;
    }
    counts.fallbacks++;
    return capture_libunwind(out, max);
}

int vt_stack_check(uint64_t *stacks, uint64_t *differ, uint64_t *fallbacks) {
    *stacks = __atomic_load_n(&check_stacks, __ATOMIC_RELAXED);
    *differ = __atomic_load_n(&check_differ, __ATOMIC_RELAXED);
    *fallbacks = __atomic_load_n(&check_fallbacks, __ATOMIC_RELAXED);
    return walker_check;
}

int vt_stack_capture_libunwind(uintptr_t *out, int max) {
    if (max > VT_STACK_MAX) max = VT_STACK_MAX;
    if (max <= 0) return 0;
    return capture_libunwind(out, max);
}
