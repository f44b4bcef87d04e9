/* inlines.c -- each compilation unit's functions and inlined calls, and
 * each module's units, read once (inlines.h). */
#include <dwarf.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <uthash.h>

#include "inlines.h"

/* A function with code (DW_TAG_subprogram) or an inlined call of one
 * (DW_TAG_inlined_subroutine), in the unit's order (a DIE before those
 * inside it). */
struct node {
    Dwarf_Die die;
    int32_t parent;     /* the node it sits in, -1 for none */
    int inlined;
};

/* One address range of a node. Sorted by start (the longer first, then
 * the outer node first), each knows the range it lies in: the ranges of a
 * unit nest or are apart, so the innermost range that holds an address is
 * the last one starting at or before it, or one of the ranges it lies in. */
struct span {
    Dwarf_Addr lo, hi;
    uint32_t node;
    int32_t up;
};

struct unit_key {
    Dwfl_Module *m;
    Dwarf_Off off;
};

struct unit {
    struct unit_key key;
    Dwarf_Die cu;
    struct node *nodes;
    uint32_t nnodes;
    struct span *spans;
    uint32_t nspans;
    UT_hash_handle hh;
};

/* A module's units by their address ranges (for a module without
 * .debug_aranges), sorted by start. */
struct unit_span {
    Dwarf_Addr lo, hi;
    Dwarf_Die cu;
};

struct module {
    Dwfl_Module *m;
    struct unit_span *spans;
    uint32_t nspans;
    UT_hash_handle hh;
};

struct vt_inlines {
    struct unit *units;
    struct module *modules;
};

struct vt_inlines *vt_inlines_new(void) { return calloc(1, sizeof(struct vt_inlines)); }

static void unit_free(struct unit *u) {
    free(u->nodes);
    free(u->spans);
    free(u);
}

void vt_inlines_free(struct vt_inlines *x) {
    if (!x) return;
    struct unit *u, *tmp;
    HASH_ITER(hh, x->units, u, tmp) {
        HASH_DEL(x->units, u);
        unit_free(u);
    }
    struct module *m, *mtmp;
    HASH_ITER(hh, x->modules, m, mtmp) {
        HASH_DEL(x->modules, m);
        free(m->spans);
        free(m);
    }
    free(x);
}

/* Room for one more element in *v (n of them, *cap allocated). */
static int room(void *v, size_t each, uint32_t n, uint32_t *cap) {
    if (n < *cap) return 0;
    uint32_t c = *cap ? *cap * 2 : 64;
    void *old;
    memcpy(&old, v, sizeof old);
    void *nv = realloc(old, (size_t)c * each);
    if (!nv) return -1;
    memcpy(v, &nv, sizeof nv);
    *cap = c;
    return 0;
}

/* Node for DIE d, inside node parent, with its ranges; its index, -1 when
 * it has no code (a declaration, an abstract instance), -2 when memory ran
 * out. */
static int32_t add_node(struct unit *u, Dwarf_Die *d, int32_t parent, int inlined, uint32_t *ncap, uint32_t *scap) {
    Dwarf_Addr base = 0, lo = 0, hi = 0;
    uint32_t first = u->nspans;
    for (ptrdiff_t off = 0; (off = dwarf_ranges(d, off, &base, &lo, &hi)) > 0;) {
        if (hi <= lo) continue;
        if (room(&u->spans, sizeof *u->spans, u->nspans, scap)) return -2;
        u->spans[u->nspans++] = (struct span){lo, hi, u->nnodes, -1};
    }
    if (u->nspans == first) return -1;
    if (room(&u->nodes, sizeof *u->nodes, u->nnodes, ncap)) return -2;
    u->nodes[u->nnodes] = (struct node){*d, parent, inlined};
    return (int32_t)u->nnodes++;
}

static int span_order(const void *a, const void *b) {
    const struct span *x = a, *y = b;
    if (x->lo != y->lo) return x->lo < y->lo ? -1 : 1;
    if (x->hi != y->hi) return x->hi > y->hi ? -1 : 1;
    return x->node < y->node ? -1 : x->node > y->node;
}

/* How deep the walk goes: DWARF nests scopes a few dozen deep at most. */
#define MAX_DEPTH 256

/* The unit walked once: every DIE visited, in order; then the ranges
 * sorted and each given the range it lies in. 0, or -1 when memory ran
 * out. */
static int walk(struct unit *u) {
    Dwarf_Die die[MAX_DEPTH];
    int32_t anc[MAX_DEPTH];
    uint32_t ncap = 0, scap = 0;
    int sp = 0;
    if (dwarf_child(&u->cu, &die[0]) != 0) return 0;
    anc[0] = -1;
    sp = 1;
    while (sp > 0) {
        Dwarf_Die *d = &die[sp - 1];
        int tag = dwarf_tag(d);
        int32_t in = anc[sp - 1];
        if (tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine) {
            int32_t n = add_node(u, d, in, tag == DW_TAG_inlined_subroutine, &ncap, &scap);
            if (n == -2) return -1;
            if (n >= 0) in = n;
        }
        if (sp < MAX_DEPTH && dwarf_haschildren(d) > 0 && dwarf_child(d, &die[sp]) == 0) {
            anc[sp] = in;
            sp++;
            continue;
        }
        /* This DIE's subtree is done: on to its sibling, or its parent's. */
        while (sp > 0) {
            Dwarf_Die next;
            if (dwarf_siblingof(&die[sp - 1], &next) == 0) {
                die[sp - 1] = next;
                break;
            }
            sp--;
        }
    }
    qsort(u->spans, u->nspans, sizeof *u->spans, span_order);
    int32_t *open = malloc((u->nspans ? u->nspans : 1) * sizeof *open);
    if (!open) return -1;
    uint32_t nopen = 0;
    for (uint32_t i = 0; i < u->nspans; i++) {
        while (nopen && u->spans[open[nopen - 1]].hi <= u->spans[i].lo) nopen--;
        u->spans[i].up = nopen ? open[nopen - 1] : -1;
        open[nopen++] = (int32_t)i;
    }
    free(open);
    return 0;
}

/* The unit that cu (of module m) is, walked at its first use; NULL when
 * memory ran out. */
static struct unit *unit_of(struct vt_inlines *x, Dwfl_Module *m, Dwarf_Die *cu) {
    struct unit_key key;
    memset(&key, 0, sizeof key);
    key.m = m;
    key.off = dwarf_dieoffset(cu);
    struct unit *u;
    HASH_FIND(hh, x->units, &key, sizeof key, u);
    if (u) return u;
    if (!(u = calloc(1, sizeof *u))) return NULL;
    u->key = key;
    u->cu = *cu;
    if (walk(u) != 0) {
        unit_free(u);
        return NULL;
    }
    HASH_ADD(hh, x->units, key, sizeof key, u);
    return u;
}

static int unit_span_order(const void *a, const void *b) {
    const struct unit_span *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Module m's units by their ranges, read at its first use; NULL when
 * memory ran out. */
static struct module *module_of(struct vt_inlines *x, Dwfl_Module *m) {
    struct module *mod;
    HASH_FIND_PTR(x->modules, &m, mod);
    if (mod) return mod;
    if (!(mod = calloc(1, sizeof *mod))) return NULL;
    mod->m = m;
    Dwarf_Addr bias = 0;
    Dwarf *dw = dwfl_module_getdwarf(m, &bias);
    uint32_t cap = 0;
    size_t hsize = 0;
    for (Dwarf_Off off = 0, next = 0; dw && dwarf_nextcu(dw, off, &next, &hsize, NULL, NULL, NULL) == 0; off = next) {
        Dwarf_Die cu;
        if (!dwarf_offdie(dw, off + hsize, &cu)) continue;
        Dwarf_Addr base = 0, lo = 0, hi = 0;
        for (ptrdiff_t o = 0; (o = dwarf_ranges(&cu, o, &base, &lo, &hi)) > 0;) {
            if (hi <= lo) continue;
            if (room(&mod->spans, sizeof *mod->spans, mod->nspans, &cap)) {
                free(mod->spans);
                free(mod);
                return NULL;
            }
            mod->spans[mod->nspans++] = (struct unit_span){lo, hi, cu};
        }
    }
    qsort(mod->spans, mod->nspans, sizeof *mod->spans, unit_span_order);
    HASH_ADD_PTR(x->modules, m, mod);
    return mod;
}

/* Whether unit cu's ranges hold a (the unit's address). */
static int unit_holds(Dwarf_Die *cu, Dwarf_Addr a) {
    Dwarf_Addr base = 0, lo = 0, hi = 0;
    for (ptrdiff_t o = 0; (o = dwarf_ranges(cu, o, &base, &lo, &hi)) > 0;)
        if (lo <= a && a < hi) return 1;
    return 0;
}

int vt_inlines_unit(struct vt_inlines *x, Dwfl_Module *m, Dwarf_Addr pc, Dwarf_Die *cu, Dwarf_Addr *bias) {
    /* libdwfl's answer, through .debug_aranges, is checked: where they
     * list some units but not all (a gcc object linked with a clang one)
     * it gives a unit next to the address, not one that holds it. */
    Dwarf_Die *d = dwfl_module_addrdie(m, pc, bias);
    if (d && unit_holds(d, pc - *bias)) {
        *cu = *d;
        return 0;
    }
    Dwarf *dw = x ? dwfl_module_getdwarf(m, bias) : NULL;
    struct module *mod = dw ? module_of(x, m) : NULL;
    if (!mod) return -1;
    Dwarf_Addr a = pc - *bias;
    /* Units' ranges do not overlap: the last one starting at or before a. */
    uint32_t lo = 0, hi = mod->nspans;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (mod->spans[mid].lo <= a) lo = mid + 1;
        else hi = mid;
    }
    if (lo == 0 || a >= mod->spans[lo - 1].hi) return -1;
    *cu = mod->spans[lo - 1].cu;
    return 0;
}

int vt_inlines_at(struct vt_inlines *x, Dwfl_Module *m, Dwarf_Addr pc, struct vt_inline_chain *c, int max) {
    Dwarf_Addr bias = 0;
    c->n = c->total = c->has_func = 0;
    if (!x || vt_inlines_unit(x, m, pc, &c->cu, &bias) != 0) return -1;
    struct unit *u = unit_of(x, m, &c->cu);
    if (!u || !u->nspans) return -1;
    Dwarf_Addr a = pc - bias;
    uint32_t lo = 0, hi = u->nspans;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (u->spans[mid].lo <= a) lo = mid + 1;
        else hi = mid;
    }
    int32_t s = (int32_t)lo - 1;
    while (s >= 0 && a >= u->spans[s].hi) s = u->spans[s].up;
    if (s < 0) return -1;
    if (max > VT_INLINES_MAX) max = VT_INLINES_MAX;
    int32_t i = (int32_t)u->spans[s].node;
    for (; i >= 0 && u->nodes[i].inlined; i = u->nodes[i].parent) {
        if (c->n < max) c->in[c->n++] = u->nodes[i].die;
        c->outermost = u->nodes[i].die;
        c->total++;
    }
    if (i >= 0) {
        c->func = u->nodes[i].die;
        c->has_func = 1;
    }
    return 0;
}
