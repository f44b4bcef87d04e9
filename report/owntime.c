/* owntime.c -- the stretches vramtrace spent on its own outputs (owntime.h). */
#include "owntime.h"

static struct { uint64_t from, to; } spans[VT_OWN_SPANS];
static unsigned nspans, next;

void vt_own_time_add(uint64_t from, uint64_t to) {
    if (to <= from) return;
    spans[next].from = from;
    spans[next].to = to;
    next = (next + 1) % VT_OWN_SPANS;
    if (nspans < VT_OWN_SPANS) nspans++;
}

uint64_t vt_own_time_within(uint64_t from, uint64_t to) {
    uint64_t sum = 0;
    /* Outputs never overlap (one at a time, under the output's lock). */
    for (unsigned i = 0; i < nspans; i++) {
        uint64_t a = spans[i].from > from ? spans[i].from : from;
        uint64_t b = spans[i].to < to ? spans[i].to : to;
        if (b > a) sum += b - a;
    }
    return sum;
}

void vt_own_time_reset(void) { nspans = next = 0; }
