/* bydevice.c -- the holders of one moment split by device, for the flame
 * graph per device.
 *
 * The dump keeps its holders (at exit, at the peak, at each OOM) by stack
 * over all devices. A stack that the history and the live allocations show
 * on one device only holds its bytes there. A stack seen on several
 * devices is split by replaying its allocations and frees up to the
 * moment, when the history is whole (no event overwritten) and the replay
 * gives back the holder's bytes exactly; otherwise its bytes stay with
 * device -1, "not known", and the page says so. */
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "html.h"

#define NONE (-2)    /* a stack seen on no device */
#define SEVERAL (-1) /* a stack seen on more than one */

static void seen(int *dev, int device) {
    if (*dev == NONE) *dev = device;
    else if (*dev != device) *dev = SEVERAL;
}

int *vh_stack_devices(const struct vm_dump *d) {
    int *dev = malloc((d->nstacks + 1) * sizeof *dev);
    if (!dev) return NULL;
    for (size_t i = 0; i < d->nstacks; i++) dev[i] = NONE;
    struct vm_ev_cursor c;
    struct vm_event e;
    for (vm_ev_from(&c, &d->events, 0); vm_ev_next(&c, &e);)
        if (e.type != 'o' && e.stack < d->nstacks) seen(&dev[e.stack], e.device);
    for (size_t i = 0; i < d->nlive; i++)
        if (d->live[i].stack < d->nstacks) seen(&dev[d->live[i].stack], d->live[i].device);
    return dev;
}

size_t *vh_events_before_ooms(const struct vm_dump *d) {
    size_t *at = malloc((d->nooms ? d->nooms : 1) * sizeof *at);
    if (!at) return NULL;
    for (size_t k = 0; k < d->nooms; k++) at[k] = SIZE_MAX;
    if (d->events_dropped) return at;
    size_t k = 0;
    struct vm_ev_cursor c;
    struct vm_event e;
    for (vm_ev_from(&c, &d->events, 0); k < d->nooms && vm_ev_next(&c, &e);) {
        if (e.type != 'o') continue;
        if (e.time_ns == d->ooms[k].time_ns) at[k] = c.i - 1;
        k++;
    }
    return at;
}

size_t vh_events_before_peak(const struct vm_dump *d) {
    if (d->events_dropped) return SIZE_MAX;
    struct vm_ev_cursor c;
    struct vm_event e;
    size_t n = 0;
    for (vm_ev_from(&c, &d->events, 0); vm_ev_next(&c, &e) && e.time_ns <= d->totals.peak_time_ns;) n++;
    return n;
}

static size_t device_index(const struct vm_dump *d, int ordinal) {
    for (size_t i = 0; i < d->ndevices; i++)
        if (d->devices[i].ordinal == ordinal) return i;
    return SIZE_MAX;
}

int vh_replay_init(struct vh_replay *r, const struct vm_dump *d, const int *dev) {
    *r = (struct vh_replay){.d = d};
    if (!dev) return 0;
    r->row = malloc((d->nstacks + 1) * sizeof *r->row);
    if (!r->row) return -1;
    for (size_t s = 0; s < d->nstacks; s++) r->row[s] = dev[s] == SEVERAL ? r->rows++ : SIZE_MAX;
    size_t cells = r->rows * d->ndevices + 1;
    r->bytes = calloc(cells, sizeof *r->bytes);
    r->counts = calloc(cells, sizeof *r->counts);
    r->bad = calloc(r->rows + 1, 1);
    if (!r->bytes || !r->counts || !r->bad) {
        vh_replay_free(r);
        return -1;
    }
    return 0;
}

void vh_replay_free(struct vh_replay *r) {
    free(r->row);
    free(r->bytes);
    free(r->counts);
    free(r->bad);
    r->row = NULL;
    r->bytes = r->counts = NULL;
    r->bad = NULL;
}

/* The replay brought to its first `upto` events: on from where it is, or
 * again from the start for an earlier moment. */
static void replay_to(struct vh_replay *r, size_t upto) {
    const struct vm_dump *d = r->d;
    size_t nd = d->ndevices;
    if (upto < r->at) {
        memset(r->bytes, 0, (r->rows * nd + 1) * sizeof *r->bytes);
        memset(r->counts, 0, (r->rows * nd + 1) * sizeof *r->counts);
        memset(r->bad, 0, r->rows + 1);
        r->at = 0;
    }
    struct vm_ev_cursor c;
    struct vm_event ev, *e = &ev;
    for (vm_ev_from(&c, &d->events, r->at); r->at < upto && vm_ev_next(&c, e); r->at++) {
        if (e->type == 'o' || e->stack >= d->nstacks || r->row[e->stack] == SIZE_MAX) continue;
        size_t row = r->row[e->stack], di = device_index(d, e->device);
        if (di == SIZE_MAX) { r->bad[row] = 1; continue; }
        int64_t sign = e->type == 'a' ? 1 : -1;
        r->bytes[row * nd + di] += sign * (int64_t)e->bytes;
        r->counts[row * nd + di] += sign;
    }
}

void vh_holders_by_device(FILE *f, const char *name, struct vh_replay *r, const int *dev, const struct vm_holder *h,
                          size_t n, int have, size_t upto) {
    const struct vm_dump *d = r->d;
    fprintf(f, ",\"%s_dev\":", name);
    if (!have || !dev) { fprintf(f, "null,\"%s_split\":null", name); return; }
    size_t nd = d->ndevices;
    /* Replayed only for a holder list with a several-device stack, and then
     * exactly where none of its several-device stacks had an event on a
     * device the dump does not list. */
    int several = 0, replayed = 0;
    for (size_t j = 0; j < n && !several; j++) several = h[j].stack < d->nstacks && dev[h[j].stack] == SEVERAL;
    if (several && upto != SIZE_MAX && r->row) {
        replay_to(r, upto);
        replayed = 1;
        for (size_t j = 0; j < n; j++)
            if (h[j].stack < d->nstacks && r->row[h[j].stack] != SIZE_MAX && r->bad[r->row[h[j].stack]]) replayed = 0;
    }
    char *split = calloc(n + 1, 1);
    struct vh_pack p;
    vh_pack_init(&p, 's');
    for (size_t j = 0; j < n; j++) {
        int where = h[j].stack < d->nstacks ? dev[h[j].stack] : NONE;
        if (where == SEVERAL && replayed && split) {
            const int64_t *b = &r->bytes[r->row[h[j].stack] * nd], *c = &r->counts[r->row[h[j].stack] * nd];
            int64_t sum = 0, count = 0, bad = 0;
            for (size_t k = 0; k < nd; k++) {
                sum += b[k];
                count += c[k];
                bad |= b[k] < 0 || c[k] < 0;
            }
            split[j] = !bad && sum == (int64_t)h[j].bytes && count == (int64_t)h[j].count;
        }
        vh_pack(&p, split && split[j] ? -2 : where >= 0 ? where : -1);
    }
    vh_pack_write(f, NULL, &p);
    fprintf(f, ",\"%s_split\":", name);
    for (size_t j = 0; split && j < n; j++) {
        if (!split[j]) continue;
        const int64_t *b = &r->bytes[r->row[h[j].stack] * nd], *c = &r->counts[r->row[h[j].stack] * nd];
        for (size_t k = 0; k < nd; k++) {
            if (!b[k] && !c[k]) continue;
            vh_pack(&p, (int64_t)j);
            vh_pack(&p, d->devices[k].ordinal);
            vh_pack(&p, b[k]);
            vh_pack(&p, c[k]);
        }
    }
    vh_pack_write(f, NULL, &p);
    free(split);
}
