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
    for (size_t i = 0; i < d->nevents; i++)
        if (d->events[i].type != 'o' && d->events[i].stack < d->nstacks) seen(&dev[d->events[i].stack], d->events[i].device);
    for (size_t i = 0; i < d->nlive; i++)
        if (d->live[i].stack < d->nstacks) seen(&dev[d->live[i].stack], d->live[i].device);
    return dev;
}

size_t vh_events_before_oom(const struct vm_dump *d, size_t k) {
    if (d->events_dropped || k >= d->nooms) return SIZE_MAX;
    size_t seen_ooms = 0;
    for (size_t i = 0; i < d->nevents; i++) {
        if (d->events[i].type != 'o') continue;
        if (seen_ooms++ == k) return d->events[i].time_ns == d->ooms[k].time_ns ? i : SIZE_MAX;
    }
    return SIZE_MAX;
}

size_t vh_events_before_peak(const struct vm_dump *d) {
    if (d->events_dropped) return SIZE_MAX;
    size_t n = 0;
    while (n < d->nevents && d->events[n].time_ns <= d->totals.peak_time_ns) n++;
    return n;
}

static size_t device_index(const struct vm_dump *d, int ordinal) {
    for (size_t i = 0; i < d->ndevices; i++)
        if (d->devices[i].ordinal == ordinal) return i;
    return SIZE_MAX;
}

/* Each several-device holder's bytes and count per device after the first
 * `upto` events, into bytes/counts[holder * ndevices + device index].
 * Returns 0 where some event fell outside the listed devices. */
static int replay(const struct vm_dump *d, const struct vm_holder *h, size_t n, const int *dev, size_t upto,
                  int64_t *bytes, int64_t *counts) {
    size_t nd = d->ndevices;
    size_t *slot = malloc((d->nstacks + 1) * sizeof *slot);
    if (!slot) return 0;
    for (size_t s = 0; s < d->nstacks; s++) slot[s] = SIZE_MAX;
    for (size_t j = 0; j < n; j++)
        if (h[j].stack < d->nstacks && dev[h[j].stack] == SEVERAL) slot[h[j].stack] = j;
    int ok = 1;
    for (size_t i = 0; i < upto && i < d->nevents; i++) {
        const struct vm_event *e = &d->events[i];
        if (e->type == 'o' || e->stack >= d->nstacks || slot[e->stack] == SIZE_MAX) continue;
        size_t di = device_index(d, e->device);
        if (di == SIZE_MAX) { ok = 0; continue; }
        int64_t sign = e->type == 'a' ? 1 : -1;
        bytes[slot[e->stack] * nd + di] += sign * (int64_t)e->bytes;
        counts[slot[e->stack] * nd + di] += sign;
    }
    free(slot);
    return ok;
}

void vh_holders_by_device(FILE *f, const char *name, const struct vm_dump *d, const int *dev,
                          const struct vm_holder *h, size_t n, int have, size_t upto) {
    fprintf(f, ",\"%s_dev\":", name);
    if (!have || !dev) { fprintf(f, "null,\"%s_split\":null", name); return; }
    size_t nd = d->ndevices;
    int64_t *bytes = upto != SIZE_MAX ? calloc(n * nd + 1, sizeof *bytes) : NULL;
    int64_t *counts = bytes ? calloc(n * nd + 1, sizeof *counts) : NULL;
    int replayed = counts && replay(d, h, n, dev, upto, bytes, counts);
    char *split = calloc(n + 1, 1);
    struct vh_pack p;
    vh_pack_init(&p, 's');
    for (size_t j = 0; j < n; j++) {
        int where = h[j].stack < d->nstacks ? dev[h[j].stack] : NONE;
        if (where == SEVERAL && replayed && split) {
            int64_t sum = 0, count = 0, bad = 0;
            for (size_t k = 0; k < nd; k++) {
                sum += bytes[j * nd + k];
                count += counts[j * nd + k];
                bad |= bytes[j * nd + k] < 0 || counts[j * nd + k] < 0;
            }
            split[j] = !bad && sum == (int64_t)h[j].bytes && count == (int64_t)h[j].count;
        }
        vh_pack(&p, split && split[j] ? -2 : where >= 0 ? where : -1);
    }
    vh_pack_write(f, NULL, &p);
    fprintf(f, ",\"%s_split\":", name);
    for (size_t j = 0; split && j < n; j++) {
        for (size_t k = 0; split[j] && k < nd; k++) {
            if (!bytes[j * nd + k] && !counts[j * nd + k]) continue;
            vh_pack(&p, (int64_t)j);
            vh_pack(&p, d->devices[k].ordinal);
            vh_pack(&p, bytes[j * nd + k]);
            vh_pack(&p, counts[j * nd + k]);
        }
    }
    vh_pack_write(f, NULL, &p);
    free(split);
    free(bytes);
    free(counts);
}
