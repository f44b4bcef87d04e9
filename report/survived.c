/* survived.c -- failures the program got past (survived.h). */
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "../common/warn.h"
#include "survived.h"
#include "symbolize.h"

/* The failures waiting for their request to come back, one a distinct
 * request (its bytes, call site, device and kind). At most PENDING_MAX:
 * past that a new request's failures are not followed (none counted). */
#define PENDING_MAX 65536

struct key {
    uint64_t bytes;
    uint32_t site;    /* its call site's group, or its stack without symbols */
    int16_t device;
    uint8_t kind;
    uint8_t pad;
};

struct pending {
    struct key k;
    UT_hash_handle hh;
};

static struct key key_of(const struct vt_event *e, uint32_t site) {
    struct key k;
    memset(&k, 0, sizeof k);
    /* A pitched allocation or an array is asked for by its rows or its
     * descriptor and recorded by what the driver gave (rows padded to its
     * pitch, its memory requirement): the same request, other bytes. */
    k.bytes = e->kind == VT_KIND_PITCHED || e->kind == VT_KIND_ARRAY ? 0 : e->bytes;
    k.site = site;
    k.device = e->device;
    k.kind = e->kind;
    return k;
}

/* Whether a key's bytes tell its request: not those of a pitched
 * allocation or an array (key_of), which only their call site tells. */
static int bytes_tell(const struct key *k) { return k->kind != VT_KIND_PITCHED && k->kind != VT_KIND_ARRAY; }

/* The same request but for the call site: a retry the next allocation of
 * all may make from another line (a C allocator that asks again there).
 * Never a pitched allocation or an array: without their bytes, any other
 * one of any size would be taken for the retry. */
static int same_but_site(const struct key *a, const struct key *b) {
    return bytes_tell(a) && a->bytes == b->bytes && a->device == b->device && a->kind == b->kind;
}

static int same(const struct key *a, const struct key *b) { return memcmp(a, b, sizeof *a) == 0; }

uint64_t vt_oom_survived(const struct vt_snapshot *s, const struct vt_symbols *sym, int *last_survived) {
    struct pending *table = NULL, *p, *tmp;
    size_t n = 0, ngroups = 0;
    uint64_t survived = 0;
    uint32_t *group = sym ? vt_site_groups(sym, s->nstacks, &ngroups, NULL) : NULL;
    /* The failures since the last allocation: the next allocation of all
     * may be any of theirs. */
    struct key *fresh = NULL;
    size_t nfresh = 0, cap = 0;
    /* The request whose retry succeeded last, not counted yet: a failure
     * of it again before another request's allocation (an allocator that
     * maps a tensor's pages one at a time got some, then failed on the
     * next, and raised) is the same failure going on, got past only if
     * that one is. `got` is the request, `by` the allocation that got it
     * (the next allocation of all may come from another line). */
    struct key got, by;
    int waiting = 0;
    /* The last failure of all, and whether it is followed (pending until
     * its request's allocation): not followed, it is not told got past. */
    struct key last;
    int have_last = 0, last_followed = 0;
    memset(&last, 0, sizeof last);
    for (size_t i = 0; i < s->nevents; i++) {
        struct vt_event e = vt_event_at(s, i);
        if (e.type != VT_EV_OOM && e.type != VT_EV_ALLOC) continue;
        struct key k = key_of(&e, group && e.stack < s->nstacks ? group[e.stack] : e.stack);
        int again = waiting && (same(&k, &got) || same(&k, &by));
        HASH_FIND(hh, table, &k, sizeof k, p);
        if (e.type == VT_EV_ALLOC) {
            for (size_t j = 0; !p && j < nfresh; j++)
                if (same_but_site(&fresh[j], &k)) HASH_FIND(hh, table, &fresh[j], sizeof fresh[j], p);
            nfresh = 0;
            /* Another request's allocation on the device, not host memory
             * (a DataLoader's pinned buffer on another thread between the
             * pages of one tensor said the failure the job died of was got
             * past): it got past. */
            if (waiting && (!again || p) && !vt_kind_is_host(e.kind) && e.device == got.device) {
                survived++;
                waiting = 0;
            }
            if (!p) continue;
            got = p->k;
            by = k;
            waiting = 1;
            HASH_DEL(table, p);
            free(p);
            n--;
            continue;
        }
        if (again) waiting = 0;   /* failed again: the one failure goes on, pending below */
        last = k;
        have_last = 1;
        last_followed = p || n < PENDING_MAX;
        if (nfresh == cap) {
            size_t want = cap ? cap * 2 : 16;
            struct key *more = realloc(fresh, want * sizeof *more);
            if (more) fresh = more, cap = want;
        }
        if (nfresh < cap) fresh[nfresh++] = k;
        if (p || n >= PENDING_MAX) continue;   /* failed again: the one pending stands for both */
        if (!(p = malloc(sizeof *p))) {
            vt_records_lost("the failures the program got past");
            last_followed = 0;
            break;
        }
        p->k = k;
        HASH_ADD(hh, table, k, sizeof p->k, p);
        n++;
    }
    if (waiting) survived++;   /* nothing failed again before the end */
    if (last_survived) {
        p = NULL;
        if (have_last) HASH_FIND(hh, table, &last, sizeof last, p);
        *last_survived = have_last && last_followed && !p;
    }
    HASH_ITER(hh, table, p, tmp) {
        HASH_DEL(table, p);
        free(p);
    }
    free(fresh);
    free(group);
    return survived;
}
