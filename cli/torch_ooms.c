/* torch_ooms.c -- the torch export's OOM entries, one per request of
 * PyTorch's where the dump knows its tries (torch_ooms.h). */
#include <stdlib.h>
#include <string.h>

#include "model_torch.h"
#include "torch_ooms.h"

static int same_text(const char *a, const char *b) { return a == b || (a && b && strcmp(a, b) == 0); }

/* Whether two stacks have the same call site: a retry's native stack
 * differs from the first try's inside the allocator, its call site not. */
static int same_site(const struct vm_dump *d, size_t a, size_t b) {
    const struct vt_frame *x = vm_site(d, a), *y = vm_site(d, b);
    if (x == y) return 1;
    return x && y && x->line == y->line && same_text(x->function, y->function) && same_text(x->file, y->file) &&
           same_text(x->module, y->module);
}

/* PyTorch's record of the failing device in OOM record o, with its
 * request; NULL for none. */
static const struct vm_torch_device *torch_request(const struct vm_oom *o) {
    if (!o->torch) return NULL;
    for (size_t i = 0; i < o->torch->ndevices; i++)
        if (o->torch->devices[i].device == o->device && o->torch->devices[i].has_request) return &o->torch->devices[i];
    return NULL;
}

/* Whether record p is a try of the same request as record o, the one
 * after it, by their records alone. */
static int same_request(const struct vm_dump *d, const struct vm_oom *p, const struct vm_oom *o) {
    return p->number + 1 == o->number && !torch_request(p) && p->device == o->device && p->thread == o->thread &&
           p->requested == o->requested && same_text(p->api, o->api) && same_text(p->kind, o->kind) &&
           same_site(d, p->stack, o->stack);
}

/* Whether device dev had no more than `pages` allocations between events
 * a and b (a < b): none but the later try's own pages. */
static int nothing_between(const struct vm_dump *d, size_t a, size_t b, int dev, uint64_t pages) {
    struct vm_ev_cursor c;
    struct vm_event e;
    uint64_t n = 0;
    for (vm_ev_from(&c, &d->events, a + 1); c.i < b && vm_ev_next(&c, &e);)
        if (e.type == 'a' && e.device == dev && ++n > pages) return 0;
    return 1;
}

struct vr_torch_oom *vr_torch_ooms(const struct vm_dump *d, const uint32_t *ev, size_t n) {
    struct vr_torch_oom *out = calloc(n ? n : 1, sizeof *out);
    size_t *rec = malloc((n ? n : 1) * sizeof *rec);   /* each event's record, or SIZE_MAX */
    if (!out || !rec) {
        free(out);
        free(rec);
        return NULL;
    }
    /* Events and records are both in time order: matched as they meet. */
    size_t k = 0;
    for (size_t j = 0; j < n; j++) {
        struct vm_event e = vm_event_at(&d->events, ev[j]);
        while (k < d->nooms && d->ooms[k].time_ns < e.time_ns) k++;
        rec[j] = k < d->nooms && d->ooms[k].time_ns == e.time_ns && d->ooms[k].device == e.device ? k++ : SIZE_MAX;
        out[j] = (struct vr_torch_oom){1, e.bytes, -1};
        const struct vm_oom *o = rec[j] != SIZE_MAX ? &d->ooms[rec[j]] : NULL;
        if (!o) continue;
        if (o->have_info) out[j].device_free = (int64_t)(o->free_bytes + o->taken_bytes);
        const struct vm_torch_device *t = torch_request(o);
        if (!t) {
            out[j].size += o->taken_bytes;
            continue;
        }
        out[j].size = t->request;
        /* The tries before it, last to first. */
        for (size_t i = j; i-- > 0;) {
            const struct vm_oom *later = &d->ooms[rec[i + 1]], *p = rec[i] != SIZE_MAX ? &d->ooms[rec[i]] : NULL;
            if (!p || !same_request(d, p, later) ||
                !nothing_between(d, ev[i], ev[i + 1], later->device, later->taken_count))
                break;
            out[i].keep = 0;
        }
    }
    free(rec);
    return out;
}
