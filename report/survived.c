/* survived.c -- failures the program got past (survived.h). */
#include <stdlib.h>

#include "survived.h"
#include "symbolize.h"

/* The failures waiting for their request to come back: a few at a time
 * (one a thread that retries); past that, the oldest is let go uncounted. */
#define PENDING 64

struct pending {
    uint64_t bytes;
    uint32_t stack;   /* its call site's group, or its stack without symbols */
    int16_t device;
    uint8_t kind;
    uint8_t next;     /* no allocation since: the next one is its retry's,
                         wherever in the program it asks (a C allocator
                         that asks again from another line) */
};

uint64_t vt_oom_survived(const struct vt_snapshot *s, const struct vt_symbols *sym) {
    struct pending p[PENDING];
    size_t n = 0, ngroups = 0;
    uint64_t survived = 0;
    uint32_t *group = sym ? vt_site_groups(sym, s->nstacks, &ngroups, NULL) : NULL;
    for (size_t i = 0; i < s->nevents; i++) {
        struct vt_event e = vt_event_at(s, i);
        if (e.type != VT_EV_OOM && e.type != VT_EV_ALLOC) continue;
        uint32_t site = group && e.stack < s->nstacks ? group[e.stack] : e.stack;
        size_t k = 0;
        while (k < n && !(p[k].bytes == e.bytes && p[k].device == e.device && p[k].kind == e.kind &&
                          (p[k].stack == site || (e.type == VT_EV_ALLOC && p[k].next))))
            k++;
        if (e.type == VT_EV_ALLOC) {
            for (size_t j = 0; j < n; j++) p[j].next = 0;
            if (k == n) continue;
            survived++;
            p[k] = p[--n];
            continue;
        }
        if (k < n) continue;   /* failed again: the one pending stands for both */
        if (n == PENDING) {    /* the oldest let go */
            for (size_t j = 1; j < n; j++) p[j - 1] = p[j];
            n--;
        }
        p[n++] = (struct pending){e.bytes, site, e.device, e.kind, 1};
    }
    free(group);
    return survived;
}
