/* inlines.c -- each compilation unit's functions and inlined calls, walked
 * once (inlines.h). */
#include <dwarf.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <uthash.h>

#include "inlines.h"

/* A function with code (DW_TAG_subprogram) or an inlined call of one
 * (DW_TAG_inlined_subroutine), in the unit's order (a DIE before those
 * inside it): the nodes inside node i are i + 1 .. end - 1. */
struct node {
    Dwarf_Die die;
    int32_t parent;     /* the node it sits in, -1 for none */
    uint32_t end;
    uint32_t span, nspans; /* its address ranges: spans[span ..] */
    int inlined;
};

struct span {
    Dwarf_Addr lo, hi;
    uint32_t node;
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
    struct span *spans;     /* every node's ranges, by node */
    uint32_t nspans;
    struct span *top;       /* the ranges of the nodes in no other, by lo */
    uint32_t ntop;
    int any_inlined;
    UT_hash_handle hh;
};

struct vt_inlines {
    struct unit *units;
};

struct vt_inlines *vt_inlines_new(void) { return calloc(1, sizeof(struct vt_inlines)); }

static void unit_free(struct unit *u) {
    free(u->nodes);
    free(u->spans);
    free(u->top);
    free(u);
}

void vt_inlines_free(struct vt_inlines *x) {
    if (!x) return;
    struct unit *u, *tmp;
    HASH_ITER(hh, x->units, u, tmp) {
        HASH_DEL(x->units, u);
        unit_free(u);
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
        u->spans[u->nspans++] = (struct span){lo, hi, u->nnodes};
    }
    if (u->nspans == first) return -1;
    if (room(&u->nodes, sizeof *u->nodes, u->nnodes, ncap)) return -2;
    u->nodes[u->nnodes] = (struct node){*d, parent, 0, first, u->nspans - first, inlined};
    u->any_inlined |= inlined;
    return (int32_t)u->nnodes++;
}

static int by_lo(const void *a, const void *b) {
    const struct span *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* How deep the walk goes: DWARF nests scopes a few dozen deep at most. */
#define MAX_DEPTH 256

/* The unit walked once: every DIE visited, in order. 0, or -1 when memory
 * ran out. */
static int walk(struct unit *u) {
    Dwarf_Die die[MAX_DEPTH];
    int32_t anc[MAX_DEPTH], own[MAX_DEPTH];
    uint32_t ncap = 0, scap = 0;
    int sp = 0;
    if (dwarf_child(&u->cu, &die[0]) != 0) return 0;
    anc[0] = -1;
    sp = 1;
    while (sp > 0) {
        Dwarf_Die *d = &die[sp - 1];
        int tag = dwarf_tag(d);
        own[sp - 1] = -1;
        int32_t in = anc[sp - 1];
        if (tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine) {
            int32_t n = add_node(u, d, in, tag == DW_TAG_inlined_subroutine, &ncap, &scap);
            if (n == -2) return -1;
            if (n >= 0) own[sp - 1] = in = n;
        }
        if (sp < MAX_DEPTH && dwarf_haschildren(d) > 0 && dwarf_child(d, &die[sp]) == 0) {
            anc[sp] = in;
            sp++;
            continue;
        }
        /* This DIE's subtree is done: on to its sibling, or its parent's. */
        while (sp > 0) {
            if (own[sp - 1] >= 0) u->nodes[own[sp - 1]].end = u->nnodes;
            Dwarf_Die next;
            if (dwarf_siblingof(&die[sp - 1], &next) == 0) {
                die[sp - 1] = next;
                break;
            }
            sp--;
        }
    }
    for (uint32_t i = 0; i < u->nnodes; i++)
        if (u->nodes[i].parent < 0) u->ntop += u->nodes[i].nspans;
    u->top = malloc((u->ntop ? u->ntop : 1) * sizeof *u->top);
    if (!u->top) return -1;
    uint32_t k = 0;
    for (uint32_t i = 0; i < u->nnodes; i++)
        if (u->nodes[i].parent < 0)
            for (uint32_t j = 0; j < u->nodes[i].nspans; j++) u->top[k++] = u->spans[u->nodes[i].span + j];
    qsort(u->top, u->ntop, sizeof *u->top, by_lo);
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

static int holds(const struct unit *u, const struct node *n, Dwarf_Addr a) {
    for (uint32_t j = 0; j < n->nspans; j++)
        if (u->spans[n->span + j].lo <= a && a < u->spans[n->span + j].hi) return 1;
    return 0;
}

int vt_inlines_at(struct vt_inlines *x, Dwfl_Module *m, Dwarf_Addr pc, Dwarf_Die *out, int max, Dwarf_Die *cu) {
    Dwarf_Addr bias = 0;
    Dwarf_Die *cud = x ? dwfl_module_addrdie(m, pc, &bias) : NULL;
    struct unit *u = cud ? unit_of(x, m, cud) : NULL;
    if (!u || !u->any_inlined || !u->ntop) return 0;
    Dwarf_Addr a = pc - bias;
    /* The function that holds a: the last range starting at or before it. */
    uint32_t lo = 0, hi = u->ntop;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (u->top[mid].lo <= a) lo = mid + 1;
        else hi = mid;
    }
    if (lo == 0 || a >= u->top[lo - 1].hi) return 0;
    uint32_t f = u->top[lo - 1].node, best = f;
    /* The innermost node in it that holds a: the last in the unit's order
     * (the nodes that hold a are each inside the one before). */
    for (uint32_t i = f + 1; i < u->nodes[f].end; i++)
        if (holds(u, &u->nodes[i], a)) best = i;
    int n = 0;
    for (int32_t i = (int32_t)best; i >= 0 && u->nodes[i].inlined && n < max; i = u->nodes[i].parent)
        out[n++] = u->nodes[i].die;
    *cu = u->cu;
    return n;
}
