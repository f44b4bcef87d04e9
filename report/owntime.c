/* owntime.c -- the stretches vramtrace spent on its own outputs (owntime.h). */
#include <pthread.h>

#include "owntime.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct { uint64_t from, to; } spans[VT_OWN_SPANS];
static unsigned nspans, next;

void vt_own_time_add(uint64_t from, uint64_t to) {
    if (to <= from) return;
    pthread_mutex_lock(&lock);
    /* Kept apart: a span that meets kept ones takes them in (a failure's
     * handling holds its post-mortem's writing; a dump asked for by
     * signal symbolizes on its own thread while a failure writes), so
     * that no time is counted twice. */
    for (unsigned i = 0; i < nspans; i++) {
        if (spans[i].to <= from || spans[i].from >= to) continue;
        if (spans[i].from < from) from = spans[i].from;
        if (spans[i].to > to) to = spans[i].to;
        spans[i].from = spans[i].to = 0;
    }
    spans[next].from = from;
    spans[next].to = to;
    next = (next + 1) % VT_OWN_SPANS;
    if (nspans < VT_OWN_SPANS) nspans++;
    pthread_mutex_unlock(&lock);
}

uint64_t vt_own_time_within(uint64_t from, uint64_t to) {
    uint64_t sum = 0;
    pthread_mutex_lock(&lock);
    /* The stretches do not overlap (vt_own_time_add). */
    for (unsigned i = 0; i < nspans; i++) {
        uint64_t a = spans[i].from > from ? spans[i].from : from;
        uint64_t b = spans[i].to < to ? spans[i].to : to;
        if (b > a) sum += b - a;
    }
    pthread_mutex_unlock(&lock);
    return sum;
}

void vt_own_time_reset(void) {
    pthread_mutex_init(&lock, NULL);
    nspans = next = 0;
}
